"""Token estimates and prices: what a call will cost at most, and what it did cost."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dreaming.llm._profile import LLMProfile

# Chat formats wrap every message in a few control tokens, and the reply is primed with a
# few more; these match OpenAI's published accounting closely enough for a budget.
TOKENS_PER_MESSAGE = 4
TOKENS_PER_REPLY = 3
# What a chat template may add to a prompt beyond its bytes (role headers, a default system
# preamble such as Llama 3.1's dates): honest usage stays under the cap with it.
_TEMPLATE_SLACK = 256


def estimate_tokens(text: str) -> int:
    """A deterministic, offline token estimate: one token per four characters, rounded up."""
    return math.ceil(len(text) / 4)


def estimate_prompt_tokens(
    messages: Sequence[Mapping[str, str]], schema: Mapping[str, Any] | None = None
) -> int:
    """Estimate the prompt tokens of a chat request (a json_schema response format counts)."""
    total = TOKENS_PER_REPLY
    for message in messages:
        total += TOKENS_PER_MESSAGE + estimate_tokens(message.get("content", ""))
    if schema is not None:
        total += estimate_tokens(json.dumps(schema, separators=(",", ":")))
    return total


def prompt_token_bound(
    messages: Sequence[Mapping[str, str]], schema: Mapping[str, Any] | None = None
) -> int:
    """An upper bound on the prompt tokens, not an estimate: byte-level BPE and
    SentencePiece with byte fallback never make more tokens than UTF-8 bytes. What the fleet
    ledger reserves, so that settling the real usage can never overshoot its cap."""
    total = TOKENS_PER_REPLY
    for message in messages:
        total += TOKENS_PER_MESSAGE + len(message.get("content", "").encode("utf-8"))
    if schema is not None:
        total += len(json.dumps(schema, separators=(",", ":")).encode("utf-8"))
    return total


def cost_usd(profile: LLMProfile, input_tokens: int, output_tokens: int) -> float | None:
    """The price of a call in USD, or None when the profile has no price."""
    if profile.price_input_per_mtok is None or profile.price_output_per_mtok is None:
        return None
    return (
        input_tokens * profile.price_input_per_mtok / 1e6
        + output_tokens * profile.price_output_per_mtok / 1e6
    )


@dataclass(frozen=True)
class Usage:
    """What one answered attempt is charged: the tokens the server reported, estimated where
    it reported none (`estimated`), capped at what the request could use (`note` says so)."""

    input_tokens: int
    output_tokens: int
    estimated: bool
    note: str | None = None


def charged_usage(
    reported: tuple[int | None, int | None],
    *,
    prompt_estimate: int,
    prompt_bound: int,
    reply_text: str | None,
    max_output_tokens: int,
) -> Usage:
    """The usage to charge for a reply, from the (prompt, completion) tokens the server
    reported (None where it did not) and the request's own bounds."""
    reported_input, reported_output = reported
    estimated = reported_input is None or reported_output is None
    input_tokens = prompt_estimate if reported_input is None else reported_input
    output_tokens = (
        estimate_tokens(reply_text or "") if reported_output is None else reported_output
    )
    # A server's usage is a claim: no request can cost more than its prompt's hard bound
    # plus the output limit it was sent with. More is capped, and flagged.
    input_cap = _TEMPLATE_SLACK + prompt_bound
    if input_tokens <= input_cap and output_tokens <= max_output_tokens:
        return Usage(input_tokens, output_tokens, estimated)
    note = (
        f"usage capped: the server reported {input_tokens}+{output_tokens} tokens,"
        f" more than the request could use ({input_cap}+{max_output_tokens})"
    )
    return Usage(
        min(input_tokens, input_cap), min(output_tokens, max_output_tokens), estimated, note
    )
