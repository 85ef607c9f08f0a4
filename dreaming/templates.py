"""The Jinja2 templates under ``prompts/``: where they are found and how prompt text is
rendered from them.

Prompts are text for a model, so their environment never autoescapes; anything that renders
HTML from the same directory (the night report) builds its own environment on this loader,
with autoescaping on.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import jinja2


def template_dirs() -> list[Path]:
    """Where templates are looked for, in order: ``prompts/`` of the source tree, else the
    wheel's packaged copy under ``dreaming/_data/prompts``."""
    here = Path(__file__).resolve()
    return [here.parents[1] / "prompts", here.parent / "_data" / "prompts"]


def template_env() -> jinja2.Environment:
    """A fresh environment for the prompt templates (no autoescaping, strict undefined,
    trailing newlines kept)."""
    # Imported here: modules that only may render a prompt (REM's diary) import this one,
    # and a night that calls no model should not load Jinja2 (~20 ms of start-up).
    import jinja2

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader([str(p) for p in template_dirs()]),
        autoescape=False,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )


@functools.cache
def default_env() -> jinja2.Environment:
    """One shared :func:`template_env`, for callers that do not bring their own."""
    return template_env()


__all__ = ["default_env", "template_dirs", "template_env"]
