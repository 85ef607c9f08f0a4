"""Command-line interface: parse arguments, call the library, print."""

from dreaming.cli._main import cli, main, register_commands

__all__ = ["cli", "main", "register_commands"]
