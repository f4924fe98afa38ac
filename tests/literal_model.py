"""A "literal model" for tests and benchmarks: it changes exactly what an error names, as the
text says to change it, and nothing more.

It stands for a model that reads the error and obeys it without guessing: it removes each
named unknown argument or key, renames a missing field from the key the text says the item
carried, replaces each named status by the one suggested (or drops the item where the text
says to drop it), sends a named array as ``todos``, and parses a list sent as a JSON string.
Anything the text does not say, it leaves alone, so a shape converges only if the first
error named every problem. The shapes are the argument habits of real harnesses.

    python -m tests.literal_model      rewrites tests/snapshots/first_errors.json
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

from dsh_tool_todo.core import contract
from dsh_tool_todo.core.tool import TodoWriteTool, todo_write_tool
from dsh_tool_todo.stores.memory import MemorySession

SNAPSHOT = Path(__file__).parent / "snapshots" / "first_errors.json"

# --- the shapes seen in real use -------------------------------------------------------------

SHAPES: dict[str, dict[str, Any]] = {
    "claude": {
        "todos": [
            {"content": "Read the spec", "status": "completed", "activeForm": "Reading the spec"},
            {"content": "Write the parser", "status": "in_progress", "activeForm": "Writing"},
            {"content": "Test the parser", "status": "pending", "activeForm": "Testing"},
        ]
    },
    "claude, older": {
        "todos": [
            {"id": "1", "content": "Read the spec", "status": "completed", "priority": "high"},
            {"id": "2", "content": "Write the parser", "status": "in_progress", "priority": "high"},
            {"id": "3", "content": "Test the parser", "status": "pending", "priority": "medium"},
        ]
    },
    "opencode/kilo": {
        "todos": [
            {"content": "Read the spec", "status": "completed", "priority": "high", "id": "1"},
            {"content": "Write the parser", "status": "in_progress", "priority": "high", "id": "2"},
            {"content": "Port to Windows", "status": "cancelled", "priority": "low", "id": "3"},
            {"content": "Run the old suite", "status": "failed", "priority": "low", "id": "4"},
            {"content": "Test the parser", "status": "pending", "priority": "medium", "id": "5"},
        ]
    },
    "OpenHands": {
        "command": "plan",
        "task_list": [
            {"title": "Read the spec", "notes": "", "status": "done"},
            {"title": "Write the parser", "notes": "start with JSON", "status": "in_progress"},
            {"title": "Test the parser", "notes": "", "status": "todo"},
        ],
    },
    "Codex": {
        "explanation": "Parser first, then tests.",
        "plan": [
            {"step": "Read the spec", "status": "completed"},
            {"step": "Write the parser", "status": "in_progress"},
            {"step": "Test the parser", "status": "pending"},
        ],
    },
    "Gemini CLI": {
        "todos": [
            {"description": "Read the spec", "status": "completed"},
            {"description": "Write the parser", "status": "in_progress"},
            {"description": "Port to Windows", "status": "cancelled"},
            {"description": "Test the parser", "status": "pending"},
        ]
    },
    "Kimi": {
        "todos": [
            {"title": "Read the spec", "status": "Done"},
            {"title": "Write the parser", "status": "In Progress"},
            {"title": "Test the parser", "status": "Pending"},
        ]
    },
    "Cursor": {
        "merge": False,
        "todos": [
            {"id": "read", "content": "Read the spec", "status": "completed"},
            {"id": "write", "content": "Write the parser", "status": "in_progress"},
            {"id": "test", "content": "Test the parser", "status": "pending"},
        ],
    },
    "Copilot": {
        "operation": "write",
        "todoList": [
            {"id": 1, "title": "Read the spec", "description": "the RFC", "status": "completed"},
            {"id": 2, "title": "Write the parser", "description": "JSON", "status": "in-progress"},
            {"id": 3, "title": "Test the parser", "description": "unit", "status": "not-started"},
        ],
    },
}


def _as_json_string(args: dict[str, Any]) -> dict[str, Any]:
    """The same call with its list sent as a JSON string, a common real failure."""
    stringified = copy.deepcopy(args)
    for key, value in stringified.items():
        if isinstance(value, list):
            stringified[key] = json.dumps(value)
    return stringified


ALL_SHAPES: dict[str, dict[str, Any]] = {
    **SHAPES,
    **{f"{name}, list as a JSON string": _as_json_string(args) for name, args in SHAPES.items()},
}

# --- reading the error ----------------------------------------------------------------------

_NAME = r'(?:`[^`]+`|"(?:[^"\\]|\\.)*")'
_NAMES = rf"({_NAME}(?:, {_NAME})*)"
_WHERE = r"( in every item| at index \d+(?:, \d+)*| at \d+ indexes)?"
_ITEM_HEAD = re.compile(r"^Error: invalid todo at index (\d+): ")


def _unname(name: str) -> str:
    return name[1:-1] if name.startswith("`") else str(json.loads(name))


def _names(names: str) -> list[str]:
    return [_unname(name) for name in re.findall(_NAME, names)]


def _places(todos: list[Any], where: str | None, head_index: int | None) -> list[dict[str, Any]]:
    """The items a clause speaks of (only objects can have keys changed)."""
    if not where:
        indexes = [head_index] if head_index is not None else list(range(len(todos)))
    elif where.startswith(" at index "):
        indexes = [int(index) for index in where.removeprefix(" at index ").split(", ")]
    else:
        indexes = list(range(len(todos)))
    return [todos[index] for index in indexes if isinstance(todos[index], dict)]


def literal_fix(args: Any, error: str) -> Any:
    """The next call of a model that does exactly what ``error`` says."""
    fixed = copy.deepcopy(args)
    head = _ITEM_HEAD.match(error)
    head_index = int(head.group(1)) if head else None
    if match := re.search(rf"missing `todos`: send the array ({_NAME}) as `todos`", error):
        fixed["todos"] = fixed.pop(_unname(match.group(1)))
    if match := re.search(rf"missing `todos`: ({_NAME}) is a JSON string; send its array", error):
        fixed["todos"] = json.loads(fixed.pop(_unname(match.group(1))))
    if "`todos` is a JSON string; send the array itself" in error:
        fixed["todos"] = json.loads(fixed["todos"])
    if match := re.search(rf"unknown arguments? {_NAMES}", error):
        for name in _names(match.group(1)):
            fixed.pop(name, None)
    todos = fixed.get("todos")
    if not isinstance(todos, list):
        return fixed
    for names, where in re.findall(rf"unknown keys? {_NAMES}{_WHERE}", error):
        for item in _places(todos, where, head_index):
            for name in _names(names):
                item.pop(name, None)
    pattern = rf"missing `(\w+)`{_WHERE}: rename ({_NAME}) to `\w+`"
    for field, where, name in re.findall(pattern, error):
        for item in _places(todos, where, head_index):
            if _unname(name) in item:
                item[field] = item.pop(_unname(name))
    dropped: list[str] = []
    if match := re.search(
        r"`status` must be one of pending, in_progress, completed \(got (.*)\)", error
    ):
        for group in match.group(1).split(contract.STATUS_GROUP_SEPARATOR):
            values = [json.loads(value) for value in re.findall(r'"(?:[^"\\]|\\.)*"', group)]
            use = re.search(r": use (\w+)", group)
            for item in todos:
                if isinstance(item, dict) and item.get("status") in values and use:
                    item["status"] = use.group(1)
            if ": drop the item" in group:
                dropped.extend(values)
    fixed["todos"] = [
        item for item in todos if not (isinstance(item, dict) and item.get("status") in dropped)
    ]
    return fixed


def calls_to_accept(tool: TodoWriteTool, args: Any, *, limit: int = 6) -> tuple[int, list[str]]:
    """How many calls the literal model needs until one is accepted, and the texts it read."""
    texts: list[str] = []
    for call in range(1, limit + 1):
        text = tool.call(args, MemorySession())
        texts.append(text)
        if not text.startswith("Error: "):
            return call, texts
        args = literal_fix(args, text)
    return limit + 1, texts


def first_errors() -> dict[str, str]:
    tool = todo_write_tool(allow_parallel_in_progress=False)
    return {name: tool.call(args, MemorySession()) for name, args in ALL_SHAPES.items()}


if __name__ == "__main__":
    SNAPSHOT.write_text(
        json.dumps(first_errors(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
