"""A person's request reaches the next model request, once, through the framework's real agent
loop: the provider's chat middleware appends the notice after the newest message."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from agent_framework import Agent, Message, SlidingWindowStrategy
from agent_framework.exceptions import ChatClientInvalidRequestException

try:  # the refusal this adapter keeps came with agent-framework's compaction strategies
    from agent_framework import _compaction

    REFUSES_SERVICE_HISTORY = hasattr(_compaction, "_requires_client_managed_history")
except ImportError:
    REFUSES_SERVICE_HISTORY = False

from dsh_tool_todo.integrations.agent_framework import TodoWriteProvider
from dsh_tool_todo.plans.reminder import plan_reminder
from tests.integrations import requests_scenario as scenario
from tests.integrations.test_agent_framework import LookingUp, Step, lookup, run_to_the_end


def run(directory: Path, *, asked: bool, stream: bool) -> LookingUp:
    client = LookingUp([[("w1", scenario.HONOURED)], "Done."])
    with scenario.planned_owner(directory, asked=asked) as owners:
        # no turn/start: it would clear the plan the request names, and the request would lapse
        provider = TodoWriteProvider(
            allow_parallel_in_progress=False, owner=scenario.OWNER, owners=owners, start_turn=False
        )
        agent = Agent(client=client, context_providers=[provider])
        asyncio.run(run_to_the_end(agent, stream=stream))
    assert client.script == []
    return client


@pytest.mark.parametrize("stream", [False, True])
def test_the_notice_is_a_user_message_after_the_newest_once(tmp_path: Path, stream: bool) -> None:
    asked = run(tmp_path / "asked", asked=True, stream=stream)
    plain = run(tmp_path / "plain", asked=False, stream=stream)
    told = ("user", "text", None, None, None, scenario.notice(), None)
    # the one message after the newest; everything before it as without the request
    assert asked.seen[0][-1] == told
    assert asked.seen[0][:-1] == plain.seen[0]
    # told once: the notice is the request's own, never the loop's history
    assert asked.seen[1] == plain.seen[1]
    assert all(told not in request for request in asked.seen[1:])


def test_after_a_compaction_strategy_and_the_reminder_the_notice_comes_last(
    tmp_path: Path,
) -> None:
    owners, log = scenario.planned(tmp_path)
    lookups: list[Step] = [[(f"L{n}", {"q": str(n)})] for n in range(1, 5)]
    client = LookingUp([[("w1", {"todos": scenario.PLAN})], *lookups, "done"])
    client.compaction_strategy = SlidingWindowStrategy(keep_last_groups=3)
    provider = TodoWriteProvider(
        allow_parallel_in_progress=False,
        owner=scenario.OWNER,
        owners=owners,
        remind_after_compaction=True,
    )
    asking = _asking_before(client, 4, lambda: scenario.ask(log))
    agent = Agent(client=asking, tools=[lookup], context_providers=[provider])
    asyncio.run(agent.run(scenario.PROMPT))
    owners.close()
    reminder, told = plan_reminder(scenario.PLAN), scenario.notice()
    texts = [[c[5] for c in request if c[0] == "user"] for request in client.seen]
    # request 4: the window dropped the write, so the reminder is due; the request came
    # in before it: its own message after the reminder's, never joined to it
    assert texts[4][-2:] == [reminder, told]
    assert texts[5][-1] == reminder
    assert [request.count(told) for request in texts] == [0, 0, 0, 0, 1, 0]


def _asking_before(client: LookingUp, number: int, act: Callable[[], Any]) -> LookingUp:
    answer = client._answer

    def answering(messages: Sequence[Message], options: Mapping[str, Any]) -> Message:
        if len(client.seen) == number - 1:
            act()  # while request number-1 is answered: the next request is where it shows
        return answer(messages, options)

    client._answer = answering  # type: ignore[method-assign]
    return client


class _ClientHistory:
    """A strategy that needs the history on the client, as the framework's
    agent-triggered compaction does."""

    requires_client_managed_history = True

    async def __call__(self, messages: list[Message]) -> bool:
        return False


@pytest.mark.skipif(
    not REFUSES_SERVICE_HISTORY,
    reason="this agent-framework (the one Python 3.10 gets) refuses no service-managed history",
)
@pytest.mark.parametrize("remind", [False, True])
def test_a_strategy_that_needs_the_history_on_the_client_is_still_refused_a_service_one(
    remind: bool,
) -> None:
    client = LookingUp(["done"])
    client.compaction_strategy = _ClientHistory()
    provider = TodoWriteProvider(
        allow_parallel_in_progress=False, owner="ada", remind_after_compaction=remind
    )
    agent = Agent(client=client, context_providers=[provider])
    with pytest.raises(ChatClientInvalidRequestException, match="client-managed history"):
        asyncio.run(agent.run("go", options={"store": True}))
