from __future__ import annotations

import click


@click.group()
def cli() -> None:
    """dreaming: consolidate agent transcripts into long-term memory."""


def main() -> None:
    cli()
