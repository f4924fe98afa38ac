"""remind_after_compaction in a real Strands ``Agent`` whose ``SummarizingConversationManager``
summarises on a context overflow; the scripted model records what Strands hands it."""

from __future__ import annotations

import asyncio
import json
import sys

import pytest

if sys.version_info < (3, 11):  # pragma: no cover - dev installs strands-agents on 3.11+ only
    pytest.skip("dev installs strands-agents on Python 3.11+", allow_module_level=True)
from strands import Agent, tool
from strands.agent.conversation_manager import SummarizingConversationManager

from dsh_tool_todo import UsageError
from dsh_tool_todo.integrations.strands import todo_write_strands_tool
from dsh_tool_todo.plans.reminder import plan_reminder
from dsh_tool_todo.stores.owners import OwnerRegistry
from tests.integrations import compaction_scenario as scenario
from tests.integrations.scripted_strands import ScriptedModel, tool_use_steps


@tool
def look(path: str) -> str:
    """Read a file."""
    return f"contents of {path}"


def run_agent(*, remind: bool, overflow: bool = True) -> tuple[list[list[bytes]], Agent]:
    model = ScriptedModel(
        [*tool_use_steps(scenario.CALLS), "Fixed."], overflow_at=5 if overflow else 0
    )
    summariser = Agent(model=ScriptedModel([scenario.SUMMARY]), callback_handler=None)
    todo_tool = todo_write_strands_tool(
        allow_parallel_in_progress=False,
        owner="ada",
        owners=OwnerRegistry(),
        remind_after_compaction=remind,
    )
    agent = Agent(
        model=model,
        system_prompt=scenario.SYSTEM,
        tools=[todo_tool, look],
        hooks=[todo_tool],
        callback_handler=None,
        # 9 messages at the overflow: the oldest 7 summarised, the last call and result kept
        conversation_manager=SummarizingConversationManager(
            summary_ratio=0.8, preserve_recent_messages=2, summarization_agent=summariser
        ),
    )
    asyncio.run(agent.invoke_async("Fix the parser bug"))
    return model.request_lines, agent


def test_the_plan_is_re_surfaced_once_after_a_summary_and_no_earlier_byte_changes() -> None:
    plain, _ = run_agent(remind=False)
    reminded, agent = run_agent(remind=True)
    text = scenario.reminder_text()
    block = json.dumps({"text": text}).encode()
    scenario.assert_unchanged_until_the_summary(plain, reminded)
    # The reminder is a text block at the end of the newest message; every byte before
    # that message is as without it, the system prompt first and unchanged.
    assert reminded[4][:-1] == plain[4][:-1]
    assert reminded[4][0] == reminded[0][0] == json.dumps(scenario.SYSTEM).encode()
    newest = json.loads(reminded[4][-1])
    assert newest["content"][-1] == {"text": text}
    assert {**newest, "content": newest["content"][:-1]} == json.loads(plain[4][-1])
    # Strands keeps it in agent.messages: the next request starts with all of this one.
    assert reminded[5][: len(reminded[4])] == reminded[4]
    assert b"".join(reminded[5]).count(block[1:-1]) == 1
    assert all(block[1:-1] not in b"".join(request) for request in plain)
    shown = [b.get("text") for m in agent.messages for b in m["content"]]
    assert shown.count(text) == 1


def test_a_plan_the_messages_still_show_is_not_repeated() -> None:
    reminded, _ = run_agent(remind=True, overflow=False)
    plain, _ = run_agent(remind=False, overflow=False)
    assert reminded == plain


def test_a_new_invocation_clears_the_plan_and_nothing_is_carried_over() -> None:
    _, agent = run_agent(remind=True)
    agent.messages[:] = agent.messages[-1:]  # as if trimmed: no write left in the messages
    agent.model = model = ScriptedModel(["Hello."])
    asyncio.run(agent.invoke_async("Something else"))
    text = plan_reminder(scenario.PLAN_B)
    assert text is not None
    assert text.encode() not in b"".join(model.request_lines[0])


def test_a_non_bool_option_is_refused() -> None:
    with pytest.raises(UsageError, match="remind_after_compaction must be a bool, not str"):
        todo_write_strands_tool(
            allow_parallel_in_progress=False,
            owner="ada",
            remind_after_compaction="yes",  # type: ignore[arg-type]
        )
