"""The AI SDK data parts of a lead's sub-agents, step by step (no I/O: the web view's tree
stream reads the logs, tests/web/test_ai_sdk_tree.py reads it with the SDK's reader)."""

from __future__ import annotations

from typing import Any

from dsh_tool_todo.core.links import End
from dsh_tool_todo.plans._ai_sdk_tree import DATA_TYPE, SubAgentParts
from tests._builders import todo, todo_write


def part(name: str, items: list[Any], end: Any = None, **rest: Any) -> dict[str, Any]:
    data = {
        "session": name,
        "name": "researcher",
        "parent": "lead",
        "parentCallId": "c1",
        "end": end,
        **rest,
        "todos": items,
    }
    return {"type": DATA_TYPE, "id": f"plan:{name}", "data": data}


def placed() -> SubAgentParts:
    parts = SubAgentParts("lead")
    parts.place("r", "lead", "researcher", "c1")
    assert "r" in parts
    return parts


def test_a_sub_agent_shows_from_its_first_write_and_its_end_keeps_its_last_plan() -> None:
    parts = placed()
    turn = {"seq": 1, "type": "turn/start", "data": {}}
    assert parts.read("r", None, False, None) == []  # linked, nothing planned yet
    assert parts.clear("r", turn) == []
    assert parts.end("r", End("failed", "early")) == []  # an end before any plan shows nothing
    search = [todo("Search", "in_progress")]
    assert parts.write("r", todo_write(*search)) == [part("r", search)]
    assert parts.end("r", End("finished")) == [part("r", search, {"outcome": "finished"})]
    assert parts.clear("r", turn) == [part("r", [], {"outcome": "finished"})]
    # written again after its end: a run started again
    assert parts.write("r", todo_write(*search)) == [part("r", search)]
    gone = {"message": "deleted", "code": "session_deleted"}
    assert parts.broken("r", "deleted", "session_deleted") == [part("r", [], unreadable=gone)]


def test_a_log_found_ended_shows_its_plan_with_its_end() -> None:
    parts = placed()
    failed = End("failed", "crashed")
    shown = parts.read("r", [todo("Search")], True, failed)
    assert shown == [part("r", [todo("Search")], {"outcome": "failed", "error": "crashed"})]
    quiet = SubAgentParts("lead")
    quiet.place("q", "lead", "quiet", None)
    assert quiet.read("q", None, False, failed) == []
    assert quiet.broken("q", "gone", "session_deleted") == []
