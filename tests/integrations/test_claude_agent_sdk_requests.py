"""A person's requests for the Claude Agent SDK, through the SDK's own hook bridge: told once,
as the ``additionalContext`` of the next ``PostToolUse`` or ``UserPromptSubmit`` answer, or in
the next ``todo_write`` result, whichever Claude Code sends first.

As in ``test_claude_agent_sdk_compaction``, Claude Code is played by the transport of
``test_claude_agent_sdk``: the request bytes Claude Code builds cannot be measured here.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

if sys.version_info < (3, 11):  # pragma: no cover - dev installs claude-agent-sdk on 3.11+ only
    pytest.skip("dev installs claude-agent-sdk on Python 3.11+", allow_module_level=True)
from claude_agent_sdk import ClaudeAgentOptions

from dsh_tool_todo.core.requests import Request
from dsh_tool_todo.integrations.claude_agent_sdk import todo_write_for_claude
from dsh_tool_todo.plans.reminder import plan_reminder, request_notice
from dsh_tool_todo.stores.owners import OwnerRegistry
from dsh_tool_todo.stores.requests import PlanRequests
from tests.integrations import requests_scenario as scenario
from tests.integrations.test_claude_agent_sdk import ClaudeCode, through_the_sdk
from tests.integrations.test_claude_agent_sdk_compaction import answers, compact

TOOL = "mcp__todo__todo_write"
READ = {"tool_name": "Read", "tool_input": {"file_path": "a.py"}, "tool_response": "ok"}


def options(owners: OwnerRegistry, *, remind: bool = False) -> Any:
    todo = todo_write_for_claude(
        allow_parallel_in_progress=False,
        owner=scenario.OWNER,
        owners=owners,
        remind_after_compaction=remind,
    )
    return ClaudeAgentOptions(mcp_servers={"todo": todo.server}, hooks=todo.hooks)


def context(event: str, text: str | None) -> dict[str, Any]:
    assert text is not None
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}


def test_the_next_tool_use_carries_the_notice_once_and_a_write_honours_it(
    tmp_path: Path,
) -> None:
    owners, log = scenario.planned(tmp_path)

    async def script(cli: ClaudeCode) -> list[Any]:
        await cli.handshake()
        asked = scenario.ask(log)
        told = await answers(cli, "PostToolUse", tool_use_id="t1", **READ)
        again = await answers(cli, "PostToolUse", tool_use_id="t2", **READ)
        written = await cli.call(scenario.HONOURED)
        return [asked, told, again, written["content"]]

    asked, told, again, written = through_the_sdk(options(owners), script)
    owners.close()
    assert told == [context("PostToolUse", scenario.notice())]
    assert again == [{}]
    assert [content["text"] for content in written] == [
        "Updated todo list: 0 pending, 1 in progress, 1 completed."
    ]
    scenario.assert_honoured(log, asked)


def test_a_todo_write_first_carries_it_in_its_result_and_the_hook_stays_quiet(
    tmp_path: Path,
) -> None:
    owners, log = scenario.planned(tmp_path)

    async def script(cli: ClaudeCode) -> list[Any]:
        await cli.handshake()
        scenario.ask(log)
        written = await cli.call({"todos": scenario.PLAN})
        used = {"tool_name": TOOL, "tool_input": {"todos": scenario.PLAN}, "tool_response": "ok"}
        return [written["content"], await answers(cli, "PostToolUse", tool_use_id="t", **used)]

    written, after = through_the_sdk(options(owners), script)
    owners.close()
    assert [content["text"] for content in written] == [
        "Updated todo list: 1 pending, 1 in progress, 0 completed.",
        scenario.notice(),
    ]
    assert after == [{}]


def test_after_a_compaction_the_reminder_and_the_notice_are_answers_of_their_own(
    tmp_path: Path,
) -> None:
    owners, log = scenario.planned(tmp_path)

    async def script(cli: ClaudeCode) -> list[dict[str, Any]]:
        await cli.handshake()
        await compact(cli)
        scenario.ask(log)
        return await answers(cli, "PostToolUse", tool_use_id="t", **READ)

    told = through_the_sdk(options(owners, remind=True), script)
    owners.close()
    assert told == [
        context("PostToolUse", plan_reminder(scenario.PLAN)),
        context("PostToolUse", scenario.notice()),
    ]


def test_a_prompt_starts_a_turn_and_tells_what_was_asked_for_it(tmp_path: Path) -> None:
    owners, log = scenario.planned(tmp_path)
    note = "Use the staging database"

    async def script(cli: ClaudeCode) -> dict[str, Any]:
        await cli.handshake()
        scenario.ask(log)  # an item of the plan the prompt clears: it lapses, untold
        await asyncio.to_thread(PlanRequests(log).file, "note", note, by="grace")
        return await cli.prompt("Now the docs")

    answer = through_the_sdk(options(owners), script)
    owners.close()
    told = request_notice([Request("any", "note", note, "grace", 0, 0.0)])
    assert answer == context("UserPromptSubmit", told)
    assert [s.status for s in PlanRequests(log).read().taken] == ["void", "delivered"]
