"""`dreaming llm check`: one small structured-output request to a profile's endpoint, made
with the client a night uses, to learn before the night whether the endpoint can serve it
(reachable, key accepted, model known, a valid reply) and which structured-output mode it
will get. Nothing is recorded in any agent's call log or charged to a budget.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict

from dreaming.errors import LLMError
from dreaming.llm import (
    CallRecord,
    LLMClient,
    LLMProfile,
    RetryPolicy,
    StructuredMode,
    calls_of,
)


class _Ok(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ok: bool


SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}},
    "required": ["ok"],
    "additionalProperties": False,
}
SYSTEM = "You are answering an automated health check. Reply with JSON only."
USER = 'Reply with the JSON object {"ok": true}.'
# A model answers this in a handful of tokens; the cap only matters to one that thinks
# first, and a night gives that one its profile's full limit anyway.
MAX_OUTPUT_TOKENS = 256


def check_policy(deadline_s: float) -> RetryPolicy:
    """Two attempts within one request's timeout: a server that blinks gets a second
    chance, one that is down fails the check in about a second, not a minute."""
    return RetryPolicy(
        max_attempts=2,
        deadline_s=deadline_s,
        initial_backoff_s=0.5,
        max_backoff_s=1.0,
        jitter_s=0.2,
    )


@dataclass(frozen=True)
class EndpointCheck:
    """What one check found. `json_schema` is None when it was not learned (the profile
    asks for json_object, or the check failed before the server answered a request)."""

    profile: LLMProfile
    ok: bool
    mode: StructuredMode  # the mode a night's first call will use
    json_schema: bool | None
    latency_s: float
    served_model: str | None = None
    requests: tuple[CallRecord, ...] = ()
    failure: LLMError | None = field(default=None, compare=False, repr=False)

    @property
    def error(self) -> str | None:
        # Server messages can span lines (a pydantic validation error): keep it to one.
        return " ".join(str(self.failure).split()) if self.failure is not None else None

    @property
    def input_tokens(self) -> int:
        return sum(r.input_tokens for r in self.requests)

    @property
    def output_tokens(self) -> int:
        return sum(r.output_tokens for r in self.requests)

    @property
    def cost_usd(self) -> float | None:
        if not self.profile.has_price:
            return None
        return sum(r.cost_usd or 0.0 for r in self.requests)

    def to_dict(self) -> dict[str, Any]:
        return {
            "profile": self.profile.name,
            "base_url": self.profile.base_url,
            "model": self.profile.model,
            "api_key_env": self.profile.api_key_env or None,
            "served_model": self.served_model,
            "ok": self.ok,
            "error": self.error,
            "structured_output": self.profile.structured_output,
            "mode": self.mode,
            "json_schema": self.json_schema,
            "latency_s": round(self.latency_s, 3),
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": self.cost_usd,
            "requests": [
                {
                    "mode": r.mode,
                    "outcome": r.outcome.value,
                    "http_status": r.http_status,
                    "duration_s": round(r.duration_s, 3),
                    "input_tokens": r.input_tokens,
                    "output_tokens": r.output_tokens,
                    "error": r.error,
                }
                for r in self.requests
            ],
        }


def check_endpoint(
    profile: LLMProfile,
    *,
    env: Mapping[str, str],
    timeout_s: float | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> EndpointCheck:
    """Send the check's request to `profile`'s endpoint. Raises LLMConfigError when the
    profile's key variable is not set; every failure of the request itself is in the result."""
    policy = check_policy(timeout_s or profile.timeout_s)
    with LLMClient(profile, env=env, retry_policy=policy) as client:
        started = clock()
        try:
            completion = client.complete_json(
                SYSTEM, USER, SCHEMA, "health_check", _Ok, max_output_tokens=MAX_OUTPUT_TOKENS
            )
        except LLMError as exc:
            records = tuple(calls_of(exc))
            return EndpointCheck(
                profile=profile,
                ok=False,
                mode=client.structured_mode,
                json_schema=_json_schema_accepted(profile, client.structured_mode, records),
                latency_s=clock() - started,
                requests=records,
                failure=exc,
            )
        records = tuple(completion.calls)
        return EndpointCheck(
            profile=profile,
            ok=True,
            mode=client.structured_mode,
            json_schema=_json_schema_accepted(profile, client.structured_mode, records),
            latency_s=clock() - started,
            served_model=completion.model,
            requests=records,
        )


def _json_schema_accepted(
    profile: LLMProfile, learned: StructuredMode, records: tuple[CallRecord, ...]
) -> bool | None:
    if profile.structured_output == "json_object":
        return None  # never sent: the profile asks for json_object
    if profile.structured_output == "auto" and learned == "json_object":
        return False  # the client saw the server reject it and fell back
    if any(r.mode == "json_schema" and r.http_status == 200 for r in records):
        return True
    return None
