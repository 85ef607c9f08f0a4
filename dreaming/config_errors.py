"""Settings errors as an operator reads them: one line per problem, naming the file and the
key, and for an unknown key the closest one its table knows. Shared by `dreaming.toml` and
job files."""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from pathlib import Path
from types import UnionType
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError


def format_error(path: Path | str, err: ValidationError, model: type[BaseModel]) -> str:
    """One line per problem, naming the file and the key; an unknown key suggests the
    closest one its table knows. Shared by settings and job files."""
    lines = []
    for e in err.errors():
        key = ".".join(str(p) for p in e["loc"]) or "(top level)"
        if e["type"] == "extra_forbidden":
            hint = _closest_key(str(e["loc"][-1]), _known_keys(model, e["loc"][:-1]))
            suffix = f" (did you mean '{hint}'?)" if hint else ""
            lines.append(f"{path}: unknown key '{key}'{suffix}")
        else:
            lines.append(f"{path}: key '{key}': {_plain(e['msg'])}")
    return "; ".join(lines)


# Pydantic prefixes the message of an exception raised in a validator with its kind; the
# operator needs the message only.
_PYDANTIC_PREFIXES = ("Value error, ", "Assertion failed, ")


def _plain(msg: str) -> str:
    for prefix in _PYDANTIC_PREFIXES:
        msg = msg.removeprefix(prefix)
    return msg


def _closest_key(key: str, known: Sequence[str]) -> str | None:
    """The known key nearest to `key`, ignoring case, `_` and `-` (`batchsize`, `batchSize`
    -> `batch_size`); of a field's two spellings (`chat_types`, `chatTypes`), the one in the
    style the operator wrote."""

    def bare(name: str) -> str:
        return name.lower().replace("_", "").replace("-", "")

    # The spelling in the operator's style comes last, so it is the one kept.
    in_style = sorted(known, key=lambda name: ("_" in name) == ("_" in key))
    by_bare = {bare(name): name for name in in_style}
    match = difflib.get_close_matches(bare(key), list(by_bare), n=1)
    return by_bare[match[0]] if match else None


def _known_keys(model: type[BaseModel], loc: Sequence[str | int]) -> list[str]:
    """Field names and aliases of the table at `loc` under `model`; [] where `loc` does not
    lead to a model (a plain dict, a value)."""
    node: Any = model
    for part in loc:
        node = _child(node, part)
        if node is None:
            return []
    node = _without_none(node)
    if not (isinstance(node, type) and issubclass(node, BaseModel)):
        return []
    keys: list[str] = []
    for name, field in node.model_fields.items():
        keys.append(name)
        if field.alias:
            keys.append(field.alias)
    return keys


def _child(node: Any, part: str | int) -> Any:
    """The type one step of a validation error's location leads to, or None."""
    node = _without_none(node)
    if isinstance(node, type) and issubclass(node, BaseModel):
        for name, field in node.model_fields.items():
            if part in (name, field.alias):
                return field.annotation
        return None
    origin, args = get_origin(node), get_args(node)
    if origin in (tuple, list) and isinstance(part, int) and args:
        return args[0]
    if origin is dict and isinstance(part, str) and len(args) == 2:
        return args[1]
    if origin in (Union, UnionType):
        # Pydantic names the member of a union it tried ('Trigger', 'tuple[str, ...]').
        for member in args:
            if getattr(member, "__name__", None) == part:
                return member
    return None


def _without_none(node: Any) -> Any:
    if get_origin(node) in (Union, UnionType):
        members = [a for a in get_args(node) if a is not type(None)]
        if len(members) == 1:
            return members[0]
    return node
