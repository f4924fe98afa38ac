from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from acp import (
    connect_to_agent,
    run_agent,
    text_block,
)
from acp.client.connection import ClientSideConnection
from acp.schema import AgentPlanUpdate, PlanEntry, SessionNotification
from acp.utils import serialize_params

import dsh_tool_todo
from dsh_tool_todo.core.contract import EVENT_TYPE, TURN_START
from dsh_tool_todo.errors import AcpUnavailable, UsageError
from dsh_tool_todo.host import Host, HostAgent, MemorySession
from dsh_tool_todo.plans.acp import (
    PlanForwarder,
    PlanUpdatePayload,
    agent_plan_update,
    forward_plans,
    plan_update,
)
from tests._builders import PLAN, options, todo, todos
from tests.test_docs import PYTHON_BLOCK

# ---- the payload ----------------------------------------------------------------


def test_plan_update_snapshot() -> None:
    assert plan_update(PLAN) == {
        "sessionUpdate": "plan",
        "entries": [
            {"content": "Read the report command", "priority": "medium", "status": "completed"},
            {"content": "Add the --json flag", "priority": "medium", "status": "in_progress"},
            {"content": "Write tests", "priority": "medium", "status": "pending"},
        ],
    }


@pytest.mark.parametrize("priority", ["high", "medium", "low"])
def test_plan_update_priority(priority: str) -> None:
    assert plan_update([todo("Ship", "pending")], priority=priority) == {
        "sessionUpdate": "plan",
        "entries": [{"content": "Ship", "priority": priority, "status": "pending"}],
    }


@pytest.mark.parametrize("todos", [[], None])
def test_no_plan_clears_the_clients_plan(todos: list[dict[str, str]] | None) -> None:
    cleared: PlanUpdatePayload = {"sessionUpdate": "plan", "entries": []}
    assert plan_update(todos) == cleared


def test_content_is_passed_through_unescaped() -> None:
    # ACP carries structured data; the displaying client escapes for its medium
    raw = "line one\nline two \x1b[2J"
    entry = plan_update([todo(raw, "pending")])["entries"][0]
    assert entry["content"] == raw


@pytest.mark.parametrize("priority", ["urgent", "HIGH", "", None, 1])
def test_unknown_priority_is_refused(priority: Any) -> None:
    with pytest.raises(
        UsageError, match=r"priority must be high, medium or low \(ACP's priorities\)"
    ):
        plan_update(PLAN, priority=priority)
    with pytest.raises(UsageError, match=r"priority must be high, medium or low"):
        agent_plan_update(PLAN, priority=priority)


def test_malformed_todos_are_refused() -> None:
    with pytest.raises(UsageError, match=r"todo at index 0: status must be one of .*got 'done'"):
        plan_update([todo("a", "done")])


def test_agent_plan_update_is_the_sdk_model() -> None:
    update = agent_plan_update(PLAN, priority="high")
    assert isinstance(update, AgentPlanUpdate)
    assert update.session_update == "plan"
    assert update.entries == [
        PlanEntry(content="Read the report command", priority="high", status="completed"),
        PlanEntry(content="Add the --json flag", priority="high", status="in_progress"),
        PlanEntry(content="Write tests", priority="high", status="pending"),
    ]
    assert update.model_dump(mode="json", by_alias=True, exclude_none=True) == plan_update(
        PLAN, priority="high"
    )


def test_wire_form_of_the_notification() -> None:
    notification = SessionNotification(session_id="sess-1", update=agent_plan_update(PLAN[:1]))
    assert serialize_params(notification) == {
        "sessionId": "sess-1",
        "update": {
            "sessionUpdate": "plan",
            "entries": [
                {"content": "Read the report command", "priority": "medium", "status": "completed"}
            ],
        },
    }
    empty = SessionNotification(session_id="sess-1", update=agent_plan_update([]))
    assert serialize_params(empty) == {
        "sessionId": "sess-1",
        "update": {"sessionUpdate": "plan", "entries": []},
    }


def test_missing_sdk_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "acp.schema", None)
    message = r"^the ACP plan bridge needs the 'acp' extra: .*pip install '\.\[acp\]'"
    with pytest.raises(AcpUnavailable, match=message):
        agent_plan_update(PLAN)
    loop = asyncio.new_event_loop()
    try:
        with pytest.raises(ImportError, match=message):
            forward_plans(MemorySession(), _Recorder(), "s", loop=loop)
    finally:
        loop.close()
    assert plan_update(PLAN)["entries"][0]["status"] == "completed"  # needs no SDK


def test_the_module_imports_without_the_sdk() -> None:
    code = (
        "import sys; sys.modules['acp'] = None\n"
        "from dsh_tool_todo.plans.acp import plan_update, agent_plan_update\n"
        "print(plan_update([])['sessionUpdate'])\n"
        "try:\n"
        "    agent_plan_update([])\n"
        "except ImportError as error:\n"
        "    print(error)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    first, second = result.stdout.splitlines()
    assert first == "plan"
    assert second.startswith(
        "the ACP plan bridge needs the 'acp' extra: install dsh-tool-todo[acp] "
        "(from this repository: pip install '.[acp]')"
    )


# ---- the forwarder, against a recording connection ------------------------------


class _Recorder:
    """Stands in for the SDK's agent-side connection."""

    def __init__(self, fail_on: int | None = None) -> None:
        self.sent: list[tuple[str, AgentPlanUpdate]] = []
        self.calls = 0
        self.fail_on = fail_on

    async def session_update(self, session_id: str, update: Any) -> None:
        self.calls += 1
        await asyncio.sleep(0)  # let later sends try to overtake
        if self.calls == self.fail_on:
            raise ConnectionError("pipe closed")
        self.sent.append((session_id, update))


def _todos(*statuses: str) -> dict[str, list[dict[str, str]]]:
    return todos(*(todo(f"Step {n}", status) for n, status in enumerate(statuses)))


def _entries(update: AgentPlanUpdate) -> list[tuple[str, str]]:
    return [(entry.content, entry.status) for entry in update.entries]


def _forwarding(
    connection: _Recorder | None = None, session_id: str = "s", **kwargs: Any
) -> tuple[Host, HostAgent, _Recorder, PlanForwarder]:
    """A new agent of a new host whose plans go to ``connection`` (call it on the loop)."""
    host = Host([dsh_tool_todo], options(False))
    agent = host.new_agent()
    connection = _Recorder() if connection is None else connection
    return host, agent, connection, forward_plans(agent.session, connection, session_id, **kwargs)


def test_forward_plans_needs_a_loop() -> None:
    with pytest.raises(UsageError, match=r"forward_plans needs the host's event loop"):
        forward_plans(MemorySession(), _Recorder(), "s")


def test_forward_plans_checks_the_priority_at_once() -> None:
    async def main() -> None:
        with pytest.raises(UsageError, match=r"priority must be high, medium or low"):
            forward_plans(MemorySession(), _Recorder(), "s", priority="urgent")

    asyncio.run(main())


def test_forwards_each_write_in_log_order() -> None:
    async def main() -> None:
        host, agent, connection, forwarder = _forwarding(session_id="sess-7", priority="low")
        assert isinstance(forwarder, PlanForwarder)
        for statuses in [("in_progress", "pending"), ("completed", "in_progress")]:
            await host.acall_tool("todo_write", _todos(*statuses), agent=agent)
        agent.session.append(TURN_START, {})
        host.call_tool("todo_write", _todos("completed", "completed"), agent=agent)
        await forwarder.drain()
        assert [sid for sid, _ in connection.sent] == ["sess-7"] * 3
        assert [_entries(update) for _, update in connection.sent] == [
            [("Step 0", "in_progress"), ("Step 1", "pending")],
            [("Step 0", "completed"), ("Step 1", "in_progress")],
            [("Step 0", "completed"), ("Step 1", "completed")],
        ]
        assert {entry.priority for _, u in connection.sent for entry in u.entries} == {"low"}

    asyncio.run(main())


def test_rejected_calls_send_nothing() -> None:
    async def main() -> None:
        host, agent, connection, forwarder = _forwarding()
        reply = await host.acall_tool(
            "todo_write", _todos("in_progress", "in_progress"), agent=agent
        )
        assert reply.startswith("Error: invalid todos: at most one task may be in_progress")
        await forwarder.drain()
        assert connection.sent == []

    asyncio.run(main())


def test_forwards_writes_made_on_other_threads() -> None:
    async def main() -> None:
        host, agent, connection, forwarder = _forwarding()

        def model_turn() -> None:
            for n in range(5):
                host.call_tool("todo_write", _todos(*["completed"] * n, "pending"), agent=agent)

        await asyncio.to_thread(model_turn)
        await forwarder.drain()
        assert [len(update.entries) for _, update in connection.sent] == [1, 2, 3, 4, 5]

    asyncio.run(main())


def test_unsubscribe() -> None:
    async def main() -> None:
        host, agent, connection, forwarder = _forwarding()
        host.call_tool("todo_write", _todos("pending"), agent=agent)
        forwarder()
        forwarder()  # twice is harmless
        host.call_tool("todo_write", _todos("in_progress"), agent=agent)
        await forwarder.drain()
        assert [_entries(update) for _, update in connection.sent] == [[("Step 0", "pending")]]

    asyncio.run(main())


def test_a_failed_send_surfaces_on_drain_and_later_plans_still_go() -> None:
    async def main() -> None:
        host, agent, connection, forwarder = _forwarding(_Recorder(fail_on=1))
        host.call_tool("todo_write", _todos("pending"), agent=agent)
        host.call_tool("todo_write", _todos("in_progress"), agent=agent)
        with pytest.raises(ConnectionError, match="pipe closed"):
            await forwarder.drain()
        await forwarder.drain()  # reported once
        assert [_entries(update) for _, update in connection.sent] == [[("Step 0", "in_progress")]]

    asyncio.run(main())


def test_a_malformed_logged_write_does_not_break_the_append() -> None:
    async def main() -> None:
        session = MemorySession()
        forwarder = forward_plans(session, _Recorder(), "s")
        session.append(EVENT_TYPE, todos(todo("x", "done")))
        assert len(session.events) == 1
        with pytest.raises(UsageError, match=r"status must be one of .*got 'done'"):
            await forwarder.drain()

    asyncio.run(main())


# ---- end to end: a real ACP agent and client over a local socket pair -----------


def _agent_class_from_the_docs() -> Any:
    """The ``TodoAgent`` of docs/acp.md, exactly as printed there: the page and the tests
    run one class."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "acp.md").read_text(encoding="utf-8")
    (block,) = [block for block in PYTHON_BLOCK.findall(page) if "class TodoAgent" in block]
    namespace: dict[str, Any] = {"__name__": "docs_acp_agent"}
    exec(compile(block, "docs/acp.md", "exec"), namespace)
    return namespace["TodoAgent"]


TodoAgent = _agent_class_from_the_docs()


def test_the_docs_agent_is_a_whole_acp_agent(tmp_path: Path) -> None:
    agent = TodoAgent(json.loads, str(tmp_path))
    for method in ("initialize", "new_session", "prompt", "cancel", "close"):
        assert asyncio.iscoroutinefunction(getattr(agent, method)), method
    assert asyncio.run(agent.cancel(session_id="session-1")) is None
    asyncio.run(agent.close())


class PlanClient:
    """An ACP client keeping each session's plan, as an editor's plan panel would."""

    def __init__(self) -> None:
        self.plans: dict[str, list[dict[str, str]]] = {}
        self.notifications: list[dict[str, Any]] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.notifications.append(
            serialize_params(SessionNotification(session_id=session_id, update=update))
        )
        if isinstance(update, AgentPlanUpdate):
            self.plans[session_id] = [
                entry.model_dump(mode="json", exclude_none=True) for entry in update.entries
            ]


async def _pump(source: asyncio.StreamReader, sink: asyncio.StreamWriter, kept: bytearray) -> None:
    try:
        while data := await source.read(1 << 16):
            kept += data
            sink.write(data)
            await sink.drain()
    except ConnectionError:
        pass  # the other end went first
    finally:
        if not sink.is_closing():  # half-closed: what the other way still carries gets through
            sink.write_eof()


@asynccontextmanager
async def connected(
    agent: Any, client: Any, sent: bytearray | None = None
) -> AsyncIterator[ClientSideConnection]:
    """The SDK's agent-side and client-side connections over local socket pairs, through a
    relay that keeps in ``sent`` every byte the agent sends."""
    sent = bytearray() if sent is None else sent
    agent_end, agent_relay = socket.socketpair()
    client_relay, client_end = socket.socketpair()
    agent_reader, agent_writer = await asyncio.open_connection(sock=agent_end)
    from_agent, to_agent = await asyncio.open_connection(sock=agent_relay)
    from_client, to_client = await asyncio.open_connection(sock=client_relay)
    client_reader, client_writer = await asyncio.open_connection(sock=client_end)
    pumps = [
        asyncio.create_task(_pump(from_agent, to_client, sent)),
        asyncio.create_task(_pump(from_client, to_agent, bytearray())),
    ]
    serving = asyncio.create_task(run_agent(agent, agent_writer, agent_reader))  # type: ignore[arg-type]
    connection = connect_to_agent(client, client_writer, client_reader)  # type: ignore[arg-type]
    try:
        yield connection
    finally:
        await connection.close()
        client_writer.close()
        await client_writer.wait_closed()
        await asyncio.wait_for(serving, timeout=5)
        agent_writer.close()
        await agent_writer.wait_closed()
        await asyncio.wait_for(asyncio.gather(*pumps), timeout=5)
        for relay in (to_agent, to_client):
            relay.close()
        await agent.close()


def plan_lines(sent: bytes) -> list[bytes]:
    """The ``session/update`` notifications among the bytes an agent sent, a line each."""
    return [line for line in sent.split(b"\n") if b'"method":"session/update"' in line]


# What the forwarder sent before it knew of identified plans, byte for byte, for the writes of
# test_end_to_end_plan_reaches_the_client: a client without them still gets exactly this.
LEGACY_BYTES = [
    b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"session-1","update":'
    b'{"entries":[{"content":"Add the --json flag","priority":"medium","status":"in_progress"},'
    b'{"content":"Write tests","priority":"medium","status":"pending"}],'
    b'"sessionUpdate":"plan"}}}',
    b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"session-1","update":'
    b'{"entries":[{"content":"Read the report command","priority":"medium",'
    b'"status":"completed"},{"content":"Add the --json flag","priority":"medium",'
    b'"status":"in_progress"},{"content":"Write tests","priority":"medium",'
    b'"status":"pending"}],"sessionUpdate":"plan"}}}',
    b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"session-2","update":'
    b'{"entries":[],"sessionUpdate":"plan"}}}',
]


def prompt(*calls: Mapping[str, Any]) -> list[Any]:
    return [text_block(json.dumps(list(calls)))]


async def within(step: Callable[[], Any]) -> Any:
    return await asyncio.wait_for(step(), timeout=10)


# the session-2 prompt of the end-to-end test: a refused write, then an empty plan
REFUSED_THEN_EMPTY = (
    {  # refused: this deployment allows one in_progress at a time
        "todos": [todo("Lint", "in_progress"), todo("Test", "in_progress")]
    },
    {"todos": []},
)


def test_end_to_end_plan_reaches_the_client(tmp_path: Path) -> None:
    async def main() -> tuple[Any, PlanClient, bytearray]:
        agent, client, sent = TodoAgent(json.loads, str(tmp_path)), PlanClient(), bytearray()
        async with connected(agent, client, sent) as connection:
            await within(lambda: connection.initialize(protocol_version=1))
            first = await within(lambda: connection.new_session(cwd="/"))
            second = await within(lambda: connection.new_session(cwd="/"))
            assert (first.session_id, second.session_id) == ("session-1", "session-2")

            response = await within(
                lambda: connection.prompt(
                    session_id="session-1", prompt=prompt(todos(*PLAN[1:]), todos(*PLAN))
                )
            )
            assert response.stop_reason == "end_turn"
            assert client.plans == {
                "session-1": [
                    {
                        "content": "Read the report command",
                        "priority": "medium",
                        "status": "completed",
                    },
                    {
                        "content": "Add the --json flag",
                        "priority": "medium",
                        "status": "in_progress",
                    },
                    {"content": "Write tests", "priority": "medium", "status": "pending"},
                ]
            }

            await within(
                lambda: connection.prompt(
                    session_id="session-2", prompt=prompt(*REFUSED_THEN_EMPTY)
                )
            )
            await within(lambda: connection.cancel(session_id="session-2"))
        return agent, client, sent

    agent, client, sent = asyncio.run(main())
    assert agent.replies == [
        "Updated todo list: 1 pending, 1 in progress, 0 completed.",
        "Updated todo list: 1 pending, 1 in progress, 1 completed.",
        "Error: invalid todos: at most one task may be in_progress (got 2)",
        "Updated todo list: 0 pending, 0 in progress, 0 completed.",
    ]
    assert client.plans["session-2"] == []
    # exactly what went over the wire, in order
    assert plan_lines(sent) == LEGACY_BYTES
    assert client.notifications == [
        {
            "sessionId": "session-1",
            "update": {
                "sessionUpdate": "plan",
                "entries": [
                    {
                        "content": "Add the --json flag",
                        "priority": "medium",
                        "status": "in_progress",
                    },
                    {"content": "Write tests", "priority": "medium", "status": "pending"},
                ],
            },
        },
        {"sessionId": "session-1", "update": plan_update(PLAN)},
        {"sessionId": "session-2", "update": {"sessionUpdate": "plan", "entries": []}},
    ]
