"""The archive: entries that did not fit MEMORY.md's capacity budget, in a file the agent's
memory search finds but that it does not load (OpenClaw indexes its workspace's `memory/`
folder: `<workspace>/memory/dreaming-archive.md`).

It is ours alone and rendered whole from the database: a short header saying what it is,
then the archived entries in MEMORY.md's own line format (`dreaming.memory.memory_file`),
under the same group headings. No entry archived: no file. Written atomically; a file that
is not what the database says (edited, a write cut short) is named by `verify` and
rewritten by the next run. Archived entries keep their lineage: forget, undo, review, verify
and the report reach them as they reach loaded ones.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from dreaming.ingest import salience
from dreaming.memory import memory_file

HEADER = (
    "# Archived memories\n"
    "\n"
    "Written by dreaming: long-term memories that did not fit in MEMORY.md. They are not"
    " loaded on every turn, but memory search finds them; one comes back to MEMORY.md when"
    " it is said again or room frees up. dreaming rewrites this file: edits here do not"
    " last (`dreaming forget` removes a memory).\n"
)


def render(
    entries: Sequence[tuple[str, str]],
    group_of: Callable[[str], str] = salience.group_of,
) -> str:
    """The archive holding `entries` (key, text), in their order within each group; "" when
    there are none (the file is removed)."""
    if not entries:
        return ""
    return memory_file.apply_entries(memory_file.parse(HEADER), entries, group_of).render()


def read(path: Path) -> str | None:
    """The archive's text (None: no file)."""
    return memory_file.load_text(path)


def keys(content: str | None) -> list[str]:
    """The keys of the entries an archive's text lists, in file order."""
    return [b.key for b in memory_file.parse(content or "").blocks]


def write(path: Path, content: str) -> bool:
    """Make the file hold `content` ("" removes it). Returns whether anything changed."""
    if not content:
        if path.exists() or path.is_symlink():
            path.unlink()
            return True
        return False
    if read(path) == content:
        return False
    memory_file.atomic_write(path, content)
    return True
