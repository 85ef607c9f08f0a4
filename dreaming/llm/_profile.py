"""The LLM profile: which server and model to call, and what a call may cost."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

StructuredOutput = Literal["auto", "json_schema", "json_object"]
"""How replies are constrained: `auto` tries json_schema and falls back to json_object."""

StructuredMode = Literal["json_schema", "json_object"]
"""The mode one request actually used."""


_KEYLIKE = re.compile(r"KEY|TOKEN|SECRET|PASS|AUTH|CRED", re.IGNORECASE)


class LLMProfile(BaseModel):
    """One OpenAI-compatible endpoint and model (OpenAI, vLLM, Ollama, llama.cpp server).

    `api_key_env` names the environment variable that holds the key; the key itself never
    appears in settings. A local server that needs no key sets `api_key_env = ""`.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = "default"
    base_url: str
    model: str = Field(min_length=1)
    api_key_env: str = "OPENAI_API_KEY"
    timeout_s: float = Field(default=60.0, gt=0)
    max_output_tokens: int = Field(default=2048, ge=1)
    temperature: float = Field(default=0.0, ge=0, le=2)
    structured_output: StructuredOutput = "auto"
    # OpenAI's reasoning models reject `max_tokens`; most local servers only know it.
    max_tokens_param: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"
    price_input_per_mtok: float | None = Field(default=None, ge=0)
    price_output_per_mtok: float | None = Field(default=None, ge=0)
    max_attempts: int = Field(default=4, ge=1)
    deadline_s: float = Field(default=120.0, gt=0)
    # A ceiling on requests per minute to this profile across every worker of a fleet
    # (enforced by a RateLimiter in the shared database); None = no limit of our own.
    requests_per_minute: int | None = Field(default=None, ge=1)
    extra_headers: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check(self) -> LLMProfile:
        if not self.base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, got {self.base_url!r}")
        if self.api_key_env and not _KEYLIKE.search(self.api_key_env):
            # `api_key_env = "HOME"` would send the home folder as a bearer token: a
            # variable that holds a key says so in its name.
            raise ValueError(
                f"api_key_env {self.api_key_env!r} does not look like a variable that holds an"
                " API key (its name should say KEY, TOKEN or SECRET, as OPENAI_API_KEY does);"
                ' set api_key_env = "" for a server that needs no key'
            )
        if (self.price_input_per_mtok is None) != (self.price_output_per_mtok is None):
            raise ValueError("set both price_input_per_mtok and price_output_per_mtok, or neither")
        return self

    @property
    def has_price(self) -> bool:
        return self.price_input_per_mtok is not None and self.price_output_per_mtok is not None
