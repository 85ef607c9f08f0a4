"""A person's say over what the agent knows: accepting review proposals, and taking a run
back (`runs undo`). Both run under the agent's lock, are recorded as runs of their own, and
change entries only through the lineage code deep uses.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, and_, select

from dreaming import faults
from dreaming.errors import NoSuchError, StateError
from dreaming.memory import journal, lineage, memory_file, memory_sync, review
from dreaming.phases.deep import DeepPhase, DeepSummary
from dreaming.runs import Outcome, RunRecord, finish_run, get_run, start_run
from dreaming.store.tables import ENTRIES

if TYPE_CHECKING:
    from dreaming.app import App

log = logging.getLogger(__name__)


# -- review ----------------------------------------------------------------------------------


@dataclass
class AcceptReport:
    agent: str
    run_id: int | None = None
    accepted: list[int] = field(default_factory=list)
    stale: dict[int, str] = field(default_factory=dict)
    not_pending: dict[int, str] = field(default_factory=dict)
    waiting: dict[int, str] = field(default_factory=dict)  # still pending, and why
    entries: list[str] = field(default_factory=list)
    memory_written: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "run_id": self.run_id,
            "accepted": self.accepted,
            "stale": {str(k): v for k, v in self.stale.items()},
            "not_pending": {str(k): v for k, v in self.not_pending.items()},
            "waiting": {str(k): v for k, v in self.waiting.items()},
            "entries": self.entries,
            "memory_written": self.memory_written,
        }


def accept(app: App, agent: str, ids: list[int] | None) -> AcceptReport:
    """Apply the pending proposals `ids` (None: all of them) in one transaction, as deep
    would have; stale ones are refused (and proposed again next night)."""
    engine = app.engine(agent)
    report = AcceptReport(agent)
    with app.lock(agent, "review"):
        # Entries a person edited in MEMORY.md since the proposal: a merge into one would
        # write its text beside theirs (their edit stands as theirs): refused as stale.
        shown = memory_file.parse(memory_file.load_text(app.paths.memory_file(agent)) or "")
        with engine.begin() as conn:
            review.expire(conn, agent)
            if ids is None:
                chosen = review.proposals(conn, agent, status=review.ProposalStatus.PENDING)
            else:
                chosen = review.proposals(conn, agent, ids=ids)
            missing = sorted(set(ids or []) - {p.id for p in chosen})
            if missing:
                raise NoSuchError(
                    f"agent {agent} has no proposal {', '.join(map(str, missing))}"
                    " (see `dreaming review list`)"
                )
            todo = []
            coming: set[str] = set()  # entry keys the proposals accepted so far write
            for p in chosen:
                if p.status != review.ProposalStatus.PENDING:
                    report.not_pending[p.id] = p.status
                    continue
                why = review.stale_reason(conn, agent, p)
                if why is None and (touched := shown.edited_hold(p.applied().targets)):
                    why = "a person edited its target since: " + ", ".join(sorted(touched))
                if why is None and (gap := review.missing_target(conn, agent, p, coming)):
                    if gap.waits:  # the proposal that adds its target is still pending
                        report.waiting[p.id] = gap.why
                        continue
                    why = gap.why
                if why is not None:
                    review.refuse_stale(conn, p, why)
                    report.stale[p.id] = why
                    continue
                todo.append(p)
                if (text := p.applied().text) is not None:
                    coming.add(memory_file.entry_key(text))
        if not todo:
            return report
        run_id = start_run(engine, agent, ["deep"], "review")
        report.run_id = run_id
        phase = DeepPhase(engine, app.paths, app.registry, run_id=run_id)
        summary = DeepSummary(agent=agent)

        def mark_accepted(conn: Connection) -> None:
            for p in todo:
                review.mark(conn, p.id, review.ProposalStatus.ACCEPTED, review.applied_note(run_id))
            faults.checkpoint("review.before_commit")

        try:
            phase.apply_decisions(agent, [p.applied() for p in todo], summary, also=mark_accepted)
        except BaseException as err:
            finish_run(engine, run_id, Outcome.FAILED, {"agent": agent, "error": str(err)})
            raise
        report.accepted = [p.id for p in todo]
        report.entries = [d["entry"] for d in summary.decisions if d["entry"]]
        report.memory_written = summary.memory_written
        finish_run(
            engine,
            run_id,
            Outcome.OK,
            {
                "agent": agent,
                "job": "review",
                "review": report.to_dict(),
                "phases": {"deep": summary.to_dict() | {"run_id": run_id}},
            },
        )
    return report


# -- undo ------------------------------------------------------------------------------------


def proposals(app: App, agents: Sequence[str] | None, *, everything: bool) -> list[Any]:
    """The agents' proposals, oldest first: pending ones (with `everything`, decided ones
    too). Reading them first expires those past their time, in the same transaction."""
    found: list[Any] = []
    for agent in app.agents_with_state(list(agents) if agents else None):
        with app.engine(agent, create=False).begin() as conn:
            review.expire(conn, agent)
            status = None if everything else review.ProposalStatus.PENDING
            found += review.proposals(conn, agent, status=status)
    return found


def proposal(app: App, agent: str, proposal_id: int) -> Any:
    """One proposal of `agent`, or NoSuchError naming where to look."""
    with app.engine(agent, create=False).connect() as conn:
        found = review.proposals(conn, agent, ids=[proposal_id])
    if not found:
        raise NoSuchError(
            f"agent {agent} has no proposal {proposal_id} (see `dreaming review list`)"
        )
    return found[0]


@dataclass(frozen=True)
class RejectReport:
    agent: str
    rejected: tuple[int, ...] = ()
    not_pending: dict[int, str] = field(default_factory=dict)  # left as they are: status

    def to_dict(self) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "rejected": list(self.rejected),
            "not_pending": self.not_pending,
        }


def reject(app: App, agent: str, ids: Sequence[int], reason: str | None) -> RejectReport:
    """Reject pending proposals under the agent's lock, in one transaction: their candidates
    are not proposed again unless new evidence arrives. An id the agent has no proposal of
    is an error that rejects nothing; one no longer pending is left as it is."""
    done: list[int] = []
    skipped: dict[int, str] = {}
    with app.lock(agent, "review"), app.engine(agent, create=False).begin() as conn:
        found = {p.id: p for p in review.proposals(conn, agent, ids=list(ids))}
        missing = sorted(set(ids) - set(found))
        if missing:
            raise NoSuchError(
                f"agent {agent} has no proposal {', '.join(map(str, missing))}"
                " (see `dreaming review list`)"
            )
        for pid in ids:
            p = found[pid]
            if p.status != review.ProposalStatus.PENDING:
                skipped[pid] = p.status
                continue
            review.reject(conn, p, reason)
            done.append(pid)
    return RejectReport(agent, tuple(done), skipped)


@dataclass
class UndoReport:
    agent: str
    run_id: int
    dry_run: bool
    undone: list[int] = field(default_factory=list)  # newest first
    restored: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    left_alone: list[str] = field(default_factory=list)  # blocks a person edited since
    undo_run_id: int | None = None
    memory_written: bool = False
    # Each restored or removed key's text: what comes back, or what leaves memory.
    texts: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "run_id": self.run_id,
            "dry_run": self.dry_run,
            "undone": self.undone,
            "restored": self.restored,
            "removed": self.removed,
            "left_alone": self.left_alone,
            "undo_run_id": self.undo_run_id,
            "memory_written": self.memory_written,
            "texts": self.texts,
        }


def undone_by(records: Sequence[RunRecord]) -> dict[tuple[str, int], int]:
    """(agent, run id) -> the undo run that took it back, from the undo runs among
    `records` (an undo is always newer than the runs it undid)."""
    out: dict[tuple[str, int], int] = {}
    for r in records:
        if r.phases != ("undo",) or r.outcome != "ok":
            continue
        undo = r.summary.get("undo")
        for rid in undo.get("undone", []) if isinstance(undo, dict) else []:
            if isinstance(rid, int):
                out[(r.agent, rid)] = r.id
    return out


def undo(app: App, agent: str, run_id: int, *, cascade: bool, dry_run: bool) -> UndoReport:
    """Put the entries, their lineage and the managed part of MEMORY.md back as they were
    before run `run_id`'s decisions. Refused when a later run changed the same entries
    (unless `cascade` undoes those too), or when a purge took text the undo would need."""
    engine = app.engine(agent, create=False)
    report = UndoReport(agent, run_id, dry_run)
    if get_run(engine, agent, run_id) is None:
        raise NoSuchError(f"no run {run_id} for agent {agent} (see `dreaming runs`)")
    files = memory_sync.Files.of(app.paths, agent)
    with app.lock(agent, "undo"):
        with engine.connect() as conn:
            order = _undo_order(conn, agent, run_id, cascade)
        if not dry_run:
            # A person's edits since are taken in first: their deletions stand, and the
            # blocks they edited are left alone below.
            memory_sync.reconcile(engine, agent, files)
        current = memory_file.load_text(files.memory) or ""
        edited = memory_file.parse(current)
        undo_id = None if dry_run else start_run(engine, agent, ["undo"], "undo")
        with engine.connect() as conn:
            tx = conn.begin()
            for rid in order:
                entry_journal = journal.read(conn, agent, rid)
                leave = sorted(edited.edited_hold(entry_journal.entries))
                _note_texts(conn, agent, entry_journal, report.texts)
                restored, removed = _restore(conn, agent, entry_journal, leave)
                review.reopen_accepted(conn, agent, rid)  # an accept undone: pending again
                report.undone.append(rid)
                report.restored += [k for k in restored if k not in report.restored]
                report.removed += [k for k in removed if k not in report.removed]
                report.left_alone += [k for k in leave if k not in report.left_alone]
            # The file is written from the one the oldest undone run started from (when the
            # operator's text is as it was), so it returns byte for byte, even after a crash.
            memory_sync.mark_dirty(conn, agent, base_run=report.undone[-1])
            faults.checkpoint("undo.before_commit")
            if dry_run:
                tx.rollback()
            else:
                tx.commit()
        if dry_run:
            return report
        faults.checkpoint("undo.after_commit")
        assert undo_id is not None
        report.undo_run_id = undo_id
        written = memory_sync.write(engine, agent, files, undo_id)
        report.memory_written = written.written
        finish_run(
            engine, undo_id, Outcome.OK, {"agent": agent, "job": "undo", "undo": report.to_dict()}
        )
    log.info("agent %s: run(s) %s undone in run %s", agent, report.undone, report.undo_run_id)
    return report


def _note_texts(
    conn: Connection, agent: str, run: journal.RunJournal, texts: dict[str, str]
) -> None:
    """The text of each entry the undo of `run` touches, as the report names it: the text
    a restored entry returns with, or the text a removed one takes out of memory."""
    for key, image in run.entries.items():
        if image is not None:
            texts[key] = image.text
        elif key not in texts:
            now = conn.execute(
                select(ENTRIES.c.text).where(and_(ENTRIES.c.agent == agent, ENTRIES.c.key == key))
            ).scalar()
            if now is not None:
                texts[key] = now


def _restore(
    conn: Connection, agent: str, run: journal.RunJournal, leave: Sequence[str]
) -> tuple[list[str], list[str]]:
    """Put every entry and candidate the run journaled back as it was before the run, except
    the keys in `leave`, and take its supersedes and its journal away. Returns (keys
    restored, keys removed). The journal says what to restore; lineage writes the entries."""
    left = set(leave)
    images = {key: image for key, image in run.entries.items() if key not in left}
    restored, removed = lineage.restore_entries(conn, agent, images)
    journal.restore_candidates(conn, agent, run)
    lineage.drop_supersessions_of_run(conn, agent, run.run_id)
    journal.drop(conn, agent, run.run_id)
    return restored, removed


def _undo_order(conn: Connection, agent: str, run_id: int, cascade: bool) -> list[int]:
    """The runs to undo, newest first: `run_id`, and with `cascade` every later run that
    changed the same entries (and, in turn, theirs)."""
    first = journal.read(conn, agent, run_id)
    if first.purged:
        raise StateError(_purged(run_id))
    if first.empty:
        raise StateError(
            f"run {run_id} of agent {agent} changed no entries that can be undone (it decided"
            " nothing, was a preview, or was undone already)"
        )
    todo = {run_id: first}
    frontier = [run_id]
    while frontier:
        rid = frontier.pop()
        later = journal.later_touching(conn, agent, rid, todo[rid].entries)
        later = {r: keys for r, keys in later.items() if r not in todo}
        if later and not cascade:
            named = "; ".join(f"run {r}: {', '.join(keys)}" for r, keys in later.items())
            raise StateError(
                f"later runs changed the same entries ({named}); undo them first, or pass"
                " --cascade to undo them too"
            )
        for r in later:
            j = journal.read(conn, agent, r)
            if j.purged:
                raise StateError(_purged(r))
            todo[r] = j
            frontier.append(r)
    return sorted(todo, reverse=True)


def _purged(run_id: int) -> str:
    return (
        f"run {run_id} cannot be undone: restoring it would need text that `forget` removed"
        " (purges win; nothing was changed)"
    )
