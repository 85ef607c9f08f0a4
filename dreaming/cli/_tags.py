"""`dreaming tags`: the injected-context tag registry, for people and for other tools."""

from __future__ import annotations

import sys

import click

from dreaming.cli._main import Context, cli, pass_ctx
from dreaming.cli._output import echo, emit_json
from dreaming.ingest.tags import Scope


@cli.group(invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="Print the declarations as JSON.")
@click.pass_context
def tags(click_ctx: click.Context, as_json: bool) -> None:
    """Show every active tag declaration with its producer and pattern."""
    if click_ctx.invoked_subcommand is not None:
        if as_json:
            raise click.UsageError(
                f"--json goes after the subcommand: tags {click_ctx.invoked_subcommand} --json"
            )
        return
    registry = click_ctx.find_object(Context).app.registry  # type: ignore[union-attr]
    if as_json:
        emit_json(
            {
                "tags": registry.describe(),
                "warnings": list(registry.warnings),
                "replaced_by": registry.replaced_by,
            }
        )
    else:
        echo(registry.banner())


@tags.command("strip")
@click.option(
    "--scope",
    type=click.Choice([s.value for s in Scope]),
    default=Scope.DREAMING_INGESTION.value,
    show_default=True,
    help="Strip the tags declared for this scope.",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print one JSON document: the stripped text and how much was removed.",
)
@pass_ctx
def strip(ctx: Context, scope: str, as_json: bool) -> None:
    """Filter stdin to stdout, removing injected blocks declared for SCOPE."""
    data = sys.stdin.buffer.read().decode("utf-8", errors="replace")
    stripped = ctx.app.registry.strip(data, Scope(scope))
    if as_json:
        emit_json(
            {
                "scope": scope,
                "text": stripped,
                "changed": stripped != data,
                "chars_removed": len(data) - len(stripped),
            }
        )
    else:
        sys.stdout.write(stripped)
