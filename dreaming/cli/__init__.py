"""Command-line interface: parse arguments, call the library, print."""

from dreaming.cli._main import main

__all__ = ["main"]
