"""The vocabulary of the tag registry: patterns, scopes, producers and one tag declaration.

A declaration is a value object. It validates itself on construction (so a runtime
registration is checked as strictly as a JSON one) and knows how to read and write the
camelCase JSON shape that plugin manifests, `DREAMING_STRIP_TAGS` and config files use.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from dreaming.errors import ConfigError


class Pattern(StrEnum):
    """How an injected block is recognised in text."""

    XML = "xml"  # <tag attr=..>...</tag>
    SENTINEL_LINE = "sentinel-line"  # a header line, then a fenced block or a paragraph
    DELIMITED = "delimited"  # <<<BEGIN ...>>> ... <<<END ...>>> marker pairs


class Scope(StrEnum):
    """Where stripping happens; a declaration applies only in the scopes it names."""

    SUMMARIZATION = "summarization"
    PERSISTENCE = "persistence"
    DISPLAY = "display"
    DREAMING_INGESTION = "dreaming-ingestion"
    RETAIN_EXTRACTION = "retain-extraction"


class Producer(StrEnum):
    """The kinds of source a declaration can come from, highest priority first.

    A declaration's ``producer`` string starts with one of these (``plugin:<id>``,
    ``runtime:<name>``); the environment source is spelled ``env:DREAMING_STRIP_TAGS``.
    """

    ENVIRONMENT = "environment"
    CONFIG = "config"
    PLUGIN = "plugin"
    RUNTIME = "runtime"
    BUILTIN = "builtin"


ALL_SCOPES: frozenset[Scope] = frozenset(Scope)

# The JSON keys a declaration may carry, and the dataclass field each one fills.
_JSON_KEYS: dict[str, str] = {
    "tag": "tag",
    "pattern": "pattern",
    "description": "description",
    "location": "location",
    "stripScopes": "scopes",
    "sentinelPrefix": "sentinel_prefix",
    "endPattern": "end_pattern",
    "begin": "begin",
    "end": "end",
    "variants": "variants",
}

# XML-ish names: what a tokenizer would accept after "<". Anything else could never match
# and is almost certainly a declaration that meant another pattern.
_XML_NAME = re.compile(r"[^\W\d][\w.:-]*")


def fold_tag(tag: str) -> str:
    """The identity of a tag for duplicate detection: case-insensitive, `-` and `_` alike."""
    return tag.casefold().replace("-", "_")


@dataclass(frozen=True)
class TagDeclaration:
    """One producer's statement "I inject blocks that look like this".

    ``scopes`` empty means every scope (normalised to the full set on construction).
    ``producer`` is free text led by a :class:`Producer` kind, e.g. ``plugin:hindsight``;
    after a duplicate merge it lists every producer, highest priority first, joined by
    ``", "``.

    Pattern-specific fields:

    - xml: ``variants`` also matches the ``-``/``_`` spelling variants of ``tag``.
    - sentinel-line: ``sentinel_prefix`` (defaults to ``tag``) and an optional
      ``end_pattern`` regex that ends the block at the first following line it matches.
    - delimited: ``begin`` and ``end`` marker prefixes; markers may carry attributes up
      to ``>>>`` (``<<<EXTERNAL_UNTRUSTED_CONTENT id="ab12">>>``).
    """

    tag: str
    pattern: Pattern
    description: str = ""
    location: str = ""
    scopes: frozenset[Scope] = ALL_SCOPES
    producer: str = Producer.RUNTIME.value
    sentinel_prefix: str | None = None
    end_pattern: str | None = None
    begin: str | None = None
    end: str | None = None
    variants: bool = False

    def __post_init__(self) -> None:
        # Frozen: normalisation has to go through object.__setattr__.
        try:
            pattern = Pattern(self.pattern)
        except ValueError:
            problem = f"must be one of {_choices(Pattern)}, got {self.pattern!r}"
            raise self._error("pattern", problem) from None
        object.__setattr__(self, "pattern", pattern)
        object.__setattr__(self, "scopes", _coerce_scopes(self.scopes, self._error))
        if not isinstance(self.tag, str) or not self.tag.strip():
            raise self._error("tag", "must be a non-empty string")
        object.__setattr__(self, "tag", self.tag.strip())
        if pattern is Pattern.XML:
            self._check_xml()
        elif pattern is Pattern.SENTINEL_LINE:
            self._check_sentinel()
        else:
            self._check_delimited()

    # -- validation ------------------------------------------------------------------

    def _error(self, key: str, problem: str) -> ConfigError:
        tag = self.tag if isinstance(self.tag, str) else "?"
        return ConfigError(f"{self.producer}: injected-context tag {tag!r}: key {key!r} {problem}")

    def _reject(self, *keys: str) -> None:
        for attr in keys:
            if getattr(self, attr) is not None:
                raise self._error(
                    _json_key(attr), f"does not apply to pattern {self.pattern.value!r}"
                )

    def _check_xml(self) -> None:
        if not _XML_NAME.fullmatch(self.tag):
            raise self._error("tag", "is not a valid XML tag name for pattern 'xml'")
        self._reject("sentinel_prefix", "end_pattern", "begin", "end")

    def _check_sentinel(self) -> None:
        self._reject("begin", "end")
        # Lines are compared after stripping their leading whitespace, so the prefix must
        # be stripped too or it could never match.
        prefix = (self.sentinel_prefix if self.sentinel_prefix is not None else self.tag).strip()
        if not prefix or "\n" in prefix or "\r" in prefix:
            raise self._error("sentinelPrefix", "must be non-empty text on a single line")
        object.__setattr__(self, "sentinel_prefix", prefix)
        if self.end_pattern is not None:
            try:
                re.compile(self.end_pattern)
            except re.error as err:
                problem = f"is not a valid regular expression: {err}"
                raise self._error("endPattern", problem) from None
        if self.variants:
            raise self._error("variants", "applies only to pattern 'xml'")

    def _check_delimited(self) -> None:
        if self.end_pattern is not None:
            raise self._error("endPattern", "does not apply to 'delimited'; use 'end'")
        if self.variants:
            raise self._error("variants", "applies only to pattern 'xml'")
        for attr in ("begin", "end"):
            value = getattr(self, attr)
            if not isinstance(value, str) or not value.strip() or "\n" in value:
                raise self._error(attr, "is required for 'delimited': a one-line marker")
            object.__setattr__(self, attr, value.strip())

    # -- identity and JSON -----------------------------------------------------------

    @property
    def key(self) -> str:
        """Duplicate-detection identity (see :func:`fold_tag`)."""
        return fold_tag(self.tag)

    @property
    def producers(self) -> tuple[str, ...]:
        """Every producer that declared this tag, highest priority first."""
        return tuple(p.strip() for p in self.producer.split(", "))

    @classmethod
    def from_json(cls, obj: Mapping[str, Any], producer: str) -> TagDeclaration:
        """Read one declaration in the camelCase shape of DESIGN.md.

        Unknown keys, wrong types, a bad pattern or scope raise ConfigError naming the
        producer and the key, so an operator can find the offending file.
        """
        if not isinstance(obj, Mapping):
            raise ConfigError(
                f"{producer}: an injected-context tag declaration must be a JSON object, "
                f"got {type(obj).__name__}"
            )
        tag = obj.get("tag")
        label = tag if isinstance(tag, str) else "?"
        for key in obj:
            if key not in _JSON_KEYS:
                raise ConfigError(
                    f"{producer}: injected-context tag {label!r}: unknown key {key!r} "
                    f"(allowed: {', '.join(_JSON_KEYS)})"
                )
        if "tag" not in obj or "pattern" not in obj:
            missing = "tag" if "tag" not in obj else "pattern"
            raise ConfigError(
                f"{producer}: injected-context tag {label!r}: key {missing!r} is required"
            )
        kwargs: dict[str, Any] = {"producer": producer}
        for key, value in obj.items():
            attr = _JSON_KEYS[key]
            if attr == "scopes":
                if value is None:
                    value = ()
                elif not isinstance(value, list | tuple) or not all(
                    isinstance(v, str) for v in value
                ):
                    raise ConfigError(
                        f"{producer}: injected-context tag {label!r}: key 'stripScopes' must "
                        f"be a list of scope names ({_choices(Scope)})"
                    )
            elif attr == "variants":
                if not isinstance(value, bool):
                    raise ConfigError(
                        f"{producer}: injected-context tag {label!r}: key 'variants' must be "
                        "true or false"
                    )
            elif value is not None and not isinstance(value, str):
                raise ConfigError(
                    f"{producer}: injected-context tag {label!r}: key {key!r} must be a string"
                )
            kwargs[attr] = value
        if kwargs.get("description") is None:
            kwargs["description"] = ""
        if kwargs.get("location") is None:
            kwargs["location"] = ""
        return cls(**kwargs)

    def to_json(self) -> dict[str, Any]:
        """The declaration in its JSON shape; ``from_json`` reads it back unchanged."""
        out: dict[str, Any] = {"tag": self.tag, "pattern": self.pattern.value}
        if self.description:
            out["description"] = self.description
        if self.location:
            out["location"] = self.location
        out["stripScopes"] = scope_names(self.scopes)
        for attr in ("sentinel_prefix", "end_pattern", "begin", "end"):
            value = getattr(self, attr)
            if value is not None:
                out[_json_key(attr)] = value
        if self.variants:
            out["variants"] = True
        return out


def scope_names(scopes: Iterable[Scope]) -> list[str]:
    """Scopes in declaration order of the enum (stable output for banners and JSON)."""
    chosen = set(scopes)
    return [s.value for s in Scope if s in chosen]


def _coerce_scopes(value: Any, error: Any) -> frozenset[Scope]:
    if isinstance(value, str):
        # A bare string would otherwise be iterated character by character.
        value = (value,)
    try:
        scopes = frozenset(Scope(s) for s in value)
    except (ValueError, TypeError):
        raise error(
            "stripScopes", f"must name scopes from {_choices(Scope)}, got {value!r}"
        ) from None
    # Omitted or empty means every scope: a producer that says nothing is stripped
    # everywhere, which is the fail-closed reading.
    return scopes or ALL_SCOPES


def _json_key(attr: str) -> str:
    return next(k for k, a in _JSON_KEYS.items() if a == attr)


def _choices(enum: type[StrEnum]) -> str:
    return ", ".join(m.value for m in enum)


__all__ = [
    "ALL_SCOPES",
    "Pattern",
    "Producer",
    "Scope",
    "TagDeclaration",
    "fold_tag",
    "scope_names",
]
