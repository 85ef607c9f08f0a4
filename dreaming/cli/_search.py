"""`dreaming entries search QUERY`: the memory's entries that match a query, best first."""

from __future__ import annotations

import click

from dreaming.cli._entries import entries
from dreaming.cli._main import Context, pass_ctx
from dreaming.cli._output import echo, emit_json

# dreaming.search.DEFAULT_LIMIT, said again so that registering the command (every start,
# `--help` included) does not import the search index and SQLAlchemy; a test holds the two
# equal.
DEFAULT_LIMIT = 10


@entries.command("search")
@click.argument("query", nargs=-1, required=True)
@click.option("--agent", "agents", multiple=True, help="Only this agent (repeatable).")
@click.option(
    "--limit",
    "-n",
    type=click.IntRange(min=1),
    default=DEFAULT_LIMIT,
    show_default=True,
    help="At most this many hits.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document and nothing else.")
@pass_ctx
def search_cmd(
    ctx: Context, query: tuple[str, ...], agents: tuple[str, ...], limit: int, as_json: bool
) -> None:
    """Search the live entries for QUERY (its words, ranked by the full-text index), and
    show each hit's key, agent, text and how many sessions it came from.

    The words may be given quoted or not; no character of them is query syntax. A query
    that starts with `-` goes after `--`: `dreaming entries search -- -rf`.
    """
    from dreaming.search import search

    app = ctx.app
    names = app.agents_with_state(list(agents) or None)
    result = search([(a, app.engine(a, create=False)) for a in names], " ".join(query), limit)
    if as_json:
        emit_json(result.to_dict())
        return
    if not names:
        echo("no entries yet: run `dreaming run` (light, then deep) first")
    elif not result.hits:
        echo(f"no entries match {result.query!r}")
    for rank, hit in enumerate(result.hits, 1):
        origins = f"{hit.origins} origin{'' if hit.origins == 1 else 's'}"
        echo(f"{rank}. {hit.agent} {hit.key}  ({origins})\n    {hit.text}")
