"""The tool's parameter schema: generated once from the argument model, minus pydantic's noise.

The serialized form is deterministic (a fixed key order, fixed separators), so every
process offers the model the same bytes and its prefix cache survives restarts. The order
is KEY_ORDER, not sorted: what a node is (``type``) and its rules come before what it holds
(``properties``, ``items``), which reads naturally and costs the DeepSeek V4 tokenizer 5-6
fewer tokens per definition than sorted keys (tests/core/test_tokens.py counts them).
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from ._validation import args_adapter

__all__ = [
    "parameters",
]


def parameters() -> dict[str, Any]:
    """A fresh copy of the JSON Schema of ``todo_write``'s arguments."""
    loaded: dict[str, Any] = json.loads(parameters_json())
    return loaded


@cache
def parameters_json() -> str:
    """The schema's bytes as every definition carries them (keys in KEY_ORDER)."""
    generated = args_adapter().json_schema()
    definitions = generated.pop("$defs", {})
    return compact_json(_clean(generated, definitions))


# Keys of a schema node and of a tool definition, in the order they are written; keys not
# listed (none today) follow, sorted. Property names keep the model's field order.
KEY_ORDER = (
    "type",
    "name",
    "description",
    "additionalProperties",
    "required",
    "enum",
    "items",
    "properties",
    "function",
    "parameters",
    "input_schema",
)
_RANK = {key: rank for rank, key in enumerate(KEY_ORDER)}


def canonical_json(value: object) -> str:
    """Sorted keys, no whitespace: byte-stable JSON for plans and ACP updates."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def compact_json(value: object) -> str:
    """No whitespace, keys in the order the value holds them (for ordered definitions)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _ordered(node: dict[str, Any]) -> dict[str, Any]:
    return {key: node[key] for key in sorted(node, key=lambda key: (_RANK.get(key, 99), key))}


def _clean(node: Any, definitions: dict[str, Any]) -> Any:
    """Inline ``$ref``s and drop ``title``s: the model reads neither."""
    if isinstance(node, list):
        return [_clean(item, definitions) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        return _clean(definitions[node["$ref"].rsplit("/", 1)[-1]], definitions)
    cleaned = {key: _clean(value, definitions) for key, value in node.items() if key != "title"}
    if "properties" in node:  # a property may itself be named "title"
        properties = node["properties"].items()
        cleaned["properties"] = {name: _clean(schema, definitions) for name, schema in properties}
    return _ordered(cleaned)
