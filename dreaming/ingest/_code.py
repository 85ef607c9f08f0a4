"""Whether a sentence is code: what `claims` leaves out of claims (a pasted snippet, a trace,
a terminal line, JSON), while inline code, a path or a URL in prose is a word of it."""

from __future__ import annotations

import re

# Code in a sentence is part of it ("Never push to `main`", "the flags go in config/flags.yaml",
# "docs are at https://docs.example.org"): only a sentence that is mostly code is no claim. A
# pasted snippet, trace or terminal line is told by its marks (JSON, "at f (file:12:3)", a
# shell prompt, escaped newlines, a command with flags), the rest by counting chunks: a chunk
# (whitespace-separated) is prose when it is a word with at most its punctuation around it.
_PASTE = re.compile(
    r"\{\s*\"|\"\w+\"\s*:|\\n|:\d+:\d+\b|\bat \S+ \(|➜|\bgit:\(|^\$ |\$\{|=>|&&|\|\||[─━│┃]{3}"
)
# A command line: a command, then a flag or a path ("npm install --save-dev vitest").
_COMMANDS = frozenset(
    """
    sudo npm npx pnpm yarn pip pip3 uv cargo docker kubectl curl wget cd ls rm mv cp
    grep sed awk git python python3 node bash sh chmod mkdir ssh brew apt apt-get
    """.split()  # noqa: SIM905
)
_COMMAND_ARGS = re.compile(r"\s--?\w|/")
_PROSE_CHUNK = re.compile(
    r"[(\[\"'“‘*_]*(?:[^\W\d_]+(?:['’-][^\W\d_]+)*|\d+(?:[.,:/-]\d+)*(?:st|nd|rd|th|am|pm|%)?)"
    r"[)\]\"'”’*_.,!?:;…]*"
)
_DASHES = frozenset("-–—…•·|")
CODE_MARKS = re.compile(r"[`{/\\➜─]")  # a sentence without these holds no code to weigh


def command_line(sentence: str) -> bool:
    return sentence.partition(" ")[0] in _COMMANDS and bool(_COMMAND_ARGS.search(sentence))


def mostly_code(sentence: str) -> bool:
    """Whether code makes up most of a sentence: a pasted snippet, a stack trace, a shell
    command line or JSON. Inline code, a path, a URL or an identifier in prose is no more
    than a word of it."""
    if _PASTE.search(sentence) or command_line(sentence):
        return True
    code = prose = 0
    inside = False  # within a `code span`
    for chunk in sentence.split():
        ticks = chunk.count("`")
        if ticks or inside:
            code += 1
        elif _PROSE_CHUNK.fullmatch(chunk):
            prose += 1
        elif not (len(chunk) == 1 and chunk in _DASHES):
            code += 1
        if ticks % 2:
            inside = not inside
    return code > prose
