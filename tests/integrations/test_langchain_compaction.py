"""remind_after_compaction in a real ``create_agent`` graph with ``SummarizationMiddleware``."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import SummarizationMiddleware
from langchain.agents.middleware.types import AgentMiddleware
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, convert_to_openai_messages
from langchain_core.tools import tool

from dsh_tool_todo import UsageError
from dsh_tool_todo.integrations.langchain import TodoWriteMiddleware
from dsh_tool_todo.plans.reminder import plan_reminder
from tests.conftest import todo
from tests.integrations.compaction_scenario import (
    PLAN_A,
    PLAN_B,
    SUMMARY,
    as_user_message,
    assert_added_last_and_kept,
    assert_unchanged_until_the_summary,
    reminder_text,
)
from tests.integrations.scripted_langchain import ScriptedChatModel, tool_calls


@tool
def look(path: str) -> str:
    """Read a file."""
    return f"contents of {path}"


def call(number: int, name: str, args: dict[str, Any]) -> AIMessage:
    """One model turn with one tool call; every call id differs (a repeated id is a retry)."""
    message = tool_calls((name, args))
    message.tool_calls[0]["id"] = f"call-{number}"
    return message


def script() -> list[AIMessage]:
    return [
        call(1, "todo_write", {"todos": PLAN_A}),
        call(2, "todo_write", {"todos": PLAN_B}),
        call(3, "look", {"path": "a.py"}),
        call(4, "look", {"path": "b.py"}),
        call(5, "look", {"path": "c.py"}),  # the answer to the first request after the summary
        AIMessage("Fixed."),
    ]


def request_bytes(messages: list[BaseMessage]) -> list[bytes]:
    """Each message as a provider receives it (OpenAI chat format), as bytes."""
    return [
        json.dumps(message, sort_keys=True).encode()
        for message in convert_to_openai_messages(messages)
    ]


def run_agent(*, remind: bool, asynchronous: bool) -> tuple[list[list[bytes]], dict[str, Any]]:
    model = ScriptedChatModel(script=script())
    summariser = ScriptedChatModel(script=lambda _messages: AIMessage(SUMMARY))
    agent = create_agent(
        model,
        tools=[look],
        system_prompt="You fix bugs.",
        middleware=[
            # 9 messages before the fifth model call: summarised, keeping the last call and result
            SummarizationMiddleware(summariser, trigger=("messages", 8), keep=("messages", 2)),
            TodoWriteMiddleware(allow_parallel_in_progress=False, remind_after_compaction=remind),
        ],
    )
    start = {"messages": [HumanMessage("Fix the parser bug")]}
    if asynchronous:
        result: dict[str, Any] = asyncio.run(agent.ainvoke(start))
    else:
        result = agent.invoke(start)
    return [request_bytes(request) for request in model.requests], result


@pytest.mark.parametrize("asynchronous", [False, True], ids=["invoke", "ainvoke"])
def test_the_plan_is_re_surfaced_once_after_a_summary_and_no_earlier_byte_changes(
    asynchronous: bool,
) -> None:
    plain, _ = run_agent(remind=False, asynchronous=asynchronous)
    reminded, result = run_agent(remind=True, asynchronous=asynchronous)
    text = reminder_text()
    reminder = as_user_message(text)
    assert_unchanged_until_the_summary(plain, reminded)
    # It stays where it was added: LangGraph keeps the state update.
    assert_added_last_and_kept(plain, reminded, reminder)
    assert [m.content for m in result["messages"]].count(text) == 1
    assert all(reminder not in request for request in plain)


def test_a_plan_the_messages_still_show_is_not_repeated() -> None:
    """No summary: the writes stay in the messages, so no reminder is added."""
    model = ScriptedChatModel(script=[*script()[:3], AIMessage("Fixed.")])
    agent = create_agent(
        model,
        tools=[look],
        middleware=[
            TodoWriteMiddleware(allow_parallel_in_progress=False, remind_after_compaction=True)
        ],
    )
    agent.invoke({"messages": [HumanMessage("Fix the parser bug")]})
    assert len(model.requests) == 4
    assert all(
        not (isinstance(m, HumanMessage) and m.content == plan_reminder(PLAN_B))
        for request in model.requests
        for m in request
    )


def test_off_by_default_adds_no_model_hook() -> None:
    """Without the option LangChain adds no node before the model, as before."""
    plain = TodoWriteMiddleware(allow_parallel_in_progress=False)
    assert type(plain).before_model is AgentMiddleware.before_model
    both = TodoWriteMiddleware(
        allow_parallel_in_progress=False, remind_after_compaction=True, system_prompt="Plan."
    )
    assert type(both).before_model is not AgentMiddleware.before_model
    assert type(both).wrap_model_call is not AgentMiddleware.wrap_model_call
    assert both.name == "TodoWriteMiddleware"


def test_a_non_bool_option_is_refused() -> None:
    with pytest.raises(UsageError, match="remind_after_compaction must be a bool, not str"):
        TodoWriteMiddleware(allow_parallel_in_progress=False, remind_after_compaction="yes")  # type: ignore[arg-type]


def test_a_stale_reminder_or_a_refused_write_does_not_count_as_showing_the_plan() -> None:
    middleware = TodoWriteMiddleware(allow_parallel_in_progress=False, remind_after_compaction=True)
    stale = HumanMessage(plan_reminder(PLAN_A))
    refused = call(7, "todo_write", {"todos": [todo("Read the code", "done")]})
    state: Any = {"messages": [HumanMessage("summary"), stale, refused], "todos": PLAN_B}
    update = middleware.before_model(state, None)  # type: ignore[arg-type]
    assert update is not None
    (added,) = update["messages"]
    assert added.content == plan_reminder(PLAN_B)
    # Once shown, nothing more; and no plan (a new turn) shows nothing.
    assert middleware.before_model({**state, "messages": [*state["messages"], added]}, None) is None  # type: ignore[arg-type]
    assert middleware.before_model({**state, "todos": None}, None) is None  # type: ignore[arg-type]
    assert middleware.before_model({**state, "todos": []}, None) is None  # type: ignore[arg-type]
