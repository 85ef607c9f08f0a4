from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dreaming import syntax
from dreaming.memory import memory_file as mf


def entries_of(*texts: str) -> list[tuple[str, str]]:
    return [(mf.entry_key(t), t) for t in texts]


def line(key: str, text: str) -> str:
    """An entry line as a file with no other key sharing its first digits shows it."""
    return mf.render_line(mf.shortest(key), text)


def managed(doc: mf.Document) -> dict[str, str]:
    return {b.key: b.text for b in doc.blocks}


def operator_text(doc: mf.Document) -> str:
    return "".join(s for s in doc.segments if isinstance(s, str))


# -- parsing ------------------------------------------------------------------------------


def test_roundtrip_preserves_operator_text_and_lines() -> None:
    fact = "The user is allergic to peanuts."
    key = mf.entry_key(fact)
    text = (
        "# Notes\n\nOperator line  with  spaces\n"
        + mf.render_heading("people")
        + line(key, fact)
        + "tail without newline"
    )
    doc = mf.parse(text)
    assert doc.render() == text
    (block,) = doc.live_blocks()
    assert (block.key, block.text, block.compact, block.edited) == (key, fact, True, False)
    assert doc.headings == [mf.Heading("people", "## People <!-- dreaming:group -->\n")]


def test_legacy_blocks_are_still_read() -> None:
    fact = "The user is allergic to peanuts."
    key = mf.entry_key(fact)
    text = "# Notes\n" + mf.render_block(key, fact) + "tail without newline"
    doc = mf.parse(text)
    assert doc.render() == text
    (block,) = doc.live_blocks()
    assert (block.key, block.text, block.compact) == (key, fact, False)
    assert block.raw == mf.render_block(key, fact)


def test_compact_line_forms() -> None:
    key = mf.entry_key("a fact")
    short = key[:8]
    # The final newline is optional; the key is the comment that ends the line.
    assert mf.parse(f"- a fact <!--{short}-->").blocks[0].raw == f"- a fact <!--{short}-->"
    other = "m:0123456789abcdef"
    (block,) = mf.parse(f"- a fact <!--{other}--> <!--{short}-->\n").blocks
    assert block.key == short and block.text == f"a fact <!--{other}-->" and block.edited
    # A line shows from 6 to 16 digits of its key (the older form: all 16, spaced).
    for shown in (key[:n] for n in range(8, 19)):
        (block,) = mf.parse(f"- a fact <!--{shown}-->\n").blocks
        assert (block.key, block.shown, block.form, block.edited) == (key, shown, mf.LINE, False)
    (block,) = mf.parse(f"- a fact <!-- {key} -->\n").blocks
    assert (block.key, block.form, block.edited) == (key, mf.OLD_LINE, False)
    # Not at a line start, not the end of the line, or no text: operator text.
    for text in (
        f"x - a fact <!--{short}-->\n",
        f"- a fact <!--{short}--> more\n",
        f"-  <!--{short}-->\n",
        f"* a fact <!--{short}-->\n",
        "- a fact <!--m:01234-->\n",  # too short to be a key
        f"- a fact <!-- {short} -->\n",  # the older form shows the whole key
        f"- a fact <!--{key}0-->\n",  # longer than a key
        "- a fact <!-- m:0123 -->\n",
    ):
        doc = mf.parse(text)
        assert doc.blocks == [] and doc.render() == text, text


def test_heading_owns_the_blank_line_before_it() -> None:
    text = "notes\n\n## Work <!-- dreaming:group -->\n"
    doc = mf.parse(text)
    assert doc.segments == ("notes\n", mf.Heading("work", "\n## Work <!-- dreaming:group -->\n"))
    assert mf.parse("## Not managed\n").headings == []


def test_key_is_content_derived_and_prefixed() -> None:
    assert mf.entry_key("The user is allergic to peanuts.") == mf.entry_key(
        "the user is  allergic to peanuts"
    )
    assert mf.entry_key("a").startswith("m:")


@given(st.text())
def test_one_line_keeps_the_key(text: str) -> None:
    assert mf.entry_key(mf.one_line(text)) == mf.entry_key(text)
    assert "\n" not in mf.render_line(mf.entry_key(text), text)[:-1]


def test_edited_entries_are_detected_and_kept() -> None:
    key = mf.entry_key("Original fact.")
    for raw in (
        mf.render_block(key, "Edited by a person."),
        f"- Edited by Sam. <!-- {key} -->\n",
        f"- Edited by Sam. <!--{key[:8]}-->\n",
    ):
        doc = mf.parse(raw)
        assert doc.edited_blocks() and not doc.live_blocks()
        # The edit stands for its entry, though only the key it showed is left to tell.
        assert doc.holds([key, mf.entry_key("Other fact.")]) == {key}
        assert mf.apply_entries(doc, []).render() == raw
        # Still wanted: kept as it is, never added a second time.
        assert mf.apply_entries(doc, [(key, "Original fact.")]).render() == raw


def test_markers_are_recognised() -> None:
    for text in (
        "<!-- dreaming:entry m:0011223344556677 -->",
        "<!-- /dreaming:entry -->",
        "<!-- dreaming:group -->",
        "<!--dreaming:GROUP-->",
        "<!-- m:0011223344556677 -->",
        "<!--m:0011223344556677-->",
        "<!--m:001122-->",
        "<!-- m:00112233 -->",
    ):
        assert mf.MARKER_RE.search(f"a {text} b"), text
    assert not mf.MARKER_RE.search("<!-- hidden -->")


# -- applying entries ---------------------------------------------------------------------


def test_new_file_is_grouped_in_group_order() -> None:
    entries = entries_of(
        "2023-05-08 — the user: I went to a LGBTQ support group yesterday.",
        "2026-03-08 — the user: never change files other than MEMORY.md.",
        "The user likes green tea.",
        "The user works at ACME on the billing project.",
    )
    out = mf.apply_entries(mf.parse(""), entries).render()
    k = [key for key, _ in entries]
    assert out == (
        "## Instructions <!-- dreaming:group -->\n"
        f"- 2026-03-08 — the user: never change files other than MEMORY.md. <!--{k[1][:8]}-->\n"
        "\n## People <!-- dreaming:group -->\n"
        f"- 2023-05-08 — the user: I went to a LGBTQ support group yesterday. <!--{k[0][:8]}-->\n"
        "\n## Work <!-- dreaming:group -->\n"
        f"- The user works at ACME on the billing project. <!--{k[3][:8]}-->\n"
        "\n## Preferences <!-- dreaming:group -->\n"
        f"- The user likes green tea. <!--{k[2][:8]}-->\n"
    )
    assert mf.apply_entries(mf.parse(out), entries).render() == out


def test_apply_entries_adds_keeps_and_removes() -> None:
    one, two, three = entries_of("one fact", "two fact", "three fact")
    start = "# Memory\n\n" + mf.render_heading("people") + line(*one) + "between\n"
    start += line(*two)
    rendered = mf.apply_entries(mf.parse(start), [two, three]).render()
    # "one" goes; "three" goes under the heading, whose run of entries ended at "between".
    assert rendered == (
        "# Memory\n\n" + mf.render_heading("people") + line(*three) + "between\n" + line(*two)
    )
    assert mf.apply_entries(mf.parse(rendered), [two, three]).render() == rendered
    # Without "three", the heading has no entry of its own left and goes, with the blank
    # line before it (a heading owns that line).
    assert mf.apply_entries(mf.parse(rendered), [two]).render() == (
        "# Memory\nbetween\n" + line(*two)
    )


def test_new_entry_goes_under_its_existing_heading() -> None:
    a, b, c = entries_of("The user has a sister, Anna.", "The user has a cat.", "Bob is 40.")
    work = entries_of("The user works at ACME.")[0]
    start = (
        "# Memory\n\n"
        + mf.render_heading("people")
        + line(*a)
        + "\n"  # a person's blank line inside the group
        + line(*b)
        + "\n## Work <!-- dreaming:group -->\n"
        + line(*work)
        + "\nOperator notes at the end.\n"
    )
    out = mf.apply_entries(mf.parse(start), [a, b, work, c]).render()
    assert out == start.replace(line(*b), line(*b) + line(*c))
    assert mf.apply_entries(mf.parse(out), [a, b, work, c]).render() == out


def test_entry_under_a_heading_at_the_end_without_newline() -> None:
    a, b = entries_of("The user has a sister, Anna.", "The user has a cat.")
    heading = "## People <!-- dreaming:group -->\n"
    for start in (heading[:-1], heading + line(*a)[:-1]):
        out = mf.apply_entries(mf.parse(start), [a, b]).render()
        assert out == heading + line(*a) + line(*b), start


def test_heading_with_no_entries_is_removed_with_its_blank_line() -> None:
    a, b = entries_of("The user has a sister, Anna.", "The user works at ACME.")
    base = "# Memory\n\nNotes.\n"
    both = mf.apply_entries(mf.parse(base), [a, b]).render()
    assert both.count("<!-- dreaming:group -->") == 2
    only_b = mf.apply_entries(mf.parse(both), [b]).render()
    assert only_b == base + "\n## Work <!-- dreaming:group -->\n" + line(*b)
    # Removing every entry gives back the operator's file, byte for byte.
    assert mf.apply_entries(mf.parse(only_b), []).render() == base
    assert mf.apply_entries(mf.parse(both), []).render() == base
    # A heading a person left empty goes too, with its group's blank line (the next
    # heading keeps its own, even where it now opens the file).
    assert mf.apply_entries(mf.parse(both.replace(line(*a), "")), [b]).render() == (only_b)
    lone = "## People <!-- dreaming:group -->\n\n## Work <!-- dreaming:group -->\n"
    assert mf.apply_entries(mf.parse(lone + line(*b)), [b]).render() == (
        "\n## Work <!-- dreaming:group -->\n" + line(*b)
    )
    # A heading followed by operator text has no entries of its own.
    assert mf.apply_entries(mf.parse("## People <!-- dreaming:group -->\nmine\n"), []).render() == (
        "mine\n"
    )


def test_operator_text_without_final_newline_is_kept() -> None:
    (a,) = entries_of("The user has a cat.")
    out = mf.apply_entries(mf.parse("no newline"), [a]).render()
    assert out == "no newline\n\n## People <!-- dreaming:group -->\n" + line(*a)


def test_entry_text_is_rendered_on_one_line() -> None:
    text = "The user has\na  cat\tnamed Pixel. "
    ((key, _),) = entries_of(text)
    out = mf.apply_entries(mf.parse(""), [(key, text)]).render()
    assert out.endswith(f"- The user has a cat named Pixel. <!--{key[:8]}-->\n")
    (block,) = mf.parse(out).blocks
    assert block.key == key and not block.edited


def test_group_of_is_used_and_checked() -> None:
    (a,) = entries_of("The user has a cat.")
    out = mf.apply_entries(mf.parse(""), [a], group_of=lambda _t: "work").render()
    assert out.startswith("## Work <!-- dreaming:group -->\n")
    with pytest.raises(ValueError, match="group_of"):
        mf.apply_entries(mf.parse(""), [a], group_of=lambda _t: "misc")


LEGACY = (
    "# MEMORY.md\n\nNotes written by the operator stay exactly as they are.\n\n"
    "<!-- dreaming:entry {k0} -->\n{t0}\n<!-- /dreaming:entry -->\n"
    "An operator line between blocks.\n"
    "<!-- dreaming:entry {k1} -->\n{t1}\n<!-- /dreaming:entry -->\n"
    "<!-- dreaming:entry {k2} -->\n{t2}\n<!-- /dreaming:entry -->\n"
    "<!-- dreaming:entry {k3} -->\nEdited by Sam.\n<!-- /dreaming:entry -->\n"
    "Trailing operator text"
)


def test_legacy_file_is_converted_once_without_loss() -> None:
    texts = [
        "2026-03-08 — the user: always answer in English.",
        "The user's sister Anna lives in Lisbon.",
        "The user prefers window seats.",
        "An entry a person since edited.",
    ]
    entries = entries_of(*texts)
    keys = [k for k, _ in entries]
    start = LEGACY.format(
        **{f"k{i}": k for i, k in enumerate(keys)}, t0=texts[0], t1=texts[1], t2=texts[2]
    )
    doc = mf.parse(start)
    assert [b.compact for b in doc.blocks] == [False] * 4
    assert doc.render() == start
    out = mf.apply_entries(doc, entries)
    rendered = out.render()
    # Every operator byte kept, in order (the edited block still between them); then the
    # groups.
    (edited,) = doc.edited_blocks()
    assert rendered.replace(edited.raw, "").startswith(operator_text(doc))
    assert operator_text(out).startswith(operator_text(doc))
    # Every entry kept: the three live ones now compact lines, the edited one as it was.
    assert managed(out) == {**dict(entries[:3]), keys[3]: "Edited by Sam."}
    converted = [b for b in out.blocks if not b.edited]
    assert all(b.compact for b in converted) and len(converted) == 3
    assert [b for b in out.blocks if b.edited] == [b for b in doc.blocks if b.edited]
    assert mf.parse(rendered).render() == rendered
    assert [h.group for h in mf.parse(rendered).headings] == [
        "instructions",
        "people",
        "preferences",
    ]
    # The second apply is a no-op.
    assert mf.apply_entries(mf.parse(rendered), entries).render() == rendered


def test_legacy_and_compact_copies_of_one_key_make_one_line() -> None:
    (a,) = entries_of("The user has a cat.")
    start = mf.render_block(*a) + "## People <!-- dreaming:group -->\n" + line(*a)
    out = mf.apply_entries(mf.parse(start), [a]).render()
    assert out == "## People <!-- dreaming:group -->\n" + line(*a)


def test_duplicate_lines_are_removed() -> None:
    (a,) = entries_of("The user has a cat.")
    start = "## People <!-- dreaming:group -->\n" + line(*a) * 2
    assert mf.apply_entries(mf.parse(start), [a]).render() == (
        "## People <!-- dreaming:group -->\n" + line(*a)
    )


# Two facts whose keys share their first six digits (m:ebb238e3... and m:ebb23894...).
COLLIDING = ("The user has 2155 books.", "The user has 2345 books.")


def test_keys_a_file_shows_are_the_shortest_that_tell_them_apart() -> None:
    a, b, c = "m:ebb238e3da2d3a1b", "m:ebb2389400c2058f", "m:0123456789abcdef"
    assert syntax.shown_keys([c]) == {c: "m:012345"}
    assert syntax.shown_keys([a, b, c]) == {a: "m:ebb238e", b: "m:ebb2389", c: "m:012345"}
    # A key shown by a line a person edited (its whole key unknown) is told apart too.
    assert syntax.shown_keys([a], ["m:ebb238"]) == {a: "m:ebb238e"}
    assert syntax.shown_keys([a], ["m:ebb238e3"]) == {a: "m:ebb238e3d"}
    assert syntax.shown_keys([a, a[:-1] + "c"]) == {a: a, a[:-1] + "c": a[:-1] + "c"}
    assert syntax.matches("m:ebb238", a) and not syntax.matches("m:ebb23", a)
    assert syntax.KeyIndex([a, b, c]).find("m:ebb238") == [a, b]
    assert syntax.KeyIndex([a, b, c]).find("m:ebb238e") == [a]
    assert syntax.KeyIndex([a, b, c]).find(a) == [a] and syntax.KeyIndex([a]).find("m:ebb2") == []


def test_a_collision_within_a_file_lengthens_those_keys() -> None:
    (a, b), (c,) = entries_of(*COLLIDING), entries_of("The user has a cat.")
    assert a[0][:8] == b[0][:8] and a[0][8] != b[0][8]
    first = mf.apply_entries(mf.parse(""), [a, c]).render()
    assert first == mf.render_heading("people") + line(*a) + line(*c)
    both = mf.apply_entries(mf.parse(first), [a, c, b]).render()
    # Both colliding keys show one digit more; the lines stay where they were.
    assert both == (
        mf.render_heading("people")
        + mf.render_line(a[0][:9], a[1])
        + line(*c)
        + mf.render_line(b[0][:9], b[1])
    )
    # Read back, each line maps to its whole key exactly.
    assert [(x.key, x.edited) for x in mf.parse(both).blocks] == [
        (a[0], False),
        (c[0], False),
        (b[0], False),
    ]
    assert mf.apply_entries(mf.parse(both), [a, c, b]).render() == both
    # When the other one leaves, the key shows six digits again: a file's keys depend on
    # which keys it holds, not on how it got there.
    assert mf.apply_entries(mf.parse(both), [a, c]).render() == first
    # A person's edit of a line keeps standing for its entry (by the key it shows), and the
    # other entry's key is told apart from the key the edit shows.
    edited = both.replace("2155 books", "2156 books")
    assert mf.parse(edited).holds([a[0], b[0], c[0]]) == {a[0], b[0], c[0]}
    assert mf.parse(edited).edited_hold([a[0], b[0], c[0]]) == {a[0]}
    assert mf.apply_entries(mf.parse(edited), [a, c, b]).render() == edited
    # With its entry gone the edit stays, and still the other key shows more digits.
    assert mf.apply_entries(mf.parse(edited), [c, b]).render() == edited


def test_older_compact_lines_are_rewritten_once_in_place() -> None:
    a, b = entries_of("The user has a cat.", "The user works at ACME.")
    start = (
        "# Memory\n\n"
        + mf.render_heading("people")
        + "- The  user has a CAT. <!-- "
        + a[0]
        + " -->\n"  # a person's harmless touch
        + "Operator text  kept.\n"
        + mf.render_heading("work")
        + mf.render_old_line(*b).rstrip("\n")  # the file's last line, no newline
    )
    out = mf.apply_entries(mf.parse(start), [a, b]).render()
    assert out == (
        "# Memory\n\n"
        + mf.render_heading("people")
        + f"- The  user has a CAT. <!--{a[0][:8]}-->\n"
        + "Operator text  kept.\n"
        + mf.render_heading("work")
        + line(*b).rstrip("\n")
    )
    assert [x.form for x in mf.parse(out).blocks] == [mf.LINE, mf.LINE]
    assert mf.apply_entries(mf.parse(out), [a, b]).render() == out
    # A person's edit in the older form is theirs: left as it is.
    edited = mf.render_old_line(a[0], "The user has two cats.")
    assert mf.apply_entries(mf.parse(edited), [a]).render() == edited


def test_a_short_key_a_person_edited_is_scrubbed_with_its_entry() -> None:
    from dreaming.forget import scrub_text
    from dreaming.forget._scrub import backup_carries

    a, b = entries_of("The user has a cat.", "The user works at ACME.")
    content = mf.render_heading("people") + f"- The user has two cats. <!--{a[0][:8]}-->\n"
    content += line(*b)
    doc = mf.parse(content)
    assert doc.edited_hold([a[0], b[0]]) == {a[0]} and doc.holds([a[0], b[0]]) == {a[0], b[0]}
    assert backup_carries(content, [], [a[0]])
    cleaned, removed = scrub_text(content, [], {a[0]})
    assert cleaned == mf.render_heading("people") + line(*b) and removed == 1


def test_a_backup_without_the_entries_keys_is_not_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    """A purge asks every MEMORY.md backup whether it holds a removed entry: one that shows
    none of their keys cannot, and is not parsed to find so."""
    from dreaming.forget import _scrub

    a, b = entries_of("The user has a cat.", "The user works at ACME.")
    older = mf.render_heading("work") + line(*b)  # taken before entry a was written
    newer = mf.render_heading("people") + line(*a) + mf.render_heading("work") + line(*b)
    edited = mf.render_heading("people") + f"- The user has two cats. <!--{a[0][:8]}-->\n"
    parsed: list[str] = []
    real_parse = mf.parse_slice
    monkeypatch.setattr(
        _scrub.memory_file, "parse_slice", lambda t: parsed.append(t) or real_parse(t)
    )
    assert not _scrub.backup_carries(older, [], [a[0]]) and parsed == []
    assert _scrub.backup_carries(newer, [], [a[0]]) and parsed == [newer]
    assert _scrub.backup_carries(edited, [], [a[0]])  # a person's edit still stands for it
    assert _scrub.backup_carries(older, ["works at ACME"], [a[0]])  # purged text, no parse
    assert parsed == [newer, edited]


def test_atomic_write(tmp_path: Path) -> None:
    target = tmp_path / "MEMORY.md"
    mf.atomic_write(target, "x\n")
    assert target.read_text() == "x\n"
    assert [p.name for p in tmp_path.iterdir()] == ["MEMORY.md"]


# -- properties ---------------------------------------------------------------------------

FACT = st.text(alphabet=st.characters(blacklist_categories=["Cs"]), min_size=1, max_size=30).filter(
    lambda t: bool(mf.one_line(t))
)
# Pieces a MEMORY.md is made of, valid and broken, to be concatenated in any order.
PIECE = st.one_of(
    st.text(max_size=20),
    st.sampled_from(
        [
            "\n",
            "\n\n",
            "- ",
            " <!-- ",
            " -->",
            "<!-- dreaming:entry ",
            "<!-- /dreaming:entry -->",
            "## ",
            " <!-- dreaming:group -->",
            "m:0123456789abcdef",
            "<!--m:012345-->",
            "## People <!-- dreaming:group -->\n",
            "## Work <!-- dreaming:group -->",
        ]
    ),
    FACT.map(lambda f: line(mf.entry_key(f), f)),
    FACT.map(lambda f: line(mf.entry_key(f), f)[:-1]),
    FACT.map(lambda f: mf.render_line(mf.entry_key(f), f)),
    FACT.map(lambda f: mf.render_old_line(mf.entry_key(f), f)),
    FACT.map(lambda f: mf.render_block(mf.entry_key(f), f)),
    FACT.map(lambda f: f"- {mf.one_line(f)} <!-- m:0123456789abcdef -->\n"),
    FACT.map(lambda f: f"- {mf.one_line(f)} <!--m:012345-->\n"),
    st.sampled_from(mf.GROUPS).map(mf.render_heading),
)


@given(st.text())
def test_parse_render_is_identity(text: str) -> None:
    assert mf.parse(text).render() == text


@given(st.lists(PIECE, max_size=12))
def test_identity_with_managed_segments_mixed_in(pieces: list[str]) -> None:
    text = "".join(pieces)
    doc = mf.parse(text)
    assert doc.render() == text
    for b in doc.blocks:
        assert b.edited == (mf.entry_key(b.text) != b.key)


def _wanted(doc: mf.Document, facts: list[str]) -> list[tuple[str, str]]:
    """Some new facts, and every other entry already in the file."""
    present = [(b.key, b.text) for b in doc.live_blocks()]
    return entries_of(*facts) + present[::2]


def _check_applied(doc: mf.Document, entries: list[tuple[str, str]]) -> mf.Document:
    out = mf.apply_entries(doc, entries)
    rendered = out.render()
    again = mf.parse(rendered)
    assert out.render() == again.render() == mf.apply_entries(doc, entries).render()
    assert mf.apply_entries(again, entries).render() == rendered
    live = [b.key for b in again.live_blocks()]
    assert len(live) == len(set(live)) and set(live) <= {k for k, _ in entries}
    assert {k for k, _ in entries} == again.holds(k for k, _ in entries)
    # Every line in the current form, showing its key as the file's keys say.
    assert all(b.form == mf.LINE for b in again.live_blocks())
    shown = syntax.shown_keys(live, (b.shown for b in again.edited_blocks()))
    assert all(b.shown == shown[b.key] for b in again.live_blocks())
    return again


# Whole lines, as a file is made of: anything else is operator text.
LINE = st.one_of(
    st.text(alphabet=st.characters(blacklist_characters="\n\r"), max_size=20).map(
        lambda t: t + "\n"
    ),
    st.sampled_from(["\n", "## People <!-- dreaming:group -->\n", "- not ours\n"]),
    FACT.map(lambda f: line(mf.entry_key(f), f)),
    FACT.map(lambda f: mf.render_old_line(mf.entry_key(f), f)),
    FACT.map(lambda f: mf.render_block(mf.entry_key(f), f)),
    FACT.map(lambda f: f"- {mf.one_line(f)} <!-- m:0123456789abcdef -->\n"),
    FACT.map(lambda f: f"- {mf.one_line(f)} <!--m:012345-->\n"),
    st.sampled_from(mf.GROUPS).map(mf.render_heading),
)


@given(st.lists(LINE, max_size=12), st.lists(FACT, max_size=6))
def test_apply_entries_on_whole_lines(lines: list[str], facts: list[str]) -> None:
    doc = mf.parse("".join(lines))
    entries = _wanted(doc, facts)
    again = _check_applied(doc, entries)
    # Exactly the entries, person-edited ones kept as they were, in their order, and every
    # non-blank operator line kept, in its order.
    edited = [(b.key, b.text) for b in doc.edited_blocks()]
    assert [(b.key, b.text) for b in again.edited_blocks()] == edited
    assert sorted(b.key for b in again.live_blocks()) == sorted(
        {k for k, _ in entries} - doc.edited_hold(k for k, _ in entries)
    )

    def operator_lines(d: mf.Document) -> list[str]:
        return [line for line in operator_text(d).splitlines() if line.strip()]

    assert operator_lines(again) == operator_lines(doc)


@given(st.lists(PIECE, max_size=10), st.lists(FACT, max_size=6))
def test_apply_entries_on_anything_is_idempotent(pieces: list[str], facts: list[str]) -> None:
    doc = mf.parse("".join(pieces))
    _check_applied(doc, _wanted(doc, facts))


# -- other users of the format ------------------------------------------------------------


def test_scrub_drops_entries_of_removed_keys_in_both_forms() -> None:
    from dreaming.forget import scrub_text

    a, b, c = entries_of("The user has a cat.", "The user works at ACME.", "Bob is 40.")
    content = (
        "# Memory\n"
        + mf.render_block(*c)
        + mf.apply_entries(mf.parse(""), [a, b]).render().replace("## ", "\n## ", 1)
    )
    # No needle: the keys alone are found (the compact form's key comment included).
    cleaned, removed = scrub_text(content, [], {a[0], c[0]})
    assert managed(mf.parse(cleaned)) == dict([b])
    # The People heading lost its only line and went with it; the rest is untouched.
    assert cleaned == "# Memory\n\n## Work <!-- dreaming:group -->\n" + line(*b)
    assert removed == 3 + 1 + 1
    assert scrub_text(cleaned, [], {a[0], c[0]}) == (cleaned, 0)
    # A needle in an entry's text drops that entry too.
    kept = scrub_text(content, ["works at ACME"], set())[0]
    assert set(managed(mf.parse(kept))) == {a[0], c[0]}
    assert "## Work" not in kept


@given(
    st.sampled_from(["", "# Memory\n", "# Memory\n\nNotes.\n\n", "no newline"]),
    st.lists(FACT, max_size=8, unique_by=lambda f: mf.entry_key(f)),
    st.lists(st.integers(min_value=0, max_value=8), max_size=4),
)
def test_file_does_not_depend_on_how_many_writes_brought_the_entries(
    base: str, facts: list[str], cuts: list[int]
) -> None:
    """Entries added over several writes give the file one write of them all gives: a night
    replayed after a crash writes in fewer steps, and must converge to the same file."""
    entries = entries_of(*facts)
    once = mf.apply_entries(mf.parse(base), entries).render()
    doc = mf.parse(base)
    for cut in [*sorted(cuts), len(entries)]:
        doc = mf.parse(mf.apply_entries(doc, entries[:cut]).render())
    assert doc.render() == once
