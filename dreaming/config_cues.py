"""The settings that extend the cue lists: `[salience]` (what a claim tells, appended to
`dreaming/ingest/lexicon.toml`) and `[slots]` (the relations a later statement replaces,
appended to `dreaming/ingest/slots.toml`). Every value is a regular expression, checked here
so a typo is an error naming the key, not a night that crashes."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict, model_validator


def _check_patterns(lists: Mapping[str, Sequence[str]]) -> None:
    """Each value of each list a regular expression, or an error naming the key."""
    for name, values in lists.items():
        for value in values:
            try:
                re.compile(value)
            except re.error as err:
                raise ValueError(f"{name}: {value!r} is not a regular expression: {err}") from None


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


class SalienceSettings(_Strict):
    """Extra cues for salience, appended to the built-in lists in `dreaming/ingest/lexicon.toml`.
    Each value is a list of regular expressions (matched case-insensitively; English ones
    within word boundaries, `*_cjk` ones as they are, for languages without spaces)."""

    instruction: tuple[str, ...] = ()
    instruction_cjk: tuple[str, ...] = ()
    remember: tuple[str, ...] = ()
    first_person: tuple[str, ...] = ()
    first_person_cjk: tuple[str, ...] = ()
    disclosure: tuple[str, ...] = ()
    disclosure_cjk: tuple[str, ...] = ()
    fact: tuple[str, ...] = ()
    fact_cjk: tuple[str, ...] = ()
    event: tuple[str, ...] = ()
    constraint: tuple[str, ...] = ()
    constraint_cjk: tuple[str, ...] = ()
    event_cjk: tuple[str, ...] = ()
    preference: tuple[str, ...] = ()
    preference_cjk: tuple[str, ...] = ()
    preference_stated: tuple[str, ...] = ()
    work: tuple[str, ...] = ()
    work_cjk: tuple[str, ...] = ()
    time: tuple[str, ...] = ()
    time_cjk: tuple[str, ...] = ()
    smalltalk_words: tuple[str, ...] = ()
    smalltalk_cjk: tuple[str, ...] = ()
    reaction: tuple[str, ...] = ()
    narration: tuple[str, ...] = ()
    narration_cjk: tuple[str, ...] = ()
    banner: tuple[str, ...] = ()
    request: tuple[str, ...] = ()
    technical: tuple[str, ...] = ()
    fact_named: tuple[str, ...] = ()
    introduction: tuple[str, ...] = ()
    request_cjk: tuple[str, ...] = ()
    fragment_starts: tuple[str, ...] = ()
    fragment_lines: tuple[str, ...] = ()
    directive_clause: tuple[str, ...] = ()
    directive_target: tuple[str, ...] = ()
    directive_object: tuple[str, ...] = ()
    thin_words: tuple[str, ...] = ()
    appraisal: tuple[str, ...] = ()
    anticipation: tuple[str, ...] = ()
    offer: tuple[str, ...] = ()
    pronoun_object: tuple[str, ...] = ()
    demonstrative_object: tuple[str, ...] = ()
    pronoun_subject: tuple[str, ...] = ()
    preference_of_view: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _patterns_compile(self) -> SalienceSettings:
        _check_patterns(dict(self))
        return self

    def extra(self) -> dict[str, tuple[str, ...]]:
        return {name: values for name, values in self if values}


class SlotSettings(_Strict):
    """Extra relations for supersession, appended to `dreaming/ingest/slots.toml`:
    `relations.<name>` lists add phrasings (a new name adds a relation; `<name>_cjk` for
    languages without spaces), `lists` extends `corrections_old`, `corrections_similar`,
    `not_values` and `not_self`. Each pattern a regular expression."""

    relations: dict[str, tuple[str, ...]] = {}
    lists: dict[str, tuple[str, ...]] = {}

    @model_validator(mode="after")
    def _patterns_compile(self) -> SlotSettings:
        _check_patterns(self.relations)
        _check_patterns(self.lists)
        return self
