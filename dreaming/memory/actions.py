"""The four things deep may decide about a candidate. Its own module, apart from the model's
reply schema (`decisions`, which needs pydantic and jinja2), because the lineage code every
phase imports records these names too, and light should not pay for deep's templates."""

from __future__ import annotations

from enum import StrEnum


class Action(StrEnum):
    ADD = "add"
    MERGE = "merge"
    SUPERSEDE = "supersede"
    SKIP = "skip"
