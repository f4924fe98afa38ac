"""remind_after_compaction for the Claude Agent SDK, through the SDK's own hook bridge.

Claude Code builds every request and compacts the conversation itself, against Anthropic's
API, which this machine cannot reach: the requests' bytes cannot be measured here. What is
tested is every step on this side of the control channel: the hooks the SDK registers with
Claude Code, and what it answers to the ``PreCompact``, ``PostToolUse`` and
``UserPromptSubmit`` callbacks Claude Code sends (the transport of ``test_claude_agent_sdk``
plays Claude Code). That the ``additionalContext`` of a ``PostToolUse`` answer reaches the
model after the tool's result is Claude Code's documented behaviour, not tested here.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest

if sys.version_info < (3, 11):  # pragma: no cover - dev installs claude-agent-sdk on 3.11+ only
    pytest.skip("dev installs claude-agent-sdk on Python 3.11+", allow_module_level=True)
from claude_agent_sdk import ClaudeAgentOptions

from dsh_tool_todo import UsageError
from dsh_tool_todo.integrations.claude_agent_sdk import todo_write_for_claude
from dsh_tool_todo.plans.reminder import plan_reminder
from dsh_tool_todo.stores.owners import OwnerRegistry
from tests._builders import PLAN_A, PLAN_B
from tests.conftest import todo
from tests.integrations.test_claude_agent_sdk import ClaudeCode, through_the_sdk

TOOL = "mcp__todo__todo_write"


async def answers(cli: ClaudeCode, event: str, **fields: Any) -> list[dict[str, Any]]:
    """Each registered callback's answer to ``event``, in order, as Claude Code asks them."""
    (matcher,) = cli.initialize["hooks"][event]
    base = {"session_id": "s1", "transcript_path": "/dev/null", "cwd": "/"}
    hook_input = {**base, "hook_event_name": event, **fields}
    return [
        await cli.control(
            {"subtype": "hook_callback", "callback_id": callback, "input": hook_input}
        )
        for callback in matcher["hookCallbackIds"]
    ]


async def hook(cli: ClaudeCode, event: str, **fields: Any) -> dict[str, Any]:
    """The one answer to ``event`` that says something (``{}``: none does)."""
    said = [answer for answer in await answers(cli, event, **fields) if answer]
    assert len(said) <= 1, said
    return said[0] if said else {}


async def used(cli: ClaudeCode, name: str, tool_input: dict[str, Any]) -> dict[str, Any]:
    fields = {"tool_name": name, "tool_input": tool_input, "tool_response": "ok"}
    return await hook(cli, "PostToolUse", tool_use_id="t", **fields)


async def compact(cli: ClaudeCode) -> dict[str, Any]:
    return await hook(cli, "PreCompact", trigger="auto", custom_instructions=None)


def options(remind: bool) -> Any:
    todo_ = todo_write_for_claude(
        allow_parallel_in_progress=False,
        owner="ada",
        owners=OwnerRegistry(),
        remind_after_compaction=remind,
    )
    return ClaudeAgentOptions(mcp_servers={"todo": todo_.server}, hooks=todo_.hooks)


def test_after_a_compaction_the_next_tool_result_carries_the_plan_once() -> None:
    text = plan_reminder(PLAN_B)
    assert text is not None
    reminder = {"hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext": text}}

    async def script(cli: ClaudeCode) -> list[dict[str, Any]]:
        await cli.handshake()
        answers = [await hook(cli, "UserPromptSubmit", prompt="Fix the parser bug")]
        await cli.call({"todos": PLAN_A})
        answers.append(await used(cli, TOOL, {"todos": PLAN_A}))
        await cli.call({"todos": PLAN_B})
        answers.append(await used(cli, "Read", {"file_path": "a.py"}))  # no compaction yet
        answers.append(await compact(cli))
        answers.append(await used(cli, "Read", {"file_path": "b.py"}))  # the reminder
        answers.append(await used(cli, "Read", {"file_path": "c.py"}))  # once
        answers.append(await compact(cli))
        answers.append(await used(cli, TOOL, {"todos": PLAN_B}))  # a write shows the plan
        answers.append(await compact(cli))
        answers.append(await used(cli, TOOL, {"todos": [todo("x", "done")]}))  # refused: due
        answers.append(await compact(cli))
        answers.append(await hook(cli, "UserPromptSubmit", prompt="Thanks"))  # plan cleared
        answers.append(await used(cli, "Read", {"file_path": "d.py"}))
        return answers

    answers = through_the_sdk(options(remind=True), script)
    assert answers == [{}, {}, {}, {}, reminder, {}, {}, {}, {}, reminder, {}, {}, {}]


def test_off_by_default_registers_no_compaction_hooks() -> None:
    async def script(cli: ClaudeCode) -> dict[str, Any]:
        return cli.initialize["hooks"]

    # PostToolUse tells a person's requests, option or not (test_claude_agent_sdk_requests.py)
    assert set(through_the_sdk(options(remind=False), script)) == {
        "UserPromptSubmit",
        "PostToolUse",
    }
    assert set(through_the_sdk(options(remind=True), script)) == {
        "UserPromptSubmit",
        "PreCompact",
        "PostToolUse",
    }


def test_a_non_bool_option_is_refused() -> None:
    with pytest.raises(UsageError, match="remind_after_compaction must be a bool, not int"):
        todo_write_for_claude(
            allow_parallel_in_progress=False,
            owner="ada",
            remind_after_compaction=1,  # type: ignore[arg-type]
        )
