"""Finding and removing purged text wherever it was copied: memory files, backups, LLM call
logs, run summaries. Text is matched exactly, raw and as it appears inside JSON."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import Connection

from dreaming import syntax
from dreaming.config import Settings
from dreaming.errors import WorkspaceFileError
from dreaming.ingest import claims as claims_mod
from dreaming.memory import diary, memory_file, memory_sync
from dreaming.paths import Paths

from ._window import head_spans, literals, windows

# Snippets shorter than this are too common to scrub whole lines for ("ok", "thanks").
MIN_SNIPPET_CHARS = 16
REDACTED = "[forgotten]"


def snippets_of(texts: Iterable[str], settings: Settings) -> set[str]:
    """The purged text to hunt for elsewhere: whole corpus lines, the claims they make (a
    candidate quotes a claim, not the whole line) and their sentences as the diary quotes
    them (without markdown)."""
    out: set[str] = set()
    cs = settings.candidates
    for t in texts:
        if len(t) >= MIN_SNIPPET_CHARS:
            out.add(t)
        for c in claims_mod.extract(t, min_words=cs.min_claim_words, max_words=cs.max_claim_words):
            if len(c.text) >= MIN_SNIPPET_CHARS:
                out.add(c.text)
        out.update(s for s in diary.clean_sentences(t) if len(s) >= MIN_SNIPPET_CHARS)
    return out


def carries(text: str | None, needles: Sequence[str]) -> bool:
    if not text:
        return False
    # map over the bound method: no Python frame per needle (a purge asks this of every
    # line, call record and summary of the agent).
    return any(map(text.__contains__, needles))


# Above this many needles one pattern of them all costs more to compile and run than a
# search per needle (measured over call records: 200 needles 5x faster, 6,000 twice, 20,000
# slower).
_PATTERN_MAX = 4000


def searcher(needles: Sequence[str]) -> Callable[[str | None], bool]:
    """`carries(text, needles)` for many texts: the needles as one pattern of literals, so
    each text is read once for all of them, not once per needle. A purge asks it of every
    call record, run summary, undo image and proposal of the agent."""
    if not needles or len(needles) > _PATTERN_MAX:
        return lambda text: carries(text, needles)
    search = literals(needles).search

    def holds(text: str | None) -> bool:
        return text is not None and text != "" and search(text) is not None

    return holds


# Above this many needles the containment pass below would cost more than it saves.
_MINIMIZE_MAX = 2000


def needles_of(snippets: Iterable[str]) -> list[str]:
    """Snippets as they appear raw and as they appear inside JSON (prompts, summaries).

    Every use asks whether a text holds any of them, so a needle holding a shorter one is
    left out (a corpus line holds its claims and sentences): the same answers, fewer
    searches."""
    out: set[str] = set()
    for s in snippets:
        out.add(s)
        out.add(json.dumps(s, ensure_ascii=False)[1:-1])
        out.add(json.dumps(s)[1:-1])
    return sorted(_minimal(out), key=len, reverse=True)


def _minimal(needles: set[str]) -> list[str]:
    """The needles that hold no other one (any text holding one of `needles` holds one of
    these)."""
    if len(needles) > _MINIMIZE_MAX:
        return list(needles)
    kept: list[str] = []
    for n in sorted(needles, key=lambda x: (len(x), x)):
        if not any(map(n.__contains__, kept)):
            kept.append(n)
    return kept


def redact(value: Any, needles: Sequence[str]) -> Any:
    if isinstance(value, str):
        return REDACTED if carries(value, needles) else value
    if isinstance(value, list):
        return [redact(v, needles) for v in value]
    if isinstance(value, dict):
        return {k: redact(v, needles) for k, v in value.items()}
    return value


def redact_within(value: Any, needles: Sequence[str]) -> Any:
    """`redact` of a whole JSON value (a run summary) searching each of its strings only for
    the needles its JSON text holds: JSON escapes character by character, so a string that
    holds a needle makes the whole text hold the needle's escaped form. A summary lists
    thousands of strings; a purge's needles are hundreds, and few of them are in it."""
    whole = json.dumps(value, ensure_ascii=False)
    present = [n for n in needles if json.dumps(n, ensure_ascii=False)[1:-1] in whole]
    return redact(value, present)


def scrub_text(content: str, needles: Sequence[str], entry_keys: set[str]) -> tuple[str, int]:
    """Drop managed entries (compact lines or legacy blocks) of removed keys and every other
    whole line quoting a needle, then managed headings left with no entry under them.
    Returns (new content, lines removed)."""
    # Most needles occur nowhere in a given file: one C-level search each over the whole
    # text leaves only those that do to be checked line by line.
    needles = [n for n in needles if n in content]
    heads = head_spans(content, {syntax.shortest(k) for k in entry_keys})
    if not needles and not heads:
        return content, 0
    # Only the lines around what occurs are read (`_window`): the rest stays as it is.
    spans = windows(content, needles, heads)
    if spans is None:
        return _scrub_read(memory_file.parse(content), needles, entry_keys)
    out: list[str] = []
    removed = done = 0
    for start, end in spans:
        piece = memory_file.parse_slice(content[start:end])
        scrubbed, count = _scrub_read(piece, needles, entry_keys)
        out += [content[done:start], scrubbed]
        removed, done = removed + count, end
    out.append(content[done:])
    return "".join(out), removed


def _scrub_read(
    doc: memory_file.Document, needles: Sequence[str], entry_keys: set[str]
) -> tuple[str, int]:
    """`scrub_text` of a document read whole."""
    removed = 0
    kept: list[memory_file.Segment] = []
    for seg in doc.segments:
        if isinstance(seg, memory_file.Block):
            if seg.stands_for_any(entry_keys) or carries(seg.text, needles):
                removed += seg.raw.count("\n") or 1
                continue
            kept.append(seg)
            continue
        if isinstance(seg, memory_file.Heading):
            kept.append(seg)
            continue
        lines = []
        for line in seg.splitlines(keepends=True):
            if carries(line, needles):
                removed += 1
            else:
                lines.append(line)
        if lines:
            kept.append("".join(lines))
    before = len(kept)
    cleaned = memory_file.tidy(memory_file.Document(tuple(kept)))
    removed += before - len(cleaned.segments)
    return cleaned.render(), removed


def memory_files(paths: Paths, agent: str) -> list[Path]:
    """The files a purge scrubs: MEMORY.md, DREAMS.md and the notes in `memory/` (OpenClaw's
    daily notes; a Claude Code project's topic files, beside its MEMORY.md), each once."""
    ws = paths.workspace(agent)
    notes = sorted((ws / "memory").glob("*.md")) if (ws / "memory").is_dir() else []
    return list(dict.fromkeys([paths.memory_file(agent), paths.dreams_file(agent), *notes]))


def scrub_files(
    paths: Paths, agent: str, snippets: set[str], entries: Sequence[str], *, dry: bool
) -> dict[str, int]:
    """Scrub the memory files (`dry`: only count). Returns lines removed per file."""
    needles = needles_of(snippets)
    removed: dict[str, int] = {}
    for path in memory_files(paths, agent):
        try:
            content = memory_file.load_text(path)
        except WorkspaceFileError:
            continue  # not a file forget can rewrite exactly; `verify` names it
        if content is None:
            continue
        cleaned, count = scrub_text(content, needles, set(entries))
        if count:
            removed[str(path)] = count
            if not dry:
                memory_file.atomic_write(path, cleaned)
    return removed


def backup_carries(content: str, needles: Sequence[str], entries: Sequence[str]) -> bool:
    """Whether a MEMORY.md backup holds purged text or an entry the purge removes. A backup
    that shows none of the entries' keys (every form of an entry line shows at least the
    key's first digits: `syntax.mentions_key`) is not parsed: a purge reads each backup,
    and one taken before the entries were written holds none of them. Of one that does,
    only the lines around the keys are (`_window`)."""
    if carries(content, needles):
        return True
    heads = head_spans(content, {syntax.shortest(k) for k in entries})
    keys = [k for k in entries if syntax.shortest(k) in heads]
    if not keys:
        return False
    spans = windows(content, [], heads) or [(0, len(content))]
    return any(
        b.stands_for_any(keys)
        for start, end in spans
        for b in memory_file.parse_slice(content[start:end]).blocks
    )


def scrub_backups(
    conn: Connection,
    backups: Iterable[tuple[int, str]],
    needles: Sequence[str],
    entries: Sequence[str],
) -> None:
    """Rewrite each (id, content) MEMORY.md backup without the purged lines and entries."""
    for backup_id, content in backups:
        cleaned = scrub_text(content, needles, set(entries))[0]
        memory_sync.replace_backup(conn, backup_id, cleaned)
