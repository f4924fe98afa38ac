"""The class of a refusal, read from its text: every clause the contract can lead with."""

from __future__ import annotations

import pytest

from dsh_tool_todo.core import contract
from dsh_tool_todo.core._refusal_class import _CLAUSES, OTHER, REFUSAL_CLASSES, refusal_class


def test_every_clause_a_refusal_can_lead_with_has_a_class() -> None:
    named = {name for name, _ in _CLAUSES}
    leading = {*contract.SCHEMA_CLAUSES, *contract.LIST_CLAUSES, "NOT_JSON", "ARGS_NOT_OBJECT"}
    assert leading <= named
    assert {kind for _, kind in _CLAUSES} <= {*REFUSAL_CLASSES, OTHER}


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        (contract.NO_OWNER, "no_owner"),
        (contract.EMPTY_CONTENT, "empty_content"),
        (contract.EMPTY_CONTENT + '; duplicate content "a"', "empty_content"),
        (contract.DUPLICATE_CONTENT.format(content="unknown key `x`"), "duplicate_content"),
        (contract.TOO_MANY_IN_PROGRESS.format(count=3), "too_many_in_progress"),
        ("Error: invalid todo at index 12: unknown key `id`", "unknown_key"),
        ("Error: invalid todos: unknown keys `a`, `b` in every item", "unknown_key"),
        (
            "Error: invalid todos: missing `content` at index 0, 1: rename `title` to `content`",
            "unknown_key",
        ),
        (
            "Error: invalid todos: missing `status` at index 0 (one of pending, in_progress, "
            "completed); missing `content` at index 1: rename `title` to `content`",
            OTHER,
        ),
        (
            "Error: invalid todos: missing `todos`: send the array `items` as `todos`, each todo "
            "{content, status}",
            "unknown_key",
        ),
        (
            "Error: invalid todos: missing `todos`: `send the array` is a JSON string; send its "
            "array as `todos`, each todo {content, status}",
            "stringified_array",
        ),
        ("Error: invalid todos: the arguments are not valid JSON (EOF)", OTHER),
        (contract.ARGS_NOT_OBJECT, OTHER),
        ("Updated todo list: 0 pending, 1 in progress, 0 completed.", OTHER),
        ("Error: invalid todo at index x: unknown key `id`", OTHER),
        ("", OTHER),
    ],
)
def test_the_head_and_first_clause_decide(text: str, kind: str) -> None:
    assert refusal_class(text) == kind
