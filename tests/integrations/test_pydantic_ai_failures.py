"""todo_write_toolset with owners= when the owner's session cannot be had: its log held by
another writer, the database out of reach, the directory deleted mid-run. Each call is
answered ``NOT_RECORDED`` with the cause logged, and the run goes on."""

from __future__ import annotations

import asyncio
import logging
import shutil
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from dsh_tool_todo import todo_write_tool
from dsh_tool_todo.core.contract import NOT_RECORDED
from dsh_tool_todo.integrations.pydantic_ai import todo_write_toolset
from dsh_tool_todo.stores.jsonl import current_plan, read_events
from dsh_tool_todo.stores.owners import OwnerRegistry
from tests._builders import PLAN_A, PLAN_B
from tests.integrations.scripted_pydantic_ai import Script
from tests.integrations.test_sub_agents import call

pytestmark = pytest.mark.usefixtures("no_model_requests")

RECORDED = "Updated todo list: 1 pending, 1 in progress, 0 completed."


def run(script: Any, owners: Any) -> Any:
    toolset = todo_write_toolset(allow_parallel_in_progress=False, owners=owners)
    return asyncio.run(Agent(FunctionModel(script), toolsets=[toolset]).run("go", deps="ada"))


def errors_logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        record.getMessage()
        for record in caplog.records
        if record.name == "dsh_tool_todo" and record.levelno == logging.ERROR
    ]


@pytest.mark.parametrize("errors", ["failed", "text"])
def test_a_log_another_writer_holds_is_answered_not_recorded_and_the_run_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, errors: str
) -> None:
    script = Script({"todos": PLAN_A})
    toolset = todo_write_toolset(allow_parallel_in_progress=False, owners=tmp_path, errors=errors)
    with OwnerRegistry(tmp_path) as holder:  # another process, or a registry of one's own
        holder.call("ada", todo_write_tool(allow_parallel_in_progress=False), {"todos": PLAN_B})
        with caplog.at_level(logging.ERROR, logger="dsh_tool_todo"):
            result = asyncio.run(
                Agent(FunctionModel(script), toolsets=[toolset]).run("go", deps="ada")
            )
    assert result.output == "done"
    (answer,) = script.returns()
    assert (answer.content, answer.outcome) == (
        NOT_RECORDED,
        "failed" if errors == "failed" else "success",
    )
    (message,) = errors_logged(caplog)
    assert message.startswith("todo_write for owner 'ada' was not recorded: owner 'ada': its ")
    assert "ada.jsonl: another session is writing this log" in message
    assert current_plan(tmp_path / "ada.jsonl") == PLAN_B  # the holder's, untouched


def test_a_database_out_of_reach_is_answered_not_recorded_with_the_cause_logged(
    unreachable: OwnerRegistry, caplog: pytest.LogCaptureFixture
) -> None:
    script = Script({"todos": PLAN_A})
    with caplog.at_level(logging.ERROR, logger="dsh_tool_todo"):
        run(script, unreachable)
    (answer,) = script.returns()
    assert (answer.content, answer.outcome) == (NOT_RECORDED, "failed")
    (message,) = errors_logged(caplog)
    assert "its session could not be opened: session 'ada' on PostgreSQL at 127.0.0.1:1" in message


def test_a_directory_deleted_mid_run_fails_one_call_and_the_next_records_in_a_fresh_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    place = tmp_path / "plans"
    responses = [
        call("todo_write", {"todos": PLAN_A}, "c0"),
        call("todo_write", {"todos": PLAN_B}, "c1"),
        call("todo_write", {"todos": PLAN_A}, "c2"),
        ModelResponse(parts=[TextPart("done")]),
    ]

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(responses) == 3:  # after the first call was recorded
            shutil.rmtree(place)
        return responses.pop(0)

    with caplog.at_level(logging.ERROR, logger="dsh_tool_todo"):
        result = run(model, place)
    answers = [
        (part.content, part.outcome)
        for message in result.all_messages()
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    ]
    assert answers == [(RECORDED, "success"), (NOT_RECORDED, "failed"), (RECORDED, "success")]
    (message,) = errors_logged(caplog)
    assert "ada.jsonl: the log was deleted or moved since this session opened it" in message
    # nothing was acknowledged that nobody can read: the log holds what the model was told
    assert [event["data"]["todos"] for event in read_events(place / "ada.jsonl")] == [PLAN_A]
