"""MEMORY.md's capacity budget: what each entry is worth, and which entries MEMORY.md holds
when they do not all fit. The rest are archived (`dreaming.memory.archive`), never cut.

The budget bounds the whole file, operator text included (`Capacity`: characters as
OpenClaw counts them, UTF-16 code units and a CRLF file's carriage returns, or the UTF-8
bytes Claude Code counts; and lines, for an agent that loads only the first lines). What
is not ours to move (operator text, entries a person edited) is laid down first; entries
follow in order of worth while they fit:

- standing instructions and constraints (an allergy, a diet) before every other entry,
  whatever their value: they are the last to be archived;
- then by value: the best score of the candidates decided into the entry (salience, rarity,
  density and corroboration: `dreaming.ingest.scoring`), or, where none is left (an entry
  adopted from a file, candidates re-derived since), what its own text earns; halved every
  `half_life_days` since the entry was last said (its newest origin or recall) on the
  agent's clock.

An entry that does not fit is passed over for a smaller one after it. Placement depends on
the database and the operator's text alone, never on where entries stand now, so a write
repeated after a crash places them the same way; `settle` records it as entry statuses.
"""

from __future__ import annotations

import functools
import json
from collections import defaultdict
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, and_, bindparam, func, select

from dreaming.config import Capacity
from dreaming.ingest import salience
from dreaming.ingest.admission import OriginClass
from dreaming.ingest.candidates import read_clock
from dreaming.memory import memory_file
from dreaming.memory.lineage import entry_statuses, held_entries, set_statuses, stated_at
from dreaming.store.statuses import EntryStatus
from dreaming.store.tables import CANDIDATES, CORPUS_LINES, DECISIONS, ENTRIES, RECALLS
from dreaming.syntax import shortest
from dreaming.text_memo import text_cache

STANDING = frozenset({salience.Feature.INSTRUCTION, salience.Feature.CONSTRAINT})
_DAY_S = 86_400.0


@dataclass(frozen=True, slots=True)
class Worth:
    """One entry the memory holds, with what it is worth keeping in MEMORY.md."""

    key: str
    text: str
    value: float
    standing: bool  # a standing instruction or a constraint

    def rank(self) -> tuple[bool, float, str]:
        """Sort key: the entries MEMORY.md keeps first come first."""
        return (not self.standing, -self.value, self.key)


@text_cache(65_536)
def _assessed(text: str) -> salience.Salience:
    return salience.assess(text)


@functools.lru_cache(maxsize=4096)
def _features(names: str | None) -> frozenset[salience.Feature]:
    return salience.parse_features(names)


def worth(
    conn: Connection, agent: str, half_life_days: float, *, valued: bool = True
) -> list[Worth]:
    """Every entry the agent's memory holds (loaded or archived), in creation order (the
    order MEMORY.md and the archive list them), with its worth (`valued` False: none, all
    0 and not standing; for a MEMORY.md without a budget, where every entry fits)."""
    rows = held_entries(conn, agent)
    if not rows or not valued:
        return [Worth(k, t, 0.0, False) for k, t in rows]
    keys = [k for k, _ in rows]
    scored = _candidate_scores(conn, agent, keys)
    said = _last_said(conn, agent, keys)
    clock = read_clock(conn, agent)
    out = []
    for key, text in rows:
        found = scored.get(key)
        if found is None:
            # No candidate left to say what it was worth: what its own text earns.
            own = _assessed(text)
            found = (own.value, own.features)
        base, features = found
        value = base * _decay(said.get(key), clock, half_life_days)
        out.append(Worth(key, text, round(value, 9), bool(features & STANDING)))
    return out


def _decay(last: datetime | None, clock: datetime | None, half_life_days: float) -> float:
    if last is None or clock is None:
        return 1.0
    age = max(0.0, (clock - last).total_seconds() / _DAY_S)
    return float(0.5 ** (age / half_life_days))


def _candidate_scores(
    conn: Connection, agent: str, keys: Collection[str]
) -> dict[str, tuple[float, frozenset[salience.Feature]]]:
    """Entry key -> (the best score of the candidates decided into it, the salience features
    of any of them). A decision's result holds what its targets held: a merge or a supersede
    carries their candidates along (followed through every decision back)."""
    direct: dict[str, set[str]] = defaultdict(set)
    sources: dict[str, set[str]] = defaultdict(set)
    for entry, candidate, targets in conn.execute(
        select(DECISIONS.c.entry_key, DECISIONS.c.candidate_key, DECISIONS.c.targets).where(
            and_(DECISIONS.c.agent == agent, DECISIONS.c.entry_key.is_not(None))
        )
    ):
        direct[entry].add(candidate)
        if not targets or targets == "[]":
            continue  # an add: nothing to follow (and no JSON to decode)
        for target in _targets(targets):
            if target != entry:
                sources[entry].add(target)
    wanted = {k: _reach(k, direct, sources) for k in keys}
    every = set().union(*wanted.values()) if wanted else set()
    known: dict[str, tuple[float, frozenset[salience.Feature]]] = {}
    for ckey, score, features in _scores_of(conn, agent, every):
        known[ckey] = (float(score), _features(features))
    out: dict[str, tuple[float, frozenset[salience.Feature]]] = {}
    for key, candidates in wanted.items():
        found = [known[c] for c in candidates if c in known]
        if found:
            out[key] = (
                max(s for s, _ in found),
                frozenset().union(*(f for _, f in found)),
            )
    return out


_CANDIDATE_SCORES = select(CANDIDATES.c.key, CANDIDATES.c.score, CANDIDATES.c.features)
_CHUNK = 500  # keys a query names
_CANDIDATE_COUNT = select(func.count()).where(CANDIDATES.c.agent == bindparam("agent"))


def _scores_of(
    conn: Connection, agent: str, keys: Collection[str]
) -> Iterator[tuple[str, float, str | None]]:
    """(key, score, features) of the agent's candidates `keys`, and maybe of others. When
    they are most of the agent's candidates (an agent holding thousands of entries under a
    budget: every entry's worth is read), one pass over all of them, not a query per
    `_CHUNK` keys (each spelling its keys out)."""
    if (
        len(keys) > _CHUNK
        and len(keys) * 2 >= conn.execute(_CANDIDATE_COUNT, {"agent": agent}).scalar_one()
    ):
        # Others come along: the caller asks only for its own.
        yield from conn.execute(_CANDIDATE_SCORES.where(CANDIDATES.c.agent == agent))
        return
    names = sorted(keys)
    for chunk in (names[i : i + _CHUNK] for i in range(0, len(names), _CHUNK)):
        yield from conn.execute(
            _CANDIDATE_SCORES.where(and_(CANDIDATES.c.agent == agent, CANDIDATES.c.key.in_(chunk)))
        )


def _targets(raw: str | None) -> list[str]:
    try:
        parsed = json.loads(raw or "[]")
    except ValueError:
        return []
    return [str(t) for t in parsed] if isinstance(parsed, list) else []


def _reach(key: str, direct: dict[str, set[str]], sources: dict[str, set[str]]) -> set[str]:
    """The candidates decided into `key` or into any entry it was made from."""
    seen, todo, out = {key}, [key], set()
    while todo:
        current = todo.pop()
        out |= direct.get(current, set())
        for older in sources.get(current, ()):
            if older not in seen:
                seen.add(older)
                todo.append(older)
    return out


def _last_said(conn: Connection, agent: str, keys: Sequence[str]) -> dict[str, datetime]:
    """When each entry was last said: its newest statement (`stated_at`) or the newest line
    of the owner or the agent that repeated it (a recall)."""
    out = dict(stated_at(conn, agent, keys))
    for key, when in conn.execute(
        select(RECALLS.c.entry_key, func.max(RECALLS.c.observed_at))
        .select_from(RECALLS.join(CORPUS_LINES, CORPUS_LINES.c.id == RECALLS.c.corpus_line_id))
        .where(
            and_(
                RECALLS.c.agent == agent,
                RECALLS.c.observed_at.is_not(None),
                CORPUS_LINES.c.origin_class.in_([OriginClass.OWNER, OriginClass.AGENT]),
            )
        )
        .group_by(RECALLS.c.entry_key)
    ):
        if when is not None and (key not in out or when > out[key]):
            out[key] = when
    return out


# -- measuring and placing ------------------------------------------------------------------


def measure(text: str, *, crlf: bool = False, unit: str = "chars") -> tuple[int, int]:
    """(characters, lines) of `text` as the agent counts them when it loads the file:
    UTF-16 code units (OpenClaw is JavaScript: an emoji is two), or with `unit` "bytes" its
    UTF-8 bytes (Claude Code loads 25 KB), a CRLF file's carriage returns included; a last
    line without a line break is a line."""
    encoded = text.encode("utf-8") if unit == "bytes" else text.encode("utf-16-le")
    chars = len(encoded) if unit == "bytes" else len(encoded) // 2
    breaks = text.count("\n")
    lines = breaks + (1 if text and not text.endswith("\n") else 0)
    return chars + (breaks if crlf else 0), lines


@dataclass(frozen=True)
class Placement:
    """Which of the held entries MEMORY.md holds, and how full it is then."""

    kept: tuple[str, ...]  # in creation order
    archived: tuple[str, ...]  # in creation order
    chars: int  # of MEMORY.md as placed
    lines: int
    fixed_chars: int  # of what is not ours to move: operator text, person-edited entries
    fixed_lines: int
    max_chars: int | None
    max_lines: int | None
    unit: str = "chars"  # what `chars` and `max_chars` count (`Capacity.unit`)

    @property
    def over(self) -> str | None:
        """Why nothing fits, when the operator's text alone is over the budget (it is never
        cut: reported, with the setting to change), else None."""
        if self.max_chars is not None and self.fixed_chars > self.max_chars:
            counted = "bytes" if self.unit == "bytes" else "characters"
            return (
                f"operator text alone is {self.fixed_chars:,} {counted}, over MEMORY.md's"
                f" budget of {self.max_chars:,}: every entry is archived and the text is"
                " left as it is (shorten it, or raise [memory] max_chars)"
            )
        if self.max_lines is not None and self.fixed_lines > self.max_lines:
            return (
                f"operator text alone is {self.fixed_lines:,} lines, over MEMORY.md's budget"
                f" of {self.max_lines:,}: every entry is archived and the text is left as it"
                " is (shorten it, or raise [memory] max_lines)"
            )
        return None


def place(
    doc: memory_file.Document,
    worths: Sequence[Worth],
    capacity: Capacity,
    *,
    crlf: bool = False,
    group_of: Callable[[str], str] = salience.group_of,
    valued: Callable[[], Sequence[Worth]] | None = None,
) -> tuple[Placement, str]:
    """Where each of `worths` (in creation order) goes when MEMORY.md is laid out from `doc`
    under `capacity`, and the text of MEMORY.md then. With `valued`, `worths` may be
    unvalued (`worth(valued=False)`): `valued()` gives them their worth, asked only when
    they do not all fit."""
    edited = {b.key for b in doc.edited_blocks()}
    fixed = memory_file.apply_entries(doc, [], group_of).render()
    unit = capacity.unit
    fixed_chars, fixed_lines = measure(fixed, crlf=crlf, unit=unit)
    limit_c, limit_l = capacity.max_chars, capacity.max_lines

    def fits(chars: int, lines: int) -> bool:
        return (limit_c is None or chars <= limit_c) and (limit_l is None or lines <= limit_l)

    movable = [w for w in worths if w.key not in edited]
    # The layout of every entry, when they all fit: the loop below would build it again.
    laid: dict[tuple[str, ...], str] = {}
    everything_text = None  # not laid out when even a floor under it is over the budget
    if fits(*_at_least(fixed_chars, fixed_lines, doc, movable)):
        everything_text = memory_file.apply_entries(
            doc, [(w.key, w.text) for w in worths], group_of
        ).render()
    if everything_text is not None and fits(*measure(everything_text, crlf=crlf, unit=unit)):
        chosen = {w.key for w in movable}  # all of them fit: no worth needed
        laid[tuple(w.key for w in worths)] = everything_text
    else:
        if valued is not None:
            worths = valued()
            movable = [w for w in worths if w.key not in edited]
        chosen = _fill(fixed, movable, fits, crlf, group_of, unit)
    ranked = sorted((w for w in movable if w.key in chosen), key=Worth.rank)
    while True:
        wanted = [(w.key, w.text) for w in worths if w.key in chosen or w.key in edited]
        text = (
            laid.pop(tuple(k for k, _ in wanted), None)
            or memory_file.apply_entries(doc, wanted, group_of).render()
        )
        chars, lines = measure(text, crlf=crlf, unit=unit)
        if fits(chars, lines) or not ranked:
            break
        # The estimate fell short (a line break the layout added): the least worth goes.
        chosen.discard(ranked.pop().key)
    kept = tuple(w.key for w in worths if w.key in chosen or w.key in edited)
    archived = tuple(w.key for w in worths if w.key not in chosen and w.key not in edited)
    placement = Placement(
        kept, archived, chars, lines, fixed_chars, fixed_lines, limit_c, limit_l, unit
    )
    return placement, text


# The shortest line an entry can stand on: one character of text, its key shown short, no
# line break (the file's last line may have none).
_LEAST_LINE = len(memory_file.render_line(shortest(memory_file.entry_key("x")), "x").rstrip("\n"))


def _at_least(
    fixed_chars: int, fixed_lines: int, doc: memory_file.Document, movable: Sequence[Worth]
) -> tuple[int, int]:
    """A floor under the size of MEMORY.md holding every movable entry: the fixed text and a
    line of at least `_LEAST_LINE` characters (bytes: at least as many) for each entry that
    gets one (not those a person's edit stands for, nor one without text). A budget below
    it is exceeded without laying out tens of thousands of entries to see so. Of a file
    holding a legacy block, only the fixed text: removing a block that began mid-line can
    make the text before it read as a person's edit standing for an entry (`apply_entries`
    reads the file again), which then gets no line of its own."""
    if any(not b.compact for b in doc.blocks):
        return fixed_chars, fixed_lines
    held = doc.edited_hold(w.key for w in movable)
    lines = sum(1 for w in movable if w.key not in held and memory_file.one_line(w.text))
    return fixed_chars + lines * _LEAST_LINE, fixed_lines + lines


def _fill(
    fixed: str,
    movable: Sequence[Worth],
    fits: Callable[[int, int], bool],
    crlf: bool,
    group_of: Callable[[str], str],
    unit: str = "chars",
) -> set[str]:
    """The entries that fit after `fixed`, taken in order of worth, each with its line and,
    for the first of a group, its heading (after a blank line)."""
    chars, lines = measure(fixed, crlf=crlf, unit=unit)
    groups = {h.group for h in memory_file.parse(fixed).headings}
    chosen: set[str] = set()
    for w in sorted(movable, key=Worth.rank):
        # The line as the file shows it: its key short (a collision lengthening one is
        # caught by the check after the fill).
        shown = memory_file.render_line(shortest(w.key), w.text)
        cost_c, cost_l = measure(shown, crlf=crlf, unit=unit)
        group = group_of(w.text)
        if group not in groups:
            c, n = measure("\n" + memory_file.render_heading(group), crlf=crlf, unit=unit)
            cost_c, cost_l = cost_c + c, cost_l + n
        if fits(chars + cost_c, lines + cost_l):
            chosen.add(w.key)
            chars, lines = chars + cost_c, lines + cost_l
            groups.add(group)
    return chosen


def settle(conn: Connection, agent: str, placement: Placement) -> tuple[list[str], list[str]]:
    """Record `placement` as the entries' statuses. Returns (keys archived now, keys back in
    MEMORY.md now)."""
    now = entry_statuses(conn, agent)
    gone = [k for k in placement.archived if now.get(k) == EntryStatus.LIVE]
    back = [k for k in placement.kept if now.get(k) == EntryStatus.ARCHIVED]
    set_statuses(conn, agent, gone, EntryStatus.ARCHIVED)
    set_statuses(conn, agent, back, EntryStatus.LIVE)
    return gone, back


def unsettled(conn: Connection, agent: str, placement: Placement) -> bool:
    """Whether the statuses differ from `placement` (a write would move entries)."""
    archived = set(conn.execute(_ARCHIVED, {"agent": agent}).scalars())
    return archived != set(placement.archived)


_ARCHIVED = select(ENTRIES.c.key).where(
    and_(ENTRIES.c.agent == bindparam("agent"), ENTRIES.c.status == EntryStatus.ARCHIVED)
)
