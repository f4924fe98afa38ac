"""A person's requests reach the model through ``TodoWriteMiddleware`` with ``owners=``: in a
real ``create_agent`` graph, the notice is one user message after the newest one, once."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware.types import AgentMiddleware
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, convert_to_openai_messages
from langchain_core.tools import StructuredTool

from dsh_tool_todo.integrations.langchain import TodoWriteMiddleware
from dsh_tool_todo.plans.reminder import plan_reminder
from tests.integrations import requests_scenario as scenario
from tests.integrations.compaction_scenario import as_user_message
from tests.integrations.scripted_langchain import ScriptedChatModel, tool_calls


def script() -> list[AIMessage]:
    steps = []
    for number, (name, args) in enumerate(scenario.CALLS, 1):
        step = tool_calls((name, args))
        step.tool_calls[0]["id"] = f"call-{number}"
        steps.append(step)
    return [*steps, AIMessage("Fixed.")]


def request_bytes(messages: list[BaseMessage]) -> list[bytes]:
    """Each message as a provider receives it (OpenAI chat format), as bytes."""
    return [
        json.dumps(message, sort_keys=True).encode()
        for message in convert_to_openai_messages(messages)
    ]


def run_agent(
    owners: Path | None, *, asked: bool, asynchronous: bool, **options: Any
) -> tuple[list[list[bytes]], dict[str, Any]]:
    log = None if owners is None or not asked else owners / "t1.jsonl"
    look = StructuredTool.from_function(
        func=lambda path: scenario.look(log, path),
        coroutine=lambda path: scenario.alook(log, path),
        name="look",
        description="Read a file.",
    )
    model = ScriptedChatModel(script=script())
    middleware = TodoWriteMiddleware(allow_parallel_in_progress=False, owners=owners, **options)
    agent = create_agent(
        model, tools=[look], system_prompt=scenario.SYSTEM, middleware=[middleware]
    )
    start = {"messages": [HumanMessage(scenario.PROMPT)]}
    config: Any = {"configurable": {"thread_id": "t1"}}
    try:
        if asynchronous:
            result: dict[str, Any] = asyncio.run(agent.ainvoke(start, config))
        else:
            result = agent.invoke(start, config)
    finally:
        if middleware.owners is not None:
            middleware.owners.close()
    return [request_bytes(request) for request in model.requests], result


@pytest.mark.parametrize("asynchronous", [False, True], ids=["invoke", "ainvoke"])
def test_a_request_is_told_once_after_the_newest_message_and_honoured(
    tmp_path: Path, asynchronous: bool
) -> None:
    plain, _ = run_agent(tmp_path / "plain", asked=False, asynchronous=asynchronous)
    asked, result = run_agent(tmp_path / "asked", asked=True, asynchronous=asynchronous)
    # the one message after the newest; a state update: kept where it was added
    notice = as_user_message(scenario.notice())
    scenario.assert_told_after_the_newest(plain, asked, notice, kept=True)
    assert [m.content for m in result["messages"]].count(scenario.notice()) == 1
    scenario.assert_honoured(tmp_path / "asked" / "t1.jsonl")


@pytest.mark.parametrize("asynchronous", [False, True], ids=["invoke", "ainvoke"])
def test_with_no_request_the_requests_are_what_they_were_without_owners(
    tmp_path: Path, asynchronous: bool
) -> None:
    """Owners add a hook before each model call; with nothing asked it adds nothing."""
    owned, _ = run_agent(tmp_path, asked=False, asynchronous=asynchronous)
    unowned, _ = run_agent(None, asked=False, asynchronous=asynchronous)
    assert owned == unowned


def test_the_notice_follows_the_reminder_as_a_message_of_its_own(tmp_path: Path) -> None:
    middleware = TodoWriteMiddleware(
        allow_parallel_in_progress=False, owners=tmp_path, remind_after_compaction=True
    )
    assert type(middleware).before_model is not AgentMiddleware.before_model
    try:
        # outside a graph run there is no thread: the owner is "default"
        middleware.owners.session("default").append("todo/write", {"todos": scenario.PLAN})  # type: ignore[union-attr]
        scenario.ask(tmp_path / "default.jsonl")
        state: Any = {"messages": [HumanMessage("summary")], "todos": scenario.PLAN}
        runtime: Any = type("Runtime", (), {"execution_info": None})()
        update = middleware.before_model(state, runtime)
    finally:
        middleware.owners.close()  # type: ignore[union-attr]
    assert update is not None
    assert [m.content for m in update["messages"]] == [
        plan_reminder(scenario.PLAN),
        scenario.notice(),
    ]
