"""Reading a server's chat completion defensively, and turning the reply text into a
validated pydantic object, or a useful error."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from pydantic import ValidationError

from dreaming.errors import InvalidReplyError
from dreaming.llm._records import ReplyT

# Some servers in json_object mode still wrap the object in a Markdown fence.
_FENCE = re.compile(r"\A\s*```(?:json)?[ \t]*\n(.*?)\n[ \t]*```\s*\Z", re.DOTALL)
_SNIPPET_CHARS = 200


def invalid_reply(message: str, raw_text: str | None) -> InvalidReplyError:
    """An InvalidReplyError carrying the reply text (as `raw_text`) for re-asking or logging."""
    error = InvalidReplyError(message)
    # errors.py does not declare raw_text; read it with dreaming.llm.raw_text_of().
    setattr(error, "raw_text", raw_text)  # noqa: B010
    return error


def parse_reply(
    text: str | None,
    reply_model: type[ReplyT],
    *,
    schema_name: str,
    finish_reason: str | None,
    max_output_tokens: int,
) -> ReplyT:
    """Parse `text` as JSON and validate it with `reply_model`; InvalidReplyError otherwise.

    The error message is written to be shown back to the model when the caller re-asks.
    """
    if text is None or not text.strip():
        raise invalid_reply(f"the reply for {schema_name!r} was empty", text)
    cut_off = (
        f" (the reply was cut off at max_output_tokens={max_output_tokens})"
        if finish_reason == "length"
        else ""
    )
    fenced = _FENCE.match(text)
    body = fenced.group(1) if fenced else text
    try:
        data = json.loads(body)
    except json.JSONDecodeError as exc:
        raise invalid_reply(
            f"the reply for {schema_name!r} is not valid JSON: {exc}{cut_off}; "
            f"it began: {text[:_SNIPPET_CHARS]!r}",
            text,
        ) from exc
    try:
        return reply_model.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(root)'}: {err['msg']}"
            for err in exc.errors()
        )
        raise invalid_reply(
            f"the reply does not match schema {schema_name!r}: {problems}{cut_off}", text
        ) from exc


@dataclass(frozen=True)
class Reply:
    """What a chat completion's first choice says: its text, a refusal, why it stopped."""

    text: str | None
    refusal: str | None
    finish_reason: str | None


def reply_of(completion: object) -> Reply | None:
    """The first choice's message, or None when the response is not a chat completion."""
    choices = getattr(completion, "choices", None)
    if not isinstance(choices, list) or not choices:
        return None
    message = getattr(choices[0], "message", None)
    if message is None or not hasattr(message, "content"):
        return None
    return Reply(
        text=_str_or_none(message.content),
        refusal=_str_or_none(getattr(message, "refusal", None)),
        finish_reason=_str_or_none(getattr(choices[0], "finish_reason", None)),
    )


def usage_of(completion: object) -> tuple[int | None, int | None]:
    """(prompt, completion) tokens as the server reported them; None where it did not."""
    usage = getattr(completion, "usage", None)
    return (
        _count_or_none(getattr(usage, "prompt_tokens", None)),
        _count_or_none(getattr(usage, "completion_tokens", None)),
    )


def _str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _count_or_none(value: object) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None
