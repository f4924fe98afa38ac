"""The Microsoft Agent Framework adapter, through the framework's real agent loop.

The model is a scripted chat client: ``BaseChatClient`` with the framework's own
function-invocation and chat-middleware layers (as its OpenAI and Anthropic clients
are built), answering each request with the next scripted message. Everything
between it and the tool (the Agent, the context providers, the tool loop, the
middleware pipeline) is the framework's.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import logging
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from agent_framework import (
    Agent,
    BaseChatClient,
    ChatMiddlewareLayer,
    ChatResponse,
    ChatResponseUpdate,
    Content,
    FunctionInvocationLayer,
    Message,
    SlidingWindowStrategy,
    tool,
)

from dsh_tool_todo.core import contract
from dsh_tool_todo.core.contract import EVENT_TYPE
from dsh_tool_todo.errors import UsageError
from dsh_tool_todo.integrations.agent_framework import TodoWriteProvider
from dsh_tool_todo.plans.reminder import plan_reminder
from dsh_tool_todo.stores.memory import MemorySession
from dsh_tool_todo.stores.owners import OwnerRegistry
from tests.integrations.adapter_contract import CHECKS, Driver, RecordingSession, Reply, opener

PLAN = {"todos": [{"content": "Read the code", "status": "in_progress"}]}
Step = Sequence[tuple[str, Any]] | str


class ScriptedClient(FunctionInvocationLayer[Any], ChatMiddlewareLayer[Any], BaseChatClient[Any]):
    """Answers each request with the next step: function calls (id, arguments) or a text."""

    def __init__(self, script: Sequence[Step]) -> None:
        super().__init__()
        self.script = list(script)
        self.requests: list[dict[str, Any]] = []

    def _answer(self, messages: Sequence[Message], options: Mapping[str, Any]) -> Message:
        tools = [tool.to_json_schema_spec() for tool in options.get("tools") or []]
        self.requests.append({"messages": list(messages), "tools": tools})
        step = self.script.pop(0)
        if isinstance(step, str):
            return Message(role="assistant", contents=[step])
        calls = [
            Content.from_function_call(
                call_id=cid, name="todo_write", arguments=a if isinstance(a, str) else json.dumps(a)
            )
            for cid, a in step
        ]
        return Message(role="assistant", contents=calls)

    def _inner_get_response(self, *, messages: Any, stream: bool, options: Any, **kw: Any) -> Any:
        answer = self._answer(messages, options)
        if not stream:

            async def respond() -> ChatResponse:
                return ChatResponse(messages=[answer])

            return respond()

        async def updates() -> AsyncIterator[ChatResponseUpdate]:
            yield ChatResponseUpdate(role="assistant", contents=answer.contents)

        return self._build_response_stream(updates())


def results_of(client: ScriptedClient, request: int = -1) -> dict[str, Any]:
    """The function results the model read in a request (the last one), by call id."""
    return {
        content.call_id: content
        for message in client.requests[request]["messages"]
        for content in message.contents
        if content.type == "function_result"
    }


async def run_to_the_end(agent: Agent, *, stream: bool) -> None:
    """Run ``agent`` on "plan it" to its end, streamed or not."""
    if stream:
        async for _ in agent.run("plan it", stream=True):
            pass
    else:
        await agent.run("plan it")


def run(
    provider: TodoWriteProvider, calls: Sequence[tuple[str, Any]], **run: Any
) -> ScriptedClient:
    client = ScriptedClient([calls, "done"] if calls else ["done"])
    agent = Agent(client=client, context_providers=[provider])
    asyncio.run(agent.run("plan it", **run))
    assert client.script == []
    return client


class AgentFrameworkDriver:
    call_ids = True

    def offered(self, *, parallel: bool) -> tuple[str, str, Mapping[str, Any]]:
        provider = TodoWriteProvider(allow_parallel_in_progress=parallel, owner="me")
        (spec,) = run(provider, []).requests[0]["tools"]
        function = spec["function"]
        return function["name"], function["description"], function["parameters"]

    def turn(self, calls: Sequence[tuple[str, Any]], session: Any) -> list[Reply]:
        owners = OwnerRegistry(open_session=opener(session))
        provider = TodoWriteProvider(
            allow_parallel_in_progress=False, owner="me", owners=owners, start_turn=False
        )
        results = results_of(run(provider, calls))
        return [Reply(results[cid].result, results[cid].exception is not None) for cid, _ in calls]


DRIVER: Driver = AgentFrameworkDriver()


@pytest.mark.parametrize("check", CHECKS.values(), ids=CHECKS.keys())
def test_agent_framework_against_the_adapter_contract(check: Any) -> None:
    check(DRIVER)


def test_the_request_offers_our_schema_byte_for_byte() -> None:
    provider = TodoWriteProvider(allow_parallel_in_progress=False, owner="me")
    (spec,) = run(provider, []).requests[0]["tools"]
    assert spec["function"]["parameters"]["additionalProperties"] is False
    expected = provider.tool.todo_tool.parameters
    assert json.dumps(spec["function"]["parameters"]) == json.dumps(expected)


@pytest.mark.parametrize("stream", [False, True])
def test_a_refusal_is_an_error_result_with_the_tools_text_and_the_model_recovers(
    stream: bool,
) -> None:
    session = MemorySession()
    owners = OwnerRegistry(open_session=lambda key: session)
    provider = TodoWriteProvider(allow_parallel_in_progress=False, owner="me", owners=owners)
    bad = {**PLAN, "merge": True}
    expected = provider.tool.todo_tool.call(bad, MemorySession())
    client = ScriptedClient([[("bad", bad)], [("good", PLAN)], "done"])
    agent = Agent(client=client, context_providers=[provider])

    asyncio.run(run_to_the_end(agent, stream=stream))
    refused = results_of(client, 1)["bad"]
    assert (refused.result, refused.exception) == (expected, expected)
    recorded = results_of(client)["good"]
    assert recorded.result == "Updated todo list: 0 pending, 1 in progress, 0 completed."
    assert recorded.exception is None
    assert [e["data"] for e in session.events] == [{}, {**PLAN, contract.CALL_ID_KEY: "good"}]


def test_arguments_the_framework_would_reject_reach_our_validation() -> None:
    # a dict schema would have the framework answer "Error: Argument parsing failed."
    provider = TodoWriteProvider(allow_parallel_in_progress=False, owner="me")
    for args in ({}, {"todos": "all of it"}, '{"todos": ['):
        expected = provider.tool.todo_tool.call(args, MemorySession())
        result = results_of(run(provider, [("c1", args)]))["c1"]
        assert (result.result, result.exception) == (expected, expected)
        assert expected.startswith("Error: ")


@pytest.mark.parametrize(
    "sent", ["[1, 2]", "null", '"{}"', json.dumps(json.dumps(PLAN)), "{not json", "todos"]
)
def test_arguments_that_are_not_a_json_object_read_the_tools_own_text(sent: str) -> None:
    # the framework hands the tool {"raw": ...} for them; the model never sent a `raw`
    session = MemorySession()
    owners = OwnerRegistry(open_session=lambda key: session)
    provider = TodoWriteProvider(
        allow_parallel_in_progress=False, owner="me", owners=owners, start_turn=False
    )
    expected = provider.tool.todo_tool.call(sent, MemorySession())
    assert expected.startswith(("Error: invalid todos: the arguments", "Error: invalid todos: the"))
    assert "raw" not in expected
    result = results_of(run(provider, [("c1", sent)]))["c1"]
    assert (result.result, result.exception) == (expected, expected)
    assert session.events == []


def test_a_raw_key_the_model_sent_itself_is_an_unknown_argument() -> None:
    provider = TodoWriteProvider(allow_parallel_in_progress=False, owner="me")
    for sent in ({"raw": PLAN}, {"raw": "x", **PLAN}):
        result = results_of(run(provider, [("c1", sent)]))["c1"]
        assert result.result.startswith("Error: invalid todos: unknown argument `raw`")


def test_the_session_is_the_owner_and_each_run_starts_a_turn() -> None:
    owners = OwnerRegistry()
    provider = TodoWriteProvider(allow_parallel_in_progress=False, owners=owners)
    other_plan = {"todos": [{"content": "Write the docs", "status": "pending"}]}
    client = ScriptedClient([[("a1", PLAN)], "done", [("b1", other_plan)], "done", "hello again"])
    agent = Agent(client=client, context_providers=[provider])
    ada, bob = agent.create_session(), agent.create_session()

    async def go() -> None:
        await agent.run("plan it", session=ada)
        await agent.run("plan yours", session=bob)

    asyncio.run(go())
    for session, plan in ((ada, PLAN), (bob, other_plan)):
        assert session.session_id is not None
        written = owners.session(session.session_id).latest([EVENT_TYPE])
        assert written is not None
        assert written["data"]["todos"] == plan["todos"]
    asyncio.run(agent.run("thanks", session=ada))  # the next run: a new turn, the plan clears
    assert ada.session_id is not None
    assert [e["type"] for e in owners.session(ada.session_id).events] == [
        "turn/start",
        EVENT_TYPE,
        "turn/start",
    ]


def test_calls_of_one_session_in_concurrent_runs_are_recorded_one_at_a_time() -> None:
    from tests.integrations.adapter_contract import SlowSession

    session = SlowSession()
    owners = OwnerRegistry(open_session=lambda key: session)
    provider = TodoWriteProvider(
        allow_parallel_in_progress=False, owner="me", owners=owners, start_turn=False
    )
    plans = [{"todos": [{"content": f"Step {n}", "status": "pending"}]} for n in range(4)]

    async def one(n: int) -> None:
        client = ScriptedClient([[(f"c{n}", plans[n])], "done"])
        await Agent(client=client, context_providers=[provider]).run("go")

    async def go() -> None:
        await asyncio.gather(*(one(n) for n in range(4)))

    asyncio.run(go())
    assert not session.overlapped
    assert sorted(d["todos"][0]["content"] for d in session.data) == [f"Step {n}" for n in range(4)]


def test_no_owner_is_refused_with_the_specification_text_and_warned_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    provider = TodoWriteProvider(allow_parallel_in_progress=False, owner=lambda session: None)
    with caplog.at_level(logging.WARNING, logger="dsh_tool_todo"):
        results = results_of(run(provider, [("c1", PLAN), ("c2", PLAN)]))
    for cid in ("c1", "c2"):
        assert (results[cid].result, results[cid].exception) == (contract.NO_OWNER,) * 2
    assert len([r for r in caplog.records if "found no owner" in r.getMessage()]) == 1


def test_a_run_without_a_session_gets_its_own_plan() -> None:
    seen: list[str | None] = []  # the session of each turn start and each call

    def owner(session: Any) -> str | None:
        seen.append(session.session_id)
        return str(session.session_id)

    provider = TodoWriteProvider(allow_parallel_in_progress=False, owner=owner)
    run(provider, [("c1", PLAN)])
    first = seen[:]  # its turn start, its call, and each model request (for its notice)
    seen.clear()
    run(provider, [("c1", PLAN)])
    assert len(first) == len(seen) == 4
    assert set(first) == {first[0]}
    assert set(seen) == {seen[0]}
    assert first[0] != seen[0]


def test_start_turn_false_appends_no_turn_start() -> None:
    session = RecordingSession()
    owners = OwnerRegistry(open_session=lambda key: session)
    provider = TodoWriteProvider(
        allow_parallel_in_progress=False, owner="me", owners=owners, start_turn=False
    )
    run(provider, [("c1", PLAN)])
    assert session.data == [{**PLAN, contract.CALL_ID_KEY: "c1"}]


def test_an_owner_that_is_neither_a_key_nor_a_function_is_refused() -> None:
    with pytest.raises(UsageError, match=r"^TodoWriteProvider: owner= takes an owner key"):
        TodoWriteProvider(allow_parallel_in_progress=False, owner=7)  # type: ignore[arg-type]


@tool(name="lookup", approval_mode="never_require")
def lookup(q: str) -> str:
    """Look something up."""
    return f"found {q}"


class LookingUp(ScriptedClient):
    """Calls whose id starts with L are ``lookup`` calls."""

    def __init__(self, script: Sequence[Step]) -> None:
        super().__init__(script)
        self.seen: list[list[tuple[Any, ...]]] = []  # each request as the model reads it, then

    def _answer(self, messages: Sequence[Message], options: Mapping[str, Any]) -> Message:
        self.seen.append(
            [
                (m.role, c.type, c.name, c.call_id, c.arguments, c.text, c.result)
                for m in messages
                for c in m.contents
            ]
        )
        answer = super()._answer(messages, options)
        for content in answer.contents:
            if content.type == "function_call" and str(content.call_id).startswith("L"):
                content.name = "lookup"
        return answer


def compacted_run(*, remind: bool, stream: bool = False) -> LookingUp:
    """Write the plan, then four lookups, with a window that drops the write by request 4."""
    lookups: list[Step] = [[(f"L{n}", {"q": str(n)})] for n in range(1, 5)]
    client = LookingUp([[("w1", PLAN)], *lookups, "done"])
    client.compaction_strategy = SlidingWindowStrategy(keep_last_groups=3)
    provider = TodoWriteProvider(allow_parallel_in_progress=False, remind_after_compaction=remind)
    agent = Agent(client=client, tools=[lookup], context_providers=[provider])

    asyncio.run(run_to_the_end(agent, stream=stream))
    assert client.script == []
    return client


def texts_of(messages: Sequence[Message]) -> list[str]:
    return [c.text for m in messages if m.role == "user" for c in m.contents if c.text]


@pytest.mark.parametrize("stream", [False, True])
def test_after_a_compaction_drops_the_write_the_reminder_is_the_last_message(stream: bool) -> None:
    reminder = plan_reminder(PLAN["todos"])
    assert reminder is not None
    client = compacted_run(remind=True, stream=stream)
    assert reminder not in texts_of(client.requests[0]["messages"])  # no plan yet
    for request in client.requests[1:4]:  # the write is still in the messages: no reminder
        assert reminder not in texts_of(request["messages"])
        assert any(
            c.type == "function_call" and c.name == "todo_write"
            for m in request["messages"]
            for c in m.contents
        )
    for request in client.requests[4:]:  # dropped: the reminder, once, after the newest message
        messages = request["messages"]
        assert texts_of(messages).count(reminder) == 1
        assert (messages[-1].role, messages[-1].text) == ("user", reminder)
    without = compacted_run(remind=False, stream=stream)
    assert all(reminder not in texts_of(r["messages"]) for r in without.requests)
    # before the reminder, each request is the one the same run sends without the option
    for mine, plain in zip(client.seen[4:], without.seen[4:], strict=True):
        assert mine[:-1] == plain


def test_no_reminder_when_nothing_is_compacted() -> None:
    client = LookingUp([[("w1", PLAN)], [("L1", {"q": "a"})], "done"])
    provider = TodoWriteProvider(allow_parallel_in_progress=False, remind_after_compaction=True)
    asyncio.run(Agent(client=client, tools=[lookup], context_providers=[provider]).run("go"))
    reminder = plan_reminder(PLAN["todos"])
    assert all(reminder not in texts_of(r["messages"]) for r in client.requests)


PAGE = Path(__file__).resolve().parents[2] / "docs" / "integrations" / "agent-framework.md"


def test_the_pages_scripted_client_streams_as_well() -> None:
    """docs/integrations/agent-framework.md's End to end client answers ``stream=True``: the
    refusal and the plan come through a streamed run as through an awaited one, and a text
    arrives in pieces (tests/test_docs.py runs the page's own blocks)."""
    section = PAGE.read_text(encoding="utf-8").partition("\n## End to end\n")[2]
    blocks = re.findall(r"^```python\n(.*?)^```", section, re.S | re.M)
    page: dict[str, Any] = {"__name__": "page"}
    with contextlib.redirect_stdout(io.StringIO()):
        exec(blocks[0], page)  # the client, and the page's own awaited run
    plan = page["plan"]
    model = page["Scripted"]([("c1", {**plan, "merge": True}), ("c2", plan), "Planned it all."])
    owners = OwnerRegistry()
    provider = TodoWriteProvider(allow_parallel_in_progress=False, owners=owners)
    agent = Agent(client=model, context_providers=[provider])
    session = agent.create_session()

    async def streamed() -> list[str]:
        return [update.text async for update in agent.run("Plan it", session=session, stream=True)]

    texts = [text for text in asyncio.run(streamed()) if text]

    assert texts == ["Planned ", "it ", "all."]
    refused, recorded = (
        content
        for message in model.requests[-1]
        for content in message.contents
        if content.type == "function_result"
    )
    assert str(refused.result).startswith("Error: invalid todos: unknown argument `merge`")
    assert refused.exception == refused.result
    assert (recorded.result, recorded.exception) == (
        "Updated todo list: 0 pending, 1 in progress, 0 completed.",
        None,
    )
    assert owners.session(session.session_id).latest([EVENT_TYPE])["data"] == {
        **plan,
        "callId": "c2",
    }
