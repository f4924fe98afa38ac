"""The tool definition in each model API's shape, carrying the one schema byte for byte."""

from __future__ import annotations

import json

import pytest

from dsh_tool_todo import todo_write_tool
from dsh_tool_todo.core.definition import FLAVORS, Flavor, definition_json, tool_definition
from dsh_tool_todo.core.schema import compact_json, parameters_json

TOOL = todo_write_tool(allow_parallel_in_progress=False)


def test_each_flavor_has_its_shape() -> None:
    name, description = TOOL.name, TOOL.description
    assert tool_definition(TOOL) == tool_definition(TOOL, "json")
    assert tool_definition(TOOL, "json") == {
        "name": name,
        "description": description,
        "parameters": TOOL.parameters,
    }
    assert tool_definition(TOOL, "anthropic") == {
        "name": name,
        "description": description,
        "input_schema": TOOL.parameters,
    }
    assert tool_definition(TOOL, "openai") == {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": TOOL.parameters,
            "strict": True,
        },
    }


@pytest.mark.parametrize("flavor", FLAVORS)
def test_every_definition_carries_the_schema_bytes_unchanged(flavor: Flavor) -> None:
    written = definition_json(TOOL, flavor)
    assert parameters_json() in written
    assert written == compact_json(tool_definition(TOOL, flavor))
    assert json.loads(written) == tool_definition(TOOL, flavor)


def test_the_definition_keys_come_in_key_order() -> None:
    assert list(json.loads(definition_json(TOOL, "openai"))) == ["type", "function"]
    assert list(json.loads(definition_json(TOOL, "anthropic"))) == [
        "name",
        "description",
        "input_schema",
    ]


def test_the_description_follows_the_option() -> None:
    parallel = todo_write_tool(allow_parallel_in_progress=True)
    assert json.loads(definition_json(parallel))["description"] == parallel.description
    assert parallel.description != TOOL.description
