"""What was kept out, for the report: sessions not admitted, by reason, and the candidate
funnel (where each candidate stopped at deep's gates, as `dreaming.memory.gates` names them)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, select

from dreaming.config import DeepSettings
from dreaming.ingest.admission import OriginClass, Status
from dreaming.memory import lineage
from dreaming.memory.gates import PASSES, Gate, list_candidates
from dreaming.report._records import FunnelStep, Held, KeptOut, Session, SessionGroup
from dreaming.store.statuses import CandidateStatus
from dreaming.store.tables import SESSIONS, TOMBSTONES

EXAMPLES = 3  # candidates shown per gate


def sessions(conn: Connection, agent: str) -> dict[str, Session]:
    """Every session the agent has a record of, by id."""
    rows = conn.execute(
        select(
            SESSIONS.c.session_id,
            SESSIONS.c.session_key,
            SESSIONS.c.kind,
            SESSIONS.c.status,
            SESSIONS.c.reason,
            SESSIONS.c.channel,
            SESSIONS.c.chat_type,
            SESSIONS.c.external_source,
            SESSIONS.c.trust,
        )
        .where(SESSIONS.c.agent == agent)
        .order_by(SESSIONS.c.session_id)
    )
    return {r[0]: Session(*r) for r in rows}


def reason_meaning(reason: str) -> str:
    """A session's admission reason in plain words."""
    kind, _, detail = reason.partition(":")
    if kind == "policy":
        field, _, value = detail.partition("=")
        value, _, origin = value.partition(" (")  # the file the policy is in, when named
        where = f" in {origin.rstrip(')')}" if origin else ""
        return f"excluded by policy: excludeSessions {field} matches {value!r}{where}"
    if kind == "internal":
        return f"internal session ({detail}): never read into the corpus"
    if reason == "forgotten":
        return "forgotten: purged and tombstoned, never read again"
    if reason == "unclassified":
        return "nothing says whose chat it is: read as untrusted evidence only, never promoted"
    return reason


def _session_groups(
    conn: Connection, agent: str, sessions: Mapping[str, Session]
) -> tuple[SessionGroup, ...]:
    groups: dict[str, list[Session]] = defaultdict(list)
    for s in sessions.values():
        if s.status != Status.ADMITTED:
            groups[s.reason or s.status].append(s)
        elif s.reason == "unclassified":
            groups["unclassified"].append(s)
    listed = {s.session_id for group in groups.values() for s in group}
    for sid, skey, reason in conn.execute(
        select(TOMBSTONES.c.session_id, TOMBSTONES.c.session_key, TOMBSTONES.c.reason)
        .where(TOMBSTONES.c.agent == agent)
        .order_by(TOMBSTONES.c.session_id)
    ):
        if sid not in listed:
            gone = Session(sid, skey, "-", Status.FORGOTTEN.value, reason, None, None, None, None)
            groups[reason or "forgotten"].append(gone)
    return tuple(
        SessionGroup(reason, reason_meaning(reason), tuple(found))
        for reason, found in sorted(groups.items(), key=lambda g: (-len(g[1]), g[0]))
    )


def gate_meaning(gate: str, deep: DeepSettings) -> str:
    return {
        "promoted": "decided: promoted into memory (added, or merged into an entry)",
        "skipped": "decided: skipped by deep (the model's or the rules' reason below)",
        Gate.NO_SPEAKER.value: "only untrusted or system lines said it: evidence, never memory",
        Gate.AGENT_ONLY.value: "only the agent said it (narration, restatements)",
        Gate.ZERO.value: "uninformative: small talk, a question, narration, a fragment",
        Gate.SCORE.value: f"informative, but scores below deep.min_score ({deep.min_score})",
        Gate.SESSIONS.value: (
            f"heard in fewer than deep.min_sessions ({deep.min_sessions}) sessions,"
            " and no durability cue"
        ),
        Gate.AGE.value: (
            "not checked: deep.max_age_days is unset"
            if deep.max_age_days is None
            else f"last heard more than deep.max_age_days ({deep.max_age_days}) days ago"
        ),
        PASSES: "passes every gate: deep considers it on its next run",
    }.get(gate, gate)


_SPEAKERS = (
    (OriginClass.OWNER.value, "owner_lines"),
    (OriginClass.AGENT.value, "agent_lines"),
    (OriginClass.UNTRUSTED.value, "untrusted_lines"),
    (OriginClass.SYSTEM.value, "system_lines"),
)


def _said_by(c: Mapping[str, Any]) -> str:
    said = [f"{who} {c[col]}" for who, col in _SPEAKERS if c[col]]
    return ", ".join(said) or "nobody"


def kept_out(
    conn: Connection,
    agent: str,
    deep: DeepSettings,
    sessions: Mapping[str, Session],
    every: Sequence[lineage.DecisionRecord],
) -> KeptOut:
    """Sessions not admitted, by reason, and the candidate funnel: where each candidate
    stopped (the gate `dreaming candidates` names), with the highest-scoring examples."""
    skipped_why = {d.candidate_key: d.reason for d in every if d.action == "skip"}
    steps: dict[str, list[dict[str, Any]]] = defaultdict(list)
    listed = list_candidates(conn, agent, deep, include_decided=True)  # by score
    for c in listed:
        step = c["gate"]
        if step == Gate.DECIDED.value:
            step = "skipped" if c["status"] == CandidateStatus.SKIPPED else "promoted"
        steps[step].append(c)
    order = ["promoted", "skipped", *(g.value for g in Gate if g is not Gate.DECIDED), PASSES]
    funnel = tuple(
        FunnelStep(
            gate=step,
            meaning=gate_meaning(step, deep),
            count=len(steps.get(step, [])),
            examples=tuple(
                Held(
                    c["key"],
                    c["text"],
                    float(c["score"] or 0.0),
                    int(c["sessions"]),
                    _said_by(c),
                    skipped_why.get(c["key"]) if step == "skipped" else None,
                )
                for c in steps.get(step, [])[:EXAMPLES]
            ),
            kept_out=step not in ("promoted", PASSES),
        )
        for step in order
    )
    admitted = sum(1 for s in sessions.values() if s.status == Status.ADMITTED)
    return KeptOut(admitted, _session_groups(conn, agent, sessions), len(listed), funnel)
