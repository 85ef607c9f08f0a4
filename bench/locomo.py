"""LoCoMo benchmark: what a night of dreaming keeps of ten long, real-shaped conversations.

    .venv/bin/python bench/locomo.py --quick                  # 2 conversations (seconds)
    .venv/bin/python bench/locomo.py                          # all 10
    .venv/bin/python bench/locomo.py --schedule nightly       # a night after every session
    .venv/bin/python bench/locomo.py --conversations 3 --json
    .venv/bin/python bench/locomo.py --llm NAME --config dreaming.toml   # + an LLM run beside it
    .venv/bin/python bench/locomo.py --keep /tmp/locomo-state            # keep the state folders

Data: LoCoMo (snap-research/LoCoMo, `data/locomo10.json`, CC BY-NC 4.0), read at run time
from `../shared/data/locomo/locomo10.json` beside the project (or `--data`); never copied
into the repository. Without it the benchmark prints why and exits 0 (nothing to measure).

What it does, per conversation (one agent each, named by its `sample_id`, e.g. `conv-26`):

1. Writes one OpenClaw v3 transcript per LoCoMo session into a fresh state folder:
   `agents/<agent>/sessions/<agent>-sNN.jsonl` (a `session` header, then one `message` line
   per turn, the first at the session's date and time, each next one a minute later) and
   `sessions.json` (key `agent:<agent>:main:<sid>`, chatType `direct`). Turn k of a session
   is transcript line k + 2; that map (session file, line) -> `dia_id` translates entry
   evidence back to LoCoMo turn ids. Only the turn's `text` is written: shared images
   (`img_url`, `blip_caption`) are not, as a text transcript would not carry them. Each
   `user` message opens with the block OpenClaw puts before a message from a chat channel,
   naming its sender (`Sender (untrusted metadata):` and a fenced JSON object with `label`,
   `id`, `name`), so the library learns who said it the way it does from OpenClaw.

   Roles (`--roles`). LoCoMo is two people talking; there is no assistant. Default
   `both-user`: both speakers' turns are `user` messages, so both are origin class `owner`,
   the class the library trusts and weights fully - the people the agent listens to. The
   alternative `b-assistant` writes speaker B as the `assistant`; that would score B's words
   at half weight (origin `agent`) and the deterministic consolidator would attribute them
   as "The agent said", i.e. it would mislabel a person as the agent and depress B's facts
   for a reason that has nothing to do with memory quality, so it is not the default (it is
   kept to measure exactly that effect). With `both-user` a session has two senders, so
   the deterministic consolidator names who said each entry ("Caroline: I ..."), and one
   person's "I" never folds into or supersedes the other's ("gold-fact recall" below
   ignores speaker names all the same).
2. Runs one night on all sessions at once: `light`, `rem`, `deep`, each timed on its own
   (`App.run([phase], [agent])`), on the embedded default: default settings, no settings
   file, no LLM, offline. The agent's clock is then the last session's date, so facts from
   months before it are old to the recency score and the `max_age_days` gate. With
   `--schedule nightly` a night runs after each session instead (its transcript is written,
   then light, rem, deep), the way a deployment dreams every night; times are summed.
   With `--llm PROFILE --config FILE`, the same conversations are written to a second
   state folder and run with that settings file and profile (rem and deep use the LLM;
   the LLM decides only candidates that passed deep's gates), and every table shows both
   runs side by side.
3. Measures (after the night, before the purge):
   - QA evidence coverage: LoCoMo questions of categories 1-4 (5, adversarial, has no
     answer in the conversation) whose evidence turns are among the evidence turns of
     MEMORY.md's live entries (the union over all entries: `entry_evidence` rows mapped back
     to `dia_id`s). "any": at least one of the question's evidence turns is; "all": every
     one is. Evidence ids are normalized (`D8:6; D9:17` is two ids, `D:11:26` is `D11:26`,
     `D30:05` is `D30:5`); ids naming no turn are dropped, and a question left with none is
     not counted (reported as `qa_unresolvable`).
   - Gold-fact recall: LoCoMo's per-session observations (facts with the turn they came
     from). An observation is matched by an entry when (a) the entry's evidence includes one
     of the observation's turns, and (b) at least half (`MATCH_CONTAINMENT`) of the
     observation's content words occur in the entry text. Content words: lower-cased
     `\\w+` tokens minus a fixed stopword list, the two speakers' names and digits, with
     plural "s"/"ies" folded; computed here, independent of the library's tokenizer.
     "recall" is (a) and (b); "recall (evidence)" is (a) alone: the entry was built from
     the observation's turn, whatever it says (an upper bound for "recall").
   - Compression: live entries and MEMORY.md characters against turns and transcript
     characters (the turns' text only, not the JSON around it). "framing/entry" (JSON
     `framing`, and `framing_chars` in all): MEMORY.md's characters beyond the statements
     themselves (headings, bullets, key comments, line ends, and the date and speaker the
     deterministic path writes before a statement), per live entry; overall, the sums'
     ratio.
   - Cost: LLM calls (every attempt sent), input and output tokens and USD, from the
     agent's `llm_calls` table (rem and deep); 0 on the embedded default.
   - "match a fact": the share of entries that match at least one gold fact (a precision
     proxy: the rest are small talk, or facts LoCoMo's annotators did not list).
   - Random baseline ("QA any (random)", "recall(ev) (random)", "vs random"): does the
     selector beat chance at the same size? Budget: the characters of the MEMORY.md the
     night wrote for the conversation. Overhead: that file's mean framing per live entry,
     (MEMORY.md characters - sum of the live entries' text lengths) / live entries (30 when
     there are no entries; never below 0). The agent's candidates (every row of its
     `candidates` table, any status), ordered by id, are shuffled with
     `random.Random(seed)` and taken in that order, each costing len(text) + overhead
     characters, until the next one would take the total past the budget. The selection's
     evidence turns are its candidates' `candidate_evidence` rows joined to `corpus_lines`,
     (session_id, line) mapped to `dia_id`s as for entries; from their union, QA evidence
     coverage (any, all) and gold-fact recall (evidence) are computed by the same function
     as for the real entries. `--random-draws` R draws (default 5) use seeds seed ..
     seed + R - 1 (`--seed`, default 0); the tables and the JSON show their mean (the JSON
     also each draw), "QA any (random)" as a share of the QA questions and "recall(ev)
     (random)" of the gold facts. "vs random" is real QA any / mean random QA any ("-" when
     the random mean is 0). Overall: the per-conversation means summed, and the ratio of
     the sums.
   - "small talk": the share of live entries none of whose evidence turns is an evidence
     turn of any QA question (any category, 5 included, unresolvable ids dropped) nor a
     turn of any gold observation (an entry without mapped evidence counts as small talk).
     The JSON lists up to 5 such entry texts per conversation (`small_talk_examples`).
     An entry built from an evidence turn can still be small talk ("Wow, that's awesome!"
     said in the turn that holds the fact), so this figure is a floor.
   - "small talk (labelled)": `bench/locomo_labels.tsv` holds hand labels (memory or
     smalltalk) of a fixed random sample of entries (25 per conversation, seed 21, see
     `bench/locomo_labels.py`); an entry whose statement (date prefix and key comment
     removed, whitespace collapsed, case folded) is a labelled one of its conversation takes
     its label. Reported: the share labelled small talk of the matched entries, and how many
     of tonight's entries matched and how many did not (`labelled` in the JSON).
   - Where gold facts are lost (the funnel): matched; in an entry built from its turn whose
     text does not match; otherwise the stage of the fact's own claim - of the candidates
     its turns fed, the one whose text holds most of the fact's words (a turn also feeds
     candidates for its other sentences, "Wow, that's awesome!", which say nothing about
     the fact): a deep gate it fails (the first, in `_select`'s order: fewer than
     `min_sessions` sessions and no durability cue; clarity (what the statement's text and
     speaker earn, `gates.row_clarity`) below `min_score`; last seen more
     than `max_age_days` before the agent's clock; no owner/agent line - and, listed below
     the funnel, every gate such facts fail); passed the gates but not decided in this run
     (`max_candidates` cap or the MEMORY.md size budget) or decided skip; no candidate
     because its claim repeats a live entry (a recall: counted for that entry, but not its
     evidence); no candidate at all (`claims.extract` found no statement: questions,
     fragments too short or long); no corpus line.
4. Purge check: `App.forget` of the conversation's first session, then every artifact is
   searched for that session's words: MEMORY.md, DREAMS.md and every other file of the
   workspace (corpus files included), the agent's SQLite database dumped with
   `sqlite3 iterdump`, and the raw bytes of every file under `<state>/dreaming/` (database,
   WAL, locks). Needles: each turn's text and each of its sentences and comma clauses,
   whitespace-collapsed and case-folded, at least 20 characters, minus any that also occur
   in a session that was not forgotten (that text may rightly remain). Each needle is also
   looked for in its SQL-quoted and JSON-escaped forms. The same scan runs before the
   purge as a control ("needles seen before": it must find them, in the corpus at least).
   Leaks are counted apart: "files, dump" (what any reader of the state sees) and "raw db
   bytes" (only in the database file's bytes, e.g. the unallocated space of a page, which
   `iterdump` does not show; forget promises purged text is gone from the bytes on disk,
   so these count too). Then `verify()` must pass. A leak of either kind, a failed verify
   or a blind control makes the exit status 1.
5. Timing: wall time of each phase and of the purge, per conversation.

Prints tables, or with --json one JSON document on stdout; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import sqlite3
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import _labels
from _common import iso, repo_on_path
from _report import table

REPO = repo_on_path()

from sqlalchemy import text as sql  # noqa: E402

from dreaming import runner  # noqa: E402
from dreaming.app import App  # noqa: E402
from dreaming.forget import Selector  # noqa: E402
from dreaming.ingest import claims as claims_mod  # noqa: E402
from dreaming.ingest.candidates import read_clock  # noqa: E402
from dreaming.memory import gates, lineage  # noqa: E402
from dreaming.verify import verify  # noqa: E402

DATA = REPO.parent / "shared" / "data" / "locomo" / "locomo10.json"
QUICK_CONVERSATIONS = 2
QA_CATEGORIES = (1, 2, 3, 4)
MATCH_CONTAINMENT = 0.5  # share of an observation's content words the entry must contain
MIN_NEEDLE_CHARS = 20
RAW = " (raw bytes)"
ROLES = ("both-user", "b-assistant")
SCHEDULES = ("once", "nightly")
EXAMPLES = 4  # examples per funnel stage kept in the JSON document
SMALL_TALK_EXAMPLES = 5  # small-talk entry texts per conversation kept in the JSON document
DEFAULT_OVERHEAD = 30.0  # framing per entry of the random baseline when MEMORY.md has none
RANDOM_DRAWS = 5  # random selections per conversation; their mean is reported
RANDOM_MEANS = ("selected", "cost", "qa_any", "qa_all", "recall_evidence")  # averaged per draw

# -- LoCoMo ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Turn:
    dia_id: str
    speaker: str
    text: str


@dataclass(frozen=True)
class Session:
    number: int
    session_id: str
    start: datetime
    turns: tuple[Turn, ...]


@dataclass(frozen=True)
class Observation:
    speaker: str
    text: str
    dia_ids: tuple[str, ...]


@dataclass(frozen=True)
class Question:
    question: str
    category: int
    evidence: tuple[str, ...]  # normalized, every id names a turn


@dataclass
class Conversation:
    agent: str
    speakers: tuple[str, str]
    sessions: list[Session]
    questions: list[Question]
    observations: list[Observation]
    qa_unresolvable: int = 0
    # Evidence turns of every QA question, any category (5 included): what is not small talk.
    qa_turns: frozenset[str] = frozenset()
    line_of: dict[str, tuple[str, int]] = field(default_factory=dict)  # dia_id -> (sid, line)
    dia_of: dict[tuple[str, int], str] = field(default_factory=dict)  # (sid, line) -> dia_id

    @property
    def turns(self) -> int:
        return sum(len(s.turns) for s in self.sessions)

    @property
    def transcript_chars(self) -> int:
        return sum(len(t.text) for s in self.sessions for t in s.turns)

    def turn(self, dia_id: str) -> Turn | None:
        sid, line = self.line_of.get(dia_id, ("", 0))
        for s in self.sessions:
            if s.session_id == sid:
                return s.turns[line - 2]
        return None


_SESSION_KEY = re.compile(r"session_(\d+)")
_DIA = re.compile(r"D:?(\d+):0*(\d+)")


def parse_when(value: str) -> datetime:
    """LoCoMo's "1:56 pm on 8 May, 2023" (taken as UTC)."""
    return datetime.strptime(value.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def dia_ids(raw: str | Sequence[str], known: set[str]) -> tuple[str, ...]:
    """Normalized turn ids in an evidence field ("D8:6; D9:17", "D:11:26", ["D1:3"]) that
    name a turn of the conversation, in order, without repeats."""
    items = [raw] if isinstance(raw, str) else list(raw)
    out: list[str] = []
    for item in items:
        for m in _DIA.finditer(str(item)):
            ident = f"D{int(m.group(1))}:{int(m.group(2))}"
            if ident in known and ident not in out:
                out.append(ident)
    return tuple(out)


def load(path: Path, limit: int | None) -> list[Conversation]:
    raw = json.loads(path.read_text(encoding="utf-8"))
    out: list[Conversation] = []
    for i, sample in enumerate(raw[:limit] if limit else raw):
        conv = sample["conversation"]
        agent = str(sample.get("sample_id") or f"conv-{i}").lower()
        sessions: list[Session] = []
        numbers = sorted(
            int(m.group(1)) for k in conv if (m := _SESSION_KEY.fullmatch(k)) and conv[k]
        )
        for n in numbers:
            turns = tuple(Turn(t["dia_id"], t["speaker"], t["text"]) for t in conv[f"session_{n}"])
            sessions.append(
                Session(n, f"{agent}-s{n:02d}", parse_when(conv[f"session_{n}_date_time"]), turns)
            )
        known = {t.dia_id for s in sessions for t in s.turns}
        questions: list[Question] = []
        unresolvable = 0
        qa_turns = frozenset(d for q in sample["qa"] for d in dia_ids(q.get("evidence", []), known))
        for q in sample["qa"]:
            if q.get("category") not in QA_CATEGORIES:
                continue
            ev = dia_ids(q.get("evidence", []), known)
            if not ev:
                unresolvable += 1
                continue
            questions.append(Question(q["question"], q["category"], ev))
        observations = [
            Observation(speaker, fact[0], ids)
            for key in sorted(
                sample.get("observation", {}), key=lambda k: int(re.sub(r"\D", "", k) or 0)
            )
            for speaker, facts in sample["observation"][key].items()
            for fact in facts
            if (ids := dia_ids(fact[1], known))
        ]
        out.append(
            Conversation(
                agent,
                (conv["speaker_a"], conv["speaker_b"]),
                sessions,
                questions,
                observations,
                unresolvable,
                qa_turns,
            )
        )
    return out


# -- transcripts ----------------------------------------------------------------------------


def sender_block(speaker: str) -> str:
    """The inbound metadata OpenClaw puts in front of a message from a chat channel, naming
    its sender: `Sender (untrusted metadata):` and a fenced JSON object."""
    ident = re.sub(r"\W+", "-", speaker.casefold()).strip("-") or "speaker"
    meta = {"label": f"{speaker} ({ident})", "id": ident, "name": speaker}
    return f"Sender (untrusted metadata):\n```json\n{json.dumps(meta, indent=2)}\n```\n\n"


def write_conversation(
    state: Path, conv: Conversation, roles: str, upto: int | None = None
) -> dict[str, int]:
    """OpenClaw v3 transcripts and sessions.json for `conv` (its first `upto` sessions);
    fills its line maps. Files already there are left alone (a later night reads only what
    is new). Returns sessions and transcript bytes."""
    folder = state / "agents" / conv.agent / "sessions"
    folder.mkdir(parents=True, exist_ok=True)
    speaker_b = conv.speakers[1]
    index: dict[str, Any] = {}
    size = 0
    for s in conv.sessions[:upto]:
        lines: list[dict[str, Any]] = [
            {"type": "session", "version": 3, "id": s.session_id, "timestamp": iso(s.start)}
        ]
        parent: str | None = None
        for k, turn in enumerate(s.turns):
            role = "assistant" if roles == "b-assistant" and turn.speaker == speaker_b else "user"
            mid = f"{s.session_id}-m{k:03d}"
            said = sender_block(turn.speaker) + turn.text if role == "user" else turn.text
            lines.append(
                {
                    "type": "message",
                    "id": mid,
                    "parentId": parent,
                    "timestamp": iso(s.start + timedelta(minutes=k)),
                    "message": {"role": role, "content": [{"type": "text", "text": said}]},
                }
            )
            parent = mid
            conv.line_of[turn.dia_id] = (s.session_id, k + 2)
            conv.dia_of[(s.session_id, k + 2)] = turn.dia_id
        body = "".join(json.dumps(o, ensure_ascii=False) + "\n" for o in lines)
        path = folder / f"{s.session_id}.jsonl"
        if not path.exists():  # unchanged files keep their mtime: light sees nothing new
            path.write_text(body, encoding="utf-8")
        size += len(body.encode())
        started = int(s.start.timestamp() * 1000)
        index[f"agent:{conv.agent}:main:{s.session_id}"] = {
            "sessionId": s.session_id,
            "updatedAt": started + 60_000 * len(s.turns),
            "sessionStartedAt": started,
            "chatType": "direct",
        }
    (folder / "sessions.json").write_text(json.dumps(index, indent=1), encoding="utf-8")
    return {"sessions": len(index), "bytes": size}


# -- matching -------------------------------------------------------------------------------

_WORD = re.compile(r"\w+", re.UNICODE)
# A fixed list, kept here so the metric does not move when the library's stopwords do.
_STOP = frozenset(
    """
    a about above after again against all also am an and any are as at be because been
    before being below between both but by can could did do does doing down during each
    few for from further had has have having he her here hers herself him himself his how
    i if in into is it its itself just let me more most my myself no nor not now of off on
    once only or other our ours ourselves out over own same she should so some such than
    that the their theirs them themselves then there these they this those through to too
    under until up very was we were what when where which while who whom why will with
    would you your yours yourself yourselves s t d ll re ve m don doesn didn isn wasn
    user agent said says really
    """.split()  # noqa: SIM905
)


def _fold(word: str) -> str:
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def words(text: str, drop: Iterable[str] = ()) -> frozenset[str]:
    dropped = set(_STOP) | {d.casefold() for d in drop}
    return frozenset(
        _fold(w)
        for w in (x.casefold() for x in _WORD.findall(text))
        if w not in dropped and not w.isdigit()
    )


def containment(fact: frozenset[str], entry: frozenset[str]) -> float:
    return len(fact & entry) / len(fact) if fact else 0.0


# -- one run --------------------------------------------------------------------------------


@dataclass
class Mode:
    label: str
    state: Path
    config: Path | None
    llm: str | None
    env: dict[str, str]


def _gates(cand: dict[str, Any], settings: Any, clock: datetime | None) -> list[str]:
    """The deep gates a candidate fails, in `_select`'s order (empty: it passes them all)."""
    deep = settings.deep
    failed: list[str] = []
    if cand["sessions"] < deep.min_sessions and not cand["durable_cue"]:
        failed.append("gate: 1 session, no cue")
    if gates.row_clarity(cand) < deep.min_score:  # the statement's own value, as deep reads it
        failed.append("gate: score")
    max_age = getattr(deep, "max_age_days", None)  # None: no age limit
    if max_age is not None and clock is not None and cand["last_seen"] is not None:
        last = datetime.fromisoformat(str(cand["last_seen"]))
        last = last if last.tzinfo else last.replace(tzinfo=UTC)
        if last < clock - timedelta(days=max_age):
            failed.append("gate: age")
    if cand["owner_lines"] + cand["agent_lines"] == 0:
        failed.append("gate: origin")
    return failed


STAGES = (
    "matched",
    "entry, text differs",
    "not decided (cap/budget) or skipped",
    "recall of an entry",
    "gate: origin",
    "gate: age",
    "gate: score",
    "gate: 1 session, no cue",
    "no claim",
    "no corpus line",
)


def night(app: App, agent: str, llm: str | None) -> dict[str, float]:
    times: dict[str, float] = {}
    for phase in ("light", "rem", "deep"):
        t0 = time.perf_counter()
        runner.run(app, [phase], [agent], llm=llm)
        times[phase] = time.perf_counter() - t0
    return times


@dataclass(frozen=True)
class _Entry:
    key: str
    text: str
    turns: set[str]  # LoCoMo turn ids of its evidence
    words: frozenset[str]


def coverage(covered: set[str] | frozenset[str], conv: Conversation) -> dict[str, int]:
    """QA evidence coverage (any, all) and gold-fact recall (evidence) of a set of LoCoMo
    turns: the evidence of MEMORY.md's entries, or of a random selection of candidates."""
    return {
        "qa_any": sum(1 for q in conv.questions if covered & set(q.evidence)),
        "qa_all": sum(1 for q in conv.questions if set(q.evidence) <= covered),
        "recall_evidence": sum(1 for ob in conv.observations if covered & set(ob.dia_ids)),
    }


@dataclass(frozen=True)
class Pick:
    """A candidate as the random baseline sees it: its text and its evidence turns."""

    id: int
    text: str
    turns: frozenset[str]


# The deterministic path's date and speaker before the statement: framing too, since a
# candidate's text carries none, so a random pick pays it like a real entry. Both forms:
# "2026-03-08 " and "2026-03-08 The agent: " now, "2026-03-08 — the user: " before.
_ATTRIBUTION = re.compile(
    r"^\d{4}-\d{2}-\d{2} — the (?:user|agent): |^(?:\d{4}-\d{2}-\d{2} )?The agent: "
    r"|^\d{4}-\d{2}-\d{2} "
)


def framing_chars(memory_chars: int, entry_texts: Sequence[str]) -> int:
    """MEMORY.md's characters beyond the statements themselves (headings, bullets, key
    comments, newlines, and the date and speaker the deterministic path puts before a
    statement); never below 0."""
    return max(0, memory_chars - sum(len(_ATTRIBUTION.sub("", t, count=1)) for t in entry_texts))


def framing(memory_chars: int, entry_texts: Sequence[str]) -> float:
    """MEMORY.md's mean framing characters per live entry (`framing_chars`);
    DEFAULT_OVERHEAD without entries."""
    if not entry_texts:
        return DEFAULT_OVERHEAD
    return framing_chars(memory_chars, entry_texts) / len(entry_texts)


def cost(pick: Pick, overhead: float) -> float:
    return len(pick.text) + overhead


def random_selection(
    picks: Sequence[Pick], budget: float, overhead: float, seed: int
) -> list[Pick]:
    """The candidates ordered by id, shuffled with `random.Random(seed)`, taken in that order
    until the next one's cost (text + overhead) would take the total past `budget`."""
    order = sorted(picks, key=lambda c: c.id)
    random.Random(seed).shuffle(order)
    taken: list[Pick] = []
    spent = 0.0
    for pick in order:
        if spent + cost(pick, overhead) > budget:
            break
        taken.append(pick)
        spent += cost(pick, overhead)
    return taken


def random_baseline(
    conv: Conversation,
    picks: Sequence[Pick],
    budget: int,
    overhead: float,
    seed: int,
    draws: int,
) -> dict[str, Any]:
    """`draws` random selections (seeds seed .. seed + draws - 1) at `budget`; the mean of
    their coverage, recall (evidence), candidates taken and characters spent."""
    per_draw: list[dict[str, Any]] = []
    for k in range(draws):
        taken = random_selection(picks, budget, overhead, seed + k)
        turns: set[str] = set().union(*(p.turns for p in taken))
        per_draw.append(
            {
                "seed": seed + k,
                "selected": len(taken),
                "cost": round(sum(cost(p, overhead) for p in taken), 1),
                **coverage(turns, conv),
            }
        )
    mean = {k: round(sum(d[k] for d in per_draw) / draws, 3) for k in RANDOM_MEANS}
    return {
        "seed": seed,
        "draws": draws,
        "budget": budget,
        "overhead": round(overhead, 2),
        "candidates": len(picks),
        **mean,
        "per_draw": per_draw,
    }


def small_talk(entries: Iterable[tuple[str, set[str]]], topical: set[str]) -> list[str]:
    """Texts of the entries (text, evidence turns) none of whose turns is in `topical` (the
    evidence turns of every QA question and the turns of every gold observation)."""
    return [text for text, turns in entries if not turns & topical]


def ratio(real: float, rand: float) -> float | None:
    return round(real / rand, 3) if rand else None


def measure(
    app: App,
    conv: Conversation,
    seed: int = 0,
    draws: int = RANDOM_DRAWS,
    labels: Sequence[_labels.Label] = (),
) -> dict[str, Any]:
    """Coverage, recall, funnel, compression and cost of one agent after its night, a random
    selection of its candidates at the same budget, and its small talk (by evidence turns,
    and by the hand `labels` of the entries whose statement they label)."""
    agent = conv.agent
    settings = app.settings
    names = [n for sp in conv.speakers for n in sp.split()]
    engine = app.engine(agent)
    with engine.connect() as conn:
        live = lineage.live_entries(conn, agent)
        entries: list[_Entry] = []
        for key, text in live:
            evidence = lineage.entry_lineage(conn, agent, key).evidence
            turns = {conv.dia_of[(s, n)] for s, n in evidence if (s, n) in conv.dia_of}
            entries.append(_Entry(key, text, turns, words(text, names)))
        # Per transcript line: its corpus line id and the candidates its claims fed.
        lines = {
            (s, n): i
            for i, s, n in conn.execute(
                sql("SELECT id, session_id, line FROM corpus_lines WHERE agent = :a"), {"a": agent}
            )
        }
        cands_of_line: dict[int, list[int]] = defaultdict(list)
        for cid, lid in conn.execute(
            sql("SELECT candidate_id, corpus_line_id FROM candidate_evidence WHERE agent = :a"),
            {"a": agent},
        ):
            cands_of_line[lid].append(cid)
        cands = {
            r["id"]: dict(r)
            for r in conn.execute(
                sql("SELECT * FROM candidates WHERE agent = :a"), {"a": agent}
            ).mappings()
        }
        recalled = {
            lid
            for (lid,) in conn.execute(
                sql("SELECT corpus_line_id FROM recalls WHERE agent = :a"), {"a": agent}
            )
        }
        clock = read_clock(conn, agent)
        llm_row = conn.execute(
            sql(
                "SELECT count(*), coalesce(sum(input_tokens), 0), coalesce(sum(output_tokens), 0),"
                " coalesce(sum(cost_usd), 0) FROM llm_calls"
                " WHERE agent = :a AND outcome NOT IN ('over_budget', 'unreachable')"
            ),
            {"a": agent},
        ).one()
        line_texts: dict[int, str] = dict(
            conn.execute(
                sql("SELECT id, text FROM corpus_lines WHERE agent = :a"), {"a": agent}
            ).all()
        )
        # Every candidate, any status, with the LoCoMo turns of its evidence.
        cand_turns: dict[int, set[str]] = defaultdict(set)
        for cid, sid, n in conn.execute(
            sql(
                "SELECT ce.candidate_id, cl.session_id, cl.line FROM candidate_evidence ce"
                " JOIN corpus_lines cl ON cl.id = ce.corpus_line_id"
                " WHERE ce.agent = :a AND cl.agent = :a"
            ),
            {"a": agent},
        ):
            if (sid, n) in conv.dia_of:
                cand_turns[cid].add(conv.dia_of[(sid, n)])
    picks = [Pick(cid, c["text"], frozenset(cand_turns[cid])) for cid, c in cands.items()]
    covered: set[str] = set().union(*(e.turns for e in entries))
    gold_turns = {d for ob in conv.observations for d in ob.dia_ids}

    # QA evidence coverage
    real = coverage(covered, conv)
    by_cat: dict[int, list[int]] = defaultdict(lambda: [0, 0, 0])
    for q in conv.questions:
        c = by_cat[q.category]
        c[0] += 1
        c[1] += bool(covered & set(q.evidence))
        c[2] += set(q.evidence) <= covered

    # Gold facts: recall and where each one is lost
    cs = settings.candidates
    funnel: Counter[str] = Counter()
    gates_failed: Counter[str] = Counter()  # of facts lost at a gate: every gate they fail
    examples: dict[str, list[dict[str, Any]]] = defaultdict(list)
    recall = recall_ev = 0
    useful: set[str] = set()  # entries that match at least one gold fact
    for ob in conv.observations:
        fact = words(ob.text, names)
        ids = set(ob.dia_ids)
        from_turn = [e for e in entries if e.turns & ids]
        best = max((containment(fact, e.words) for e in from_turn), default=0.0)
        stage: str
        detail: dict[str, Any] = {"fact": ob.text, "turns": list(ob.dia_ids)}
        for e in from_turn:
            if containment(fact, e.words) >= MATCH_CONTAINMENT:
                useful.add(e.key)
        if from_turn:
            recall_ev += 1
            detail["entry"] = max(from_turn, key=lambda e: containment(fact, e.words)).text
            detail["containment"] = round(best, 2)
            if best >= MATCH_CONTAINMENT:
                recall += 1
                stage = "matched"
            else:
                stage = "entry, text differs"
        else:
            stage = "no corpus line"
            # The fact's claim: of the candidates its turns fed, the one whose text holds most
            # of the fact's words (ties: the one that got furthest). A turn also feeds
            # candidates for its other sentences ("Wow, that's awesome!"); they do not count.
            rank = STAGES.index
            options: list[tuple[float, int, str, dict[str, Any], list[str]]] = []
            for d in ob.dia_ids:
                lid = lines.get(conv.line_of[d])
                if lid is None:
                    continue
                # Unless one of its candidates says more, below. A claim that repeats a live
                # entry is a recall of that entry (not a candidate, not entry evidence).
                if lid in recalled:
                    stage = "recall of an entry"
                elif stage != "recall of an entry":
                    stage = "no claim"
                turn = conv.turn(d)
                found = claims_mod.extract(
                    line_texts[lid], min_words=cs.min_claim_words, max_words=cs.max_claim_words
                )
                detail.setdefault("said", turn.text if turn else None)
                detail.setdefault("claims", [c.text for c in found])
                for cid in cands_of_line.get(lid, []):
                    cand = cands[cid]
                    failed = _gates(cand, settings, clock) if cand["status"] == "pending" else []
                    here = failed[0] if failed else "not decided (cap/budget) or skipped"
                    near = containment(fact, words(cand["text"], names))
                    options.append((near, -rank(here), here, cand, failed))
            if options:
                near, _, stage, cand, failed = max(options, key=lambda o: o[:2])
                detail["gates_failed"] = failed
                shown = ("text", "sessions", "days", "score", "durable_cue", "status")
                detail["candidate"] = {k: cand[k] for k in shown} | {"containment": round(near, 2)}
        funnel[stage] += 1
        if stage.startswith("gate"):
            gates_failed.update(detail["gates_failed"])
        if len(examples[stage]) < EXAMPLES:
            examples[stage].append(detail)

    memory = app.paths.memory_file(agent)
    memory_chars = len(memory.read_text(encoding="utf-8")) if memory.exists() else 0
    overhead = framing(memory_chars, [e.text for e in entries])
    rand = random_baseline(conv, picks, memory_chars, overhead, seed, draws)
    chatter = small_talk(((e.text, e.turns) for e in entries), set(conv.qa_turns) | gold_turns)
    labelled = _labels.rescore(((agent, e.text) for e in entries), labels)
    assert real["recall_evidence"] == recall_ev  # one definition for the real and the random
    return {
        "sessions": len(conv.sessions),
        "turns": conv.turns,
        "transcript_chars": conv.transcript_chars,
        "qa": len(conv.questions),
        "qa_unresolvable": conv.qa_unresolvable,
        "qa_any": real["qa_any"],
        "qa_all": real["qa_all"],
        "qa_by_category": {str(k): v for k, v in sorted(by_cat.items())},
        "gold": len(conv.observations),
        "recall": recall,
        "recall_evidence": recall_ev,
        "entries": len(entries),
        "entries_gold_turn": sum(1 for e in entries if e.turns & gold_turns),
        "entries_matching": len(useful),
        "entries_small_talk": len(chatter),
        "small_talk": round(len(chatter) / len(entries), 4) if entries else None,
        "small_talk_examples": chatter[:SMALL_TALK_EXAMPLES],
        "labelled": labelled,
        "turns_in_entries": len(covered),
        "memory_chars": memory_chars,
        "framing_chars": framing_chars(memory_chars, [e.text for e in entries]),
        "framing": round(overhead, 2) if entries else None,
        "random": rand,
        "qa_any_vs_random": ratio(real["qa_any"], rand["qa_any"]),
        "candidates": len(cands),
        "candidates_pending": sum(1 for c in cands.values() if c["status"] == "pending"),
        "llm_calls": int(llm_row[0]),
        "input_tokens": int(llm_row[1]),
        "output_tokens": int(llm_row[2]),
        "cost_usd": round(float(llm_row[3]), 6),
        "funnel": {s: funnel[s] for s in STAGES if funnel[s]},
        "gates_failed": dict(sorted(gates_failed.items())),
        "funnel_examples": {s: examples[s] for s in STAGES if examples[s]},
        "entry_examples": [e.text for e in entries[:EXAMPLES]],
    }


# -- the purge check ------------------------------------------------------------------------

_WS = re.compile(r"\s+")
_PIECES = re.compile(r"(?<=[.!?])\s+|[;,]\s+")


def _norm(text: str) -> str:
    return _WS.sub(" ", text).strip().casefold()


def needles(forgotten: Session, kept: Sequence[Session]) -> list[str]:
    """The forgotten session's words that must not survive: turn texts, sentences, clauses."""
    kept_text = "\n".join(_norm(t.text) for s in kept for t in s.turns)
    found: set[str] = set()
    for t in forgotten.turns:
        for piece in [t.text, *_PIECES.split(t.text)]:
            n = _norm(piece).strip(" \"'*_#>`")
            if len(n) >= MIN_NEEDLE_CHARS and n not in kept_text:
                found.add(n)
    return sorted(found)


def _variants(needle: str) -> list[str]:
    forms = {needle, json.dumps(needle)[1:-1], json.dumps(needle, ensure_ascii=False)[1:-1]}
    forms |= {f.replace("'", "''") for f in forms}
    return sorted(forms)


def haystacks(app: App, agent: str) -> Iterable[tuple[str, str]]:
    """(name, text) of every artifact that could hold an agent's words."""
    workspace = app.paths.workspace(agent)
    if workspace.is_dir():
        for p in sorted(workspace.rglob("*")):
            if p.is_file():
                yield (
                    str(p.relative_to(app.paths.state_dir)),
                    p.read_bytes().decode("utf-8", "replace"),
                )
    db = app.paths.database(agent)
    if db.exists():
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            yield f"{db.name} (iterdump)", "\n".join(con.iterdump())
        finally:
            con.close()
    for p in sorted(app.paths.home.rglob("*")):
        if p.is_file() and (p.name.startswith(agent + ".") or p.parent.name != "agents"):
            yield (
                f"{p.relative_to(app.paths.state_dir)}{RAW}",
                p.read_bytes().decode("utf-8", "ignore"),
            )


def scan(app: App, agent: str, wanted: Sequence[str]) -> list[dict[str, str]]:
    """Every (artifact, needle) where a needle occurs. Closes the app's engines first, so the
    database files are read as they are on disk."""
    app.close()
    found: list[dict[str, str]] = []
    for name, text in haystacks(app, agent):
        hay = _norm(text)
        for n in wanted:
            if any(v in hay for v in _variants(n)):
                found.append({"artifact": name, "text": n})
    return found


def purge_check(app: App, conv: Conversation) -> dict[str, Any]:
    forgotten, kept = conv.sessions[0], conv.sessions[1:]
    wanted = needles(forgotten, kept)
    # The control: before the purge the same scan must find the session's words (in the
    # corpus files and the database at least), or finding none afterwards proves nothing.
    before = {hit["text"] for hit in scan(app, conv.agent, wanted)}
    t0 = time.perf_counter()
    selector = Selector(sessions=(forgotten.session_id,))
    report = runner.forget(app, conv.agent, selector, dry_run=False).to_dict()
    seconds = time.perf_counter() - t0
    leaks = scan(app, conv.agent, wanted)
    verdict = verify(app.engine(conv.agent), app.paths, conv.agent)
    return {
        "session": forgotten.session_id,
        "entries_removed": len(report.get("entries_removed", [])),
        "needles": len(wanted),
        "needles_found_before": len(before),
        # Text artifacts and the SQL dump: what any reader of the state sees.
        "leaks": sum(1 for x in leaks if not x["artifact"].endswith(RAW)),
        # Raw file bytes only (free space inside pages): what a disk forensic read sees.
        "leaks_raw_bytes": sum(1 for x in leaks if x["artifact"].endswith(RAW)),
        "leak_examples": leaks[:10],
        "verify_ok": verdict.ok,
        "violations": verdict.violations[:10],
        "seconds": seconds,
    }


def ok(purge: dict[str, Any]) -> bool:
    return bool(
        purge["leaks"] == 0
        and purge["leaks_raw_bytes"] == 0
        and purge["verify_ok"]
        and purge["needles_found_before"] > 0
    )


def run_mode(
    mode: Mode,
    convs: list[Conversation],
    roles: str,
    schedule: str,
    log: Callable[[str], None],
    seed: int = 0,
    draws: int = RANDOM_DRAWS,
    labels: Sequence[_labels.Label] = (),
) -> dict[str, Any]:
    mode.state.mkdir(parents=True, exist_ok=True)
    nightly = schedule == "nightly"
    for conv in convs:
        write_conversation(mode.state, conv, roles, 1 if nightly else None)
    app = App.open(mode.state, mode.config, env=mode.env)
    per: dict[str, Any] = {}
    try:
        for conv in convs:
            times: Counter[str] = Counter()
            for upto in range(1, len(conv.sessions) + 1) if nightly else [None]:
                if upto is not None and upto > 1:
                    write_conversation(mode.state, conv, roles, upto)
                times.update(night(app, conv.agent, mode.llm))
            data = measure(app, conv, seed, draws, labels)
            purge = purge_check(app, conv)
            times["forget"] = purge.pop("seconds")
            data["nights"] = len(conv.sessions) if nightly else 1
            data["times"] = {k: round(v, 3) for k, v in times.items()}
            data["purge"] = purge
            per[conv.agent] = data
            log(
                f"  [{mode.label}] {conv.agent}: {data['entries']} entries, recall "
                f"{data['recall']}/{data['gold']}, QA any {data['qa_any']}/{data['qa']} "
                f"(random {data['random']['qa_any']:g}), "
                f"purge {'ok' if ok(purge) else 'FAILED'} "
                f"({sum(times.values()):.1f}s)"
            )
    finally:
        app.close()
    return {"label": mode.label, "llm": mode.llm, "conversations": per, "overall": overall(per)}


SUMMED = (
    "sessions",
    "turns",
    "transcript_chars",
    "qa",
    "qa_unresolvable",
    "qa_any",
    "qa_all",
    "gold",
    "recall",
    "recall_evidence",
    "entries",
    "entries_gold_turn",
    "entries_matching",
    "entries_small_talk",
    "turns_in_entries",
    "memory_chars",
    "framing_chars",
    "candidates",
    "candidates_pending",
    "llm_calls",
    "input_tokens",
    "output_tokens",
    "cost_usd",
)


def labelled_overall(parts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The conversations' label matches summed, and the share of small talk among them."""
    out = {k: sum(p[k] for p in parts) for k in ("matched", "unmatched", "small_talk")}
    out["share"] = round(out["small_talk"] / out["matched"], 4) if out["matched"] else None
    return out


def overall(per: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {k: sum(d[k] for d in per.values()) for k in SUMMED}
    out["cost_usd"] = round(out["cost_usd"], 6)
    rands = [d["random"] for d in per.values()]
    out["random"] = {
        "seed": rands[0]["seed"] if rands else None,
        "draws": rands[0]["draws"] if rands else None,
        "budget": sum(r["budget"] for r in rands),
        "candidates": sum(r["candidates"] for r in rands),
        **{k: round(sum(r[k] for r in rands), 3) for k in RANDOM_MEANS},
    }
    out["qa_any_vs_random"] = ratio(out["qa_any"], out["random"]["qa_any"])
    n = out["entries"]
    out["small_talk"] = round(out["entries_small_talk"] / n, 4) if n else None
    out["labelled"] = labelled_overall([d["labelled"] for d in per.values()])
    out["framing"] = round(out["framing_chars"] / n, 2) if n else None
    funnel: Counter[str] = Counter()
    gates: Counter[str] = Counter()
    cats: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    times: Counter[str] = Counter()
    for d in per.values():
        funnel.update(d["funnel"])
        gates.update(d["gates_failed"])
        times.update(d["times"])
        for k, v in d["qa_by_category"].items():
            cats[k] = [a + b for a, b in zip(cats[k], v, strict=True)]
    out["funnel"] = {s: funnel[s] for s in STAGES if funnel[s]}
    out["gates_failed"] = dict(sorted(gates.items()))
    out["qa_by_category"] = dict(sorted(cats.items()))
    out["times"] = {k: round(v, 3) for k, v in times.items()}
    out["purge"] = {
        "leaks": sum(d["purge"]["leaks"] for d in per.values()),
        "leaks_raw_bytes": sum(d["purge"]["leaks_raw_bytes"] for d in per.values()),
        "verify_ok": all(d["purge"]["verify_ok"] for d in per.values()),
        "needles": sum(d["purge"]["needles"] for d in per.values()),
        "needles_found_before": sum(d["purge"]["needles_found_before"] for d in per.values()),
        "entries_removed": sum(d["purge"]["entries_removed"] for d in per.values()),
    }
    return out


# -- report ---------------------------------------------------------------------------------


def _pct(a: float, b: float) -> str:
    return f"{100 * a / b:.1f}%" if b else "-"


def _row(d: dict[str, Any]) -> dict[str, str]:
    p = d["purge"]
    return {
        "sess": str(d["sessions"]),
        "turns": str(d["turns"]),
        "QA": str(d["qa"]),
        "QA any": _pct(d["qa_any"], d["qa"]),
        "QA all": _pct(d["qa_all"], d["qa"]),
        "QA any (random)": _pct(d["random"]["qa_any"], d["qa"]),
        "vs random": f"{v:.2f}x" if (v := d["qa_any_vs_random"]) is not None else "-",
        "recall(ev) (random)": _pct(d["random"]["recall_evidence"], d["gold"]),
        "gold": str(d["gold"]),
        "recall": _pct(d["recall"], d["gold"]),
        "recall(ev)": _pct(d["recall_evidence"], d["gold"]),
        "entries": str(d["entries"]),
        "match a fact": _pct(d["entries_matching"], d["entries"]),
        "small talk": _pct(d["entries_small_talk"], d["entries"]),
        "small talk (labelled)": _pct(d["labelled"]["small_talk"], d["labelled"]["matched"]),
        "labelled: matched/unmatched": f"{d['labelled']['matched']}/{d['labelled']['unmatched']}",
        "MEMORY chars": f"{d['memory_chars']:,}",
        "of transcript": _pct(d["memory_chars"], d["transcript_chars"]),
        "framing/entry": f"{v:.1f}" if (v := d["framing"]) is not None else "-",
        "LLM calls": str(d["llm_calls"]),
        "tokens in/out": f"{d['input_tokens']:,}/{d['output_tokens']:,}",
        "light s": f"{d['times']['light']:.2f}",
        "rem s": f"{d['times']['rem']:.2f}",
        "deep s": f"{d['times']['deep']:.2f}",
        "forget s": f"{d['times']['forget']:.2f}",
        "needles seen before": f"{p['needles_found_before']}/{p['needles']}",
        "left: files, dump": str(p["leaks"]),
        "left: raw db bytes": str(p["leaks_raw_bytes"]),
        "verify": "ok" if p["verify_ok"] else "FAILED",
    }


QUALITY = [
    "sess",
    "turns",
    "QA",
    "QA any",
    "QA any (random)",
    "vs random",
    "QA all",
    "gold",
    "recall",
    "recall(ev)",
    "recall(ev) (random)",
]
SIZE = [
    "entries",
    "match a fact",
    "small talk",
    "small talk (labelled)",
    "labelled: matched/unmatched",
    "MEMORY chars",
    "of transcript",
    "framing/entry",
    "LLM calls",
    "tokens in/out",
]
TIMING = [
    "light s",
    "rem s",
    "deep s",
    "forget s",
    "needles seen before",
    "left: files, dump",
    "left: raw db bytes",
    "verify",
]


def render(doc: dict[str, Any]) -> str:
    runs = doc["runs"]
    parts: list[str] = []
    ds = doc["data"]
    parts.append(
        f"LoCoMo: {ds['conversations']} conversations, {ds['sessions']} sessions, "
        f"{ds['turns']:,} turns, {ds['transcript_chars']:,} transcript chars; roles "
        f"{doc['roles']}; schedule {doc['schedule']}\nQA categories 1-4; gold fact matched: an "
        f"entry's evidence has the fact's turn and >= {MATCH_CONTAINMENT:.0%} of its content words"
        f"\nrandom: the agent's candidates shuffled (seeds {doc['seed']}.."
        f"{doc['seed'] + doc['random_draws'] - 1}, mean of {doc['random_draws']}), taken until "
        "MEMORY.md's size; small talk: entries with no QA (any category) or gold-fact turn"
        f"\nsmall talk (labelled): of the entries whose statement is one of the "
        f"{doc['labels']} hand-labelled ones ({_labels.LABELS.name}), the share labelled small talk"
    )
    agents = list(runs[0]["conversations"])
    tables = ((QUALITY, "quality"), (SIZE, "size and cost"), (TIMING, "time; purge of session 1"))
    for cols, title in tables:
        headers = ["conversation", *(["run"] if len(runs) > 1 else []), *cols]
        rows: list[list[str]] = []
        for agent in [*agents, "overall"]:
            for run in runs:
                d = run["overall"] if agent == "overall" else run["conversations"][agent]
                row = _row(d)
                rows.append(
                    [agent, *([run["label"]] if len(runs) > 1 else []), *(row[c] for c in cols)]
                )
        parts.append(f"\n{title}\n" + table(headers, rows, label_column=True))
    many = len(runs) > 1
    stage_rows: list[list[str]] = []
    for st in STAGES:
        if any(r["overall"]["funnel"].get(st) for r in runs):
            cells = [st]
            for r in runs:
                o = r["overall"]
                n = o["funnel"].get(st, 0)
                cells += [str(n), _pct(n, o["gold"])]
            stage_rows.append(cells)
    for gate in sorted({g for r in runs for g in r["overall"]["gates_failed"]}):
        cells = [f"  of those lost at a gate, failing {gate.removeprefix('gate: ')}"]
        for r in runs:
            o = r["overall"]
            lost = sum(n for st, n in o["funnel"].items() if st.startswith("gate"))
            n = o["gates_failed"].get(gate, 0)
            cells += [str(n), _pct(n, lost)]
        stage_rows.append(cells)
    labels = [r["label"] for r in runs]
    parts.append(
        "\nwhere gold facts end up (lost at a gate: the stage of the fact's own claim)\n"
        + table(
            ["stage", *(h for lb in labels for h in (f"{lb} facts" if many else "facts", "share"))],
            stage_rows,
            label_column=True,
        )
    )
    cat_rows: list[list[str]] = []
    for k, v in runs[0]["overall"]["qa_by_category"].items():
        cells = [k, str(v[0])]
        for r in runs:
            w = r["overall"]["qa_by_category"][k]
            cells += [_pct(w[1], w[0]), _pct(w[2], w[0])]
        cat_rows.append(cells)
    parts.append(
        "\nQA evidence coverage by category\n"
        + table(
            [
                "category",
                "questions",
                *(h for lb in labels for h in ((f"{lb} any", "all") if many else ("any", "all"))),
            ],
            cat_rows,
            label_column=True,
        )
    )
    return "\n".join(parts)


# -- main -----------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DATA, help="locomo10.json")
    ap.add_argument("--conversations", type=int, default=None, help="only the first N")
    ap.add_argument("--quick", action="store_true", help=f"{QUICK_CONVERSATIONS} conversations")
    ap.add_argument("--roles", choices=ROLES, default="both-user")
    ap.add_argument(
        "--schedule",
        choices=SCHEDULES,
        default="once",
        help="once: one night after all sessions; nightly: a night after each session",
    )
    ap.add_argument("--llm", metavar="PROFILE", help="also run with this [llm.profiles] name")
    ap.add_argument("--config", type=Path, help="settings file for the --llm run")
    ap.add_argument("--keep", type=Path, help="keep the state folders here (must not exist)")
    ap.add_argument("--json", action="store_true", help="print one JSON document")
    ap.add_argument("--seed", type=int, default=0, help="first seed of the random baseline")
    ap.add_argument(
        "--random-draws",
        type=int,
        default=RANDOM_DRAWS,
        help="random selections per conversation (seeds seed .. seed+N-1); the mean is shown",
    )
    args = ap.parse_args(argv)
    if args.random_draws < 1:
        ap.error("--random-draws must be at least 1")
    if args.llm and args.config is None:
        ap.error("--llm needs --config (the file defining [llm.profiles.PROFILE])")

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    if not args.data.is_file():
        log(
            f"locomo: {args.data} not found; LoCoMo (CC BY-NC 4.0) is read from ../shared/data "
            "at run time and never copied into the repository. Nothing to measure: skipped."
        )
        return 0
    limit = QUICK_CONVERSATIONS if args.quick else args.conversations
    if args.keep is not None and args.keep.exists():
        ap.error(f"--keep {args.keep}: already exists")
    root = args.keep or Path(tempfile.mkdtemp(prefix="dreaming-locomo-"))
    runs: list[dict[str, Any]] = []
    labels = _labels.load() if _labels.LABELS.is_file() else []
    try:
        convs = load(args.data, limit)
        modes = [Mode("embedded", root / "embedded", None, None, {})]
        if args.llm:
            modes.append(
                Mode(f"llm:{args.llm}", root / "llm", args.config, args.llm, dict(os.environ))
            )
        log(f"locomo: {len(convs)} conversations, state in {root}")
        for mode in modes:
            for conv in convs:  # each run writes its own transcripts and maps
                conv.line_of.clear()
                conv.dia_of.clear()
            runs.append(
                run_mode(
                    mode,
                    convs,
                    args.roles,
                    args.schedule,
                    log,
                    args.seed,
                    args.random_draws,
                    labels,
                )
            )
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    doc = {
        "benchmark": "locomo",
        "data": {
            "path": str(args.data),
            "conversations": len(convs),
            "sessions": sum(len(c.sessions) for c in convs),
            "turns": sum(c.turns for c in convs),
            "transcript_chars": sum(c.transcript_chars for c in convs),
        },
        "roles": args.roles,
        "schedule": args.schedule,
        "match_containment": MATCH_CONTAINMENT,
        "qa_categories": list(QA_CATEGORIES),
        "seed": args.seed,
        "random_draws": args.random_draws,
        "labels": len(labels),
        "runs": runs,
    }
    print(json.dumps(doc, indent=1, default=str) if args.json else render(doc))
    failed = any(not ok(r["overall"]["purge"]) for r in runs)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
