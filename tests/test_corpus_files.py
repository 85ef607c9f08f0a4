"""Corpus day files written in batches (`corpus.write_days`): every file fsynced before any
rename, by threads the process keeps (started once, not per batch), in a forked child too."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dreaming.ingest import corpus


def _fsync_threads() -> set[int]:
    return {t.ident or 0 for t in threading.enumerate() if t.name.startswith("corpus-fsync")}


def test_batches_write_every_file_and_reuse_the_threads(tmp_path: Path) -> None:
    days = [(f"2026-03-{d:02d}", f"line of day {d}\n") for d in range(1, 21)]
    assert corpus.write_days(tmp_path, days) == 20
    first, pool = _fsync_threads(), corpus._fsyncers
    assert first, "a batch of files is fsynced from threads"
    assert corpus.write_days(tmp_path, [(d, c + "more\n") for d, c in days]) == 20
    # The same pool, its threads still there: none ended and was started again. (The pool
    # may add threads up to its size when its first ones were busy: how many a batch
    # starts depends on how fast the disk answers.)
    again = _fsync_threads()
    assert corpus._fsyncers is pool and first <= again
    assert len(again) <= corpus._FSYNC_THREADS
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{d}.txt" for d, _ in days]
    assert (tmp_path / "2026-03-07.txt").read_text() == "line of day 7\nmore\n"


def test_a_failed_fsync_is_raised_and_no_file_is_renamed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = os.fsync
    calls: list[int] = []

    def failing(fd: int) -> None:
        calls.append(fd)
        if len(calls) == 3:
            raise OSError(5, "Input/output error")
        real(fd)

    monkeypatch.setattr(os, "fsync", failing)
    with pytest.raises(OSError, match="Input/output"):
        corpus.write_days(tmp_path, [(f"2026-03-{d:02d}", "x\n") for d in range(1, 6)])
    assert len(calls) == 5  # every fsync ran before the error came back
    assert list(tmp_path.iterdir()) == []  # no day file renamed, no temp file left


@pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX only")
def test_a_forked_child_writes_with_threads_of_its_own(tmp_path: Path) -> None:
    corpus.write_days(tmp_path / "parent", [("2026-03-01", "a\n"), ("2026-03-02", "b\n")])
    pid = os.fork()
    if pid == 0:  # the child: its parent's fsync threads do not exist here
        try:
            days = [("2026-03-01", "c\n"), ("2026-03-02", "d\n")]
            n = corpus.write_days(tmp_path / "child", days)
            os._exit(0 if n == 2 else 1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert (tmp_path / "child" / "2026-03-02.txt").read_text() == "d\n"


_ODD = st.text(alphabet=st.sampled_from(list("ab[]%\x00\x1f\x7f\u2028\u2029 /#é")), min_size=1)


@settings(max_examples=300, deadline=None)
@given(_ODD, st.lists(st.tuples(_ODD, st.integers(1, 10_000), st.text(max_size=5)), max_size=6))
def test_a_day_file_references_each_line_as_reference_does(
    agent: str, rows: list[tuple[str, int, str]]
) -> None:
    # render_day escapes a session's part of the reference once, not once a line.
    expected = "".join(f"[{corpus.reference(agent, s, n)}] {t}\n" for s, n, t in rows)
    assert corpus.render_day(agent, rows) == expected
