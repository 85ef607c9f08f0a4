"""LineSource decodes with msgspec and falls back to json for every line msgspec rejects: what
each line yields, or which skip it counts, must stay exactly what json.loads makes of it
(NaN, huge integers, lone surrogates, duplicate keys, a BOM, bad UTF-8 ...)."""

from __future__ import annotations

import io
import json
import math
from collections import Counter
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dreaming.ingest.transcripts._lines import LineSource, loads
from dreaming.messages import SkipReason


def _read(data: bytes) -> tuple[list[tuple[int, str]], Counter[str]]:
    """What LineSource yields for `data`: (line number, repr of the object), and its skips.
    repr tells nan, -0.0, 1 from 1.0 and key order apart, which == would not."""
    skips: Counter[str] = Counter()
    source = LineSource(io.BytesIO(data), offset=0, line=0, skips=skips)
    return [(n, repr(obj)) for n, obj in source], skips


def _reference(data: bytes) -> tuple[list[tuple[int, str]], Counter[str]]:
    """The same, as json.loads sees each newline-terminated line (the contract LineSource
    kept before msgspec): invalid UTF-8, blank, malformed, not an object, or the object."""
    out: list[tuple[int, str]] = []
    skips: Counter[str] = Counter()
    # Lines end at b"\n" only: bytes.splitlines() would also split at a bare b"\r".
    for n, raw in enumerate(data.split(b"\n")[:-1], start=1):
        raw += b"\n"
        try:
            text = raw.decode().removeprefix("\ufeff")
        except UnicodeDecodeError:
            skips[SkipReason.INVALID_UTF8.value] += 1
            continue
        if not text.strip():
            continue
        try:
            obj = json.loads(text)
        except (ValueError, RecursionError):
            skips[SkipReason.MALFORMED_JSON.value] += 1
            continue
        if type(obj) is dict:
            out.append((n, repr(obj)))
        else:
            skips[SkipReason.NOT_AN_OBJECT.value] += 1
    return out, skips


ODD_LINES = [
    # what msgspec rejects and json accepts
    b'{"a":NaN}',
    b'{"a":Infinity,"b":-Infinity}',
    b'{"a":1e400}',
    b'{"a":-1e400,"b":1e999999999999999999}',
    b'{"a":"\\ud800"}',
    b'{"a":"\\udfff","b":"\\udc00\\ud800"}',
    b'{"a":"\\ud800\\u0041"}',
    b'{"\xed\xa0\x80":"\xed\xbf\xbf"}',  # surrogates encoded in UTF-8: Python decodes them
    b'\xef\xbb\xbf{"a":1}',  # a BOM
    # what both accept: the values must be the same
    b'{"a":123456789012345678901234567890,"b":-18446744073709551617}',
    b'{"a":' + b"9" * 4300 + b"}",
    b'{"a":1,"b":2,"a":3}',
    b'{"a":{"x":1},"a":{"y":2}}',
    b'{"a":-0.0,"b":-0,"c":0e0,"d":1E2,"e":1e-400,"f":-1e-400}',
    b'{"a":0.1,"b":2.2250738585072011e-308,"c":4.9e-324,"d":9007199254740993.0}',
    b'{"a":0.' + b"1" * 400 + b"}",
    b'{"a":"\\ud83d\\ude00 \xf0\x9f\x98\x80 \\u00E9 \\/ \x7f \\u0000"}',
    b'{"a":"\xef\xbb\xbf"}',
    b'  {"a":1}\t ',
    b'{"a":1}\r',
    b'{"a":[1,2,{"b":null}],"t":true,"f":false}',
    b"{}",
    # what both reject, and how it is counted
    b'{"a":' + b"9" * 4301 + b"}",  # past Python's int digit limit
    b'{"a":"\xff"}',
    b'{"\xc0\xaf":1}',
    b'{"a":"\xe2\x82"}',
    b'{"a":1}\xff',
    b'{"a":"\x01"}',
    b'{"a":"\t"}',
    b'{"a":1,}',
    b'{"a":01}',
    b'{"a":.5}',
    b"{'a':1}",
    b'{"a":1}{"b":2}',
    b'{"a":1',
    b'{"a":1}\x0c',
    b'\x00{"a":1}',
    b'{"a":nan}',
    b'["a",1]',
    b'"text"',
    b"42",
    b"null",
    b"",
    b"   \t",
    b"\xef\xbb\xbf",
    b'{"a":' * 5000 + b"1" + b"}" * 5000,  # deeper than any recursion limit
    b"[" * 100_000 + b"]" * 100_000,
]


@pytest.mark.parametrize("raw", ODD_LINES, ids=lambda raw: repr(raw[:40]))
def test_an_odd_line_reads_as_json_loads_reads_it(raw: bytes) -> None:
    data = raw + b"\n"
    assert _read(data) == _reference(data)


def test_odd_lines_together_keep_their_line_numbers_and_counts() -> None:
    data = b"".join(raw + b"\n" for raw in ODD_LINES)
    got, skips = _read(data)
    assert (got, skips) == _reference(data)
    assert len(got) >= 20 and set(skips) == {
        SkipReason.INVALID_UTF8.value,
        SkipReason.MALFORMED_JSON.value,
        SkipReason.NOT_AN_OBJECT.value,
    }


def test_values_msgspec_rejects_come_back_as_json_loads_makes_them() -> None:
    data = b'{"n":NaN,"i":-Infinity,"o":1e400,"s":"\\ud800x","big":' + b"7" * 40 + b"}\n"
    skips: Counter[str] = Counter()
    [(_, obj)] = list(LineSource(io.BytesIO(data), offset=0, line=0, skips=skips))
    assert math.isnan(obj["n"]) and obj["i"] == -math.inf and obj["o"] == math.inf
    assert obj["s"] == "\ud800x"
    assert obj["big"] == int("7" * 40) and type(obj["big"]) is int
    assert not skips


# Any code point, lone surrogates included (hypothesis leaves them out by default).
_TEXT = st.text(st.characters(exclude_categories=()))


def _json_values() -> st.SearchStrategy[Any]:
    scalars = (
        st.none()
        | st.booleans()
        | st.integers(min_value=-(10**30), max_value=10**30)
        | st.floats(allow_nan=True, allow_infinity=True)
        | _TEXT
    )
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TEXT, inner, max_size=4),
        max_leaves=12,
    )


@st.composite
def _lines(draw: st.DrawFn) -> bytes:
    """A JSON line, sometimes not an object, sometimes damaged: a byte changed or inserted."""
    value = draw(st.dictionaries(_TEXT, _json_values(), max_size=5) | _json_values())
    ascii_only = draw(st.booleans())
    raw = json.dumps(value, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
    if draw(st.integers(0, 3)) == 0 and raw:
        at = draw(st.integers(0, len(raw) - 1))
        byte = draw(st.integers(0, 255).filter(lambda b: b != 10))
        raw = raw[:at] + bytes([byte]) + raw[at + draw(st.integers(0, 1)) :]
    return raw


@settings(max_examples=150, deadline=None)  # 400 took 25 s, the suite's longest test
@given(st.lists(_lines(), min_size=1, max_size=6))
@example([b"\r{}"])  # a carriage return inside a line is no line break
def test_any_lines_read_as_json_loads_reads_them(lines: list[bytes]) -> None:
    data = b"".join(raw + b"\n" for raw in lines)
    assert _read(data) == _reference(data)


def _json_loads_outcome(load: Any, raw: bytes) -> tuple[str, str]:
    try:
        return "value", repr(load(raw))
    except RecursionError:
        return "error", "RecursionError"
    except ValueError:
        return "error", "ValueError"


@pytest.mark.parametrize("raw", ODD_LINES, ids=lambda raw: repr(raw[:40]))
def test_loads_is_json_loads(raw: bytes) -> None:
    # A session's head is read through `loads` (its chat facts): msgspec first, json.loads
    # for what msgspec rejects, so the value or the error is json.loads' own.
    assert _json_loads_outcome(loads, raw) == _json_loads_outcome(json.loads, raw)
