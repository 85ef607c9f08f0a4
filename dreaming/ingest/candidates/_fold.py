"""Folding: the claims of newly committed corpus lines joined to candidates (new ones or
near-duplicates of existing ones), with one evidence row per line and the recalls of
entries that were said again.

A first-person claim of a line that names its speaker ("I live in Leeds", said by Caroline
in a chat of several people) is that person's: the speaker is part of the candidate's key
and guard (`candidates.speaker`), so Caroline's and Melanie's "I live in Leeds" stay two
candidates, and neither recalls the other's entry. Everything else folds as before: the
owner's claims, and claims that speak of no one in particular, whoever said them.

The agent's own lines corroborate, they do not create: unless `[deep] promote_agent_only` is
on (the agent's words alone never become memory otherwise), a claim only the agent made is
evidence for the candidate it repeats, or nothing (counted as `agent_unmatched`). Two thirds
of what a chatty agent says would otherwise be candidates no night could promote. An agent
line is folded after the batch's other lines, so it can back what the owner said just
before it. REM still hears the agent (`phases._rem_agent`)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import (
    Connection,
    and_,
    bindparam,
    column,
    insert,
    select,
    table,
)

from dreaming import syntax
from dreaming.config import Settings
from dreaming.ingest import claims as claims_mod
from dreaming.ingest.admission import OriginClass
from dreaming.ingest.candidates._common import MARK_CUE, chunks, mark_stale, set_where_ids, utc_now
from dreaming.memory import diary, memory_file
from dreaming.store.bulk import execute_many
from dreaming.store.dialect import insert_ignore, is_sqlite
from dreaming.store.statuses import HELD
from dreaming.store.tables import (
    CANDIDATE_EVIDENCE,
    CANDIDATES,
    ENTRIES,
    RECALLS,
)

# Built once (see `store.compiled`).
_CANDIDATES = select(
    CANDIDATES.c.id, CANDIDATES.c.key, CANDIDATES.c.tokens, CANDIDATES.c.speaker
).where(CANDIDATES.c.agent == bindparam("agent"))
_HELD_ENTRIES = select(ENTRIES.c.key, ENTRIES.c.text).where(
    and_(ENTRIES.c.agent == bindparam("agent"), ENTRIES.c.status.in_(HELD))
)


@dataclass(frozen=True, slots=True)
class FoldStats:
    """What one fold did: the candidates it touched, and the counts the light phase reports."""

    touched: frozenset[int]  # candidates that gained evidence
    echoes: int  # lines dropped as our own diary quoted back
    candidates_new: int
    recalls: int
    agent_unmatched: int = 0  # the agent's claims that repeated no candidate: not kept


@dataclass(slots=True)
class _Batch:
    """What a fold gathers from its lines before it writes anything."""

    # The id the batch's first new candidate takes (SQLite: one above the largest, as the
    # insert gives them), or PENDING where the database picks them (PostgreSQL). No
    # default: any other number would fold new candidates under ids already taken.
    first: int
    # (candidate, or a pending one's id; corpus line id; corpus row)
    evidence: list[tuple[int, int, dict[str, Any]]] = field(default_factory=list)
    recalls: list[dict[str, Any]] = field(default_factory=list)
    # New candidates: -1, -2, ... while their own file is folded, `first` + n after it.
    pending: list[dict[str, Any]] = field(default_factory=list)
    file_start: int = 0  # the first of `pending` made by the file being folded
    cue: set[int] = field(default_factory=set)  # known candidates a claim gave a durable cue
    echoes: int = 0
    agent_unmatched: int = 0
    assessed: list[str] = field(default_factory=list)  # see `Folder.made`


@dataclass
class Folder:
    """Folds claims into candidates; holds the agent's candidate and entry indexes."""

    agent: str
    settings: Settings
    by_key: dict[str, int]
    index: claims_mod.SimilarityIndex
    entries: claims_mod.SimilarityIndex
    entry_keys: list[str]
    entry_by_claim_key: dict[str, str]
    echoes: claims_mod.EchoIndex
    shown: dict[str, str]  # a key MEMORY.md or the database shows -> the entry it recalls
    # `shown`'s keys by the short form MEMORY.md shows them in (and a quote repeats).
    shown_index: syntax.KeyIndex = field(init=False)
    # The texts of the new candidates the rescore will assess (the owner's; anyone's when
    # the agent's words may become memory), since `take_made` last took them.
    made: list[str] = field(init=False, default_factory=list)

    def __post_init__(self) -> None:
        self.shown_index = syntax.KeyIndex(self.shown)

    def take_made(self) -> list[str]:
        """The texts of the candidates to assess folded since last asked (light assesses
        them ahead, `phases.light._assess_ahead`)."""
        made, self.made = self.made, []
        return made

    @classmethod
    def load(
        cls,
        conn: Connection,
        agent: str,
        settings: Settings,
        memory: Path,
        dreams: Path,
        successors: Callable[[Collection[str]], Mapping[str, str | None]] = lambda _keys: {},
        speakers: Callable[[], Mapping[str, frozenset[str]]] = dict,
    ) -> Folder:
        """`successors` tells, for MEMORY.md keys the database no longer has, the live entry
        each was merged into, or None for one that left memory otherwise (superseded); see
        `lineage.successors` (the candidates cannot ask lineage: lineage writes them).
        `speakers` gives the people each live entry names as having said it
        (`lineage.spoken_by`)."""
        sim = settings.candidates.similarity
        index = claims_mod.SimilarityIndex(sim)
        by_key: dict[str, int] = {}
        for cid, key, tokens, speaker in conn.execute(_CANDIDATES, {"agent": agent}):
            by_key[key] = cid
            index.add(cid, frozenset(tokens.split()), speaker)
        # Our own MEMORY.md entries: a claim that repeats one is a recall, not a new candidate
        # (that is how our output echoed back in a transcript is recognised, not re-promoted).
        entries = claims_mod.SimilarityIndex(sim)
        entry_keys: list[str] = []
        entry_by_claim_key: dict[str, str] = {}
        # The database is the truth about our entries; blocks in the file that it does not
        # know count too (a MEMORY.md older than the database, until `repair` adopts them).
        # After a crash the file may still show an entry since merged away: a repeat of that
        # line recalls the entry it went into, not a key no entry has. One since superseded
        # is no longer ours: what it said is no longer so, and saying it again is evidence.
        # Archived entries are ours too: said again, they are recalled (and come back).
        known: dict[str, str] = dict(conn.execute(_HELD_ENTRIES, {"agent": agent}).all())
        lagging = {
            b.key: b.text for b in memory_file.read(memory).live_blocks() if b.key not in known
        }
        moved = successors(lagging.keys()) if lagging else {}
        shown = {key: key for key in known}
        for old in lagging:
            went = moved.get(old, old)
            if went is not None:
                shown[old] = went
        voices = speakers() if known else {}
        for old, body in sorted((known | lagging).items()):
            key = shown.get(old)
            if key is None:
                continue  # superseded: no longer ours
            tokens, holder = _entry_claim(body, voices.get(key, frozenset()))
            if not tokens:
                continue
            entries.add(len(entry_keys), tokens, holder)
            entry_keys.append(key)
            entry_by_claim_key[claims_mod.held_key(claims_mod.claim_key(tokens), holder)] = key
        # Our diary quoted back in a conversation is our own output, not something said.
        echoes = claims_mod.EchoIndex()
        for entry in diary.entries(diary.read(dreams)):
            for line in entry.body.splitlines():
                echoes.add(line)
        return cls(
            agent, settings, by_key, index, entries, entry_keys, entry_by_claim_key, echoes, shown
        )

    def recalled_entry(self, claim: claims_mod.Claim, holder: str | None = None) -> str | None:
        key = claims_mod.held_key(claim.key, holder)
        if key in self.entry_by_claim_key:
            return self.entry_by_claim_key[key]
        hit = self.entries.best(claim.tokens, holder)
        return self.entry_keys[hit] if hit is not None else None

    def fold(self, conn: Connection, lines: Sequence[tuple[int, dict[str, Any]]]) -> FoldStats:
        """Fold the claims of new corpus lines (one file's) into candidates."""
        return self.fold_files(conn, [lines])

    def fold_files(
        self,
        conn: Connection,
        files: Sequence[Sequence[tuple[int, dict[str, Any]]]],
        known: Mapping[int, tuple[claims_mod.Claim, ...]] | None = None,
    ) -> FoldStats:
        """Fold the claims of several files' new corpus lines into candidates, file by file
        as if each were committed on its own, in a few statements. Signals are not recomputed
        here: touched candidates are marked stale and refreshed once at the end of the run.
        `known`: rows' claims extracted already (by `id` of the row), each what extracting
        the row's text gives (light's reading child makes them: `light._claims_ahead`)."""
        batch = _Batch(_first_new_id(conn))
        now = utc_now()
        for lines in files:
            evidence_start = len(batch.evidence)
            # The agent's lines last: what the owner said in the file is a candidate by then.
            for line_id, row in sorted(lines, key=lambda x: not self.creates(x[1])):
                self._gather_line(batch, line_id, row, now, known)
            self._file_folded(batch, evidence_start)
        real = self._insert_new(conn, batch)
        self.made += batch.assessed
        touched = {real.get(cid, cid) for cid, _, _ in batch.evidence}
        mark_stale(conn, touched.difference(real.values()))
        set_where_ids(conn, MARK_CUE, batch.cue)
        self._write_evidence(conn, batch.evidence, real)
        if batch.recalls:
            execute_many(conn, insert_ignore(conn, RECALLS), batch.recalls)
        return FoldStats(
            touched=frozenset(touched),
            echoes=batch.echoes,
            candidates_new=len(batch.pending),
            recalls=len(batch.recalls),
            agent_unmatched=batch.agent_unmatched,
        )

    def creates(self, row: Mapping[str, Any]) -> bool:
        """Whether a line's claims may start candidates: anyone's but the agent's, unless
        the agent's words alone may become memory."""
        return row.get("origin_class") != OriginClass.AGENT or self.settings.deep.promote_agent_only

    def _gather_line(
        self,
        batch: _Batch,
        line_id: int,
        row: dict[str, Any],
        now: datetime,
        known: Mapping[int, tuple[claims_mod.Claim, ...]] | None = None,
    ) -> None:
        """One line's recalls and claims, each claim tied to its candidate (a new one pending)."""
        body = row["text"]
        if self.echoes.contains_echo(body):
            batch.echoes += 1
            return
        if "<!--" in body:
            body = self._gather_quoted_blocks(batch, line_id, row, body)
        cs = self.settings.candidates
        speaker = row.get("speaker")
        create = self.creates(row)
        # What the rescore assesses (`assess_new`): candidates with the owner's evidence.
        assessed = create and (
            row.get("origin_class") == OriginClass.OWNER or self.settings.deep.promote_agent_only
        )
        found = known.get(id(row)) if known else None
        if found is None or body is not row["text"]:  # not sent, or quoted blocks taken out
            found = claims_mod.extract_cached(body, cs.min_claim_words, cs.max_claim_words)
        for claim in found:
            if not (create or self._could_corroborate(claim.tokens)):
                batch.agent_unmatched += 1  # it repeats nothing: not looked up
                continue
            holder = speaker if claim.first_person else None
            entry = self.recalled_entry(claim, holder)
            if entry is not None:
                batch.recalls.append(self._recall(entry, line_id, row))
                continue
            made = len(batch.pending)
            cid = self._candidate_of(batch, claim, holder, now, create=create)
            if len(batch.pending) > made and assessed:
                batch.assessed.append(claim.text)
            if cid is None:
                batch.agent_unmatched += 1
                continue
            batch.evidence.append((cid, line_id, row))

    def _could_corroborate(self, tokens: frozenset[str]) -> bool:
        """Whether a claim may repeat an entry or a candidate at all (see `could_match`)."""
        return self.entries.could_match(tokens) or self.index.could_match(tokens)

    def _gather_quoted_blocks(
        self, batch: _Batch, line_id: int, row: dict[str, Any], body: str
    ) -> str:
        """Recall the entries whose MEMORY.md blocks the line quotes; returns the line with
        every quoted block taken out. A whole block quoted back is our own output: a recall
        of that entry, and none of its words are a claim (invariant 6). A forged block (a key
        we never wrote) is dropped from claims too, but recalls nothing."""
        for m in QUOTED_BLOCK.finditer(body):
            recalled = {self.shown[k] for k in self.shown_index.find(m["key"])}
            if len(recalled) == 1:
                batch.recalls.append(self._recall(recalled.pop(), line_id, row))
        return QUOTED_BLOCK.sub(" ", body)

    def _recall(self, entry: str, line_id: int, row: dict[str, Any]) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "entry_key": entry,
            "corpus_line_id": line_id,
            "session_id": row["session_id"],
            "observed_at": row["ts"],
        }

    def _candidate_of(
        self,
        batch: _Batch,
        claim: claims_mod.Claim,
        holder: str | None,
        now: datetime,
        *,
        create: bool = True,
    ) -> int | None:
        """The candidate a claim (of `holder`, when it is a named speaker's own) is evidence
        for: the one with its key, else the most similar of the same holder, else a new one
        of this batch (a pending id until it is inserted); None when there is none and the
        claim may not `create` one."""
        key = claims_mod.held_key(claim.key, holder)
        cid = self.by_key.get(key)
        if cid is None:
            cid = self.index.best(claim.tokens, holder)
        if cid is None and not create:
            return None
        if cid is None:
            cid = -(len(batch.pending) - batch.file_start + 1)
            batch.pending.append(
                {
                    "agent": self.agent,
                    "key": key,
                    "text": claim.text,
                    "tokens": " ".join(sorted(claim.tokens)),
                    "durable_cue": claim.durable_cue,
                    "updated_at": now,
                    "stale": True,
                    "speaker": holder,
                }
            )
            self.by_key[key] = cid
            self.index.add(cid, claim.tokens, holder)
        elif claim.durable_cue:
            if cid < 0:  # made by this file
                batch.pending[batch.file_start - cid - 1]["durable_cue"] = True
            elif cid >= batch.first:  # made by an earlier file of the batch
                batch.pending[cid - batch.first]["durable_cue"] = True
            else:
                batch.cue.add(cid)
        return cid

    def _file_folded(self, batch: _Batch, evidence_start: int) -> None:
        """A file's new candidates, folded, take the ids they would have once inserted (above
        every real one, in the order made): the next file of the batch finds them as it would
        after a commit of this one, while a file's own new candidates (negative ids) come first
        among its probes and ties, as they always did."""
        renamed = {}
        for n in range(batch.file_start, len(batch.pending)):
            old, new = -(n - batch.file_start + 1), batch.first + n
            renamed[old] = new
            self.by_key[batch.pending[n]["key"]] = new
            self.index.rename(old, new)
        if renamed:
            batch.evidence[evidence_start:] = [
                (renamed.get(cid, cid), line_id, row)
                for cid, line_id, row in batch.evidence[evidence_start:]
            ]
        batch.file_start = len(batch.pending)

    def _insert_new(self, conn: Connection, batch: _Batch) -> dict[int, int]:
        """Insert the batch's new candidates; returns their real ids by pending id, and puts
        the real ids in the folder's indexes. On SQLite they take the ids they were folded
        under (`_first_new_id`): nothing to read back or rename."""
        real: dict[int, int] = {}
        pending = batch.pending
        if not pending:
            return real
        if batch.first != PENDING:
            for n, p in enumerate(pending, batch.first):
                p["id"] = real[n] = n
            execute_many(conn, _INSERT_NEW_WITH_ID, pending)
            return real
        execute_many(conn, _INSERT_NEW, pending)
        keys = [p["key"] for p in pending]
        ids: dict[str, int] = {}
        for chunk in chunks(keys):
            ids.update(conn.execute(_IDS_OF_KEYS, {"agent": self.agent, "keys": chunk}).all())
        for n, p in enumerate(pending, PENDING):
            real[n] = ids[p["key"]]
            self.by_key[p["key"]] = ids[p["key"]]
            self.index.rename(n, ids[p["key"]])
        return real

    def _write_evidence(
        self,
        conn: Connection,
        evidence: list[tuple[int, int, dict[str, Any]]],
        real: dict[int, int],
    ) -> None:
        if not evidence:
            return
        execute_many(
            conn,
            insert_ignore(conn, CANDIDATE_EVIDENCE),
            [
                {
                    "candidate_id": real.get(cid, cid),
                    "corpus_line_id": line_id,
                    "agent": self.agent,
                    "session_id": row["session_id"],
                    "day": row["day"],
                    "origin_class": row["origin_class"],
                }
                for cid, line_id, row in evidence
            ],
        )


# A candidate of an earlier file of the batch, folded but not inserted yet, has an id from
# `_first_new_id` on: above every real one, in the order they were made, as they will be once
# inserted, so the similarity index probes and breaks ties (the lowest id wins) alike whether
# a file's candidates were inserted before the next file is folded or with it. Where the
# database picks ids (a PostgreSQL sequence), from here, renamed once inserted.
PENDING = 1 << 62


def _first_new_id(conn: Connection) -> int:
    """The id SQLite gives the next candidate inserted: one above the largest (the table is
    not AUTOINCREMENT, so this is the rowid it would choose, a reused one included). The
    batch inserts its new candidates with these ids, in the order they were made."""
    if not is_sqlite(conn):
        return PENDING
    return int(conn.exec_driver_sql(_MAX_ID).scalar() or 0) + 1


_MAX_ID = "SELECT max(id) FROM candidates"


# A new candidate names only these columns; the others take the defaults of the table's DDL
# (the models' defaults: a test checks they agree), so SQLAlchemy does not fill a dozen
# defaults per row in Python. Same SQLAlchemy types, so values bind as before.
_NEW_COLUMNS = (
    "agent",
    "key",
    "text",
    "tokens",
    "durable_cue",
    "updated_at",
    "stale",
    "speaker",
)


def _entry_claim(text: str, names: frozenset[str]) -> tuple[frozenset[str], str | None]:
    """An entry's text as a claim: its content tokens (the names of the people it says said
    it are none of them) and, for one person's first-person statement, that person."""
    tokens = claims_mod.content_tokens(text)
    if not names:
        return tokens, None
    tokens -= claims_mod.content_tokens(" ".join(names))
    holder = next(iter(names)) if len(names) == 1 and claims_mod.speaks_of_self(text) else None
    return tokens, holder


_INSERT_NEW = insert(
    table(CANDIDATES.name, *(column(c, CANDIDATES.c[c].type) for c in _NEW_COLUMNS))
)
_INSERT_NEW_WITH_ID = insert(
    table(CANDIDATES.name, *(column(c, CANDIDATES.c[c].type) for c in ("id", *_NEW_COLUMNS)))
)


# Statements built once (building one costs more than SQLite spends running it).
_IDS_OF_KEYS = select(CANDIDATES.c.key, CANDIDATES.c.id).where(
    and_(
        CANDIDATES.c.agent == bindparam("agent"),
        CANDIDATES.c.key.in_(bindparam("keys", expanding=True)),
    )
)


# A managed entry quoted back in a corpus line (`syntax.QUOTED_ENTRY_RE`).
QUOTED_BLOCK = syntax.QUOTED_ENTRY_RE
