"""plan_reminder_filter in real ``Runner.run`` runs whose own input filter summarises old items;
the SDK's scripted model records each request as the SDK builds it."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner, function_tool
from agents.run_config import CallModelData, ModelInputData
from agents.testing import ScriptedModel, assistant_message, function_call

from dsh_tool_todo import UsageError
from dsh_tool_todo.core.contract import EVENT_TYPE
from dsh_tool_todo.integrations.openai_agents import (
    plan_reminder_filter,
    todo_write_function_tool,
)
from dsh_tool_todo.plans.reminder import plan_reminder
from dsh_tool_todo.stores.owners import OwnerRegistry
from tests.integrations.compaction_scenario import (
    CALLS,
    PLAN_A,
    PLAN_B,
    SUMMARY,
    SYSTEM,
    as_user_message,
    assert_unchanged_until_the_summary,
    reminder_text,
)


@function_tool
def look(path: str) -> str:
    """Read a file."""
    return f"contents of {path}"


def summarise(data: CallModelData[Any]) -> ModelInputData:
    """The host's own compaction: past 8 items, the oldest 7 become one summary message."""
    items = data.model_data.input
    if len(items) <= 8:
        return data.model_data
    summary: Any = {"role": "user", "content": SUMMARY}
    return ModelInputData(input=[summary, *items[7:]], instructions=data.model_data.instructions)


def run_agent(*, remind: bool, compact: bool = True) -> list[list[bytes]]:
    steps = [
        [function_call(name, args, call_id=f"call-{n}")] for n, (name, args) in enumerate(CALLS, 1)
    ]
    model = ScriptedModel([*steps, [assistant_message("Fixed.")]])
    owners = OwnerRegistry()
    tool = todo_write_function_tool(
        allow_parallel_in_progress=False, owner=lambda ctx: ctx.context["user"], owners=owners
    )
    agent = Agent(name="fixer", instructions=SYSTEM, model=model, tools=[tool, look])
    if remind:
        input_filter: Any = plan_reminder_filter(
            owner=lambda context: context["user"],
            owners=owners,
            compact=summarise if compact else None,
        )
    else:
        input_filter = summarise if compact else None
    config = RunConfig(tracing_disabled=True, call_model_input_filter=input_filter)
    asyncio.run(Runner.run(agent, "Fix the parser bug", context={"user": "ada"}, run_config=config))
    model.assert_complete()
    # one line of bytes per item, the instructions first, as the Responses API reads them
    return [
        [json.dumps(call.system_instructions).encode()]
        + [json.dumps(item, sort_keys=True).encode() for item in call.input]
        for call in model.calls
    ]


def test_the_plan_is_re_surfaced_after_a_summary_and_no_earlier_byte_changes() -> None:
    plain = run_agent(remind=False)
    reminded = run_agent(remind=True)
    text = reminder_text()
    reminder = as_user_message(text)
    assert_unchanged_until_the_summary(plain, reminded)
    # The reminder is the one item after the newest: every byte before it is as without
    # it, the instructions first and unchanged.
    assert reminded[4] == [*plain[4], reminder]
    assert reminded[4][0] == reminded[0][0] == json.dumps(SYSTEM).encode()
    # The SDK keeps no filtered input: the next request starts with every byte of this one
    # before the reminder, which comes again last, once.
    assert reminded[5] == [*plain[5], reminder]
    assert reminded[5][: len(reminded[4]) - 1] == reminded[4][:-1]
    assert all(reminder not in request for request in plain)


def test_a_plan_the_input_still_shows_is_not_repeated() -> None:
    assert run_agent(remind=True, compact=False) == run_agent(remind=False, compact=False)


def test_a_new_turn_clears_the_plan_and_nothing_is_carried_over() -> None:
    owners = OwnerRegistry()
    owners.session("ada").append(EVENT_TYPE, {"todos": PLAN_B})
    remind = plan_reminder_filter(owner="ada", owners=owners)
    data: Any = CallModelData(
        model_data=ModelInputData(input=[{"role": "user", "content": "hi"}], instructions=None),
        agent=None,
        context=None,
    )
    added = asyncio.run(remind(data))  # type: ignore[arg-type]
    assert added.input[-1] == {"role": "user", "content": plan_reminder(PLAN_B)}
    owners.start_turn("ada")
    assert asyncio.run(remind(data)).input == [{"role": "user", "content": "hi"}]  # type: ignore[arg-type]


def test_bad_arguments_are_refused() -> None:
    owners = OwnerRegistry()
    with pytest.raises(UsageError, match=r"^plan_reminder_filter: owner= takes an owner key"):
        plan_reminder_filter(owner=5, owners=owners)  # type: ignore[arg-type]
    with pytest.raises(
        UsageError, match=r"^plan_reminder_filter: owners= takes .*OwnerRegistry.*, not dict"
    ):
        plan_reminder_filter(owner="ada", owners={})  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="compact must be a call_model_input_filter"):
        plan_reminder_filter(owner="ada", owners=owners, compact="trim")  # type: ignore[arg-type]


def test_what_shows_the_plan_and_what_does_not() -> None:
    owners = OwnerRegistry()
    owners.session("ada").append(EVENT_TYPE, {"todos": PLAN_B})
    remind = plan_reminder_filter(owner="ada", owners=owners)
    text = plan_reminder(PLAN_B)
    hi: Any = {"role": "user", "content": "hi"}

    def due(*items: Any) -> bool:
        data: Any = CallModelData(
            model_data=ModelInputData(input=[hi, *items], instructions=None),
            agent=None,
            context=None,
        )
        return asyncio.run(remind(data)).input[-1] != (items or [hi])[-1]

    def write(arguments: str) -> Any:
        return {
            "type": "function_call",
            "name": "todo_write",
            "arguments": arguments,
            "call_id": "c",
        }

    assert not due(write(json.dumps({"todos": PLAN_B})))
    assert not due({"role": "user", "content": [{"type": "input_text", "text": text}]})
    assert due(write(json.dumps({"todos": PLAN_A})))  # a stale list
    assert due(write('{"todos": ['))  # arguments that are not JSON show nothing
    assert due({"type": "function_call", "name": "look", "arguments": "{}", "call_id": "d"})
