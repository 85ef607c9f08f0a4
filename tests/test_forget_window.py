"""A scrub reads only the slice of a memory file around what it removes (`forget._window`):
its result must be the whole file's scrub, byte for byte and line count for line count, for
any file. Checked against the whole-file scrub as it was before the slice (the oracle below)
over generated files of every segment kind."""

from __future__ import annotations

import random

import pytest

from dreaming import syntax
from dreaming.forget import _scrub, _window
from dreaming.memory import memory_file

WORDS = "alpha beta gamma delta peanuts Tokyo lives works ACME since March".split()


def _oracle(content: str, needles: list[str], keys: set[str]) -> tuple[str, int]:
    """`scrub_text` as it was: the whole file parsed, every segment checked."""
    needles = [n for n in needles if n in content]
    if not needles and not any(syntax.mentions_key(content, k) for k in keys):
        return content, 0
    doc = memory_file.parse(content)
    removed = 0
    kept: list[memory_file.Segment] = []
    for seg in doc.segments:
        if isinstance(seg, memory_file.Block):
            if seg.stands_for_any(keys) or _scrub.carries(seg.text, needles):
                removed += seg.raw.count("\n") or 1
                continue
            kept.append(seg)
        elif isinstance(seg, memory_file.Heading):
            kept.append(seg)
        else:
            lines = [x for x in seg.splitlines(keepends=True) if not _scrub.carries(x, needles)]
            removed += len(seg.splitlines(keepends=True)) - len(lines)
            if lines:
                kept.append("".join(lines))
    before = len(kept)
    cleaned = memory_file.tidy(memory_file.Document(tuple(kept)))
    return cleaned.render(), removed + before - len(cleaned.segments)


def _text(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 6)))


def _line(rng: random.Random, keys: list[str]) -> str:
    kind = rng.random()
    text = _text(rng)
    key = syntax.entry_key(text)
    if kind < 0.45:
        keys.append(key)
        return syntax.render_line(key[: rng.choice((8, 8, 8, 10, 18))], text)
    if kind < 0.5:  # a person's edit: the text no longer hashes to the key shown
        keys.append(key)
        return syntax.render_line(key[:8], text + " (edited)")
    if kind < 0.55:
        keys.append(key)
        return syntax.render_old_line(key, text)
    if kind < 0.68:
        blank = "\n" if rng.random() < 0.5 else ""
        heading = blank + syntax.render_heading(rng.choice(("People", "Instructions", "Notes")))
        # Mostly as dreaming writes them, an entry under each; now and then left empty.
        if rng.random() < 0.1:
            return heading
        under = _text(rng)
        keys.append(syntax.entry_key(under))
        return heading + syntax.render_line(syntax.shortest(keys[-1]), under)
    if kind < 0.72:
        return rng.choice(("\n", "  \n", "\t\n", " \u2028 \n"))
    if kind < 0.75:
        return f"- {text} <!-- not a key -->\n"
    if kind < 0.77:
        return f"note {text}\u2028 more {_text(rng)}\n"
    if kind < 0.772:
        keys.append(key)
        return syntax.render_block(key, text)
    return f"{text}\n"


def _document(rng: random.Random, keys: list[str]) -> str:
    out = "".join(_line(rng, keys) for _ in range(rng.randint(0, 60)))
    if out and rng.random() < 0.2:
        out = out.rstrip("\n")  # a last line without its line break
    return out


def _needles(rng: random.Random, content: str) -> list[str]:
    out = []
    for _ in range(rng.randint(0, 2)):
        if content and rng.random() < 0.85:
            i = rng.randrange(len(content))
            out.append(content[i : i + rng.randint(3, 30)])
        else:
            out.append(_text(rng))
    return [n for n in out if n]


def test_the_slice_scrubs_as_the_whole_file_does() -> None:
    rng = random.Random(20261207)
    sliced = removed = 0
    for _ in range(3000):
        keys: list[str] = []
        content = _document(rng, keys)
        needles = _needles(rng, content)
        gone = {k for k in keys if rng.random() < 0.05} | {syntax.entry_key("absent fact")}
        want = _oracle(content, needles, gone)
        assert _scrub.scrub_text(content, needles, gone) == want, (content, needles, gone)
        present = [n for n in needles if n in content]
        heads = _window.head_spans(content, {syntax.shortest(k) for k in gone})
        assert set(heads) == {syntax.shortest(k) for k in gone if syntax.mentions_key(content, k)}
        spans = _window.windows(content, present, heads) if present or heads else None
        if spans and spans != [(0, len(content))]:
            sliced += 1
        removed += want[1] > 0
        keep = [k for k in gone if syntax.mentions_key(content, k)]
        whole = any(b.stands_for_any(keep) for b in memory_file.parse(content).blocks)
        assert _scrub.backup_carries(content, [], list(gone)) == whole
    # Not a test of the fallback alone: most scrubs read a slice, and remove something.
    assert sliced > 1200 and removed > 1200, (sliced, removed)


def test_a_purge_of_one_entry_reads_its_lines_not_the_file() -> None:
    lines = [syntax.render_heading("People")]
    texts = [f"Person {i} lives in town number {i}." for i in range(5000)]
    lines += [syntax.render_line(syntax.shortest(syntax.entry_key(t)), t) for t in texts]
    content = "".join(lines)
    key = syntax.entry_key(texts[2500])
    heads = _window.head_spans(content, {syntax.shortest(key)})
    [(start, end)] = _window.windows(content, [], heads) or [(0, 0)]
    assert content[start:end] == lines[2501] + lines[2502]  # its line and the next entry
    cleaned, removed = _scrub.scrub_text(content, [], {key})
    assert removed == 1 and cleaned == content.replace(lines[2501], "")


@pytest.mark.parametrize(
    "content",
    [
        # a legacy block spans lines: the file is read whole
        syntax.render_line("m:0123456789abcdef", "kept")
        + syntax.render_block("m:fedcba9876543210", "gone fact"),
        # an empty heading: tidying removes it wherever it stands
        syntax.render_heading("Notes")
        + "\n"
        + syntax.render_heading("People")
        + syntax.render_line("m:0123456789abcdef", "gone fact"),
    ],
)
def test_files_read_whole(content: str) -> None:
    assert _window.windows(content, ["gone fact"], {}) is None
    assert _scrub.scrub_text(content, ["gone fact"], set()) == _oracle(
        content, ["gone fact"], set()
    )


@pytest.mark.parametrize(("needles", "keys"), [([""], set()), ([], {""}), (["a", ""], {"m:0"})])
def test_empty_needles_and_keys_read_the_file_whole(needles: list[str], keys: set[str]) -> None:
    content = "x\n- a <!--" + syntax.entry_key("a")[:8] + "-->\n## T <!-- dreaming:group -->\n"
    content += syntax.render_line(syntax.entry_key("b")[:8], "b")
    assert _scrub.scrub_text(content, needles, keys) == _oracle(content, needles, keys)


def test_a_file_without_entry_lines_is_one_slice_however_often_it_quotes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A diary quoting a purged sentence on every other line: the slice reaches the end of
    the file once, not once per quote (which made a scrub quadratic in the file's lines)."""
    content = "".join(
        f"Night {i}: the user said the gone fact again.\nA quiet night.\n" for i in range(2000)
    )
    calls: list[int] = []
    after = _window._after_entry_from
    monkeypatch.setattr(_window, "_after_entry_from", lambda c, p: calls.append(p) or after(c, p))
    assert _window.windows(content, ["gone fact"], {}) == [(0, len(content))]
    assert len(calls) == 1
    want = _oracle(content, ["gone fact"], set())
    assert _scrub.scrub_text(content, ["gone fact"], set()) == want and want[1] == 2000


def test_many_keys_are_found_in_one_pass() -> None:
    texts = [f"Fact {i} stands here." for i in range(3000)]
    keys = [syntax.entry_key(t) for t in texts]
    content = "".join(
        syntax.render_line(syntax.shortest(k), t) for k, t in zip(keys, texts, strict=True)
    )
    gone = {*keys[::3], syntax.entry_key("not in the file"), "odd"}
    heads = _window.head_spans(content, {syntax.shortest(k) for k in gone})
    assert set(heads) == {syntax.shortest(k) for k in gone if syntax.mentions_key(content, k)}
    assert _scrub.scrub_text(content, [], gone) == _oracle(content, [], gone)
    assert _scrub.backup_carries(content, [], sorted(gone))
