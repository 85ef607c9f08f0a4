from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from dreaming import memory_file as mf


def test_roundtrip_preserves_operator_text_and_blocks() -> None:
    key = mf.entry_key("The user is allergic to peanuts.")
    text = (
        "# Notes\n\nOperator line  with  spaces\n"
        + mf.render_block(key, "The user is allergic to peanuts.")
        + "tail without newline"
    )
    doc = mf.parse(text)
    assert doc.render() == text
    assert [b.key for b in doc.live_blocks()] == [key]


def test_key_is_content_derived_and_prefixed() -> None:
    assert mf.entry_key("The user is allergic to peanuts.") == mf.entry_key(
        "the user is  allergic to peanuts"
    )
    assert mf.entry_key("a").startswith("m:")


def test_edited_block_is_detected_and_kept() -> None:
    key = mf.entry_key("Original fact.")
    doc = mf.parse(mf.render_block(key, "Edited by a person."))
    assert doc.edited_blocks() and not doc.live_blocks()
    out = mf.apply_entries(doc, [])
    assert out.render() == doc.render()


def test_apply_entries_adds_keeps_and_removes() -> None:
    k1, k2, k3 = (mf.entry_key(t) for t in ("one fact", "two fact", "three fact"))
    start = (
        "# Memory\n"
        + mf.render_block(k1, "one fact")
        + "between\n"
        + mf.render_block(k2, "two fact")
    )
    doc = mf.apply_entries(mf.parse(start), [(k2, "two fact"), (k3, "three fact")])
    rendered = doc.render()
    assert "one fact" not in rendered
    assert rendered.startswith("# Memory\nbetween\n")
    assert rendered.index("two fact") < rendered.index("three fact")


def test_atomic_write(tmp_path: Path) -> None:
    target = tmp_path / "MEMORY.md"
    mf.atomic_write(target, "x\n")
    assert target.read_text() == "x\n"
    assert [p.name for p in tmp_path.iterdir()] == ["MEMORY.md"]


@given(st.text())
def test_parse_render_is_identity(text: str) -> None:
    assert mf.parse(text).render() == text


@given(st.lists(st.text(min_size=0, max_size=40), max_size=5), st.text(max_size=60))
def test_identity_with_blocks_mixed_in(facts: list[str], operator: str) -> None:
    parts = [operator]
    for f in facts:
        f = f.replace("<!--", "").replace("-->", "")
        parts.append(mf.render_block(mf.entry_key(f), f))
        parts.append(operator)
    text = "".join(parts)
    assert mf.parse(text).render() == text
