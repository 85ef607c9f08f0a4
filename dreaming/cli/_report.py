"""`dreaming report`: one self-contained HTML page of what memory learned and why."""

from __future__ import annotations

from datetime import date, datetime
from pathlib import Path

import click

from dreaming.cli._main import Context, cli, pass_ctx
from dreaming.cli._output import echo, note, printable
from dreaming.errors import StateError


@cli.command()
@click.option("--agent", "agents", multiple=True, help="Only this agent (repeatable).")
@click.option(
    "--since",
    type=click.DateTime(formats=["%Y-%m-%d"]),
    help="Show the changes of every run since DATE (UTC, YYYY-MM-DD) instead of tonight's.",
)
@click.option(
    "--out",
    required=True,
    metavar="FILE.html",
    help="Where to write the page ('-' for stdout).",
)
@pass_ctx
def report(ctx: Context, agents: tuple[str, ...], since: datetime | None, out: str) -> None:
    """Write one HTML page per state folder: per agent, tonight's changes to memory (or every
    change since --since) with diffs and reasons, every live entry's lineage down to its
    evidence lines and LLM calls, what was kept out and why, and LLM spend against the caps.

    The page is self-contained (inline CSS and SVG, no script, nothing fetched): open it
    from disk. "Tonight" is the agent's last run with a deep phase that changed memory (a
    quiet night after it does not hide it); spend is shown against every daily cap that
    applies, the settings' and each job's, as `status` shows them."""
    # The report (Jinja2) and the purge records (SQLAlchemy) load when a page is written,
    # not at every `dreaming` start.
    from dreaming.forget import record_report
    from dreaming.report import build_report, render
    from dreaming.syntax import atomic_write

    day: date | None = since.date() if since is not None else None
    # Control characters of stored text shown as escapes, in the file as on stdout: a page
    # piped to a terminal (or `cat`) must not drive it.
    built = build_report(ctx.app, agents, day)
    html = printable(render(built))
    if out == "-":
        echo(html, nl=False)
        return
    path = Path(out).expanduser()
    if path.is_symlink():
        # A link could point anywhere (another user's file, a workspace's MEMORY.md): a
        # report replaces only a file of its own.
        raise StateError(f"{path} is a symbolic link: not followed; give the file's own path")
    # Recorded before it is written: `forget` removes the page if it shows what it purges.
    for section in built.agents:
        if ctx.app.has_state(section.agent):
            with ctx.app.engine(section.agent, create=False).begin() as conn:
                record_report(conn, section.agent, path)
    try:
        atomic_write(path, html)  # readers see the old page or the new one, never half
    except OSError as err:
        raise StateError(f"cannot write the report to {path}: {err.strerror or err}") from err
    note(f"report written: {path}")
