"""The A2A helper end to end: the a2a-sdk's own server and client, in process.

An ``AgentExecutor`` runs an agent through the reference host and forwards its
session with :func:`forward_plan_artifacts`; the SDK's client sends a message
over JSON-RPC (an in-process ASGI transport) and reads the stream. The client
sees artifact ``plan`` replaced on each write, and the task the server keeps
ends with one plan artifact, the last.
"""

from __future__ import annotations

import ast
import asyncio
import json
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from a2a.client import ClientConfig, ClientFactory
from a2a.helpers import new_task_from_user_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    TaskArtifactUpdateEvent,
    TaskState,
)
from google.protobuf.json_format import MessageToDict, ParseDict
from starlette.applications import Starlette

import dsh_tool_todo
from dsh_tool_todo.errors import UsageError
from dsh_tool_todo.host import Host
from dsh_tool_todo.integrations.a2a import forward_plan_artifacts, plan_artifact_update
from dsh_tool_todo.plans.wire import a2a_artifact_update

from ..conftest import PLAN, options

URL = "http://agent.test/"
PLANS = [
    PLAN,
    [{**PLAN[0]}, {**PLAN[1], "status": "completed"}, {**PLAN[2], "status": "in_progress"}],
]


class PlanningExecutor(AgentExecutor):
    """Writes each plan of PLANS with todo_write, then starts a new turn, which clears it."""

    def __init__(self, *, from_thread: bool = False) -> None:
        self.host = Host([dsh_tool_todo], options(False))
        self.from_thread = from_thread

    async def start_task(self, context: RequestContext, event_queue: EventQueue) -> Any:
        """Enqueue the task of the user's message; a new agent and its plan forwarder."""
        assert context.message is not None
        await event_queue.enqueue_event(new_task_from_user_message(context.message))
        agent = self.host.new_agent()
        forwarder = forward_plan_artifacts(
            agent.session, event_queue, task_id=context.task_id, context_id=context.context_id
        )
        return agent, forwarder

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        agent, forwarder = await self.start_task(context, event_queue)
        if self.from_thread:  # a host that runs tools in worker threads
            await asyncio.to_thread(self._write_all, agent)
        else:
            for plan in PLANS:
                await self.host.acall_tool("todo_write", {"todos": plan}, agent=agent)
        if context.get_user_input() == "then start a new turn":
            agent.session.append("turn/start", {})
        await forwarder.drain()
        forwarder()
        await TaskUpdater(event_queue, context.task_id, context.context_id).complete()

    def _write_all(self, agent: Any) -> None:
        assert threading.current_thread() is not threading.main_thread()
        for plan in PLANS:
            self.host.call_tool("todo_write", {"todos": plan}, agent=agent)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError("the scripted agent finishes at once")


def plan_of(update: TaskArtifactUpdateEvent) -> Any:
    (part,) = update.artifact.parts
    return MessageToDict(part.data)["todos"]


def a2a_app(executor: AgentExecutor, url: str = URL) -> tuple[AgentCard, Starlette]:
    """The SDK's request handler and JSON-RPC routes around ``executor``, and its card."""
    card = AgentCard(
        name="planner",
        description="writes plans",
        version="1.0.0",
        supported_interfaces=[AgentInterface(protocol_binding="JSONRPC", url=url)],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["application/json"],
    )
    handler = DefaultRequestHandler(
        agent_executor=executor, task_store=InMemoryTaskStore(), agent_card=card
    )
    return card, Starlette(routes=create_jsonrpc_routes(handler, "/"))


async def converse(executor: AgentExecutor, text: str) -> tuple[list[Any], Any]:
    """Send ``text`` with the SDK's client; the stream's events and the task the server kept."""
    card, app = a2a_app(executor)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=URL) as http:
        client = ClientFactory(ClientConfig(httpx_client=http, streaming=True)).create(card)
        message = Message(message_id="m-1", role=Role.ROLE_USER, parts=[Part(text=text)])
        events = [event async for event in client.send_message(SendMessageRequest(message=message))]
        task_ids = {event.task.id for event in events if event.HasField("task")}
        (task_id,) = task_ids
        task = await client.get_task(GetTaskRequest(id=task_id))
        await client.close()
    return events, task


@pytest.mark.parametrize("from_thread", [False, True], ids=["on the loop", "from a thread"])
def test_the_client_sees_the_plan_artifact_replaced_on_each_write(from_thread: bool) -> None:
    events, task = asyncio.run(converse(PlanningExecutor(from_thread=from_thread), "plan it"))
    updates = [event.artifact_update for event in events if event.HasField("artifact_update")]
    assert [plan_of(update) for update in updates] == PLANS
    for update in updates:
        assert update.artifact.artifact_id == "plan"
        assert update.append is False
        assert update.last_chunk is True
        assert update.task_id == task.id
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    (artifact,) = task.artifacts  # replaced, not appended: one plan artifact, the last
    assert artifact.artifact_id == "plan"
    assert MessageToDict(artifact.parts[0].data) == {"todos": PLANS[-1]}


def test_a_new_turn_sends_the_cleared_plan() -> None:
    events, task = asyncio.run(converse(PlanningExecutor(), "then start a new turn"))
    updates = [event.artifact_update for event in events if event.HasField("artifact_update")]
    assert [plan_of(update) for update in updates] == [*PLANS, []]
    (artifact,) = task.artifacts
    assert MessageToDict(artifact.parts[0].data) == {"todos": []}


@pytest.mark.parametrize("source", [PLAN, {"type": "turn/start", "data": {}}, None])
def test_plan_artifact_update_is_the_wire_form_parsed_by_the_sdk(source: Any) -> None:
    update = plan_artifact_update(source, task_id="t", context_id="c")
    assert isinstance(update, TaskArtifactUpdateEvent)
    parsed = ParseDict(a2a_artifact_update(source, task_id="t", context_id="c"), type(update)())
    assert update == parsed
    assert plan_of(update) == (PLAN if source is PLAN else [])


def test_forwarding_needs_the_tasks_ids_and_a_loop() -> None:
    session = Host([dsh_tool_todo], options(False)).new_agent().session

    class Queue:
        async def enqueue_event(self, event: TaskArtifactUpdateEvent, /) -> None:
            raise AssertionError("nothing is sent")

    with pytest.raises(UsageError, match=r"task_id must be the A2A task's non-empty id string"):
        forward_plan_artifacts(session, Queue(), task_id=None, context_id="c")
    with pytest.raises(UsageError, match=r"forward_plan_artifacts needs the host's event loop"):
        forward_plan_artifacts(session, Queue(), task_id="t", context_id="c")


def test_a_failed_enqueue_is_raised_by_drain_and_later_plans_still_go() -> None:
    host = Host([dsh_tool_todo], options(False))
    agent = host.new_agent()

    class FlakyQueue:
        def __init__(self) -> None:
            self.sent: list[Any] = []

        async def enqueue_event(self, event: TaskArtifactUpdateEvent, /) -> None:
            if not self.sent:
                self.sent.append(None)
                raise RuntimeError("queue closed")
            self.sent.append(plan_of(event))

    async def main() -> list[Any]:
        queue = FlakyQueue()
        forwarder = forward_plan_artifacts(agent.session, queue, task_id="t", context_id="c")
        for plan in PLANS:
            await host.acall_tool("todo_write", {"todos": plan}, agent=agent)
        with pytest.raises(RuntimeError, match="queue closed"):
            await forwarder.drain()
        await forwarder.drain()  # the failure was reported once
        forwarder()
        await host.acall_tool("todo_write", {"todos": PLAN[:1]}, agent=agent)
        await forwarder.drain()
        return queue.sent

    assert asyncio.run(main()) == [None, PLANS[1]], "nothing sent after unsubscribing"


def test_without_the_sdk_the_import_names_the_extra(tmp_path: Path) -> None:
    (tmp_path / "a2a.py").write_text("# the user's own script, hiding the SDK\n")
    code = (
        "from dsh_tool_todo.integrations import MissingExtra\n"
        "try:\n    import dsh_tool_todo.integrations.a2a\n"
        "except MissingExtra as error:\n    print(error)\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120
    )
    assert run.returncode == 0, run.stderr
    assert "[a2a]" in run.stdout, run.stdout
    assert "your own 'a2a'" in run.stdout, run.stdout


def test_a_lone_surrogate_the_tool_recorded_still_goes_out_as_u_fffd() -> None:
    host = Host([dsh_tool_todo], options(False))
    agent = host.new_agent()
    sent: list[Any] = []

    class Queue:
        async def enqueue_event(self, event: TaskArtifactUpdateEvent, /) -> None:
            sent.append(plan_of(event))

    async def main() -> None:
        forwarder = forward_plan_artifacts(agent.session, Queue(), task_id="t", context_id="c")
        arguments = '{"todos": [{"content": "a \\ud800 b 計画", "status": "pending"}]}'
        text = await host.acall_tool("todo_write", arguments, agent=agent)
        assert text.startswith("Updated todo list"), text
        await forwarder.drain()
        forwarder()

    asyncio.run(main())
    assert sent == [[{"content": "a \ufffd b 計画", "status": "pending"}]]


# Line breaks the SDK's server writes raw into a `data:` line and its client splits at.
BREAKING = [
    {"content": "Read\u2028the spec", "status": "completed"},
    {"content": "Write\u2029the code", "status": "in_progress"},
    {"content": "Test\x85it 計画", "status": "pending"},
]


class BreakingExecutor(PlanningExecutor):
    """Writes a plan whose text holds each line break, then the plans of PLANS."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        agent, forwarder = await self.start_task(context, event_queue)
        for plan in [BREAKING, *PLANS]:
            text = await self.host.acall_tool("todo_write", {"todos": plan}, agent=agent)
            assert text.startswith("Updated todo list"), text
        await forwarder.drain()
        forwarder()
        await TaskUpdater(event_queue, context.task_id, context.context_id).complete()


def test_line_separators_in_a_plan_reach_the_sdks_streaming_client_as_line_feeds() -> None:
    events, task = asyncio.run(converse(BreakingExecutor(), "plan it"))
    updates = [event.artifact_update for event in events if event.HasField("artifact_update")]
    sent = [
        {"content": "Read\nthe spec", "status": "completed"},
        {"content": "Write\nthe code", "status": "in_progress"},
        {"content": "Test\nit 計画", "status": "pending"},
    ]
    assert [plan_of(update) for update in updates] == [sent, *PLANS]
    assert plan_of(plan_artifact_update(BREAKING, task_id="t", context_id="c")) == sent
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    (artifact,) = task.artifacts
    assert MessageToDict(artifact.parts[0].data) == {"todos": PLANS[-1]}


class LockstepExecutor(PlanningExecutor):
    """Writes the next plan only once the client has seen the previous one."""

    def __init__(self, seen: list[threading.Event]) -> None:
        super().__init__()
        self.seen = seen

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        agent, forwarder = await self.start_task(context, event_queue)
        for index, plan in enumerate(PLANS):
            await self.host.acall_tool("todo_write", {"todos": plan}, agent=agent)
            await forwarder.drain()
            if not await asyncio.to_thread(self.seen[index].wait, 10):
                raise AssertionError(f"the client did not see plan {index} while the task ran")
        forwarder()
        await TaskUpdater(event_queue, context.task_id, context.context_id).complete()


def test_over_http_the_client_sees_each_plan_while_the_task_runs() -> None:
    seen = [threading.Event() for _ in PLANS]
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    card, app = a2a_app(LockstepExecutor(seen), url=f"http://127.0.0.1:{port}/")
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert thread.is_alive(), "the A2A server stopped while starting"
        assert time.monotonic() < deadline, "the A2A server did not start within 10 s"
        time.sleep(0.01)

    async def read() -> list[Any]:
        plans: list[Any] = []
        async with httpx.AsyncClient(timeout=30) as http:
            client = ClientFactory(ClientConfig(httpx_client=http, streaming=True)).create(card)
            message = Message(message_id="m-1", role=Role.ROLE_USER, parts=[Part(text="go")])
            async for event in client.send_message(SendMessageRequest(message=message)):
                if event.HasField("artifact_update"):
                    plans.append(plan_of(event.artifact_update))
                    seen[len(plans) - 1].set()
        return plans

    try:
        assert asyncio.run(read()) == PLANS
    finally:
        server.should_exit = True
        thread.join(timeout=10)


# --- the page's recipe ------------------------------------------------------------------------

PAGE = Path(__file__).resolve().parents[2] / "docs" / "wire-formats.md"
PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def test_the_wire_formats_page_serves_its_agent_and_its_client_reads_the_plans(
    tmp_path: Path,
) -> None:
    """The A2A section shows what the SDK's server needs (a task store and the agent card
    beside the executor) and the client that reads the plan; its code, run after the page's
    blocks before it (they define the plan it sends), serves and reads each plan."""
    text = PAGE.read_text(encoding="utf-8")
    start = text.index("\n## A2A\n")
    section = text[start : text.index("\n## ", start + 1)]
    code = "\n".join(PYTHON_BLOCK.findall(section))
    calls = {
        node.func.id: {keyword.arg for keyword in node.keywords}
        for node in ast.walk(ast.parse(code))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    }
    assert {"agent_executor", "task_store", "agent_card"} <= calls.get(
        "DefaultRequestHandler", set()
    )
    assert "send_message" in code, "the page shows the client that reads the plan"

    before = "\n".join(PYTHON_BLOCK.findall(text[:start]))
    script = tmp_path / "a2a_page.py"
    script.write_text(f"{before}\n{code}\nprint(json.dumps(plans))\n", encoding="utf-8")
    run = subprocess.run(
        [sys.executable, "-W", "error", str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    plans = json.loads(run.stdout.splitlines()[-1])
    assert [[item["status"] for item in plan] for plan in plans] == [
        ["completed", "in_progress"],
        ["completed", "completed"],
    ]
