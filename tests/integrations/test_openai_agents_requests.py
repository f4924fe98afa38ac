"""A person's requests reach the model through ``plan_reminder_filter`` in real ``Runner.run``
runs; the SDK's scripted model records each request as the SDK builds it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from agents import Agent, RunConfig, Runner, function_tool
from agents.run_config import CallModelData, ModelInputData
from agents.testing import ScriptedModel, assistant_message, function_call

from dsh_tool_todo.integrations.openai_agents import (
    plan_reminder_filter,
    todo_write_function_tool,
)
from dsh_tool_todo.plans.reminder import plan_reminder
from dsh_tool_todo.stores.owners import OwnerRegistry
from tests.integrations import requests_scenario as scenario
from tests.integrations.compaction_scenario import as_user_message


def run_agent(directory: Path, *, asked: bool, filtered: bool = True) -> list[list[bytes]]:
    log = directory / "ada.jsonl" if asked else None

    @function_tool
    async def look(path: str) -> str:
        """Read a file."""
        return await scenario.alook(log, path)

    steps = [
        [function_call(name, args, call_id=f"call-{n}")]
        for n, (name, args) in enumerate(scenario.CALLS, 1)
    ]
    model = ScriptedModel([*steps, [assistant_message("Fixed.")]])
    with OwnerRegistry(directory) as owners:
        tool = todo_write_function_tool(
            allow_parallel_in_progress=False, owner=lambda ctx: ctx.context["user"], owners=owners
        )
        agent = Agent(name="fixer", instructions=scenario.SYSTEM, model=model, tools=[tool, look])
        input_filter: Any = None
        if filtered:
            input_filter = plan_reminder_filter(
                owner=lambda context: context["user"], owners=owners
            )
        config = RunConfig(tracing_disabled=True, call_model_input_filter=input_filter)
        run = Runner.run(agent, scenario.PROMPT, context={"user": "ada"}, run_config=config)
        asyncio.run(run)
    model.assert_complete()
    # one line of bytes per item, the instructions first, as the Responses API reads them
    return [
        [json.dumps(call.system_instructions).encode()]
        + [json.dumps(item, sort_keys=True).encode() for item in call.input]
        for call in model.calls
    ]


def test_a_request_is_told_once_after_the_newest_item_and_honoured(tmp_path: Path) -> None:
    plain = run_agent(tmp_path / "plain", asked=False)
    asked = run_agent(tmp_path / "asked", asked=True)
    # the one item after the newest; the SDK keeps no filtered input: the next request is as
    # when no one asked, the notice not repeated
    notice = as_user_message(scenario.notice())
    scenario.assert_told_after_the_newest(plain, asked, notice, kept=False)
    scenario.assert_honoured(tmp_path / "asked" / "ada.jsonl")


def test_with_no_request_the_requests_are_what_they_were_without_the_filter(
    tmp_path: Path,
) -> None:
    filtered = run_agent(tmp_path / "filtered", asked=False)
    unfiltered = run_agent(tmp_path / "unfiltered", asked=False, filtered=False)
    assert filtered == unfiltered


def test_the_notice_is_a_message_of_its_own_after_the_reminder(tmp_path: Path) -> None:
    owners, log = scenario.planned(tmp_path)
    with owners:
        scenario.ask(log)
        remind = plan_reminder_filter(owner="ada", owners=owners)
        hi: Any = {"role": "user", "content": "hi"}
        data: Any = CallModelData(
            model_data=ModelInputData(input=[hi], instructions=None), agent=None, context=None
        )
        first = asyncio.run(remind(data)).input
        second = asyncio.run(remind(data)).input
    assert first == [
        hi,
        {"role": "user", "content": plan_reminder(scenario.PLAN)},
        {"role": "user", "content": scenario.notice()},
    ]
    assert second == first[:2]  # told once
