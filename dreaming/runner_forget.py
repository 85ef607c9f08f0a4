"""`forget` as the command runs it (`runner.forget`): which sessions a selector names (an
error, forgetting nothing, when it names none), the purge under the agent's lock, and the
same sessions purged under the agents that read the same transcripts (`Paths.kin`)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine

from dreaming import forget as forgetting  # its parts load when a purge needs them
from dreaming.app import App
from dreaming.errors import NoSuchError
from dreaming.ingest import sources
from dreaming.ingest.sessions import records as session_records
from dreaming.messages import SessionFile

if TYPE_CHECKING:
    from dreaming.forget import PurgeReport, Selector


def forget(
    app: App,
    agent: str,
    selector: Selector,
    *,
    dry_run: bool,
    pre_tombstone: bool = False,
    wait_s: float = 0,
) -> PurgeReport:
    """Purge everything derived from the selected sessions of `agent` (see forget), and
    from the same sessions under the agents that read the same transcripts (`Paths.kin`:
    a Claude Code source's pooled agent of an older state and its projects' agents), so no
    copy survives under another name (their reports under "other_agents").

    A dry run writes nothing at all: no tombstone, no lock file, no database. A selector
    that matches no session is an error (NoSuchError) that forgets nothing: a typo in a
    session id would otherwise tombstone nothing and leave the real session, a mistyped
    participant or source would report success. `pre_tombstone` says forgetting session ids
    before they appear is meant. `wait_s` waits that long for the agent's lock when a run
    holds it, ahead of any run that would start meanwhile (erasure is not starved)."""
    files = _discover(app, agent, selector)
    has_state = app.has_state(agent)
    if not files and not has_state and not _discover(app, agent, None):
        app.agents([agent])  # unknown agent: a clean error naming the known ones
    engine = app.engine(agent, create=False) if has_state else None
    # What the selector names is checked before anything is planned or locked: a typo costs
    # a lookup, and a purge plans once (under the lock), not once more to be checked.
    targets = forgetting.Purge(engine, app.paths, agent).targets(selector, files)
    if not (pre_tombstone and selector.sessions):
        _matched(
            agent,
            selector,
            targets,
            lambda: _known_values(engine, agent, _discover(app, agent, None)),
        )
    if dry_run:
        tally = forgetting.Purge(engine, app.paths, agent).forget(selector, files, dry_run=True)
    else:
        engine = app.engine(agent)
        with app.lock(agent, "forget", wait_s=wait_s):
            tally = forgetting.Purge(engine, app.paths, agent).forget(
                selector, files, dry_run=False
            )
    others = tuple(
        r
        for other in app.paths.kin(agent)
        if app.has_state(other)
        and (r := _forget_kin(app, other, selector, dry_run=dry_run, wait_s=wait_s)) is not None
    )
    return dataclasses.replace(forgetting.PurgeReport.of(tally), other_agents=others)


def _forget_kin(
    app: App, agent: str, selector: Selector, *, dry_run: bool, wait_s: float = 0
) -> PurgeReport | None:
    """`forget` of the sessions `selector` names that `agent` also holds, or None when it
    holds none of them."""
    files = _discover(app, agent, selector)
    targets = forgetting.Purge(app.engine(agent, create=False), app.paths, agent).targets(
        selector, files
    )
    held = tuple(t.session_id for t in targets if t.resolved and not t.already_forgotten)
    if not held:
        return None
    if selector.sessions:
        selector = forgetting.Selector(sessions=held)
    if dry_run:
        probe = forgetting.Purge(app.engine(agent, create=False), app.paths, agent)
        return forgetting.PurgeReport.of(probe.forget(selector, files, dry_run=True))
    engine = app.engine(agent)
    with app.lock(agent, "forget", wait_s=wait_s):
        tally = forgetting.Purge(engine, app.paths, agent).forget(selector, files, dry_run=False)
    return forgetting.PurgeReport.of(tally)


def _discover(app: App, agent: str, selector: Selector | None) -> list[SessionFile]:
    """The agent's transcript files a purge of `selector` can name (None: all of them). A
    purge of session ids or keys opens only those sessions' files."""
    sessions = selector.sessions if selector is not None and selector.sessions else None
    return sources.discover(app.paths, [agent], sessions=sessions).get(agent, [])


def _matched(
    agent: str,
    selector: Selector,
    targets: Sequence[Any],
    known: Callable[[], tuple[list[str], list[str], list[str]]],
) -> None:
    """Raise NoSuchError naming what in `selector` matched no session (and, for a
    participant or a hook source, the ones the agent's sessions have)."""
    unknown = [t.session_id for t in targets if not t.resolved]
    nothing = "nothing forgotten"
    if unknown:
        raise NoSuchError(
            f"agent {agent} has no session {', '.join(map(repr, unknown))} ({nothing}; its"
            f" sessions: {_listed(known()[0])}; pass --pre-tombstone to keep such a session"
            " out before it ever appears)"
        )
    if targets:
        return
    _sessions, participants, hook_sources = known()
    if selector.participant is not None:
        raise NoSuchError(
            f"agent {agent} has no session with participant {selector.participant!r}"
            f" ({nothing}; its sessions' participants: {_listed(participants)})"
        )
    if selector.hook_source is not None:
        since = f" since {selector.since.isoformat()}" if selector.since else ""
        raise NoSuchError(
            f"agent {agent} has no session from hook source {selector.hook_source!r}{since}"
            f" ({nothing}; its sessions' hook sources: {_listed(hook_sources)})"
        )


def _listed(values: Sequence[str], most: int = 10) -> str:
    if not values:
        return "none"
    more = f", and {len(values) - most} more" if len(values) > most else ""
    return ", ".join(values[:most]) + more


def _known_values(
    engine: Engine | None, agent: str, files: Sequence[SessionFile]
) -> tuple[list[str], list[str], list[str]]:
    """The session ids, participants and hook sources of the agent's sessions (from its
    files and its records)."""
    ids = {f.session_id for f in files}
    participants = {p for f in files for p in f.participants}
    hooks = {f.external_source for f in files if f.external_source}
    if engine is not None:
        with engine.connect() as conn:
            for sid, record in session_records(conn, agent).items():
                ids.add(sid)
                with contextlib.suppress(ValueError, TypeError):
                    participants.update(json.loads(record["participants"] or "[]"))
                if record["external_source"]:
                    hooks.add(record["external_source"])
    return sorted(ids), sorted(map(str, participants)), sorted(map(str, hooks))
