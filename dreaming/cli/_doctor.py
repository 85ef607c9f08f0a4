"""`dreaming doctor`: check an installation, one line per finding with what to fix."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

import click

from dreaming.cli._main import Context, cli, pass_ctx
from dreaming.cli._output import EXIT_FAILED, echo, emit_json

if TYPE_CHECKING:
    from dreaming.doctor import Finding


def format_finding(f: Finding) -> str:
    fix = f"; fix: {f.fix}" if f.fix else ""
    return f"{f.level.value:<4}  {f.check}: {f.message}{fix}"


@cli.command("doctor")
@click.option(
    "--llm",
    "try_llm",
    is_flag=True,
    help="Also send one small request to [deep] llm's endpoint (the only network use).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    help="With --llm: give up after this many seconds (default: the profile's timeout_s).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document and nothing else.")
@pass_ctx
def doctor(ctx: Context, try_llm: bool, timeout: float | None, as_json: bool) -> None:
    """Check the installation and say what to fix: the state folder, dreaming.toml,
    openclaw.json, the tag registry, the transcript sources, one writer per MEMORY.md, the
    caps (LLM budget, MEMORY.md against bootstrapMaxChars), the key variable (and with --llm
    the endpoint) and each agent's verify.

    Each finding is one line, `ok`, `warn` or `fail`, with the fix. Exits 1 when a check
    fails, 0 otherwise (warnings alone too). Nothing is written.
    """
    from dreaming.doctor import diagnose  # it checks everything: it imports everything

    result = diagnose(ctx.state_dir, ctx.config, dict(os.environ), llm=try_llm, timeout_s=timeout)
    if as_json:
        emit_json(result.to_dict())
    else:
        for finding in result.findings:
            echo(format_finding(finding))
        counts = result.counts()
        verdict = "nothing to fix" if not counts["warn"] and result.ok else "see above"
        echo(f"doctor: {counts['ok']} ok, {counts['warn']} warn, {counts['fail']} fail ({verdict})")
    if not result.ok:
        sys.exit(EXIT_FAILED)
