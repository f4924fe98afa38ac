"""A person's requests reach the model through ``plan_reminder_processor(toolset=...)``, in
real pydantic-ai runs against a mock OpenAI Chat Completions API: a user prompt part of its
own at the end of the newest request, once."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import ModelMessage, ModelRequest, UserPromptPart
from pydantic_ai.toolsets import FunctionToolset

from dsh_tool_todo import UsageError
from dsh_tool_todo.core.contract import EVENT_TYPE
from dsh_tool_todo.integrations.pydantic_ai import plan_reminder_processor, todo_write_toolset
from dsh_tool_todo.plans.reminder import plan_reminder
from dsh_tool_todo.stores.owners import OwnerRegistry
from tests._builders import PLAN_A
from tests.integrations import requests_scenario as scenario
from tests.integrations.compaction_scenario import as_user_message
from tests.integrations.scripted_pydantic_ai import openai_chat_api, openai_chat_model

pytestmark = pytest.mark.usefixtures("no_model_requests")


def run_agent(
    owners: Path, *, asked: bool, process: bool = True
) -> tuple[list[list[bytes]], list[ModelMessage]]:
    bodies: list[dict[str, Any]] = []
    log = owners / "t1.jsonl" if asked else None

    async def look(path: str) -> str:
        """Read a file."""
        return await scenario.alook(log, path)

    async def run_once() -> list[ModelMessage]:
        api = openai_chat_api(bodies, scenario.CALLS, text="Fixed.")
        async with openai_chat_model(api) as model:
            todo = todo_write_toolset(allow_parallel_in_progress=False, owners=owners)
            processors = [ProcessHistory(plan_reminder_processor(toolset=todo))] if process else []
            agent = Agent(
                model,
                instructions=scenario.SYSTEM,
                tools=[look],
                toolsets=[todo],
                capabilities=processors,
            )
            result = await agent.run(scenario.PROMPT, deps="t1")
            return result.all_messages()

    history = asyncio.run(run_once())
    requests = [
        [json.dumps(message, sort_keys=True).encode() for message in body["messages"]]
        for body in bodies
    ]
    return requests, history


def test_a_request_is_told_once_after_the_newest_message_and_honoured(tmp_path: Path) -> None:
    plain, _ = run_agent(tmp_path / "plain", asked=False)
    asked, history = run_agent(tmp_path / "asked", asked=True)
    notice = as_user_message(scenario.notice_text())
    told = scenario.TOLD_AT
    assert len(plain) == len(asked) == 4
    assert asked[:told] == plain[:told]
    # a part of its own at the end of the newest request: every byte before it is as when
    # no one asked
    assert asked[told] == [*plain[told], notice]
    # pydantic-ai keeps the processed history: kept where it was added, never told again
    assert asked[told + 1][: len(asked[told])] == asked[told]
    assert asked[told + 1][len(asked[told]) :] == plain[told + 1][len(plain[told]) :]
    assert asked[told + 1].count(notice) == 1
    assert all(notice not in request for request in plain)
    shown = [
        part.content
        for message in history
        for part in message.parts
        if isinstance(part, UserPromptPart)
    ]
    assert shown.count(scenario.notice_text()) == 1
    scenario.assert_settled_in_the_log(tmp_path / "asked" / "t1.jsonl")


def test_with_no_request_the_requests_are_what_they_were_without_the_processor(
    tmp_path: Path,
) -> None:
    processed, _ = run_agent(tmp_path / "processed", asked=False)
    unprocessed, _ = run_agent(tmp_path / "unprocessed", asked=False, process=False)
    assert processed == unprocessed


def test_the_notice_is_a_part_after_the_reminder_and_the_plan_is_the_owners(
    tmp_path: Path,
) -> None:
    owners = OwnerRegistry(tmp_path)
    try:
        owners.session("t1").append(EVENT_TYPE, {"todos": PLAN_A})
        scenario.ask(tmp_path / "t1.jsonl")
        todo = todo_write_toolset(allow_parallel_in_progress=False, owners=owners)
        remind = plan_reminder_processor(toolset=todo)
        messages: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart("summary")])]
        added = asyncio.run(remind(_ctx("t1"), messages))
        again = asyncio.run(remind(_ctx("t1"), [*added, ModelRequest(parts=[])]))
    finally:
        owners.close()
    assert added[:-1] == messages[:-1]
    assert [part.content for part in added[-1].parts] == [
        "summary",
        plan_reminder(PLAN_A),
        scenario.notice_text(),
    ]
    assert again[-1].parts == []  # told once; the reminder is in the messages now


def test_a_toolset_it_cannot_find_owners_in_is_refused() -> None:
    with pytest.raises(UsageError, match=r"toolset= takes the toolset todo_write_toolset\(\)"):
        plan_reminder_processor(toolset=FunctionToolset([]))
    session_owned = todo_write_toolset(allow_parallel_in_progress=False)
    with pytest.raises(UsageError, match="toolset= takes a todo_write_toolset built with owners="):
        plan_reminder_processor(toolset=session_owned)


def _ctx(deps: object) -> Any:
    class Ctx:
        agent = None

    ctx = Ctx()
    ctx.deps = deps  # type: ignore[attr-defined]
    return ctx


def test_a_run_the_toolset_finds_no_owner_for_is_left_as_it_is(tmp_path: Path) -> None:
    with OwnerRegistry(tmp_path) as owners:
        todo = todo_write_toolset(allow_parallel_in_progress=False, owners=owners)
        messages: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart("hi")])]
        assert asyncio.run(plan_reminder_processor(toolset=todo)(_ctx(None), messages)) is messages
