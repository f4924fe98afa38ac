"""A person's requests reach the model through the Strands tool as a hook provider, in a
real Strands ``Agent``; the scripted model records what Strands hands it."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

if sys.version_info < (3, 11):  # pragma: no cover - dev installs strands-agents on 3.11+ only
    pytest.skip("dev installs strands-agents on Python 3.11+", allow_module_level=True)
from strands import Agent, tool

from dsh_tool_todo.integrations.strands import todo_write_strands_tool
from dsh_tool_todo.plans.reminder import plan_reminder
from dsh_tool_todo.stores.owners import OwnerRegistry
from tests.integrations import requests_scenario as scenario
from tests.integrations.scripted_strands import ScriptedModel, tool_use_steps


def run_agent(
    directory: Path, *, asked: bool, hooked: bool = True
) -> tuple[list[list[bytes]], Agent]:
    log = directory / "ada.jsonl" if asked else None

    @tool
    async def look(path: str) -> str:
        """Read a file."""
        return await scenario.alook(log, path)

    model = ScriptedModel([*tool_use_steps(scenario.CALLS), "Fixed."])
    with OwnerRegistry(directory) as owners:
        todo = todo_write_strands_tool(allow_parallel_in_progress=False, owner="ada", owners=owners)
        agent = Agent(
            model=model,
            system_prompt=scenario.SYSTEM,
            tools=[todo, look],
            hooks=[todo] if hooked else [],
            callback_handler=None,
        )
        asyncio.run(agent.invoke_async(scenario.PROMPT))
    return model.request_lines, agent


def test_a_request_is_told_once_at_the_end_of_the_newest_message_and_honoured(
    tmp_path: Path,
) -> None:
    plain, _ = run_agent(tmp_path / "plain", asked=False)
    asked, agent = run_agent(tmp_path / "asked", asked=True)
    text = scenario.notice()
    block = json.dumps({"text": text}).encode()[1:-1]
    told = scenario.TOLD_AT
    assert len(plain) == len(asked) == 4
    assert asked[:told] == plain[:told]
    # a text block of its own at the end of the newest message: every byte before that
    # message is as when no one asked
    assert asked[told][:-1] == plain[told][:-1]
    newest = json.loads(asked[told][-1])
    assert newest["content"][-1] == {"text": text}
    assert {**newest, "content": newest["content"][:-1]} == json.loads(plain[told][-1])
    # Strands keeps it in agent.messages: the next request starts with all of this one
    scenario.assert_kept(plain, asked)
    assert b"".join(asked[told + 1]).count(block) == 1
    assert all(block not in b"".join(request) for request in plain)
    shown = [b.get("text") for m in agent.messages for b in m["content"]]
    assert shown.count(text) == 1
    scenario.assert_honoured(tmp_path / "asked" / "ada.jsonl")


def test_with_no_request_the_requests_are_what_they_were_without_the_hooks(
    tmp_path: Path,
) -> None:
    hooked, _ = run_agent(tmp_path / "hooked", asked=False)
    unhooked, _ = run_agent(tmp_path / "unhooked", asked=False, hooked=False)
    assert hooked == unhooked


@pytest.mark.parametrize("remind", [False, True])
def test_the_notice_is_a_block_of_its_own_after_the_reminder(tmp_path: Path, remind: bool) -> None:
    owners, log = scenario.planned(tmp_path)
    with owners:
        scenario.ask(log)
        todo = todo_write_strands_tool(
            allow_parallel_in_progress=False,
            owner="ada",
            owners=owners,
            remind_after_compaction=remind,
        )
        messages: list[Any] = [{"role": "user", "content": [{"text": "summary"}]}]
        event: Any = type("Event", (), {"agent": type("Agent", (), {"messages": messages})()})()
        asyncio.run(todo._remind(event))
        asyncio.run(todo._remind(event))  # told once
    reminder = [{"text": plan_reminder(scenario.PLAN)}] if remind else []
    assert messages[-1]["content"] == [
        {"text": "summary"},
        *reminder,
        {"text": scenario.notice()},
    ]
