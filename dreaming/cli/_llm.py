"""`dreaming llm`: the LLM endpoints of the settings; `llm check` tries one before a night."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING

import click

from dreaming.cli._main import Context, cli, pass_ctx
from dreaming.cli._output import echo, emit_json
from dreaming.errors import ConfigError, LLMConfigError, LLMError

if TYPE_CHECKING:
    from dreaming.config import Settings
    from dreaming.llm.check import EndpointCheck


def _profile_name(settings: Settings, name: str | None) -> str:
    """The named profile, else the one deep uses; an error naming the known ones otherwise."""
    known = sorted(settings.llm.profiles)
    listed = ", ".join(known) if known else "none: add one under [llm.profiles]"
    if name is None:
        name = settings.deep.llm
        if name is None:
            raise ConfigError(
                f"no profile given and [deep] llm is not set: name one (known: {listed})"
            )
    if name not in settings.llm.profiles:
        raise ConfigError(f"no LLM profile {name!r} under [llm.profiles] (known: {listed})")
    return name


def _structured(check: EndpointCheck) -> str:
    setting = check.profile.structured_output
    if setting == "json_object":
        return "json_object (the profile's structured_output; json_schema not tried)"
    if check.json_schema is False:
        rejected = next(
            (r for r in check.requests if r.mode == "json_schema" and r.http_status), None
        )
        status = f" (HTTP {rejected.http_status})" if rejected is not None else ""
        return (
            f"json_schema rejected{status}: the json_object fallback will be used (set"
            ' structured_output = "json_object" to save each phase its rejected first request)'
        )
    if check.json_schema:
        return "json_schema accepted"
    return f"{setting} (not learned: no request was answered)"


def format_check(check: EndpointCheck) -> str:
    profile = check.profile
    served = f" (the server reports {check.served_model})" if check.served_model else ""
    count = len(check.requests)
    cost = "unpriced" if check.cost_usd is None else f"${check.cost_usd:.6f}"
    lines = [
        f"profile:    {profile.name}",
        f"base_url:   {profile.base_url}",
        f"model:      {profile.model}{served}",
        f"key from:   {profile.api_key_env or '(none: the server needs no key)'}",
        f"latency:    {check.latency_s:.2f}s ({count} request{'' if count == 1 else 's'})",
        f"tokens:     {check.input_tokens} input, {check.output_tokens} output; cost {cost}",
        f"structured: {_structured(check)}",
    ]
    if check.ok:
        lines.append(f"ok: profile {profile.name!r} can serve a night")
    return "\n".join(lines)


@contextlib.contextmanager
def _client_warnings_quiet() -> Iterator[None]:
    """The check reports each request itself: the client's warnings about them would say
    it twice on stderr. With -v they still show."""
    client_log = logging.getLogger("dreaming.llm")
    level = client_log.level
    if client_log.getEffectiveLevel() >= logging.WARNING:
        client_log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        client_log.setLevel(level)


@cli.group()
def llm() -> None:
    """The LLM endpoints of the settings: `llm check` tries one before a night."""


@llm.command("check")
@click.argument("profile", required=False)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    help="Give up after this many seconds (default: the profile's timeout_s).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document and nothing else.")
@pass_ctx
def check(ctx: Context, profile: str | None, timeout: float | None, as_json: bool) -> None:
    """Send one small structured-output request to PROFILE (default: [deep] llm).

    Prints the model the server reports, the latency, tokens and cost, and whether
    json_schema is accepted or the json_object fallback will be used. Exits 1 when the
    endpoint cannot serve a night (unreachable, key refused, unknown model, invalid reply,
    timeout), 2 when the settings are wrong. Nothing is recorded or charged to a budget.
    """
    # The HTTP client stack loads only for this command (see dreaming.llm).
    from dreaming.llm.check import check_endpoint

    app = ctx.app
    name = _profile_name(app.settings, profile)
    try:
        with _client_warnings_quiet():
            result = check_endpoint(app.settings.llm.profiles[name], env=app.env, timeout_s=timeout)
    except LLMConfigError as err:  # a missing key is the settings' fault, as in a run
        raise ConfigError(str(err)) from err
    if as_json:
        emit_json(result.to_dict())
    else:
        echo(format_check(result))
    if result.failure is not None:
        raise LLMError(result.error or "the check failed") from result.failure
