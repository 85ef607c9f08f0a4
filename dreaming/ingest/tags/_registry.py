"""The registry: gather declarations from every source, merge them, strip by scope.

Sources, highest priority first:

1. environment ``DREAMING_STRIP_TAGS``: a JSON list of declarations, or a path to a JSON
   file holding one;
2. explicit config (``config_tags``, i.e. ``[tags] declarations`` in dreaming.toml);
3. plugin manifests: ``contracts.injectedContextTags`` of every ``openclaw.plugin.json``
   found under the configured plugin folders;
4. runtime registration (declarations handed in by code);
5. the built-in defaults.

Sources 1 and 2 are explicit operator lists: the highest one present *replaces* the whole
merged list, and the registry says so. Otherwise 3-5 are merged; duplicates of one tag
(case-insensitive, ``-``/``_`` alike) warn and merge.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from dreaming.errors import ConfigError

from ._builtin import BUILTIN_TAGS
from ._matcher import Stripper
from ._model import (
    ALL_SCOPES,
    Pattern,
    Producer,
    Scope,
    TagDeclaration,
    scope_names,
)

ENV_VAR = "DREAMING_STRIP_TAGS"
ENV_PRODUCER = f"env:{ENV_VAR}"
CONFIG_PRODUCER = Producer.CONFIG.value
MANIFEST_NAME = "openclaw.plugin.json"


class TagRegistry:
    """The active declarations, with one compiled stripper per scope.

    Immutable once built. ``warnings`` lists what an operator should know (duplicates
    merged, a list replaced, a manifest skipped); ``replaced_by`` is ``"environment"`` or
    ``"config"`` when an explicit list replaced the merged one.
    """

    def __init__(
        self,
        declarations: Iterable[TagDeclaration],
        *,
        warnings: Iterable[str] = (),
        replaced_by: str | None = None,
    ) -> None:
        self._declarations = tuple(declarations)
        self._warnings = tuple(warnings)
        self._replaced_by = replaced_by
        # Scopes that select the same declarations share one compiled stripper.
        cache: dict[tuple[TagDeclaration, ...], Stripper] = {}
        self._strippers: dict[Scope, Stripper] = {}
        for scope in Scope:
            chosen = tuple(d for d in self._declarations if scope in d.scopes)
            if chosen not in cache:
                cache[chosen] = Stripper(chosen)
            self._strippers[scope] = cache[chosen]

    @property
    def declarations(self) -> tuple[TagDeclaration, ...]:
        return self._declarations

    @property
    def warnings(self) -> tuple[str, ...]:
        return self._warnings

    @property
    def replaced_by(self) -> str | None:
        return self._replaced_by

    def strip(self, text: str, scope: Scope) -> str:
        """Remove every block declared for ``scope`` from ``text``; the user's words stay."""
        try:
            # Scope is a StrEnum: its members and their string values hash alike, so a
            # plain string works here too without a conversion on every message.
            stripper = self._strippers[scope]
        except KeyError:
            raise ValueError(f"unknown scope {scope!r}; expected one of {list(Scope)}") from None
        return stripper.strip(text)

    def describe(self) -> list[dict[str, Any]]:
        """The active declarations as JSON-able data (declaration shape plus producers)."""
        out = []
        for d in self._declarations:
            entry = d.to_json()
            entry["producer"] = d.producer
            entry["producers"] = list(d.producers)
            out.append(entry)
        return out

    def banner(self) -> str:
        """Human diagnostics: one line per active tag, then the warnings."""
        if self._replaced_by == Producer.ENVIRONMENT:
            source = f"explicit list from {ENV_VAR}; plugin, runtime and built-in tags ignored"
        elif self._replaced_by == Producer.CONFIG:
            source = "explicit list from config; plugin, runtime and built-in tags ignored"
        else:
            source = "merged: plugin manifests, runtime, built-in defaults"
        lines = [f"injected-context tags: {len(self._declarations)} active ({source})"]
        width = max((len(d.tag) for d in self._declarations), default=0)
        for d in self._declarations:
            scopes = (
                "all scopes"
                if d.scopes == ALL_SCOPES
                else "scopes=" + ",".join(scope_names(d.scopes))
            )
            lines.append(
                f"  {d.tag:<{width}}  {d.pattern.value:<13}  {_marker(d)}  "
                f"producer={d.producer}  {scopes}"
            )
        lines += [f"warning: {w}" for w in self._warnings]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (
            f"TagRegistry({len(self._declarations)} declarations, "
            f"replaced_by={self._replaced_by!r}, {len(self._warnings)} warnings)"
        )


def build_registry(
    *,
    env: Mapping[str, str] | None = None,
    config_tags: Sequence[Mapping[str, Any]] | None = None,
    plugin_dirs: Sequence[Path] = (),
    runtime: Sequence[TagDeclaration] = (),
) -> TagRegistry:
    """Build the registry from every source (see the module docstring for priority).

    ``env`` defaults to ``os.environ``; pass a mapping to keep tests hermetic.
    ``config_tags=None`` means "not configured"; an empty list is an explicit, empty
    replacement. Invalid env or config declarations raise ConfigError (the operator
    asked for them explicitly); an unreadable plugin manifest is only a warning.
    """
    environ = os.environ if env is None else env
    warnings: list[str] = []

    raw_env = (environ.get(ENV_VAR) or "").strip()
    if raw_env:
        declared = _parse_list(_load_env(raw_env), ENV_PRODUCER)
        ignored = ["plugin manifests", "runtime registrations", "built-in defaults"]
        if config_tags is not None:
            ignored.insert(0, "config declarations")
        warnings.append(
            f"{ENV_VAR} replaces the whole tag list ({len(declared)} declarations); "
            f"ignored: {', '.join(ignored)}"
        )
        return TagRegistry(
            _merge(declared, warnings), warnings=warnings, replaced_by=Producer.ENVIRONMENT.value
        )

    if config_tags is not None:
        declared = _parse_list(config_tags, CONFIG_PRODUCER)
        warnings.append(
            f"config replaces the whole tag list ({len(declared)} declarations); "
            "ignored: plugin manifests, runtime registrations, built-in defaults"
        )
        return TagRegistry(
            _merge(declared, warnings), warnings=warnings, replaced_by=Producer.CONFIG.value
        )

    ordered: list[TagDeclaration] = []
    for folder in plugin_dirs:
        ordered += _read_plugin_dir(Path(folder), warnings)
    ordered += runtime
    ordered += BUILTIN_TAGS
    return TagRegistry(_merge(ordered, warnings), warnings=warnings)


# -- sources ------------------------------------------------------------------------------


def _load_env(raw: str) -> Any:
    if raw.startswith(("[", "{")):
        try:
            return json.loads(raw)
        except json.JSONDecodeError as err:
            raise ConfigError(f"{ENV_PRODUCER}: not valid JSON: {err}") from None
    path = Path(raw).expanduser()
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(
            f"{ENV_PRODUCER}: {raw!r} is neither a JSON list nor a readable file "
            f"({err.strerror or err}); set it to a JSON list of declarations or a path to one"
        ) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise ConfigError(f"{ENV_PRODUCER} file {path}: not valid JSON: {err}") from None


def _parse_list(value: Any, producer: str) -> list[TagDeclaration]:
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise ConfigError(
            f"{producer}: injected-context tags must be a JSON list of declarations, "
            f"got {type(value).__name__}"
        )
    return [TagDeclaration.from_json(item, producer) for item in value]


def _read_plugin_dir(folder: Path, warnings: list[str]) -> list[TagDeclaration]:
    if not folder.is_dir():
        warnings.append(f"plugin folder {folder} does not exist or is not a folder; skipped")
        return []
    try:
        manifests = sorted(folder.rglob(MANIFEST_NAME))
    except OSError as err:
        warnings.append(f"plugin folder {folder} could not be searched ({err}); skipped")
        return []
    found: list[TagDeclaration] = []
    for manifest in manifests:
        found += _read_manifest(manifest, warnings)
    return found


def _read_manifest(path: Path, warnings: list[str]) -> list[TagDeclaration]:
    """A plugin's declarations; a broken manifest costs that plugin's tags, not the run."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        warnings.append(f"plugin manifest {path} could not be read ({err}); its tags are skipped")
        return []
    if not isinstance(data, dict):
        warnings.append(f"plugin manifest {path} is not a JSON object; its tags are skipped")
        return []
    plugin_id = data.get("id")
    name = plugin_id if isinstance(plugin_id, str) and plugin_id.strip() else path.parent.name
    producer = f"{Producer.PLUGIN.value}:{name}"
    contracts = data.get("contracts")
    if contracts is None:
        return []
    declared = contracts.get("injectedContextTags") if isinstance(contracts, dict) else None
    if declared is None:
        if not isinstance(contracts, dict):
            warnings.append(f"plugin manifest {path}: 'contracts' is not an object; skipped")
        return []
    if not isinstance(declared, list):
        warnings.append(
            f"plugin manifest {path}: contracts.injectedContextTags is not a list; skipped"
        )
        return []
    found = []
    for item in declared:
        try:
            found.append(TagDeclaration.from_json(item, producer))
        except ConfigError as err:
            warnings.append(f"plugin manifest {path}: {err}; that declaration is skipped")
    return found


# -- merging ------------------------------------------------------------------------------


def _merge(ordered: Iterable[TagDeclaration], warnings: list[str]) -> list[TagDeclaration]:
    """Fold duplicates (same :attr:`TagDeclaration.key`); ``ordered`` is highest first."""
    merged: dict[str, TagDeclaration] = {}
    for decl in ordered:
        kept = merged.get(decl.key)
        if kept is None:
            merged[decl.key] = decl
            continue
        merged[decl.key] = _combine(kept, decl)
        conflict = ""
        if kept.pattern is not decl.pattern:
            conflict = f"; pattern {decl.pattern.value!r} from {decl.producer} is overridden"
        warnings.append(
            f"tag {decl.tag!r} declared more than once ({kept.producer} and {decl.producer}); "
            f"merged: scopes unioned, {kept.producers[0]} wins the other fields{conflict}"
        )
    return list(merged.values())


def _combine(high: TagDeclaration, low: TagDeclaration) -> TagDeclaration:
    producers = list(high.producers)
    producers += [p for p in low.producers if p not in producers]
    variants = high.variants
    if (
        high.pattern is Pattern.XML
        and low.pattern is Pattern.XML
        and high.tag.casefold() != low.tag.casefold()
    ):
        # Two spellings were declared (relevant_memories / relevant-memories): both must
        # keep matching after the merge.
        variants = True
    return replace(
        high,
        scopes=high.scopes | low.scopes,
        producer=", ".join(producers),
        variants=variants,
        description=high.description or low.description,
        location=high.location or low.location,
    )


def _marker(d: TagDeclaration) -> str:
    if d.pattern is Pattern.XML:
        tag = f"<{d.tag}>"
        return tag + " (+ -/_ variants)" if d.variants else tag
    if d.pattern is Pattern.SENTINEL_LINE:
        end = f" ... /{d.end_pattern}/" if d.end_pattern else ""
        return f"line {d.sentinel_prefix!r}{end}"
    return f"{d.begin} ... {d.end}"
