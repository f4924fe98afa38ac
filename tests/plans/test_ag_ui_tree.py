"""A lead's sub-agents as AG-UI 1.0 events (``plans._ag_ui_tree``), each one validated by
``ag-ui-protocol``'s own models, field for field (no field the model does not define)."""

from __future__ import annotations

from typing import Any

import pytest
from ag_ui.core import (
    ActivitySnapshotEvent,
    SubagentErrorEvent,
    SubagentFinishedEvent,
    SubagentStartedEvent,
)
from pydantic import BaseModel

from dsh_tool_todo.core.links import End
from dsh_tool_todo.errors import UsageError
from dsh_tool_todo.plans import wire
from dsh_tool_todo.plans._ag_ui_tree import FAILED_CODE, SubAgents, agent_name
from dsh_tool_todo.plans.fleet import MAX_DEPTH, descendants
from dsh_tool_todo.protocols import SessionSummary
from tests._builders import todo, todo_write

MODELS: dict[str, type[BaseModel]] = {
    "ACTIVITY_SNAPSHOT": ActivitySnapshotEvent,
    "SUBAGENT_STARTED": SubagentStartedEvent,
    "SUBAGENT_FINISHED": SubagentFinishedEvent,
    "SUBAGENT_ERROR": SubagentErrorEvent,
}


def valid(events: list[Any]) -> list[Any]:
    """``events``, each checked by its ag-ui-protocol model and round-tripped unchanged."""
    for event in events:
        parsed = MODELS[event["type"]].model_validate(event)
        assert not parsed.model_extra, f"fields the model does not define: {parsed.model_extra}"
        assert parsed.model_dump(mode="json", by_alias=True, exclude_none=True) == event
    return events


def kinds(events: list[Any]) -> list[tuple[str, str | None]]:
    return [(event["type"], event.get("subagentRunId")) for event in events]


WRITE = todo_write(todo("Search", "in_progress"), seq=1)


def tree() -> SubAgents:
    """A lead with a researcher (call c1) and, under it, a checker (call r2)."""
    agents = SubAgents("lead")
    agents.place("lead/researcher@c1", "lead", "researcher", "c1")
    agents.place("lead/researcher@c1/checker@r2", "lead/researcher@c1", "checker", "r2")
    return agents


def test_the_activity_converter_attributes_a_plan_to_a_sub_agent_run() -> None:
    plain = wire.ag_ui_activity_snapshot("lead", WRITE)
    assert "subagentRunId" not in plain
    attributed = valid([wire.ag_ui_activity_snapshot("r", WRITE, subagent_run_id="run-1")])[0]
    assert attributed == {**wire.ag_ui_activity_snapshot("r", WRITE), "subagentRunId": "run-1"}
    with pytest.raises(UsageError, match="subagent_run_id must be the sub-agent invocation's"):
        wire.ag_ui_activity_snapshot("r", WRITE, subagent_run_id="")


def test_a_first_write_starts_the_sub_agent_naming_its_parent_and_the_delegating_call() -> None:
    agents = tree()
    researcher = valid(agents.write("lead/researcher@c1", WRITE))
    assert researcher[0] == {
        "type": "SUBAGENT_STARTED",
        "subagentRunId": "lead/researcher@c1",
        "name": "researcher",
        "parentToolCallId": "c1",
    }
    assert researcher[1]["messageId"] == "plan:lead/researcher@c1"
    assert researcher[1]["subagentRunId"] == "lead/researcher@c1"
    checker = valid(agents.write("lead/researcher@c1/checker@r2", WRITE))
    assert checker[0]["parentSubagentRunId"] == "lead/researcher@c1"
    assert checker[0]["parentToolCallId"] == "r2"
    # a second write only replaces the plan
    assert kinds(agents.write("lead/researcher@c1", WRITE)) == [
        ("ACTIVITY_SNAPSHOT", "lead/researcher@c1")
    ]
    assert agents.active() == ["lead/researcher@c1", "lead/researcher@c1/checker@r2"]


def test_an_end_finishes_or_fails_the_run_and_a_write_after_it_is_a_new_run() -> None:
    agents = tree()
    name = "lead/researcher@c1"
    agents.write(name, WRITE)
    assert valid(agents.end(name, End("finished"))) == [
        {"type": "SUBAGENT_FINISHED", "subagentRunId": name}
    ]
    assert agents.end(name, End("finished")) == []  # nothing open to end
    # a durable engine's retry of the same call writes again: a run id is never used again
    again = valid(agents.write(name, WRITE))
    assert kinds(again) == [("SUBAGENT_STARTED", f"{name}#2"), ("ACTIVITY_SNAPSHOT", f"{name}#2")]
    assert valid(agents.end(name, End("failed", "quota exceeded"))) == [
        {
            "type": "SUBAGENT_ERROR",
            "subagentRunId": f"{name}#2",
            "message": "quota exceeded",
            "code": FAILED_CODE,
        }
    ]
    assert agents.active() == []


def test_a_child_that_writes_first_starts_its_parent_before_itself() -> None:
    agents = tree()
    # the researcher wrote no plan, and its end came before its checker's first write
    assert agents.read("lead/researcher@c1", None, False, End("failed", "gave up")) == []
    events = valid(agents.write("lead/researcher@c1/checker@r2", WRITE))
    assert kinds(events) == [
        ("SUBAGENT_STARTED", "lead/researcher@c1"),
        ("SUBAGENT_ERROR", "lead/researcher@c1"),  # its recorded end, at once
        ("SUBAGENT_STARTED", "lead/researcher@c1/checker@r2"),
        ("ACTIVITY_SNAPSHOT", "lead/researcher@c1/checker@r2"),
    ]
    assert events[2]["parentSubagentRunId"] == "lead/researcher@c1"


def test_what_a_log_holds_when_first_read_and_a_log_that_breaks() -> None:
    agents = tree()
    name = "lead/researcher@c1"
    assert agents.read(name, None, False, None) == []  # linked, nothing written yet
    assert agents.clear(name, {"seq": 2, "type": "turn/start", "data": {}}) == []
    plan = [todo("Search", "completed")]
    events = valid(agents.read(name, plan, True, End("finished")))
    assert kinds(events) == [
        ("SUBAGENT_STARTED", name),
        ("ACTIVITY_SNAPSHOT", name),
        ("SUBAGENT_FINISHED", name),
    ]
    assert events[1]["content"] == {"todos": plan}
    checker = "lead/researcher@c1/checker@r2"
    agents.write(checker, WRITE)
    cleared = valid(agents.clear(checker, {"seq": 3, "type": "turn/start", "data": {}}))
    assert cleared[0]["content"] == {"todos": []}
    assert valid(agents.broken(checker, "its log was deleted", "session_deleted")) == [
        {
            "type": "SUBAGENT_ERROR",
            "subagentRunId": checker,
            "message": "its log was deleted",
            "code": "session_deleted",
        }
    ]
    assert agents.broken(checker, "again", "read_failed") == []


@pytest.mark.parametrize(
    ("key", "parent", "name"),
    [
        ("ada/researcher@l2", "ada", "researcher"),
        ("ada/researcher", "ada", "researcher"),
        ("ada/re@search@1f2e3d4c5b6a", "ada", "re@search"),
        ("ada/researcher@not a call", "ada", "researcher@not a call"),
        ("ada/x/researcher@l2", "ada", "ada/x/researcher@l2"),  # not its parent's child key
        ("helper", "lead", "helper"),
    ],
)
def test_the_agent_name_is_read_from_a_delegated_sessions_key(
    key: str, parent: str, name: str
) -> None:
    assert agent_name(key, parent) == name


def row(name: str, parent: str | None = None) -> SessionSummary:
    return SessionSummary(name, 0.0, None, parent=parent)


def test_the_sessions_under_a_lead_are_the_fleets_tree_below_it() -> None:
    rows = [
        row("lead"),
        row("c", parent="b"),  # listed before its parent: still placed under it
        row("b", parent="lead"),
        row("a", parent="lead"),
        row("x", parent="y"),  # on a cycle: a root of its own, as sessions shows it
        row("y", parent="x"),
        row("stray", parent="elsewhere"),  # its parent is not visible here
        row("lead2"),
    ]
    assert descendants(rows, "lead") == [("b", "lead"), ("a", "lead"), ("c", "b")]
    assert descendants(rows, "x") == []
    assert descendants(rows, "nobody") == []
    # a lead no row is (its log in another store): what sessions draws under it, not visible
    assert descendants(rows, "elsewhere") == [("stray", "elsewhere")]
    chain = [row("s0"), *(row(f"s{i}", parent=f"s{i - 1}") for i in range(1, MAX_DEPTH + 5))]
    # a chain deeper than the fleet draws goes on as a tree of its own there, and here
    assert len(descendants(chain, "s0")) == MAX_DEPTH
