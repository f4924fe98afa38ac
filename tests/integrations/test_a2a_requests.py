"""What was asked, beside the plan, in A2A's artifact ``plan``: through the a2a-sdk's own
server and client (``test_a2a``'s), on JSONL and PostgreSQL (docs/requests.md)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from a2a.helpers import new_task_from_user_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import TaskArtifactUpdateEvent
from google.protobuf.json_format import MessageToDict

import dsh_tool_todo
from dsh_tool_todo.core.contract import EVENT_TYPE
from dsh_tool_todo.host import Host
from dsh_tool_todo.integrations.a2a import forward_plan_artifacts
from dsh_tool_todo.stores import open_reader, open_session
from dsh_tool_todo.stores._inbox import take_requests
from dsh_tool_todo.stores.requests import PlanRequests
from tests._builders import PLAN_A, PLAN_B

from ..conftest import options
from .test_a2a import converse


@pytest.fixture
def place(store_place: str) -> str:
    """Where session ``ada`` is kept: a directory of JSONL logs, or a fresh database's URL."""
    return store_place


def data_of(update: TaskArtifactUpdateEvent) -> Any:
    (part,) = update.artifact.parts
    return MessageToDict(part.data)


def asked_of(data: dict[str, Any]) -> list[tuple[str, str]]:
    return [(request["content"], request["status"]) for request in data["requests"]]


class AskedExecutor(AgentExecutor):
    """Writes PLAN_A; a person asks for its first item done and the writer takes it; then
    writes PLAN_B, which has it done."""

    def __init__(self, place: str) -> None:
        self.place = place
        self.host = Host([dsh_tool_todo], options(False))

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.message is not None
        await event_queue.enqueue_event(new_task_from_user_message(context.message))
        with open_session(self.place, "ada") as session:
            agent = self.host.new_agent(session=session)
            forwarder = forward_plan_artifacts(
                session, event_queue, task_id=context.task_id, context_id=context.context_id
            )
            await self.host.acall_tool("todo_write", {"todos": PLAN_A}, agent=agent)
            asked = await PlanRequests(self.place, "ada").afile("done", "Read the code", by="gr")
            assert [request.id for request in take_requests(session)] == [asked.id]
            session.append("message/assistant", {"text": "on it"})  # nothing to send
            await self.host.acall_tool("todo_write", {"todos": PLAN_B}, agent=agent)
            await forwarder.drain()
            forwarder()
        await TaskUpdater(event_queue, context.task_id, context.context_id).complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError("the scripted agent finishes at once")


def test_the_sdks_client_sees_the_request_pending_beside_the_plan_then_honoured(
    place: str,
) -> None:
    events, task = asyncio.run(converse(AskedExecutor(place), "plan it"))
    updates = [event.artifact_update for event in events if event.HasField("artifact_update")]
    sent = [data_of(update) for update in updates]

    assert sent[0] == {"todos": PLAN_A}  # no request yet: the artifact as it always was
    assert sent[1]["todos"] == PLAN_A  # the plan again, as it is, with what was asked
    assert asked_of(sent[1]) == [("Read the code", "pending")]
    assert sent[2]["todos"] == PLAN_B
    assert asked_of(sent[2]) == [("Read the code", "honoured")]
    assert len(sent) == 3
    (request,) = sent[2]["requests"]
    assert (request["by"], request["notified"]) == ("gr", True)
    assert request["settledSeq"] > request["takenSeq"]
    (artifact,) = task.artifacts  # one plan artifact, the last
    assert MessageToDict(artifact.parts[0].data) == sent[2]


def test_with_a_reader_what_was_asked_before_the_forwarder_started_is_sent_at_once(
    place: str,
) -> None:
    with open_session(place, "ada") as session:
        session.append(EVENT_TYPE, {"todos": PLAN_A})
    asked = PlanRequests(place, "ada").file("add", "Tell the team", by="grace")
    with open_session(place, "ada") as session:
        take_requests(session)
    sent: list[Any] = []

    class Queue:
        async def enqueue_event(self, event: TaskArtifactUpdateEvent, /) -> None:
            sent.append(data_of(event))

    async def main() -> None:
        reader = open_reader(place)
        with open_session(place, "ada") as session:
            forwarder = forward_plan_artifacts(
                session, Queue(), task_id="t", context_id="c", reader=reader, session_key="ada"
            )
            await forwarder.drain()
            session.append(
                EVENT_TYPE, {"todos": [*PLAN_A, {"content": "Tell the team", "status": "pending"}]}
            )
            await forwarder.drain()
            await forwarder.aclose()
        await reader.aclose()

    asyncio.run(main())
    assert [item["content"] for item in sent[0]["todos"]] == ["Read the code", "Fix the bug"]
    assert [(r["id"], r["status"]) for r in sent[0]["requests"]] == [(asked.id, "pending")]
    assert [(r["id"], r["status"]) for r in sent[1]["requests"]] == [(asked.id, "honoured")]
    assert len(sent) == 2


def test_with_a_reader_a_session_without_requests_sends_nothing_at_start(tmp_path: Path) -> None:
    with open_session(str(tmp_path), "ada") as session:
        session.append(EVENT_TYPE, {"todos": PLAN_A})
    sent: list[Any] = []

    class Queue:
        async def enqueue_event(self, event: TaskArtifactUpdateEvent, /) -> None:
            sent.append(data_of(event))

    async def main() -> None:
        reader = open_reader(tmp_path)
        with open_session(str(tmp_path), "ada") as session:
            forwarder = forward_plan_artifacts(
                session, Queue(), task_id="t", context_id="c", reader=reader, session_key="ada"
            )
            await forwarder.drain()
            assert sent == []
            session.append(EVENT_TYPE, {"todos": PLAN_B})
            await forwarder.drain()
            await forwarder.aclose()
        await reader.aclose()

    asyncio.run(main())
    assert sent == [{"todos": PLAN_B}]


def test_the_text_of_a_request_reaches_the_sdk_wire_safe_as_the_plans_does() -> None:
    from google.protobuf.json_format import ParseDict

    from dsh_tool_todo.integrations.a2a import plan_artifact_update
    from dsh_tool_todo.plans.wire import a2a_artifact_update

    asked = {"id": "r1", "kind": "note", "content": "a\u2028b \ud800 計画", "by": "x\x85y"}
    asked |= {"planSeq": -1, "at": 1.5, "status": "pending", "takenSeq": 2, "settledSeq": None}
    update = plan_artifact_update(PLAN_A, task_id="t", context_id="c", requests=[asked])

    safe = {**asked, "content": "a\nb \ufffd 計画", "by": "x\ny"}
    expected = a2a_artifact_update(PLAN_A, task_id="t", context_id="c", requests=[safe])
    assert update == ParseDict(expected, TaskArtifactUpdateEvent())
    assert data_of(update)["requests"] == [{**safe, "takenSeq": 2.0, "planSeq": -1.0}]
