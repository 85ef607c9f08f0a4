"""Property-based tests for tag stripping: adversarial text must not break the invariants."""

from __future__ import annotations

import re

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from dreaming.ingest.tags import Pattern, Scope, TagDeclaration, TagRegistry, build_registry

# Built-ins plus declarations exercising what the built-ins do not: an end pattern, a
# marker pair without "<", a declaration limited to one scope.
EXTRA = (
    TagDeclaration(
        tag="recap",
        pattern=Pattern.SENTINEL_LINE,
        sentinel_prefix="[recap]",
        end_pattern=r"^\[/recap\]",
        producer="runtime:test",
    ),
    TagDeclaration(
        tag="web", pattern=Pattern.DELIMITED, begin="[[WEB", end="[[/WEB", producer="runtime:test"
    ),
    TagDeclaration(
        tag="display_only",
        pattern=Pattern.XML,
        scopes=frozenset({Scope.DISPLAY}),
        producer="runtime:test",
    ),
)
REGISTRY = build_registry(env={}, runtime=EXTRA)
SCOPE = Scope.DREAMING_INGESTION
ACTIVE = [d for d in REGISTRY.declarations if SCOPE in d.scopes]
XML = [d for d in ACTIVE if d.pattern is Pattern.XML]
SENTINELS = [d.sentinel_prefix for d in ACTIVE if d.sentinel_prefix is not None]
DELIMITED = [d for d in ACTIVE if d.pattern is Pattern.DELIMITED]
# Sentinels whose block is a following fence or paragraph (no declared end pattern).
OPEN_ENDED = [
    d.sentinel_prefix for d in ACTIVE if d.sentinel_prefix is not None and d.end_pattern is None
]

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _name(d: TagDeclaration) -> str:
    if d.variants:
        return "".join("[-_]" if c in "-_" else re.escape(c) for c in d.tag)
    return re.escape(d.tag)


# An independent statement of "a declared marker": what must never survive stripping.
_XML_MARK = re.compile(r"(?i:<\s*/?\s*(?:" + "|".join(_name(d) for d in XML) + r")(?![\w.:-]))")
_DELIM_MARK = re.compile(
    "(?i:"
    + "|".join(
        re.escape(m) + (r"(?!\w)" if m[-1].isalnum() or m[-1] == "_" else "")
        for d in DELIMITED
        for m in (d.begin or "", d.end or "")
    )
    + ")"
)


def leftover_markers(text: str) -> list[str]:
    found = _XML_MARK.findall(text) + _DELIM_MARK.findall(text)
    found += [
        line for line in text.split("\n") if any(line.lstrip().startswith(p) for p in SENTINELS)
    ]
    return found


# -- strategies ----------------------------------------------------------------------------


def _spellings(tag: str) -> st.SearchStrategy[str]:
    return st.sampled_from([tag, tag.upper(), tag.replace("_", "-"), tag.replace("-", "_")])


def _xml_tokens() -> st.SearchStrategy[str]:
    tag = st.sampled_from([d.tag for d in XML]).flatmap(_spellings)
    space = st.sampled_from(["", " ", "\n", "  "])
    attrs = st.sampled_from(["", ' a="1"', " x='>'", " b=c", " /"])
    return st.builds(
        lambda close, sp1, name, at, sp2: f"<{sp1}{close}{name}{at}{sp2}>",
        st.sampled_from(["", "/"]),
        space,
        tag,
        attrs,
        space,
    )


def _delimited_tokens() -> st.SearchStrategy[str]:
    marker = st.sampled_from([m for d in DELIMITED for m in (d.begin or "", d.end or "")])
    attrs = st.sampled_from(["", ">>>", ' id="a">>>', ' id="b">>>', " id=a]]", "]]", " >"])
    return st.builds(lambda m, a: m + a, marker, attrs)


def _sentinel_tokens() -> st.SearchStrategy[str]:
    return st.builds(
        lambda lead, p, tail: f"\n{lead}{p}{tail}\n",
        st.sampled_from(["", " ", "\t"]),
        st.sampled_from(SENTINELS),
        st.sampled_from(["", " ```json", " extra"]),
    )


FRAGMENTS = st.one_of(
    _xml_tokens(),
    _delimited_tokens(),
    _sentinel_tokens(),
    st.sampled_from(["\n", "\n\n", "```", "```json\n", "\n```\n", "[/recap]", "<", ">", " "]),
    st.text(alphabet="ab <>/\n`-_[]", max_size=8),
    st.text(max_size=8),
)
ADVERSARIAL = st.lists(FRAGMENTS, max_size=25).map("".join)

# Text with no "<" (so no XML tag and no "<<<" marker), no "[" (no [[WEB marker) and no
# "(" (every sentinel has one): nothing in it can be, or can combine into, a marker.
SAFE_ALPHABET = st.characters(exclude_characters="<[(")
SAFE_TEXT = st.text(alphabet=SAFE_ALPHABET, max_size=60)


def _plain_with_near_misses() -> st.SearchStrategy[list[str]]:
    near = st.sampled_from(
        [
            "Sender (untrusted metadata)",  # no colon
            "he said Sender (untrusted metadata): ok",  # not at a line start
            "system-reminder>",
            "EXTERNAL_UNTRUSTED_CONTENT>>>",
            "recap]",
            "```",
        ]
    )
    return st.lists(st.one_of(near, st.text(alphabet=st.characters(exclude_characters="<"))))


def _block() -> st.SearchStrategy[tuple[str, bool]]:
    """A well-formed block, and whether it must stand on lines of its own."""
    body = st.text(alphabet=st.characters(exclude_characters="<`[\n"), max_size=20)
    xml = st.builds(
        lambda d, b: (f"<{d.tag} k='v'>{b}</{d.tag}>", False), st.sampled_from(XML), body
    )
    delimited = st.builds(
        lambda d, b: (f'{d.begin} id="q">>>{b}{d.end} id="q">>>', False),
        st.sampled_from([d for d in DELIMITED if (d.begin or "").startswith("<")]),
        body,
    )
    fenced = st.builds(
        lambda p, b: (f'{p}\n```json\n{{"v": "{b}"}}\n```', True),
        st.sampled_from(OPEN_ENDED),
        body,
    )
    paragraph = st.builds(
        lambda p, b: (f"{p}\n{b}\n\n", True),
        st.sampled_from(OPEN_ENDED),
        body.filter(lambda b: b.strip() != ""),
    )
    ended = st.builds(lambda b: (f"[recap] {b}\n\n{b}\n[/recap]", True), body)
    return st.one_of(xml, delimited, fenced, paragraph, ended)


# -- properties --------------------------------------------------------------------------------


@FAST
@given(ADVERSARIAL)
def test_stripping_is_idempotent(text: str) -> None:
    once = REGISTRY.strip(text, SCOPE)
    assert REGISTRY.strip(once, SCOPE) == once


@FAST
@given(ADVERSARIAL)
def test_no_declared_marker_survives(text: str) -> None:
    assert leftover_markers(REGISTRY.strip(text, SCOPE)) == []


@FAST
@given(st.text())
def test_arbitrary_unicode_is_idempotent_and_clean(text: str) -> None:
    once = REGISTRY.strip(text, SCOPE)
    assert REGISTRY.strip(once, SCOPE) == once
    assert leftover_markers(once) == []


@FAST
@given(_plain_with_near_misses().map("\n".join))
def test_text_without_markers_is_unchanged(text: str) -> None:
    assume(leftover_markers(text) == [])
    assert REGISTRY.strip(text, SCOPE) == text


@FAST
@given(SAFE_TEXT, _block(), SAFE_TEXT)
def test_text_around_a_block_survives(
    prefix: str, block_and_lines: tuple[str, bool], suffix: str
) -> None:
    block, own_lines = block_and_lines
    text = f"{prefix}\n{block}\n{suffix}" if own_lines else prefix + block + suffix
    out = REGISTRY.strip(text, SCOPE)
    assert prefix.strip() in out
    assert suffix.strip() in out
    assert leftover_markers(out) == []
    assert len(out) <= len(prefix) + len(suffix) + 2


@FAST
@given(ADVERSARIAL)
def test_scopes_only_apply_their_own_declarations(text: str) -> None:
    # display_only is stripped in DISPLAY and nowhere else.
    wrapped = f"keep <display_only>{text.replace('<', '')}</display_only> keep"
    assert "display_only" not in REGISTRY.strip(wrapped, Scope.DISPLAY)
    plain = TagRegistry([d for d in REGISTRY.declarations if d.tag != "display_only"])
    assert REGISTRY.strip(wrapped, SCOPE) == plain.strip(wrapped, SCOPE)
