"""The argument and result shapes: strict, closed, and the contract's statuses."""

from __future__ import annotations

import typing
from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from dsh_tool_todo.core import contract
from dsh_tool_todo.core.model import Status, TodoCounts, TodoItem, TodoResult, TodoWriteArgs
from tests._builders import todo, todos

ARGS = TypeAdapter(TodoWriteArgs)


def test_the_statuses_are_the_contracts() -> None:
    assert typing.get_args(Status) == contract.STATUSES


def test_a_plain_call_validates_to_itself() -> None:
    args = todos(todo("a", "in_progress"), todo("b"))
    assert ARGS.validate_python(args) == args
    assert ARGS.validate_json('{"todos": []}') == {"todos": []}


@pytest.mark.parametrize(
    "args",
    [
        {"todos": [{"content": "a", "status": "pending", "id": 1}]},  # a key not in the item
        {"todos": [], "merge": True},  # an argument not in the call
        {"todos": [{"content": 1, "status": "pending"}]},  # strict: no coercion to str
        {"todos": [{"content": "a", "status": "done"}]},  # a status outside the three
        {"todos": ({"content": "a", "status": "pending"},)},  # strict: a tuple is no list
        {},
    ],
)
def test_the_shapes_are_closed_and_strict(args: Any) -> None:
    with pytest.raises(ValidationError):
        ARGS.validate_python(args)


def test_a_refused_list_stops_at_its_first_bad_item() -> None:
    bad = {"todos": [{"content": index, "status": "pending"} for index in range(1000)]}
    with pytest.raises(ValidationError) as info:
        ARGS.validate_python(bad)
    assert info.value.error_count() == 1  # fail_fast: one error, not one per item


def test_the_result_shapes_name_their_keys() -> None:
    assert list(typing.get_type_hints(TodoResult)) == ["todos", "counts"]
    assert list(typing.get_type_hints(TodoCounts)) == ["pending", "inProgress", "completed"]
    assert list(typing.get_type_hints(TodoItem, include_extras=False)) == ["content", "status"]
