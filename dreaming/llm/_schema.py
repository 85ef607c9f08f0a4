"""JSON schemas for structured output: OpenAI's strict form, and the prompt-side fallback;
what a request carries in either mode."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from dreaming.llm._profile import StructuredMode

if TYPE_CHECKING:  # the openai package loads only with the client (see dreaming.llm)
    from openai.types.chat.completion_create_params import ResponseFormat

# Strict mode refuses defaults; the model fills every field anyway.
_DROPPED_KEYWORDS = ("default",)


def strict_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """Return a copy of `schema` in the form OpenAI's `strict: true` requires.

    Every object gets `additionalProperties: false` and lists all its properties as required
    (optional fields stay optional through their nullable type), defaults are dropped, and a
    `$ref` with sibling keywords is inlined. Idempotent; the input is not modified.
    """
    root = copy.deepcopy(dict(schema))
    return _strict(root, root)


def _strict(node: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref")
    if isinstance(ref, str) and len(node) > 1:
        resolved = _resolve(root, ref)
        merged = {**copy.deepcopy(resolved), **{k: v for k, v in node.items() if k != "$ref"}}
        return _strict(merged, root)
    for keyword in _DROPPED_KEYWORDS:
        node.pop(keyword, None)
    for key in ("$defs", "definitions"):
        defs = node.get(key)
        if isinstance(defs, dict):
            node[key] = {name: _strict(sub, root) for name, sub in defs.items()}
    properties = node.get("properties")
    if node.get("type") == "object" or isinstance(properties, dict):
        node["additionalProperties"] = False
        if isinstance(properties, dict):
            node["properties"] = {name: _strict(sub, root) for name, sub in properties.items()}
            node["required"] = list(properties)
    items = node.get("items")
    if isinstance(items, dict):
        node["items"] = _strict(items, root)
    for key in ("anyOf", "allOf", "oneOf"):
        variants = node.get(key)
        if isinstance(variants, list):
            node[key] = [_strict(v, root) if isinstance(v, dict) else v for v in variants]
    return node


def _resolve(root: dict[str, Any], ref: str) -> dict[str, Any]:
    if not ref.startswith("#/"):
        raise ValueError(f"only local $ref values are supported, got {ref!r}")
    node: Any = root
    for part in ref[2:].split("/"):
        node = node[part]
    if not isinstance(node, dict):
        raise ValueError(f"$ref {ref!r} does not point at a schema object")
    return node


def schema_instructions(schema: Mapping[str, Any]) -> str:
    """The system-prompt addendum used when the server cannot enforce a JSON schema."""
    return (
        "Reply with one JSON object and nothing else (no prose, no code fences). "
        "It must validate against this JSON Schema:\n"
        + json.dumps(schema, indent=2, sort_keys=False)
    )


def system_prompt(system: str, schema: Mapping[str, Any], mode: StructuredMode) -> str:
    """The system prompt of a request: in json_object mode it carries the schema itself."""
    if mode == "json_object":
        return f"{system}\n\n{schema_instructions(schema)}".lstrip()
    return system


def response_format(
    schema_name: str, schema: dict[str, Any], mode: StructuredMode
) -> ResponseFormat:
    """The `response_format` of a request in `mode`."""
    if mode == "json_object":
        return {"type": "json_object"}
    return {
        "type": "json_schema",
        "json_schema": {"name": schema_name, "schema": schema, "strict": True},
    }
