"""The REM phase: recurring themes of the recent past, a boost for the candidates that carry
them, and a dated entry in the dream diary (DREAMS.md).

Themes are found deterministically: a concept (a content word, never a role word like
"user") is a theme when candidates mentioning it were seen in several sessions on several
days of the lookback window, on the agent's own clock. The diary entry is a short narrative
by the LLM when a profile and budget allow, else a plain summary. Either way it never quotes
metadata (scores, line references), and the diary is never read back as input.
"""

from __future__ import annotations

import json
import logging
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict
from sqlalchemy import Engine, and_, func, select

from dreaming.config import Paths
from dreaming.errors import BudgetExceededError, LLMError
from dreaming.ingest import candidates
from dreaming.ingest import claims as claims_mod
from dreaming.ingest.tags import TagRegistry
from dreaming.llm import CallRecord, calls_of
from dreaming.llm.calls import LLMAccess
from dreaming.memory import diary
from dreaming.memory.sanitize import sanitize_entry_text
from dreaming.phases._calls_log import log_calls
from dreaming.store import state
from dreaming.store.state import StateKey
from dreaming.store.tables import CANDIDATE_EVIDENCE, CANDIDATES, CORPUS_LINES
from dreaming.templates import template_env

log = logging.getLogger(__name__)


# Concepts that recur in any conversation and say nothing about it.
_DULL = frozenset({"want", "need", "make", "know", "think", "good", "time", "today", "tomorrow"})


@dataclass(frozen=True, slots=True)
class Theme:
    concept: str  # the stemmed word candidates carry ("alway"): what boosts match on
    label: str  # the word as people wrote it most often ("always"): what the diary shows
    related: tuple[str, ...]  # labels too
    sessions: int
    days: int
    example: str  # the statement that best carries it, sanitized


class DiaryReply(BaseModel):
    model_config = ConfigDict(extra="forbid")
    entry: str


@dataclass
class RemSummary:
    agent: str
    day: str | None = None
    candidates_in_window: int = 0
    themes: list[Theme] = field(default_factory=list)
    boosted: int = 0
    diary_written: bool = False
    diary_by: str = "deterministic"
    diary_text: str = ""
    llm_calls: int = 0
    fallback: str | None = None
    degraded: str | None = None  # the model failed, so the deterministic diary stood in
    dry_run: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "day": self.day,
            "candidates_in_window": self.candidates_in_window,
            "themes": [
                {
                    "concept": t.label,
                    "related": list(t.related),
                    "sessions": t.sessions,
                    "days": t.days,
                }
                for t in self.themes
            ],
            "boosted": self.boosted,
            "diary_written": self.diary_written,
            "diary_by": self.diary_by,
            "diary_text": self.diary_text,
            "llm_calls": self.llm_calls,
            "fallback": self.fallback,
            "degraded": self.degraded,
            "dry_run": self.dry_run,
        }


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
        summary = RemSummary(agent=agent, dry_run=self.dry_run)
        with self.engine.connect() as conn:
            clock = candidates.read_clock(conn, agent)
            if clock is None:
                return summary  # nothing ingested yet: nothing to dream about
            summary.day = clock.date().isoformat()
            since = clock - timedelta(days=self.settings.lookback_days)
            rows = list(
                conn.execute(
                    select(
                        CANDIDATES.c.id,
                        CANDIDATES.c.text,
                        CANDIDATES.c.tokens,
                        CANDIDATES.c.score,
                        CANDIDATES.c.last_seen,
                        CANDIDATES.c.rem_boost,
                    ).where(and_(CANDIDATES.c.agent == agent, CANDIDATES.c.last_seen >= since))
                ).all()
            )
            ids = [r[0] for r in rows]
            spread: dict[int, tuple[set[str], set[str]]] = defaultdict(lambda: (set(), set()))
            for cid, session_id, day in conn.execute(
                select(
                    CANDIDATE_EVIDENCE.c.candidate_id,
                    CANDIDATE_EVIDENCE.c.session_id,
                    CANDIDATE_EVIDENCE.c.day,
                ).where(CANDIDATE_EVIDENCE.c.candidate_id.in_(ids))
            ):
                spread[cid][0].add(session_id)
                spread[cid][1].add(day)
            previous_boosts = {
                cid: boost
                for cid, boost in conn.execute(
                    select(CANDIDATES.c.id, CANDIDATES.c.rem_boost).where(
                        and_(CANDIDATES.c.agent == agent, CANDIDATES.c.rem_boost > 0)
                    )
                )
            }
        summary.candidates_in_window = len(rows)
        summary.themes = self._themes(rows, spread)
        boosts = self._boosts(rows, summary.themes)
        summary.boosted = sum(1 for b in boosts.values() if b > 0)
        newest_line = _newest_line(self.engine, agent)
        dreams = self.paths.dreams_file(agent)
        written = {e.day: e.body for e in diary.entries(diary.read(dreams))}
        if summary.day in written and _get_mark(self.engine, agent) == newest_line:
            # Nothing admitted since tonight's entry was written: keep it, call no model
            # (invariant 10), and leave the boosts as they are.
            summary.diary_text = written[summary.day]
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
                candidates.rescore(conn, agent, self.paths.settings)
        summary.diary_written = diary.write_entry(dreams, summary.day, summary.diary_text)
        _set_mark(self.engine, agent, newest_line)
        return summary

    def _themes(self, rows: list[Any], spread: dict[int, tuple[set[str], set[str]]]) -> list[Theme]:
        sessions: dict[str, set[str]] = defaultdict(set)
        days: dict[str, set[str]] = defaultdict(set)
        cooccur: dict[str, Counter[str]] = defaultdict(Counter)
        best: dict[str, tuple[float, str]] = {}
        surface: dict[str, Counter[str]] = defaultdict(Counter)
        for cid, text, tokens, score, _last, _boost in rows:
            for word in claims_mod.query_words(text):
                surface[claims_mod.stem(word)][word] += 1
            words = [
                t for t in tokens.split() if len(t) >= 3 and not t.isdigit() and t not in _DULL
            ]
            s, d = spread.get(cid, (set(), set()))
            for w in words:
                sessions[w] |= s
                days[w] |= d
                cooccur[w].update(x for x in words if x != w)
                if w not in best or (score, text) > best[w]:
                    best[w] = (score, text)
        eligible = [
            w
            for w in sessions
            if len(sessions[w]) >= self.settings.min_theme_sessions
            and len(days[w]) >= self.settings.min_theme_days
        ]
        eligible.sort(key=lambda w: (-len(sessions[w]), -len(days[w]), w))
        themes: list[Theme] = []
        covered: set[str] = set()
        for w in eligible:
            if w in covered:
                continue  # already named as a related concept of a stronger theme
            related = tuple(x for x, _ in cooccur[w].most_common(3) if x in sessions)
            covered |= {w, *related}
            example = sanitize_entry_text(best[w][1], max_chars=200, registry=self.registry)

            def label(stem: str) -> str:
                common = surface[stem].most_common(1)
                return common[0][0] if common else stem

            themes.append(
                Theme(
                    w,
                    label(w),
                    tuple(label(x) for x in related),
                    len(sessions[w]),
                    len(days[w]),
                    example,
                )
            )
            if len(themes) >= self.settings.max_themes:
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
            lines.append(
                f"- {t.label}{about}, across {t.sessions} conversations on {t.days} days;"
                f" for instance: {t.example}"
            )
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


def _newest_line(engine: Engine, agent: str) -> str:
    with engine.connect() as conn:
        value = conn.execute(
            select(func.max(CORPUS_LINES.c.id)).where(CORPUS_LINES.c.agent == agent)
        ).scalar()
    return str(value or 0)


def _get_mark(engine: Engine, agent: str) -> str | None:
    with engine.connect() as conn:
        return state.get(conn, agent, StateKey.REM_INPUT)


def _set_mark(engine: Engine, agent: str, value: str) -> None:
    with engine.begin() as conn:
        state.put(conn, agent, StateKey.REM_INPUT, value)
