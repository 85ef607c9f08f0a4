"""Entry text hygiene: memory is untrusted input for the next prompt (DESIGN invariant 7).

Whatever is written to MEMORY.md is later pasted into some agent's context, and shown to
the model in the next deep run. So entry text must not be able to break out of where it is
put or pass itself off as something else:

- no code fences (``` or ~~~) that could open or close a block around it, and no
  backtick that opens an inline code span nothing closes (it would run on into whatever
  follows the entry: its key comment, the next line);
- no fake role or chat-template markers (``system:`` at a line start, ``<|im_start|>``,
  ``[INST]``, ``<<SYS>>``, ``</s>`` ...);
- no dreaming markers (``<!-- dreaming:entry ... -->``, ``<!-- dreaming:group -->``, an
  entry line's key comment ``<!-- m:... -->``) and no HTML comments at all (they would
  corrupt MEMORY.md, where an entry is one line ending in its key comment);
- no injected or markup tags (``<relevant_memories>``; the registry's blocks for the
  ``dreaming-ingestion`` scope);
- no raw metadata (``score=0.9``, ``confidence: high``, line references ``#L12``);
- no link that runs or embeds something when followed (``javascript:``, ``data:text/html``),
  also when its characters are entity-encoded (``javascript&#58;``, which CommonMark
  decodes), and no image or Markdown link at all: an image is fetched by every viewer that
  shows the file (``![x](https://evil.example/t.png?c=...)`` leaks), so only its alt text
  stays, and a link keeps its text with the address as plain text;
- no characters a reader cannot see: Unicode tag characters (U+E0000-E007F, "ASCII
  smuggling"), soft hyphens, fillers, variation selectors and other default-ignorable
  code points, bidi controls; and the text is NFKC-normalised first, so full-width
  markers (``＜/relevant_memories＞``, ``＜system＞``) are matched as the markers they read as.

:func:`hold_reason` names entry text shaped as an instruction to override the agent's
instructions or to send data out: deep never writes such an entry straight to MEMORY.md, it
goes to review with that reason.

:func:`entry_text_problems` reports those (the deep phase rejects a model's text that has
any); :func:`sanitize_entry_text` removes them. Both use the same patterns, and sanitizing
repeats its pass until the text stops changing, so its result has no problems (except,
possibly, being empty) and sanitizing twice changes nothing.

:func:`prompt_safe` is the much lighter treatment of data strings rendered into a prompt:
they are shown as JSON, so only what a tokenizer might read as a control token is removed.
"""

from __future__ import annotations

import html
import re
import unicodedata

from dreaming.ingest.tags import Scope, TagRegistry
from dreaming.syntax import MARKER_RE

DEFAULT_MAX_CHARS = 500
EMPTY = "text is empty"

# -- patterns, shared by detection and removal -------------------------------------------
# Every pattern matches at least two characters, so replacing a match with one space (or
# nothing) always shortens the text: the sanitize loop terminates.

_HTML_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
# Leftovers of unterminated or split comments.
_COMMENT_TOKEN = re.compile(r"<!--|-->|--!>")

# Special tokens of common chat templates. Anywhere in the text, not only at a line start:
# servers that tokenize with special tokens enabled would turn them into real turns.
_CHAT_TOKEN = re.compile(
    r"<[|｜][^<>|｜\n]{0,64}[|｜]>"  # <|im_start|>, <|system|>, <|eot_id|>, DeepSeek's <｜…｜>
    r"|\[/?(?:INST|SYS|SYSTEM_PROMPT|AVAILABLE_TOOLS|TOOL_CALLS|TOOL_RESULTS)\]"
    r"|<</?SYS>>"
    r"|</?s>"
    r"|</?(?:start_of_turn|end_of_turn|bos|eos|endoftext)>",
    re.IGNORECASE,
)
_ROLES = r"system|assistant|user|human|developer|tool|function|model"
# "System:", "**User:**", "> assistant:" leading a line.
_ROLE_PREFIX = re.compile(
    rf"^[^\S\n]*(?:[>*_\[(-][^\S\n]*)*(?:{_ROLES})(?:[^\S\n]*[*_\])])*[^\S\n]*:[*_]*",
    re.IGNORECASE | re.MULTILINE,
)
# "### System", "## Instruction" headings leading a line.
_ROLE_HEADING = re.compile(
    rf"^[^\S\n]*#{{1,6}}[^\S\n]*(?:{_ROLES}|instructions?|response|input|context)\b",
    re.IGNORECASE | re.MULTILINE,
)

# Delimited wrappers such as <<<EXTERNAL_UNTRUSTED_CONTENT id=..>>>, then any XML-ish tag.
_DELIMITER = re.compile(r"<<<[^<>\n]{0,200}>>>")
_TAG = re.compile(r"</?[A-Za-z_][\w.:-]*(?:\s[^<>]*)?/?>")

_FENCE = re.compile(r"`{3,}|~{3,}")
_TICKS = re.compile(r"`+")

# A link a Markdown renderer would make live and that runs or embeds something when followed
# (a diary or memory shown in a UI): the scheme is removed, the rest stays readable text.
_UNSAFE_LINK = re.compile(
    r"\b(?:javascript|vbscript|livescript)\s*:|\bdata\s*:\s*[a-z]+/[\w.+-]+|\bfile:/",
    re.IGNORECASE,
)

_META_KEYS = r"score|confidence|relevance|similarity|salience"
# A probability or a level: a credit score of 720 is a fact, a score of 0.92 is metadata.
_META_VALUE = (
    r"(?:[-+]?(?:0?\.\d+|0|1(?:\.0+)?)(?![\w%-]|\.\d)|\d{1,3}(?:\.\d+)?%"
    r"|(?:very\s+)?(?:high|medium|med|low)\b|(?:un)?certain\b)"
)
_METADATA = re.compile(
    rf"\b(?:{_META_KEYS})[\"']?\s*=\s*[\"']?[^\s,;)\]}}]*"  # key=anything
    rf"|\b(?:{_META_KEYS})[\"']?\s*:\s*[\"']?{_META_VALUE}",  # key: 0.9 / key: high
    re.IGNORECASE,
)
# [main/sessions/main/abc#L12] or [agent/sessions/...] as a whole, then bare #L12 / #L3-L9.
_BRACKET_REF = re.compile(r"\[[^\[\]\n]*(?:#L\d|/sessions/|\.jsonl\b)[^\[\]\n]*\]")
LINE_REF_RE = re.compile(r"#L\d+(?:-L?\d+)?")

# Invisible characters that can hide a marker from a reader: bidi controls, zero-width
# space, word joiner, BOM, plus any remaining C0/C1 control character. Whitespace is
# collapsed separately; ZWJ/ZWNJ stay because scripts and emoji need them.
_INVISIBLE = re.compile(
    "[\u200b\u2060\ufeff\u202a-\u202e\u2066-\u2069\x00-\x08\x0e-\x1f\x7f-\x84\x86-\x9f"
    # default-ignorable code points a reader cannot see: soft hyphen, combining grapheme
    # joiner, Hangul fillers, Khmer inherent vowels, Mongolian selectors, LRM/RLM and ALM,
    # invisible operators, variation selectors, the tag block ("ASCII smuggling")
    "\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200e\u200f\u2061-\u2064"
    "\u206a-\u206f\u3164\ufe00-\ufe0f\uffa0\ufff0-\ufff8\U0001d173-\U0001d17a"
    "\U000e0000-\U000e0fff]"
)
# Images are fetched by whatever shows the file: only their alt text stays. Links keep
# their text; the address stays as plain text. Reference definitions go.
_IMAGE = re.compile(
    r"!\[([^\[\]\n]{0,200})\]\s*(?:\((?:[^()\n]|\([^()\n]{0,100}\)){0,500}\)|\[[^\[\]\n]{0,100}\])"
)
_LINK = re.compile(
    r"\[([^\[\]\n]{1,200})\]\(\s*<?((?:[^()<>\s]|\([^()<>\s]{0,100}\)){1,500})>?"
    r"(?:\s+\"[^\"\n]*\")?\s*\)"
)
_LINK_DEF = re.compile(r"^\s{0,3}\[[^\[\]\n]{1,200}\]:\s*\S+.*$", re.MULTILINE)
# What a removal inside brackets leaves behind ("(score=0.9)" -> "( )"); a bare "()" of
# the user's own stays.
_EMPTY_BRACKETS = re.compile(r"\(\s+\)|\[\s+\]|\{\s+\}")
_WS = re.compile(r"\s+")
# The space a removal leaves before punctuation or inside a bracket: "tea (see #L2)." ->
# "tea (see)." rather than "tea (see )."
_LOOSE_PUNCT = re.compile(r"\s+(?=[.,;:!?)\]}])|(?<=[(\[{])\s+")
_LINE_BREAKS = re.compile("[\u2028\u2029\x85]")
# Everything CommonMark or a terminal treats as the start of a new line.
_NEWLINES = re.compile("\r\n?|[\u2028\u2029\x85\x0b\x0c]")


def _first(pattern: re.Pattern[str], text: str) -> str | None:
    m = pattern.search(text)
    if m is None:
        return None
    found = m.group()
    return found if len(found) <= 40 else found[:37] + "..."


def _strip_registry(text: str, registry: TagRegistry | None) -> str:
    if registry is None:
        return text
    return registry.strip(text, Scope.DREAMING_INGESTION)


def entry_text_problems(
    text: str,
    *,
    max_chars: int = DEFAULT_MAX_CHARS,
    registry: TagRegistry | None = None,
) -> list[str]:
    """What is wrong with ``text`` as an entry, as short human-readable strings.

    Empty means nothing wrong. The text is not changed; the messages are written to be
    shown back to the model when its reply is rejected.
    """
    problems: list[str] = []
    body = text.strip()
    if not body:
        return [EMPTY]
    text = _NEWLINES.sub("\n", _normalized(text))
    if len(body) > max_chars:
        problems.append(f"text is too long ({len(body)} characters, at most {max_chars})")
    if (found := _first(_FENCE, text)) is not None:
        problems.append(f"contains a code fence ({found!r})")
    role = _first(_CHAT_TOKEN, text) or _first(_ROLE_PREFIX, text) or _first(_ROLE_HEADING, text)
    if role is not None:
        problems.append(f"contains a role or chat-template marker ({role.strip()!r})")
    if MARKER_RE.search(text):
        problems.append("contains a dreaming block marker")
    elif (found := _first(_COMMENT_TOKEN, text)) is not None:
        problems.append(f"contains an HTML comment ({found!r})")
    tag = _first(_DELIMITER, text) or _first(_TAG, text)
    if tag is None and _strip_registry(text, registry) != text:
        tag = "injected context"
    if tag is not None:
        problems.append(f"contains an injected or markup tag ({tag!r})")
    if (found := _first(_UNSAFE_LINK, text)) is not None:
        problems.append(f"contains an unsafe link ({found!r})")
    if (found := _first(_IMAGE, text) or _first(_LINK, text)) is not None:
        problems.append(f"contains a Markdown image or link ({found!r})")
    meta = _first(_METADATA, text) or _first(_BRACKET_REF, text) or _first(LINE_REF_RE, text)
    if meta is not None:
        problems.append(f"contains raw metadata ({meta!r})")
    return problems


def _normalized(text: str) -> str:
    """The text as a reader sees it: entities decoded (CommonMark decodes ``&#58;``), NFKC
    (full-width ``＜`` is ``<``), invisible characters gone."""
    if "&" in text:
        text = html.unescape(text)
    if not text.isascii():
        text = unicodedata.normalize("NFKC", text)
        text = _INVISIBLE.sub("", text)
    return text


def _pass(text: str, max_chars: int, registry: TagRegistry | None) -> str:
    text = _normalized(text)
    text = _NEWLINES.sub("\n", _strip_registry(text, registry))
    text = _LINK_DEF.sub(" ", text)
    text = _IMAGE.sub(lambda m: f" {m.group(1)} ", text)
    text = _LINK.sub(lambda m: f"{m.group(1)} ({m.group(2)})", text)
    text = _HTML_COMMENT.sub(" ", text)
    text = _COMMENT_TOKEN.sub(" ", text)
    text = _CHAT_TOKEN.sub(" ", text)
    # Line-start markers before whitespace is collapsed: afterwards only the first remains.
    text = _ROLE_PREFIX.sub(" ", text)
    text = _ROLE_HEADING.sub(" ", text)
    text = _DELIMITER.sub(" ", text)
    text = _TAG.sub(" ", text)
    text = _FENCE.sub("", text)
    text = _UNSAFE_LINK.sub(" ", text)
    text = _BRACKET_REF.sub(" ", text)
    text = _METADATA.sub(" ", text)
    text = LINE_REF_RE.sub(" ", text)
    text = _INVISIBLE.sub("", text)
    text = _EMPTY_BRACKETS.sub("", text)
    text = _LOOSE_PUNCT.sub("", _WS.sub(" ", text)).strip()
    text = _truncate(text, max_chars)
    if "`" in text:  # after the cut, which may fall inside a code span
        text = _balance_code_spans(text)
    return text


def _balance_code_spans(text: str) -> str:
    """Inline code stays inline code ("Never push to `main`"); a backtick run that no run of
    the same length closes (how CommonMark pairs them) is removed, and one between two
    letters was an apostrophe ("it`s"). Whatever follows the entry stays outside any span."""
    runs = list(_TICKS.finditer(text))
    unmatched: list[re.Match[str]] = []
    i = 0
    while i < len(runs):
        width = len(runs[i].group())
        close = next((k for k in range(i + 1, len(runs)) if len(runs[k].group()) == width), None)
        if close is None:
            unmatched.append(runs[i])
            i += 1
        else:
            i = close + 1  # the runs between are the span's content
    if not unmatched:
        return text
    out: list[str] = []
    pos = 0
    for m in unmatched:
        start, end = m.span()
        out.append(text[pos:start])
        between_letters = start > 0 and end < len(text) and text[start - 1].isalpha()
        if end - start == 1 and between_letters and text[end].isalpha():
            out.append("'")
        pos = end
    out.append(text[pos:])
    return _LOOSE_PUNCT.sub("", _WS.sub(" ", "".join(out))).strip()


def _truncate(text: str, max_chars: int) -> str:
    if len(text) <= max_chars:
        return text
    cut = text.rfind(" ", 0, max_chars + 1)
    if cut <= 0:
        return text[:max_chars].rstrip()
    return text[:cut].rstrip()


def sanitize_entry_text(
    text: str,
    *,
    max_chars: int = DEFAULT_MAX_CHARS,
    registry: TagRegistry | None = None,
) -> str:
    """``text`` made safe to store: markers, fences, tags and metadata removed, whitespace
    collapsed to single spaces (an entry is one paragraph), cut at a word boundary to at
    most ``max_chars``. May return ``""``; callers decide what an empty entry means.

    Idempotent, and :func:`entry_text_problems` of the result is empty or ``[EMPTY]``.
    """
    if max_chars < 1:
        raise ValueError(f"max_chars must be at least 1, got {max_chars}")
    # Removing one thing can make another (`<!<!---->--`): repeat until nothing changes.
    # A pass that changes the text shortens it, except the first whitespace collapse.
    for _ in range(len(text) + 2):
        cleaned = _pass(text, max_chars, registry)
        if cleaned == text:
            break
        text = cleaned
    return text


# Entry text that would have the agent set its instructions aside, or send what it holds
# out of the conversation: fine as a record of what someone said, never as a standing
# instruction the agent reads on every turn without a person having looked at it.
_OVERRIDE = re.compile(
    r"\b(?:ignore|disregard|forget|override|bypass|drop)\b[^.!?\n]{0,40}?"
    r"\b(?:previous|prior|earlier|above|all|any|your|the|system|safety)\b[^.!?\n]{0,30}?"
    r"\b(?:instructions?|rules?|guidelines?|prompts?|polic(?:y|ies)|guardrails?)\b"
    r"|\byou are (?:now|no longer)\b|\bnew (?:system )?instructions\s*:|\bjailbreak"
    r"|\bdeveloper mode\b|\bdo anything now\b",
    re.IGNORECASE,
)
_SEND_OUT = re.compile(
    r"\b(?:send|e-?mail|mail|upload|post|forward|share|copy|transfer|leak|exfiltrate|paste)"
    r"\w*\b[^.!?\n]{0,60}?\b(?:every|all|any|each|the whole|entire)\b[^.!?\n]{0,30}?"
    r"\b(?:files?|documents?|passwords?|secrets?|keys?|tokens?|credentials?|data|emails?|"
    r"messages?|contacts?|history|memory|repos?(?:itory|itories)?|code|logs?)\b"
    r"[^.!?\n]{0,60}?\b(?:to|at|into)\b\s+\S*(?:@|https?://|\.\w{2,})",
    re.IGNORECASE,
)
_PIPE_TO_SHELL = re.compile(r"\b(?:curl|wget)\b[^|\n]{0,200}\|\s*(?:ba|z)?sh\b", re.IGNORECASE)


def hold_reason(text: str) -> str | None:
    """Why `text` must be seen by a person before it becomes memory, or None: it tells the
    agent to override its instructions, to send data out, or to run a fetched script."""
    seen = _normalized(text)
    if _OVERRIDE.search(seen):
        return "tells the agent to set its instructions aside"
    if _SEND_OUT.search(seen):
        return "tells the agent to send data out"
    if _PIPE_TO_SHELL.search(seen):
        return "tells the agent to run a fetched script"
    return None


def prompt_safe(text: str) -> str:
    """A data string fit to render as JSON in a prompt: chat-template tokens removed and
    Unicode line separators made spaces (JSON leaves both as they are). Nothing else is
    changed: the model is told that data is never instructions."""
    previous = None
    while previous != text:
        previous = text
        text = _CHAT_TOKEN.sub(" ", text)
    return _LINE_BREAKS.sub(" ", text)


__all__ = [
    "DEFAULT_MAX_CHARS",
    "EMPTY",
    "LINE_REF_RE",
    "entry_text_problems",
    "hold_reason",
    "prompt_safe",
    "sanitize_entry_text",
]
