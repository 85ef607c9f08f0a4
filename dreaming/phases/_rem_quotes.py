"""A theme's quote: the sentence of the window that best carries it, and whose it is.

A quote is a whole sentence a person said (the owner's before the agent's), free of
markdown, not a question, not small talk, fit for a memory file, and one forget finds again
if its line is purged. Themes of one night draw on many of the same lines, so each line is
split into its sentences once a night, and a sentence is judged only once it names a theme
(most of a line's sentences never need to be), and then once.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection, and_, bindparam, case, select

from dreaming.ingest import claims as claims_mod
from dreaming.ingest import salience as salience_mod
from dreaming.ingest.admission import OriginClass
from dreaming.ingest.tags import TagRegistry
from dreaming.memory import diary
from dreaming.memory.sanitize import entry_text_problems
from dreaming.phases import _rem_agent as agent_claims
from dreaming.phases._rem_themes import SPEAKER_WEIGHT, quality
from dreaming.store.tables import CANDIDATE_EVIDENCE, CORPUS_LINES

MAX_QUOTE_LINES = 40  # corpus lines read per theme for its quote, at most

# A corpus line's whole sentences, each with its place among them and its content tokens.
_Sentences = list[tuple[int, str, frozenset[str]]]


class Quotes:
    """One night's quotes: the lines and sentences earlier themes of the night looked at."""

    def __init__(
        self,
        conn: Connection,
        lexicon: salience_mod.Lexicon,
        said: agent_claims.AgentClaims,
        registry: TagRegistry | None,
    ) -> None:
        self.conn, self.lexicon, self.said, self.registry = conn, lexicon, said, registry
        self.lines: dict[str, _Sentences] = {}
        self.fit: dict[str, bool] = {}

    def best(self, concept: str, contenders: Sequence[int], used: set[str]) -> tuple[str, str]:
        """The sentence that best carries `concept`, from the lines behind `contenders`
        (candidates, and the agent's claim groups by their negative ids), none of `used`;
        and whose it is. ("", "") if none is fit."""
        best: tuple[tuple[float, int, int], str, str] | None = None
        for line_id, text, origin in _lines_of(self.conn, contenders, self.said):
            for i, sentence, tokens in self._sentences(text):
                if concept not in tokens or sentence in used or not self._fit(sentence):
                    continue
                value = quality(sentence, origin, self.lexicon)
                if value is None:
                    continue
                # The place among the line's whole sentences orders as the place among its
                # quotable ones would: a tie goes to the sentence said first either way.
                key = (-value, -line_id, i)
                if best is None or key < best[0]:
                    best = (key, sentence, origin)
        return ("", "") if best is None else (best[1], best[2])

    def _sentences(self, line: str) -> _Sentences:
        found = self.lines.get(line)
        if found is None:
            found = self.lines[line] = [
                (i, sentence, claims_mod.content_tokens(sentence))
                for i, sentence in enumerate(diary.whole_sentences(line))
            ]
        return found

    def _fit(self, sentence: str) -> bool:
        """Whether a diary may quote one of a line's whole sentences: `diary.quotable`'s
        judgement, and fit for a memory file. Forget, purging the line, finds a diary line
        quoting it: each is one of the line's clean sentences, long enough to be one of the
        snippets it hunts for (`forget.snippets_of`; tests/test_rem_diary.py holds it to
        that)."""
        ok = self.fit.get(sentence)
        if ok is None:
            ok = self.fit[sentence] = diary.is_quotable(
                sentence, self.lexicon
            ) and not entry_text_problems(
                sentence, max_chars=diary.MAX_QUOTE_CHARS, registry=self.registry
            )
        return ok


_OWNER_FIRST = case((CORPUS_LINES.c.origin_class == OriginClass.OWNER.value, 0), else_=1)
_LINES_BEHIND = (
    select(CORPUS_LINES.c.id, CORPUS_LINES.c.text, CORPUS_LINES.c.origin_class, _OWNER_FIRST)
    .join(CANDIDATE_EVIDENCE, CANDIDATE_EVIDENCE.c.corpus_line_id == CORPUS_LINES.c.id)
    .where(
        and_(
            CANDIDATE_EVIDENCE.c.candidate_id.in_(bindparam("ids", expanding=True)),
            CORPUS_LINES.c.origin_class.in_(bindparam("speakers", expanding=True)),
        )
    )
    .distinct()
    .order_by(_OWNER_FIRST, CORPUS_LINES.c.id.desc())
    .limit(MAX_QUOTE_LINES)
)
_LINES_BY_ID = select(
    CORPUS_LINES.c.id, CORPUS_LINES.c.text, CORPUS_LINES.c.origin_class, _OWNER_FIRST
).where(CORPUS_LINES.c.id.in_(bindparam("ids", expanding=True)))


def _lines_of(
    conn: Connection, ids: Sequence[int], said: agent_claims.AgentClaims
) -> list[tuple[int, str, str]]:
    """(id, text, origin class) of the owner and agent lines behind `ids` (candidates, and
    the agent's claim groups by their negative ids): the owner's first, the newest first, at
    most MAX_QUOTE_LINES."""
    if not ids:
        return []
    real = [i for i in ids if i > 0]
    own = sorted({n for i in ids if i < 0 for n in said.lines(i)}, reverse=True)
    found: list[tuple[int, str, str, int]] = []
    if real:
        rows = conn.execute(_LINES_BEHIND, {"ids": real, "speakers": list(SPEAKER_WEIGHT)})
        found += [(r[0], r[1], r[2], r[3]) for r in rows]
    if own:
        rows = conn.execute(_LINES_BY_ID, {"ids": own[:MAX_QUOTE_LINES]})
        found += [(r[0], r[1], r[2], r[3]) for r in rows]
    found = sorted(set(found), key=lambda r: (r[3], -r[0]))[:MAX_QUOTE_LINES]
    return [(r[0], r[1], r[2]) for r in found]
