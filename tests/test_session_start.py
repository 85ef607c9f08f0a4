"""When a session started (`sessions.created_at`, and the day of a line without a time of its
own) comes from its OpenClaw header, which discovery leaves unread: the read that opens the
file anyway takes it, and a quiet night opens no transcript at all."""

from __future__ import annotations

import json
import pathlib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from sqlalchemy import select

from dreaming.app import App
from dreaming.cli import cli
from dreaming.phases.light import _ahead
from dreaming.store.tables import SESSIONS
from tests.transcript_builders import append_jsonl, oc_header, oc_message, openclaw_root

START = "2026-03-01T08:00:00.000Z"
STARTED = datetime(2026, 3, 1, 8, 0, tzinfo=UTC)


def _night(state: Path, config: str = "") -> dict[str, Any]:
    from dreaming.cli import _run  # noqa: F401  (registers the command)

    path = state / "dreaming.toml"
    path.write_text(config)
    result = CliRunner().invoke(
        cli,
        ["--state-dir", str(state), "--config", str(path), "run", "--phase", "light", "--json"],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    return dict(json.loads(result.stdout)["agents"]["main"]["light"])


def _started(state: Path) -> dict[str, datetime | None]:
    app = App.open(state, state / "dreaming.toml", env={})
    try:
        with app.engine("main").connect() as conn:
            rows = conn.execute(select(SESSIONS.c.session_id, SESSIONS.c.created_at))
            return {sid: created for sid, created in rows}
    finally:
        app.close()


def _corpus_days(state: Path) -> list[str]:
    folder = state / "workspace" / "memory" / ".dreams" / "session-corpus"
    return sorted(p.stem for p in folder.glob("*.txt"))


def _sessions(state: Path, n: int, *, timeless: bool = False, channel: str = "telegram") -> Path:
    """`n` sessions of main, indexed without sessionStartedAt, their header saying START; the
    last one's chat is on `channel`. `timeless`: their lines carry no time of their own."""
    ts = None if timeless else "2026-03-04T10:00:00.000Z"
    files = {
        f"s{i}.jsonl": [oc_header(ts=START), oc_message("user", f"My locker is number {i}.", ts=ts)]
        for i in range(n)
    }
    index = {
        f"agent:main:telegram:dm:{i}": {
            "sessionId": f"s{i}",
            "chatType": "direct",
            "channel": channel if i == n - 1 else "telegram",
        }
        for i in range(n)
    }
    return openclaw_root(state, index=index, files=files)


@pytest.fixture(params=["here", "ahead"])
def reading(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Light reads in this process, or in a forked child reading ahead (its results cross a
    pipe: the header's time must cross with them)."""
    if request.param == "ahead":
        monkeypatch.setattr(_ahead, "MB", 1)  # `read_ahead_mb` counts bytes: enough to fork
        return "[corpus]\nread_ahead_mb = 1\n"
    return "[corpus]\nread_ahead_mb = 0\n"


def test_a_new_session_is_recorded_with_its_header_start(tmp_path: Path, reading: str) -> None:
    _sessions(tmp_path, 4)
    summary = _night(tmp_path, reading)
    assert summary["sessions"]["read"] == 4
    assert _started(tmp_path) == {f"s{i}": STARTED for i in range(4)}


def test_a_line_without_a_time_falls_on_the_day_the_header_gives(
    tmp_path: Path, reading: str
) -> None:
    folder = _sessions(tmp_path, 3, timeless=True)
    _night(tmp_path, reading)
    assert _corpus_days(tmp_path) == ["2026-03-01"]
    # Read on from its cursor: the header is not among the new lines, and still says.
    append_jsonl(folder / "s1.jsonl", [oc_message("user", "My bike is blue.", ts=None)])
    assert _night(tmp_path, reading)["sessions"]["read"] == 1
    assert _corpus_days(tmp_path) == ["2026-03-01"]
    assert _started(tmp_path)["s1"] == STARTED


def test_a_quiet_night_opens_no_transcript(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _sessions(tmp_path, 5)
    _night(tmp_path)
    opened: list[str] = []
    real_open = pathlib.Path.open

    def spy(self: Path, *args: Any, **kwargs: Any) -> Any:
        if self.suffix == ".jsonl" and self.parent.name == "sessions":
            opened.append(self.name)
        return real_open(self, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, "open", spy)
    summary = _night(tmp_path)
    assert summary["sessions"]["unchanged"] == 5
    assert opened == []
    assert _started(tmp_path) == {f"s{i}": STARTED for i in range(5)}  # the records stand


def test_a_rewritten_session_takes_its_new_header(tmp_path: Path, reading: str) -> None:
    folder = _sessions(tmp_path, 2)
    _night(tmp_path, reading)
    (folder / "s0.jsonl").write_text(
        json.dumps(oc_header(ts="2026-03-02T07:30:00.000Z"))
        + "\n"
        + json.dumps(oc_message("user", "My locker is number 9 now.", ts=None))
        + "\n"
    )
    _night(tmp_path, reading)
    assert _started(tmp_path) == {
        "s0": datetime(2026, 3, 2, 7, 30, tzinfo=UTC),
        "s1": STARTED,
    }


def test_a_session_never_read_is_recorded_with_its_header_start(tmp_path: Path) -> None:
    """A session light does not admit is not read: its header is read for its record."""
    _sessions(tmp_path, 2, channel="whatsapp")
    summary = _night(tmp_path, '[excludeSessions]\nchannels = ["whatsapp"]\n')
    assert summary["sessions"]["read"] == 1
    assert _started(tmp_path) == {"s0": STARTED, "s1": STARTED}


def test_a_huge_first_line_is_read_as_far_as_discovery_did(tmp_path: Path) -> None:
    """A header longer than the reader's first look at the file still gives its time."""
    header = {**oc_header(ts=START), "note": "x" * 20_000}
    openclaw_root(
        tmp_path,
        index={"agent:main:main": {"sessionId": "s0"}},
        files={"s0.jsonl": [header, oc_message("user", "My locker is number 3.", ts=None)]},
    )
    _night(tmp_path)
    assert _started(tmp_path) == {"s0": STARTED}
    assert _corpus_days(tmp_path) == ["2026-03-01"]


def test_forget_since_reads_the_header_of_a_session_it_never_recorded(tmp_path: Path) -> None:
    """`forget --hook-source X --since D` over transcripts no night has read yet: when each
    started is read from its header, for that source's sessions only."""
    from dreaming.forget._select import Selector, resolve
    from dreaming.ingest.transcripts import discover_openclaw

    index = {
        f"agent:main:hook:gmail:{sid}": {"sessionId": sid, "hookExternalContentSource": src}
        for sid, src in (("old", "gmail"), ("new", "gmail"), ("other", "webhook"))
    }
    openclaw_root(
        tmp_path,
        index=index,
        files={
            "old.jsonl": [oc_header(ts="2026-02-01T00:00:00Z"), oc_message("user", "a")],
            "new.jsonl": [oc_header(ts="2026-03-05T00:00:00Z"), oc_message("user", "b")],
            "other.jsonl": [oc_header(ts="2026-03-05T00:00:00Z"), oc_message("user", "c")],
        },
    )
    files = discover_openclaw(tmp_path)
    assert all(f.start_unread for f in files)
    since = datetime(2026, 3, 1, tzinfo=UTC)
    targets = resolve(None, "main", Selector(hook_source="gmail", since=since), files)
    assert [t.session_id for t in targets] == ["new"]
