"""The frozen PurgeReport drivers get says what the purge's tally said, in the same shape."""

from __future__ import annotations

import dataclasses
import json

from dreaming.forget import STEPS, PurgeReport, Target
from dreaming.forget._purge import PurgeTally


def _tally() -> PurgeTally:
    return PurgeTally(
        "main",
        {"sessions": ["s1", "s2"]},
        dry_run=False,
        targets=[
            Target("s1", "agent:main:main", resolved=True, path=None),
            Target("s2", None, resolved=False, path=None),
        ],
        counts={"tombstones": 1, "corpus_lines": 3, "entries": 1},
        entries_removed=["m:0123456789abcdef"],
        mixed_lineage=[{"key": "m:0123456789abcdef", "other_sessions": ["s9"]}],
        file_lines_removed={"MEMORY.md": 1},
        report_files=[{"path": "r.html", "action": "remove"}],
        purge_id=7,
    )


def test_the_report_is_the_tally_in_the_same_json_shape() -> None:
    tally = _tally()
    report = PurgeReport.of(tally)
    assert json.dumps(report.to_dict()) == json.dumps(tally.to_dict())
    assert report.unresolved == ("s2",)
    top = dataclasses.replace(report, other_agents=(report,))
    assert list(top.to_dict()) == [*tally.to_dict(), "other_agents"]
    assert top.to_dict()["other_agents"] == [tally.to_dict()]


def test_the_steps_are_the_purge_steps_in_order_with_their_counts() -> None:
    steps = PurgeReport.of(_tally()).steps
    assert [s.name for s in steps] == [name for name, _ in STEPS]
    assert [s.number for s in steps] == list(range(1, len(STEPS) + 1))
    assert steps[0].counts == (("corpus_lines", 3),)
    assert dict(steps[-1].counts) == {"origins": 0, "tombstones": 1}
