"""The Strands Agents adapter, through Strands' real Agent loop with a scripted model
(``tests/integrations/scripted_strands.py``)."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from dsh_tool_todo.core.contract import EVENT_TYPE

if sys.version_info < (3, 11):  # pragma: no cover - dev installs strands-agents on 3.11+ only
    pytest.skip("dev installs strands-agents on Python 3.11+", allow_module_level=True)
from strands import Agent

from dsh_tool_todo.core import contract
from dsh_tool_todo.integrations.strands import TodoWriteAgentTool, todo_write_strands_tool
from dsh_tool_todo.stores.memory import MemorySession
from dsh_tool_todo.stores.owners import OwnerRegistry
from tests.integrations.adapter_contract import CHECKS, Driver, RecordingSession, Reply, opener
from tests.integrations.scripted_strands import ScriptedModel

PLAN = {"todos": [{"content": "Read the code", "status": "in_progress"}]}


def results_of(model: ScriptedModel, request: int = -1) -> dict[str, dict[str, Any]]:
    """The toolResult blocks the model read in a request (the last one), by toolUseId."""
    found: dict[str, dict[str, Any]] = {}
    for message in model.requests[request]["messages"]:
        for block in message["content"]:
            if "toolResult" in block:
                found[block["toolResult"]["toolUseId"]] = block["toolResult"]
    return found


def run(tool: TodoWriteAgentTool, calls: Sequence[tuple[str, Any]], **agent: Any) -> ScriptedModel:
    model = ScriptedModel([calls, "done"] if calls else ["done"])
    strands_agent = Agent(model=model, tools=[tool], callback_handler=None, **agent)
    asyncio.run(strands_agent.invoke_async("plan it"))
    assert model.script == []
    return model


class StrandsDriver:
    call_ids = True

    def offered(self, *, parallel: bool) -> tuple[str, str, Mapping[str, Any]]:
        tool = todo_write_strands_tool(allow_parallel_in_progress=parallel, owner="me")
        (spec,) = run(tool, []).requests[0]["tools"]
        return spec["name"], spec["description"], spec["inputSchema"]["json"]

    def turn(self, calls: Sequence[tuple[str, Any]], session: Any) -> list[Reply]:
        owners = OwnerRegistry(open_session=opener(session))
        tool = todo_write_strands_tool(allow_parallel_in_progress=False, owner="me", owners=owners)
        results = results_of(run(tool, calls))
        replies = []
        for cid, _ in calls:
            (content,) = results[cid]["content"]
            replies.append(Reply(content["text"], results[cid]["status"] == "error"))
        return replies


DRIVER: Driver = StrandsDriver()


@pytest.mark.parametrize("check", CHECKS.values(), ids=CHECKS.keys())
def test_strands_against_the_adapter_contract(check: Any) -> None:
    check(DRIVER)


def test_the_spec_strands_hands_the_model_is_ours_byte_for_byte() -> None:
    tool = todo_write_strands_tool(allow_parallel_in_progress=False, owner="me")
    (spec,) = run(tool, []).requests[0]["tools"]
    ours = todo_write_strands_tool(allow_parallel_in_progress=False, owner="me").tool_spec
    assert json.dumps(spec, sort_keys=True) == json.dumps(ours, sort_keys=True)
    assert spec["inputSchema"]["json"]["additionalProperties"] is False


def test_a_refusal_is_an_error_tool_result_and_the_model_recovers() -> None:
    session = MemorySession()
    owners = OwnerRegistry(open_session=lambda key: session)
    tool = todo_write_strands_tool(allow_parallel_in_progress=False, owner="me", owners=owners)
    model = ScriptedModel([[("bad", '{"todos": "all of it"}')], [("good", PLAN)], "done"])
    asyncio.run(Agent(model=model, tools=[tool], callback_handler=None).invoke_async("go"))
    refused = results_of(model, 1)["bad"]
    assert refused["status"] == "error"
    assert refused["content"][0]["text"].startswith("Error: ")
    recorded = results_of(model)["good"]
    assert recorded == {
        "toolUseId": "good",
        "status": "success",
        "content": [{"text": "Updated todo list: 0 pending, 1 in progress, 0 completed."}],
    }
    assert [e["data"] for e in session.events] == [{**PLAN, contract.CALL_ID_KEY: "good"}]


def test_the_owner_is_read_from_the_agent_and_hooks_start_a_turn_per_invocation() -> None:
    owners = OwnerRegistry()
    tool = todo_write_strands_tool(
        allow_parallel_in_progress=False,
        owner=lambda agent: agent.state.get("user"),
        owners=owners,
    )
    model = ScriptedModel([[("c1", PLAN)], "done", "hello again"])
    agent = Agent(
        model=model, tools=[tool], hooks=[tool], state={"user": "ada"}, callback_handler=None
    )
    asyncio.run(agent.invoke_async("plan it"))
    latest = owners.session("ada").latest([EVENT_TYPE, "turn/start"])
    assert latest is not None
    assert latest["data"]["todos"] == PLAN["todos"]
    asyncio.run(agent.invoke_async("thanks"))  # the next user request: the plan clears
    assert [e["type"] for e in owners.session("ada").events] == [
        "turn/start",
        EVENT_TYPE,
        "turn/start",
    ]


def test_no_owner_is_refused_with_the_specification_text_and_warned_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    tool = todo_write_strands_tool(allow_parallel_in_progress=False, owner=lambda agent: None)
    with caplog.at_level(logging.WARNING, logger="dsh_tool_todo"):
        model = run(tool, [("c1", PLAN), ("c2", PLAN)])
    results = results_of(model)
    for cid in ("c1", "c2"):
        assert results[cid]["status"] == "error"
        assert results[cid]["content"] == [{"text": contract.NO_OWNER}]
    assert len([r for r in caplog.records if "found no owner" in r.getMessage()]) == 1


def test_unparsable_arguments_are_refused_and_nothing_is_recorded() -> None:
    # Strands turns unparsable JSON into {} before any tool runs: the model still reads
    # the tool's own refusal, not a Strands error
    session = RecordingSession()
    owners = OwnerRegistry(open_session=lambda key: session)
    tool = todo_write_strands_tool(allow_parallel_in_progress=False, owner="me", owners=owners)
    expected = tool._tool.call({}, MemorySession())
    result = results_of(run(tool, [("c1", '{"todos": [')]))["c1"]
    assert result == {"toolUseId": "c1", "status": "error", "content": [{"text": expected}]}
    assert session.data == []
