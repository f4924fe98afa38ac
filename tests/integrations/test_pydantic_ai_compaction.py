"""plan_reminder_processor in real pydantic-ai runs against a mock OpenAI Chat Completions API."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic_ai import Agent, RunContext
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, UserPromptPart

from dsh_tool_todo import UsageError
from dsh_tool_todo.core.contract import EVENT_TYPE
from dsh_tool_todo.integrations.pydantic_ai import plan_reminder_processor, todo_write_toolset
from dsh_tool_todo.plans.reminder import plan_reminder
from dsh_tool_todo.stores.memory import MemorySession
from tests.integrations import compaction_scenario as scenario
from tests.integrations.scripted_pydantic_ai import run_on_openai_chat, user_prompts

pytestmark = pytest.mark.usefixtures("no_model_requests")


def summarise(messages: list[ModelMessage]) -> list[ModelMessage]:
    """A summarising history processor: past 7 messages, a summary and the last call kept."""
    if len(messages) <= 7:
        return messages
    assert isinstance(messages[-2], ModelResponse)
    return [ModelRequest(parts=[UserPromptPart(scenario.SUMMARY)]), *messages[-2:]]


def look(path: str) -> str:
    """Read a file."""
    return f"contents of {path}"


def run_agent(*, remind: bool) -> tuple[list[list[bytes]], list[ModelMessage]]:
    def agent_on(model: Any) -> Agent[Any, Any]:
        processors: list[Any] = [ProcessHistory(summarise)]
        if remind:  # capabilities run in order: the reminder after the summary
            processors.append(ProcessHistory(plan_reminder_processor()))
        return Agent(
            model,
            instructions="You fix bugs.",
            tools=[look],
            toolsets=[todo_write_toolset(allow_parallel_in_progress=False)],
            capabilities=processors,
        )

    return run_on_openai_chat(scenario.CALLS, agent_on, "Fix the parser bug", MemorySession())


def test_the_plan_is_re_surfaced_once_after_a_summary_and_no_earlier_byte_changes() -> None:
    plain, _ = run_agent(remind=False)
    reminded, history = run_agent(remind=True)
    text = scenario.reminder_text()
    reminder = scenario.as_user_message(text)
    scenario.assert_unchanged_until_the_summary(plain, reminded)
    # pydantic-ai keeps the processed history: the next request starts with all of this one.
    scenario.assert_added_last_and_kept(plain, reminded, reminder)
    assert user_prompts(history).count(text) == 1
    assert all(reminder not in request for request in plain)


def test_a_plan_the_messages_still_show_is_not_repeated() -> None:
    reminded, _ = run_agent_without_summary()
    text = plan_reminder(scenario.PLAN_B)
    assert all(text.encode() not in b"".join(request) for request in reminded)  # type: ignore[union-attr]


def run_agent_without_summary() -> tuple[list[list[bytes]], None]:
    def agent_on(model: Any) -> Agent[Any, Any]:
        return Agent(
            model,
            tools=[look],
            toolsets=[todo_write_toolset(allow_parallel_in_progress=False)],
            capabilities=[ProcessHistory(plan_reminder_processor())],
        )

    requests, _ = run_on_openai_chat(
        scenario.CALLS, agent_on, "Fix the parser bug", MemorySession()
    )
    assert len(requests) == 6
    return requests, None


def test_plan_finds_the_plan_elsewhere_and_a_cleared_plan_shows_nothing() -> None:
    seen: list[object] = []

    async def no_plan(ctx: RunContext[Any]) -> list[dict[str, str]] | None:
        seen.append(ctx.deps)
        return None

    remind = plan_reminder_processor(plan=no_plan)
    messages: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart("hi")])]
    assert asyncio.run(remind(_ctx("deps"), messages)) is messages
    assert seen == ["deps"]

    session = MemorySession()
    session.append(EVENT_TYPE, {"todos": scenario.PLAN_A})
    default = plan_reminder_processor()
    added = asyncio.run(default(_ctx(session), messages))
    assert added[-1].parts[-1] == UserPromptPart(
        plan_reminder(scenario.PLAN_A), timestamp=added[-1].parts[-1].timestamp
    )  # type: ignore[arg-type,union-attr]
    assert messages[0].parts == [UserPromptPart("hi", timestamp=messages[0].parts[0].timestamp)]
    session.append("turn/start", {})  # a new turn clears the plan: nothing is carried over
    assert asyncio.run(default(_ctx(session), messages)) is messages


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(UsageError, match="plan must be a function of the RunContext, not str"):
        plan_reminder_processor(plan="todos")  # type: ignore[arg-type]
    remind = plan_reminder_processor()
    messages: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart("hi")])]
    with pytest.raises(UsageError, match="pass plan= a function of the RunContext"):
        asyncio.run(remind(_ctx(42), messages))


def _ctx(deps: object) -> Any:
    class Ctx:
        pass

    ctx = Ctx()
    ctx.deps = deps  # type: ignore[attr-defined]
    return ctx


@pytest.mark.parametrize(
    "args",
    ['{"todos": [', '{"todos": 5}', "[1, 2]", {"todos": [{"content": 1}]}, {"todos": "x"}, None],
)
def test_a_malformed_write_in_the_history_shows_no_plan(args: Any) -> None:
    """Garbage arguments from the model never break the request; the reminder is still due."""
    from pydantic_ai.messages import ToolCallPart

    session = MemorySession()
    session.append(EVENT_TYPE, {"todos": scenario.PLAN_A})
    messages: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("hi")]),
        ModelResponse(parts=[ToolCallPart("todo_write", args, tool_call_id="c1")]),
        ModelRequest(parts=[UserPromptPart("go on")]),
    ]
    added = asyncio.run(plan_reminder_processor()(_ctx(session), messages))
    assert added[:-1] == messages[:-1]
    assert [part.content for part in added[-1].parts] == ["go on", plan_reminder(scenario.PLAN_A)]  # type: ignore[union-attr]
