"""The tool's parameter schema: generated once from the argument model, minus pydantic's noise.

The serialized form is deterministic (sorted keys, fixed separators), so every
process offers the model the same bytes and its prefix cache survives restarts.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from .validation import args_adapter


def parameters() -> dict[str, Any]:
    """A fresh copy of the JSON Schema of ``todo_write``'s arguments."""
    loaded: dict[str, Any] = json.loads(parameters_json())
    return loaded


@cache
def parameters_json() -> str:
    generated = args_adapter().json_schema()
    definitions = generated.pop("$defs", {})
    return canonical_json(_clean(generated, definitions))


def canonical_json(value: object) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


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
    return cleaned
