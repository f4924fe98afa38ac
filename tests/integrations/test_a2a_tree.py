"""A lead's sub-agents as A2A artifacts, through the a2a-sdk's own server and client.

The executor's lead writes its plan and two sub-agents, keyed and linked as the
adapters key and link them (``<parent>/<agent>@<call>`` in an owner registry's
directory), write theirs: one linked before the task starts, one while it runs.
``forward_plan_artifacts(..., reader=...)`` sends each as an artifact of its own.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import TaskArtifactUpdateEvent
from google.protobuf.json_format import MessageToDict, ParseDict

from dsh_tool_todo.core.contract import SESSION_END_EVENT_TYPE, TURN_START
from dsh_tool_todo.core.links import end_data
from dsh_tool_todo.errors import UsageError
from dsh_tool_todo.host import MemorySession
from dsh_tool_todo.integrations.a2a import _sdk_event, forward_plan_artifacts
from dsh_tool_todo.stores import open_reader
from dsh_tool_todo.stores.jsonl import JsonlSession
from dsh_tool_todo.stores.owners import owner_file_name
from tests._builders import one_item_plan, owner_stem, todo, todos, write_owner_log

from .test_a2a import converse, plan_of

LEAD, RESEARCHER, CRITIC = "lead", "lead/researcher@c1", "lead/critic@c2"


class TreeExecutor(AgentExecutor):
    """The lead's task: its plan, a sub-agent linked while it runs, and both sub-agents'
    ends, each step drained so the client sees it while the task runs."""

    def __init__(self, directory: Path, elsewhere: Path) -> None:
        self.directory = directory
        self.elsewhere = elsewhere

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        from a2a.helpers import new_task_from_user_message

        assert context.message is not None
        await event_queue.enqueue_event(new_task_from_user_message(context.message))
        reader = open_reader(self.directory)
        directory, lead_stem = self.directory, owner_stem(LEAD)
        with JsonlSession(directory / owner_file_name(LEAD)) as lead:
            forwarder = forward_plan_artifacts(
                lead,
                event_queue,
                task_id=context.task_id,
                context_id=context.context_id,
                reader=reader,
            )
            lead.append(*one_item_plan("Delegate"))
            await forwarder.drain()
            # linked while the task runs: found through the reader's changes (or the drain)
            write_owner_log(
                directory, CRITIC, one_item_plan("Review"), parent=lead_stem, parent_call_id="c2"
            )
            # neither is under the lead as `dsh-todo sessions` draws it
            write_owner_log(
                self.elsewhere, "lead/stray@c3", one_item_plan("Elsewhere"), parent=lead_stem
            )
            write_owner_log(directory, "orphan", one_item_plan("Lost"), parent="ghost")
            # a sub-agent that ends without a plan shows nothing, as in AG-UI
            silent = (SESSION_END_EVENT_TYPE, end_data("finished"))
            write_owner_log(
                directory, "lead/silent@c4", silent, parent=lead_stem, parent_call_id="c4"
            )
            await forwarder.drain()
            write_owner_log(directory, RESEARCHER, one_item_plan("Search", "completed"))
            write_owner_log(directory, RESEARCHER, (SESSION_END_EVENT_TYPE, end_data("finished")))
            write_owner_log(
                directory, CRITIC, (SESSION_END_EVENT_TYPE, end_data("failed", "crashed"))
            )
            await forwarder.drain()
            await forwarder.aclose()
        await reader.aclose()
        await TaskUpdater(event_queue, context.task_id, context.context_id).complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError("the scripted agent finishes at once")


def metadata(update: Any) -> Any:
    return MessageToDict(update.artifact.metadata) if update.artifact.HasField("metadata") else None


def test_each_agents_plan_is_its_own_artifact_attributed_to_its_agent(tmp_path: Path) -> None:
    directory, elsewhere = tmp_path / "logs", tmp_path / "elsewhere"
    directory.mkdir()
    elsewhere.mkdir()
    write_owner_log(
        directory, RESEARCHER, one_item_plan("Search"), parent=owner_stem(LEAD), parent_call_id="c1"
    )
    events, task = asyncio.run(converse(TreeExecutor(directory, elsewhere), "plan it"))

    updates = [event.artifact_update for event in events if event.HasField("artifact_update")]
    seen = [(u.artifact.artifact_id, plan_of(u), metadata(u)) for u in updates]
    lead, researcher, critic = (
        "plan",
        f"plan:{owner_stem(RESEARCHER)}",
        f"plan:{owner_stem(CRITIC)}",
    )
    assert {artifact for artifact, _, _ in seen} == {lead, researcher, critic}
    # the lead's artifact is exactly what it is without a reader: no metadata
    assert [(plan, meta) for artifact, plan, meta in seen if artifact == lead] == [
        ([todo("Delegate", "in_progress")], None)
    ]
    of_researcher = {
        "session": owner_stem(RESEARCHER),
        "name": "researcher",
        "parent": owner_stem(LEAD),
        "parentCallId": "c1",
        "end": None,
    }
    of_critic = {
        **of_researcher,
        "session": owner_stem(CRITIC),
        "name": "critic",
        "parentCallId": "c2",
    }
    assert [(plan, meta) for artifact, plan, meta in seen if artifact == researcher] == [
        ([todo("Search", "in_progress")], of_researcher),
        ([todo("Search", "completed")], of_researcher),
        ([todo("Search", "completed")], {**of_researcher, "end": {"outcome": "finished"}}),
    ]
    # the sub-agent linked while the task ran: its plan, then its end with that plan
    assert [(plan, meta) for artifact, plan, meta in seen if artifact == critic] == [
        ([todo("Review", "in_progress")], of_critic),
        (
            [todo("Review", "in_progress")],
            {**of_critic, "end": {"outcome": "failed", "error": "crashed"}},
        ),
    ]
    # the task the server keeps: one artifact per agent, each the latest
    kept = {artifact.artifact_id: artifact for artifact in task.artifacts}
    assert set(kept) == {lead, researcher, critic}
    assert MessageToDict(kept[critic].metadata)["end"]["outcome"] == "failed"
    assert MessageToDict(kept[researcher].parts[0].data) == todos(todo("Search", "completed"))


def test_a_sub_agent_artifact_is_the_json_form_parsed_by_the_sdk() -> None:
    update = {
        "taskId": "t",
        "contextId": "c",
        "artifact": {
            "artifactId": "plan:lead%2fa%40c1",
            "name": "plan",
            "parts": [{"data": todos(todo("a\u2028b")), "mediaType": "application/json"}],
            "metadata": {
                "session": "lead%2fa%40c1",
                "name": "a",
                "parent": "lead",
                "parentCallId": None,
                "end": {"outcome": "failed", "error": "down\u2029here"},
            },
        },
        "append": False,
        "lastChunk": True,
    }
    # the line breaks the SDK's client would split a `data:` line at go out as line feeds
    safe = json.loads(json.dumps(update).replace("\\u2028", "\\n").replace("\\u2029", "\\n"))
    built = _sdk_event(update)
    assert built == ParseDict(safe, TaskArtifactUpdateEvent())
    assert MessageToDict(built.artifact.metadata)["end"]["error"] == "down\nhere"


def test_a_reader_needs_the_leads_key(tmp_path: Path) -> None:
    class Queue:
        async def enqueue_event(self, event: TaskArtifactUpdateEvent, /) -> None:
            raise AssertionError("nothing is sent")

    async def main() -> None:
        reader = open_reader(tmp_path)
        with pytest.raises(UsageError, match=r"pass session_key="):
            forward_plan_artifacts(
                MemorySession(), Queue(), task_id="t", context_id="c", reader=reader
            )
        forwarder = forward_plan_artifacts(
            MemorySession(key="lead"), Queue(), task_id="t", context_id="c", reader=reader
        )
        await forwarder.aclose()
        await reader.aclose()

    asyncio.run(main())


def test_a_turn_start_empties_a_sub_agents_artifact_and_a_deleted_log_marks_it(
    tmp_path: Path,
) -> None:
    write_owner_log(
        tmp_path, RESEARCHER, one_item_plan("Search"), parent=owner_stem(LEAD), parent_call_id="c1"
    )
    sent: list[TaskArtifactUpdateEvent] = []

    class Queue:
        async def enqueue_event(self, event: TaskArtifactUpdateEvent, /) -> None:
            sent.append(event)

    async def main() -> None:
        reader = open_reader(tmp_path)
        lead = MemorySession(key=owner_stem(LEAD))
        forwarder = forward_plan_artifacts(
            lead, Queue(), task_id="t", context_id="c", reader=reader
        )
        await forwarder.drain()
        write_owner_log(tmp_path, RESEARCHER, (TURN_START, {}))
        await forwarder.drain()
        (tmp_path / owner_file_name(RESEARCHER)).unlink()
        deadline = asyncio.get_running_loop().time() + 10
        while len(sent) < 3:
            assert asyncio.get_running_loop().time() < deadline, [plan_of(u) for u in sent]
            await asyncio.sleep(0.01)
        await forwarder.aclose()
        await reader.aclose()

    asyncio.run(main())
    assert [plan_of(update) for update in sent] == [[todo("Search", "in_progress")], [], []]
    assert metadata(sent[-1])["unreadable"] == {
        "message": f"session {owner_stem(RESEARCHER)!r}: its log was deleted",
        "code": "session_deleted",
    }
