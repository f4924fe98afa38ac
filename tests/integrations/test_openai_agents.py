"""The OpenAI Agents SDK adapter, end to end through Runner with the SDK's own scripted model."""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import shutil
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner
from agents.strict_schema import ensure_strict_json_schema
from agents.testing import ScriptedModel, assistant_message, function_call
from agents.tool import FunctionTool
from agents.tool_context import ToolContext

from dsh_tool_todo import todo_write_tool
from dsh_tool_todo.core import contract
from dsh_tool_todo.core.contract import EVENT_TYPE
from dsh_tool_todo.core.schema import parameters
from dsh_tool_todo.integrations.openai_agents import todo_write_function_tool
from dsh_tool_todo.stores.owners import OwnerRegistry

SNAPSHOTS = Path(__file__).resolve().parents[1] / "snapshots"
PLAN = {"todos": [{"content": "Draft the release notes", "status": "in_progress"}]}
DONE = {"todos": [{"content": "Draft the release notes", "status": "completed"}]}


def run(
    tool: FunctionTool, *responses: list[Any], context: Any = None
) -> tuple[Any, ScriptedModel]:
    model = ScriptedModel([*responses, [assistant_message("done")]])
    agent = Agent(name="planner", model=model, tools=[tool])
    config = RunConfig(tracing_disabled=True)
    result = asyncio.run(Runner.run(agent, "plan it", context=context, run_config=config))
    model.assert_complete()
    return result, model


def outputs(model: ScriptedModel) -> dict[str, str]:
    """What the model read back, by call id, in the request after its tool calls."""
    last = model.calls[-1].input
    return {
        item["call_id"]: item["output"]
        for item in last
        if item.get("type") == "function_call_output"
    }


def test_our_schema_is_already_strict_so_the_sdk_leaves_it_unchanged() -> None:
    ours = parameters()
    assert ensure_strict_json_schema(copy.deepcopy(ours)) == ours
    tool = todo_write_function_tool(allow_parallel_in_progress=False, owner="me")
    assert tool.params_json_schema == json.loads((SNAPSHOTS / "parameters.json").read_text())
    assert tool.strict_json_schema is True
    assert (tool.name, tool.description) == ("todo_write", contract.DESCRIPTION_SINGLE)
    parallel = todo_write_function_tool(allow_parallel_in_progress=True, owner="me")
    assert parallel.description == contract.DESCRIPTION_PARALLEL


def test_a_run_records_the_plan_and_the_model_reads_our_texts_as_is() -> None:
    owners = OwnerRegistry()
    tool = todo_write_function_tool(allow_parallel_in_progress=False, owner="me", owners=owners)
    expected_refusal = todo_write_tool(allow_parallel_in_progress=False).call(
        {**PLAN, "merge": True}, OwnerRegistry().session("x")
    )
    result, model = run(
        tool,
        [function_call("todo_write", {**PLAN, "merge": True}, call_id="bad")],
        [function_call("todo_write", PLAN, call_id="good")],
    )
    assert result.final_output == "done"
    assert outputs(model) == {
        "bad": expected_refusal,
        "good": "Updated todo list: 0 pending, 1 in progress, 0 completed.",
    }
    (offered,) = model.calls[0].tools
    assert offered.params_json_schema == parameters()
    events = owners.session("me").events  # type: ignore[attr-defined]
    # the SDK's call id is recorded beside the list
    assert [event["data"] for event in events] == [{**PLAN, "callId": "good"}]


def test_tool_calls_of_one_response_are_serialised_in_call_order() -> None:
    owners = OwnerRegistry()
    tool = todo_write_function_tool(allow_parallel_in_progress=False, owner="me", owners=owners)
    plans = [{"todos": [{"content": f"Step {n}", "status": "pending"}]} for n in range(8)]
    calls = [function_call("todo_write", p, call_id=f"c{n}") for n, p in enumerate(plans)]
    _, model = run(tool, calls)
    assert set(outputs(model).values()) == {
        "Updated todo list: 1 pending, 0 in progress, 0 completed."
    }
    events = owners.session("me").events  # type: ignore[attr-defined]
    # the last call's list wins; each event carries its own call's id
    assert [event["data"] for event in events] == [
        {**plan, "callId": f"c{n}"} for n, plan in enumerate(plans)
    ]


def test_the_run_context_picks_the_owner() -> None:
    owners = OwnerRegistry()
    tool = todo_write_function_tool(
        allow_parallel_in_progress=False, owner=lambda ctx: ctx.context["user"], owners=owners
    )
    run(tool, [function_call("todo_write", PLAN, call_id="a")], context={"user": "ada"})
    run(tool, [function_call("todo_write", DONE, call_id="b")], context={"user": "bob"})
    ada = owners.session("ada").latest([EVENT_TYPE])
    bob = owners.session("bob").latest([EVENT_TYPE])
    assert ada is not None
    assert ada["data"] == {**PLAN, "callId": "a"}
    assert bob is not None
    assert bob["data"] == {**DONE, "callId": "b"}


def test_a_failure_to_record_reads_not_recorded_and_logs_the_cause(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with OwnerRegistry(tmp_path / "plans") as owners:
        owners.session("me")
        shutil.rmtree(tmp_path / "plans")  # the open log's file is gone: its next append fails
        tool = todo_write_function_tool(allow_parallel_in_progress=False, owner="me", owners=owners)
        with caplog.at_level(logging.ERROR, logger="dsh_tool_todo"):
            _, model = run(tool, [function_call("todo_write", PLAN, call_id="c")])
    assert outputs(model) == {"c": contract.NOT_RECORDED}
    (record,) = [r for r in caplog.records if r.name == "dsh_tool_todo"]
    assert "todo_write for owner 'me' was not recorded" in record.getMessage()
    assert "me.jsonl: the log was deleted or moved" in record.getMessage()


def test_raw_json_reaches_our_validation_untouched() -> None:
    tool = todo_write_function_tool(allow_parallel_in_progress=False, owner="me")
    raw = '{"todos": [{"content": "A", "status": "pending"}], "todos": []}'  # duplicate key
    context = ToolContext(
        context=None, tool_name="todo_write", tool_call_id="1", tool_arguments=raw
    )
    direct = todo_write_tool(allow_parallel_in_progress=False).call(
        raw, OwnerRegistry().session("x")
    )
    assert asyncio.run(tool.on_invoke_tool(context, raw)) == direct
    bad = '{"todos": "not a list"'
    assert asyncio.run(tool.on_invoke_tool(context, bad)) == todo_write_tool(
        allow_parallel_in_progress=False
    ).call(bad, OwnerRegistry().session("x"))


def test_an_owner_function_that_finds_no_owner_gets_the_no_owner_text_and_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    owners = OwnerRegistry()
    tool = todo_write_function_tool(
        allow_parallel_in_progress=False, owner=lambda ctx: ctx.context.get("user"), owners=owners
    )
    calls = [function_call("todo_write", PLAN, call_id=c) for c in ("a", "b")]
    with caplog.at_level(logging.WARNING, logger="dsh_tool_todo"):
        _, model = run(tool, calls, context={})
        run(tool, [function_call("todo_write", PLAN, call_id="c")], context={})
    assert outputs(model) == {"a": contract.NO_OWNER, "b": contract.NO_OWNER}
    assert owners.owners() == []
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "found no owner" in warning
    assert "owner= returned None" in warning


def test_a_repeated_key_takes_its_last_value_in_the_core_and_in_the_docs() -> None:
    """Every JSON parser on the way (the provider SDKs', the frameworks', pydantic's) keeps a
    repeated key's last value; the core does the same for a raw text, and the docs say so."""
    raw = (
        '{"todos": [{"content": "A", "status": "pending"}],'
        ' "todos": [{"content": "B", "status": "completed", "status": "in_progress"}]}'
    )
    owners = OwnerRegistry()
    tool = todo_write_function_tool(allow_parallel_in_progress=False, owner="me", owners=owners)
    context = ToolContext(
        context=None, tool_name="todo_write", tool_call_id="1", tool_arguments=raw
    )
    text = asyncio.run(tool.on_invoke_tool(context, raw))
    assert text == "Updated todo list: 0 pending, 1 in progress, 0 completed."
    assert owners.session("me").latest([EVENT_TYPE])["data"] == {  # type: ignore[index]
        "todos": [{"content": "B", "status": "in_progress"}],
        "callId": "1",
    }
    page = (Path(__file__).resolve().parents[2] / "docs/integrations/openai-agents.md").read_text(
        encoding="utf-8"
    )
    assert "a duplicate key" not in page
    assert "A key written twice takes its last value" in page
