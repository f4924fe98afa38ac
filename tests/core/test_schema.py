"""The parameter schema: what the seeds say, in the same bytes in every process."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from dsh_tool_todo.core import contract
from dsh_tool_todo.core.schema import (
    KEY_ORDER,
    canonical_json,
    compact_json,
    parameters,
    parameters_json,
)
from dsh_tool_todo.host import Host
from tests.conftest import HostFactory, snapshot


def test_parameter_schema_snapshot(host: Host) -> None:
    tool = host.tools["todo_write"]
    assert canonical_json(tool.parameters) == snapshot("parameters.json")


def test_parameter_schema_says_what_the_seeds_say(host: Host) -> None:
    schema = host.tools["todo_write"].parameters
    todos = schema["properties"]["todos"]
    item = todos["items"]
    assert todos["description"] == "The COMPLETE task list, replacing any previous list."
    assert item["properties"]["content"]["description"] == (
        "What the task is — a short imperative line."
    )
    assert item["properties"]["status"] == {
        "type": "string",
        "enum": ["pending", "in_progress", "completed"],
        "description": "pending (not started) | in_progress (now) | completed (done).",
    }
    assert item["required"] == ["content", "status"]
    assert schema["required"] == ["todos"]
    assert schema["additionalProperties"] is False
    assert item["additionalProperties"] is False
    assert "title" not in json.dumps(schema)
    assert "$ref" not in json.dumps(schema)
    assert "$defs" not in json.dumps(schema)


def test_each_tool_gets_its_own_copy_of_the_schema(make_host: HostFactory) -> None:
    first = make_host().tools["todo_write"].parameters
    first["properties"]["todos"]["description"] = "tampered"
    assert make_host().tools["todo_write"].parameters["properties"]["todos"]["description"] == (
        contract.TODOS_DESCRIPTION
    )


def test_schema_bytes_are_the_same_in_every_process() -> None:
    code = "from dsh_tool_todo.core.schema import parameters_json; print(parameters_json(), end='')"
    outputs = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            check=True,
        ).stdout
        for seed in ("0", "1", "4242")
    }
    assert outputs == {parameters_json().encode("utf-8")}


def test_parameters_is_a_fresh_copy_of_the_cached_bytes() -> None:
    first, second = parameters(), parameters()
    assert first == second == json.loads(parameters_json())
    assert first is not second
    first["required"].append("tampered")
    assert parameters()["required"] == ["todos"]
    assert parameters_json() is parameters_json()  # generated once


def _keys_in_order(node: object) -> None:
    """Every schema node's keys follow KEY_ORDER (property names keep the model's order)."""
    if isinstance(node, list):
        for item in node:
            _keys_in_order(item)
        return
    if not isinstance(node, dict):
        return
    ranks = [KEY_ORDER.index(key) for key in node]
    assert ranks == sorted(ranks), list(node)
    for key, value in node.items():
        if key == "properties":
            for schema in value.values():
                _keys_in_order(schema)
        else:
            _keys_in_order(value)


def test_what_a_node_is_comes_before_what_it_holds() -> None:
    schema = json.loads(parameters_json())
    _keys_in_order(schema)
    assert list(schema) == ["type", "additionalProperties", "required", "properties"]
    assert list(schema["properties"]["todos"]["items"]["properties"]) == ["content", "status"]


def test_the_two_serializations() -> None:
    value = {"b": [1, {"z": "é", "a": None}], "a": True}
    assert canonical_json(value) == '{"a":true,"b":[1,{"a":null,"z":"é"}]}'
    assert compact_json(value) == '{"b":[1,{"z":"é","a":null}],"a":true}'
    assert parameters_json() == compact_json(json.loads(parameters_json()))
