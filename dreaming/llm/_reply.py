"""Turning a model's reply text into a validated pydantic object, or a useful error."""

from __future__ import annotations

import json
import re

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
