"""The REM phase: recurring themes of the recent past, a boost for the candidates that carry
them, and a dated entry in the dream diary (DREAMS.md).

Themes are found deterministically (`dreaming.phases._rem_themes`): a concept (a content
word of what the owner or the agent said, never a stopword, a small-talk word or a role word
like "user") is a theme when candidates seen in the lookback window, or the agent's claims
of the window that no candidate holds (`_rem_agent`: the agent's lines create no
candidates), carry it in several sessions on several days, on the agent's own clock. Themes
are ranked by that recurrence (the owner's sessions over the agent's, how often it was said)
times how specific the word is among the agent's sessions; ties go to the measure's parts,
then to what was said first. Each theme quotes one whole sentence a person said, without its
markdown, never a question or small talk (`_rem_quotes`), the owner's first. The diary
entry is a short narrative by the LLM when a profile and budget allow, else a plain summary.
Either way it never quotes metadata (scores, line references), and the diary is never read
back as input.

What the window read is recorded, so a purge can find what it derived: the sessions of every
piece of evidence of the window's candidates, and of the agent's claims it read, go into the
entry's window (`diary_windows`, written before the entry) and into the run summary
(`read_sessions`). Forget removes the entry and redacts the summary's themes and diary text
when one of them is purged.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict
from sqlalchemy import Connection, Engine, and_, bindparam, func, select

from dreaming.config import Settings
from dreaming.errors import BudgetExceededError, LLMError
from dreaming.ingest import candidates
from dreaming.ingest import salience as salience_mod
from dreaming.ingest.admission import OriginClass
from dreaming.ingest.tags import TagRegistry
from dreaming.llm import CallRecord, calls_of
from dreaming.llm.calls import LLMAccess, log_calls
from dreaming.memory import diary
from dreaming.memory.sanitize import sanitize_entry_text
from dreaming.paths import Paths
from dreaming.phases import _rem_agent as agent_claims
from dreaming.phases._rem_quotes import Quotes
from dreaming.phases._rem_summary import RemSummary, Theme
from dreaming.phases._rem_themes import (
    SPEAKER_WEIGHT,
    Evidence,
    Specificity,
    Tally,
)
from dreaming.runs import rem_summary
from dreaming.store import state
from dreaming.store.state import StateKey
from dreaming.store.tables import CANDIDATE_EVIDENCE, CANDIDATES, CORPUS_LINES
from dreaming.templates import template_env

log = logging.getLogger(__name__)


class DiaryReply(BaseModel):
    model_config = ConfigDict(extra="forbid")
    entry: str


class RemPhase:
    def __init__(
        self,
        engine: Engine,
        paths: Paths,
        registry: TagRegistry,
        *,
        llm: LLMAccess | None = None,
        dry_run: bool = False,
        run_id: int | None = None,
    ) -> None:
        self.engine = engine
        self.paths = paths
        self.settings = paths.settings.rem
        self.registry = registry
        self.llm = llm  # None: the deterministic diary
        self.dry_run = dry_run
        self.run_id = run_id

    def run(self, agent: str) -> RemSummary:
        started = time.perf_counter()
        summary = self._run(agent)
        summary.duration_s = time.perf_counter() - started
        return summary

    def _run(self, agent: str) -> RemSummary:
        summary = RemSummary(agent=agent, dry_run=self.dry_run)
        dreams = self.paths.dreams_file(agent)
        with self.engine.connect() as conn:
            clock = candidates.read_clock(conn, agent)
            if clock is None:
                return summary  # nothing ingested yet: nothing to dream about
            summary.day = clock.date().isoformat()
            signature = _signature(conn, agent, self.paths.settings, self.registry, dreams)
            again = _dreamt(conn, agent, signature, summary, dreams)
            if again is not None:
                return again
            since = clock - timedelta(days=self.settings.lookback_days)
            rows = _window(conn, agent, since)
            said = agent_claims.gather(conn, agent, since, self.paths.settings, dreams)
            read = set(_sessions_read(conn, [r.id for r in rows])) | said.sessions
            summary.read_sessions = sorted(read)
            evidence = _evidence(conn, [r.id for r in rows]) | said.evidence
            found = self._themes(conn, agent, [*rows, *said.rows], evidence, said)
            previous_boosts = {
                cid: boost for cid, boost in conn.execute(_BOOSTED, {"agent": agent})
            }
        summary.candidates_in_window = len(rows)
        summary.themes = found
        boosts = self._boosts(rows, summary.themes)
        summary.boosted = sum(1 for b in boosts.values() if b > 0)
        newest_line = _newest_line(self.engine, agent)
        written = {e.day: e.body for e in diary.entries(diary.read(dreams))}
        if summary.day in written and _get_mark(self.engine, agent) == newest_line:
            # Nothing admitted since tonight's entry was written: keep it, call no model
            # (invariant 10), and leave the boosts as they are.
            summary.diary_text = written[summary.day]
            self._remember(agent, signature)
            return summary
        summary.diary_text = self._narrate(agent, summary) or self._plain(summary)
        if self.dry_run:
            return summary
        changes = [
            {"cid": cid, "boost": boost}
            for cid, boost in ({**{c: 0.0 for c in previous_boosts}, **boosts}).items()
            if previous_boosts.get(cid, 0.0) != boost
        ]
        with self.engine.begin() as conn:
            if changes:
                candidates.set_boosts(conn, changes)
                # A boost moves only its own candidate's score (rarity is the words', the
                # clock is light's): when the others' scores are current, they stay.
                settings = self.paths.settings
                current = candidates.scores_current(conn, agent, settings)
                boosted = {c["cid"] for c in changes} if current else None
                candidates.rescore(conn, agent, settings, only=boosted)
            # Before the entry: a crash between the two leaves a window listing too much,
            # never an entry drawing on a session its window does not name.
            diary.record_window(conn, agent, summary.day, summary.read_sessions)
        summary.diary_written = diary.write_entry(dreams, summary.day, summary.diary_text)
        _set_mark(self.engine, agent, newest_line)
        with self.engine.connect() as conn:  # DREAMS.md as this night left it
            signature = _signature(conn, agent, self.paths.settings, self.registry, dreams)
        # Stored once that connection is back: a second one, opened while it was out, cost
        # an agent's night a connection of its own (its pragmas, its WAL handle, its close).
        self._remember(agent, signature)
        return summary

    def _remember(self, agent: str, signature: str) -> None:
        """This run's themes stand for every night that reads what it read (`_dreamt`)."""
        if self.run_id is None or self.dry_run:
            return
        with self.engine.begin() as conn:
            value = json.dumps({"signature": signature, "run": self.run_id})
            state.put(conn, agent, StateKey.REM_DREAMT, value)

    def _themes(
        self,
        conn: Connection,
        agent: str,
        rows: Sequence[Any],
        evidence: Mapping[int, Sequence[Evidence]],
        said: agent_claims.AgentClaims,
    ) -> list[Theme]:
        """The concepts that kept coming back, strongest first: recurrence across sessions and
        days (the owner's word counting more than the agent's) times how specific the word
        is in the agent's corpus. Ties go to the measure's parts, then to the concept said
        first; never to the alphabet."""
        lexicon = salience_mod.lexicon_for(self.paths.settings.salience.extra())
        tally = Tally(lexicon)
        for row in rows:
            tally.add(row, evidence.get(row.id, ()))
        s = self.settings
        extra = [(e.session, r.tokens) for r in said.rows for e in said.evidence[r.id]]
        specificity = Specificity.of(conn, agent, set(tally.words), extra)
        weights = {w: r.weight(specificity.of_word(w)) for w, r in tally.words.items()}
        eligible = sorted(
            (
                w
                for w, r in tally.words.items()
                if len(r.sessions) >= s.min_theme_sessions and len(r.days) >= s.min_theme_days
            ),
            key=lambda w: (-round(weights[w], 9), *tally.words[w].order(), w),
        )
        themes: list[Theme] = []
        quotes = Quotes(conn, lexicon, said, self.registry)
        covered: set[str] = set()
        quoted: set[str] = set()
        for w in eligible:
            if w in covered:
                continue  # already named with a stronger theme
            rec = tally.words[w]
            label, partner = tally.phrase(w, s.min_theme_sessions)
            related = tally.related(w, partner, specificity)
            covered |= {w, partner, *related}
            example, by = quotes.best(w, tally.contenders(w), quoted)
            quoted.add(example)
            themes.append(
                Theme(
                    w,
                    label,
                    tuple(tally.label(x) for x in related),
                    len(rec.sessions),
                    len(rec.days),
                    example,
                    round(weights[w], 6),
                    rec.owner_sessions(),
                    by,
                )
            )
            if len(themes) >= s.max_themes:
                break
        return themes

    def _boosts(self, rows: list[Any], themes: list[Theme]) -> dict[int, float]:
        concepts = {t.concept for t in themes}
        out: dict[int, float] = {}
        for cid, _text, tokens, *_ in rows:
            hits = len(concepts & set(tokens.split()))
            out[cid] = round(min(self.settings.max_boost, hits * self.settings.boost_per_theme), 6)
        return out

    def _plain(self, summary: RemSummary) -> str:
        if not summary.themes:
            return f"## {summary.day}\n\nA quiet night: nothing recurred."
        lines = [f"## {summary.day}", "", "What kept coming back:"]
        for t in summary.themes:
            about = f" (with {', '.join(t.related)})" if t.related else ""
            line = f"- {t.label}{about}, across {_count(t.sessions, 'conversation')}"
            line += f" on {_count(t.days, 'day')}"
            if t.example:
                said = "in my words" if t.example_by == OriginClass.AGENT.value else "for instance"
                line += f"; {said}: “{t.example}”"
            lines.append(line)
        return "\n".join(lines)

    def _narrate(self, agent: str, summary: RemSummary) -> str | None:
        """An LLM-written entry, or None (no profile, no themes, no budget, or a failure)."""
        if not (self.settings.narrative and self.llm and summary.themes):
            return None
        budget = self.llm.budget
        env = template_env()
        data = json.dumps(
            [
                {
                    "concept": t.label,
                    "related": list(t.related),
                    "conversations": t.sessions,
                    "days": t.days,
                    "example": t.example,
                }
                for t in summary.themes
            ],
            ensure_ascii=False,
            indent=2,
        )
        system = env.get_template("rem_system.j2").render(max_chars=self.settings.max_diary_chars)
        user = env.get_template("rem_user.j2").render(day=summary.day, themes_json=data)
        client = self.llm.client_factory()
        try:
            completion = client.complete_json(
                system,
                user,
                DiaryReply.model_json_schema(),
                "dream_diary",
                DiaryReply,
                max_output_tokens=600,
                budget=budget,
            )
        except (BudgetExceededError, LLMError) as err:
            summary.fallback = str(err)
            if isinstance(err, LLMError):  # over budget is a limit kept, not a fault
                summary.degraded = f"diary written without the model ({err})"
            self._log(agent, calls_of(err), summary)
            return None
        finally:
            client.close()
        self._log(agent, completion.calls, summary)
        text = sanitize_entry_text(
            completion.parsed.entry, max_chars=self.settings.max_diary_chars, registry=self.registry
        )
        if not text:
            summary.fallback = "the model's diary entry was empty after sanitizing"
            return None
        summary.diary_by = "llm"
        return f"## {summary.day}\n\n{text}"

    def _log(self, agent: str, calls: Sequence[CallRecord], summary: RemSummary) -> None:
        summary.llm_calls += log_calls(self.engine, agent, self.run_id, calls).calls


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _newest_line(engine: Engine, agent: str) -> str:
    with engine.connect() as conn:
        value = conn.execute(_NEWEST_LINE, {"agent": agent}).scalar()
    return str(value or 0)


# REM's statements, built once (see `store.compiled`).
_BOOSTED = select(CANDIDATES.c.id, CANDIDATES.c.rem_boost).where(
    and_(CANDIDATES.c.agent == bindparam("agent"), CANDIDATES.c.rem_boost > 0)
)
_NEWEST_LINE = select(func.max(CORPUS_LINES.c.id)).where(CORPUS_LINES.c.agent == bindparam("agent"))


def _signature(
    conn: Connection, agent: str, settings: Settings, registry: TagRegistry, dreams: Path
) -> str:
    """What REM's themes are made of, told in a few bytes: the corpus (its newest line and
    how many there are: new input, a purge, a rederived session all move them), the
    settings REM reads (its own, the claims', the cues') and the injected-context tags a
    quote may not hold, and DREAMS.md (whose lines echoed back are no one's claims). No
    path: the same state in another folder has the same signature."""
    newest, count = conn.execute(_CORPUS_SIZE, {"agent": agent}).one()
    digest = hashlib.blake2b(f"{newest}:{count}".encode(), digest_size=16)
    for part in (settings.rem, settings.candidates, settings.salience):
        digest.update(part.model_dump_json().encode())
    tags = sorted(
        repr((d.tag, d.pattern, d.sentinel_prefix, d.begin)) for d in registry.declarations
    )
    digest.update(repr(tags).encode())
    with contextlib.suppress(OSError):
        digest.update(dreams.read_bytes())
    return digest.hexdigest()


_CORPUS_SIZE = select(func.max(CORPUS_LINES.c.id), func.count()).where(
    CORPUS_LINES.c.agent == bindparam("agent")
)


def _dreamt(
    conn: Connection, agent: str, signature: str, tonight: RemSummary, dreams: Path
) -> RemSummary | None:
    """A quiet night's dream: when REM reads exactly what an earlier run read (the same
    `_signature`) and that run's diary entry for the day stands, its themes are tonight's,
    taken from its run record (which forget redacts with the rest) instead of worked out
    again; None: they must be worked out."""
    raw = state.get(conn, agent, StateKey.REM_DREAMT)
    mark = json.loads(raw) if raw else {}
    if not isinstance(mark, dict) or mark.get("signature") != signature:
        return None
    before = rem_summary(conn, int(mark["run"]))
    written = {e.day: e.body for e in diary.entries(diary.read(dreams))}
    if before is None or before.get("day") != tonight.day or tonight.day not in written:
        return None
    try:
        again = RemSummary.from_dict(before)
    except (KeyError, TypeError, ValueError):
        return None
    return dataclasses.replace(
        tonight,
        read_sessions=again.read_sessions,
        candidates_in_window=again.candidates_in_window,
        themes=again.themes,
        boosted=again.boosted,
        diary_text=written[tonight.day],
    )


def _get_mark(engine: Engine, agent: str) -> str | None:
    with engine.connect() as conn:
        return state.get(conn, agent, StateKey.REM_INPUT)


def _set_mark(engine: Engine, agent: str, value: str) -> None:
    with engine.begin() as conn:
        state.put(conn, agent, StateKey.REM_INPUT, value)


# -- what REM reads ---------------------------------------------------------------------------


def _window(conn: Connection, agent: str, since: datetime) -> list[Any]:
    """The candidates seen in the lookback window."""
    return list(conn.execute(_WINDOW, {"agent": agent, "since": since}).all())


_WINDOW = select(
    CANDIDATES.c.id,
    CANDIDATES.c.text,
    CANDIDATES.c.tokens,
    CANDIDATES.c.score,
    CANDIDATES.c.features,
).where(
    and_(CANDIDATES.c.agent == bindparam("agent"), CANDIDATES.c.last_seen >= bindparam("since"))
)


def _sessions_read(conn: Connection, ids: Sequence[int]) -> list[str]:
    """Every session with evidence on the window's candidates, whoever said it: what the
    themes, their quotes and the diary may draw on."""
    if not ids:
        return []
    return sorted(str(r[0]) for r in conn.execute(_SESSIONS_READ, {"ids": list(ids)}))


_SESSIONS_READ = (
    select(CANDIDATE_EVIDENCE.c.session_id)
    .where(CANDIDATE_EVIDENCE.c.candidate_id.in_(bindparam("ids", expanding=True)))
    .distinct()
)


def _evidence(conn: Connection, ids: Sequence[int]) -> dict[int, list[Evidence]]:
    """Each candidate's evidence from the owner or the agent (what third parties or system
    lines said is no theme of the owner's)."""
    out: dict[int, list[Evidence]] = defaultdict(list)
    for cid, session_id, day, origin, line_id in conn.execute(_EVIDENCE, {"ids": list(ids)}):
        out[cid].append(Evidence(session_id, day, origin, line_id))
    return out


_EVIDENCE = select(
    CANDIDATE_EVIDENCE.c.candidate_id,
    CANDIDATE_EVIDENCE.c.session_id,
    CANDIDATE_EVIDENCE.c.day,
    CANDIDATE_EVIDENCE.c.origin_class,
    CANDIDATE_EVIDENCE.c.corpus_line_id,
).where(
    and_(
        CANDIDATE_EVIDENCE.c.candidate_id.in_(bindparam("ids", expanding=True)),
        CANDIDATE_EVIDENCE.c.origin_class.in_(tuple(SPEAKER_WEIGHT)),
    )
)
