"""The plan as an A2A task artifact: each write replaces artifact ``plan`` in the client's task.

For authors of A2A agents on the ``a2a-sdk`` (extra ``a2a``): in your
``AgentExecutor.execute(context, event_queue)``, after enqueueing the task,
forward the session the agent writes its plans to::

    forwarder = forward_plan_artifacts(
        session, event_queue, task_id=context.task_id, context_id=context.context_id
    )
    ...  # run the agent: each todo_write (and each turn/start) becomes an artifact update
    await forwarder.drain()  # before the final status update, so the plan arrives first
    forwarder()

Every update is :func:`dsh_tool_todo.plans.wire.a2a_artifact_update` parsed into
the SDK's own ``TaskArtifactUpdateEvent``: artifact id ``plan``, one data part
``{"todos": [...]}``, ``append`` false, so the client's task keeps one plan
artifact, the latest. See docs/wire-formats.md. Once the session has taken a
person's request, the data part says what was asked beside the plan,
``{"todos": [...], "requests": [...]}`` (docs/requests.md).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ..core.contract import EVENT_TYPE, TURN_START
from ..errors import UsageError
from ..plans._a2a_tree import ArtifactTree
from ..plans._lead_asked import AskedForwarder, LeadAsked, Requests
from ..plans.forwarding import Subscribable, event_loop
from ..plans.wire import PlanSource, a2a_artifact_update
from ._binding import LogReader
from ._extras import needs_extra

with needs_extra("dsh_tool_todo.integrations.a2a", "a2a", module="a2a"):
    from a2a.types import Artifact, Part, TaskArtifactUpdateEvent

    # protobuf ships no type stubs; a2a-sdk's own types are typed
    from google.protobuf.struct_pb2 import Value  # type: ignore[import-untyped]

if TYPE_CHECKING:
    import asyncio

__all__ = [
    "forward_plan_artifacts",
    "plan_artifact_update",
]


class ArtifactQueue(Protocol):
    """Where updates go: the ``EventQueue`` an ``AgentExecutor`` is given fits."""

    async def enqueue_event(self, event: TaskArtifactUpdateEvent, /) -> None: ...


def plan_artifact_update(
    source: PlanSource,
    *,
    task_id: str,
    context_id: str,
    requests: Sequence[Mapping[str, Any]] | None = None,
) -> TaskArtifactUpdateEvent:
    """The plan of ``source`` (an event or a plan) as the SDK's ``TaskArtifactUpdateEvent``.

    Two kinds of text the tool accepts and logs as the model sent it cannot
    reach the SDK's client as they are, and are replaced here, so the plan
    still goes out, the rest of its text unchanged: protobuf strings are
    UTF-8, which has no form for a lone surrogate (each becomes U+FFFD); and
    the SDK's server writes U+2028, U+2029 and U+0085 raw into an SSE
    ``data:`` line, where its streaming client's line reader breaks the line
    (each becomes a line feed, which JSON escapes, as the line break it is).
    Two items whose contents differ only there then read alike. The text of
    ``requests`` (what was asked, beside the plan) is made safe alike.
    """
    update = a2a_artifact_update(source, task_id=task_id, context_id=context_id, requests=requests)
    return _sdk_event(dict(update))


def _sdk_event(update: dict[str, Any]) -> TaskArtifactUpdateEvent:
    """The JSON form of an artifact update as the SDK's event, its text made wire-safe; a
    sub-agent's artifact carries its ``metadata`` (``plans._a2a_tree``)."""
    artifact = update["artifact"]
    (part,) = artifact["parts"]
    for todo in part["data"]["todos"]:
        todo["content"] = _wire_safe(todo["content"])
    if "requests" in part["data"]:
        part["data"]["requests"] = _wire_safe_json(part["data"]["requests"])
    # Built field by field, not through json_format.ParseDict (6x slower); the tests check
    # that both give the same event.
    data = Value()
    data.struct_value.update(part["data"])
    built = Artifact(
        artifact_id=artifact["artifactId"],
        name=artifact["name"],
        parts=[Part(data=data, media_type=part["mediaType"])],
    )
    if "metadata" in artifact:
        built.metadata.update(_wire_safe_json(artifact["metadata"]))
    return TaskArtifactUpdateEvent(
        task_id=update["taskId"],
        context_id=update["contextId"],
        artifact=built,
        append=update["append"],
        last_chunk=update["lastChunk"],
    )


def _wire_safe_json(value: Any) -> Any:
    if isinstance(value, str):
        return _wire_safe(value)
    if isinstance(value, dict):
        return {key: _wire_safe_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_wire_safe_json(item) for item in value]
    return value


# The line breaks httpx's line reader (str.splitlines) splits at that a JSON text may hold
# raw: every other one (\n, \r, \v, \f, \x1c-\x1e) is a control that JSON escapes.
_LINE_BREAKS = re.compile("[\u2028\u2029\x85]")
_SURROGATES = re.compile("[\ud800-\udfff]")


def _wire_safe(text: str) -> str:
    """``text`` as the SDK's stream carries it whole: lone surrogates as U+FFFD, the line
    breaks its client would split a ``data:`` line at as line feeds."""
    if text.isascii():
        return text
    return _SURROGATES.sub("\ufffd", _LINE_BREAKS.sub("\n", text))


def _lead_plan(task_id: str, context_id: str, *, priming: bool) -> LeadAsked[Any]:
    """The lead's artifact ``plan``: each plan event's, and what was asked beside it once a
    request was seen; a request event that changes that sends the plan again, as it is."""

    def build(source: Mapping[str, Any], requests: Requests) -> TaskArtifactUpdateEvent:
        return plan_artifact_update(
            source, task_id=task_id, context_id=context_id, requests=requests
        )

    def decides(event: Mapping[str, Any]) -> bool:
        return event.get("type") in (EVENT_TYPE, TURN_START)

    return LeadAsked(build, decides, priming=priming)


class PlanArtifactForwarder(AskedForwarder[TaskArtifactUpdateEvent]):
    """A subscription made by :func:`forward_plan_artifacts`; calling it unsubscribes.

    ``await drain()`` waits until every update queued so far has been
    enqueued (and, with a ``reader``, every event each sub-agent's log held
    then, and what was asked in the lead's log before it started), and raises
    the first failure since the last drain; ``await aclose()`` stops it and
    waits for the sub-agents' followers to end.
    """


def forward_plan_artifacts(
    session: Subscribable,
    event_queue: ArtifactQueue,
    *,
    task_id: str | None,
    context_id: str | None,
    loop: asyncio.AbstractEventLoop | None = None,
    reader: LogReader | None = None,
    session_key: str | None = None,
) -> PlanArtifactForwarder:
    """Enqueue each ``todo/write`` and ``turn/start`` appended to ``session`` as a plan artifact.

    A ``turn/start`` sends the cleared plan (``{"todos": []}``). Updates reach
    ``event_queue`` in log order whichever thread appends (as the ACP
    forwarder's: :func:`dsh_tool_todo.plans.acp.forward_plans`). ``task_id``
    and ``context_id`` are the request context's (``context.task_id``,
    ``context.context_id``); ``loop`` defaults to the running loop.

    With ``reader`` (the store's reader: ``dsh_tool_todo.stores.open_reader``),
    every sub-agent session linked under this one, found as ``dsh-todo
    sessions`` finds them and as they are linked, is an artifact of its own,
    ``plan:<its key>``, whose ``metadata`` names its agent, its parent, the
    delegating call and how its run ended (docs/wire-trees.md). The
    lead's key is ``session_key``, else the session's ``key``. Without
    ``reader`` only artifact ``plan`` is sent, the lead's.

    Once the session takes a person's request, artifact ``plan`` says what was asked
    beside the plan (``"requests"``, docs/requests.md), and a request event that changes
    that sends it again. With ``reader``, what was asked in the lead's log before this
    call counts too (sent at once, with the plan the log holds).
    """
    # checked now, not at the first write, so a wrong call fails where it is made
    plan_artifact_update(None, task_id=task_id, context_id=context_id)  # type: ignore[arg-type]
    task, context = str(task_id), str(context_id)
    running = event_loop(loop, "forward_plan_artifacts")
    tree = None
    if reader is not None:
        key = session_key if session_key is not None else getattr(session, "key", None)
        if not isinstance(key, str) or not key:
            raise UsageError(
                "forward_plan_artifacts: a reader finds the sub-agents under the lead's session "
                "key: pass session_key= (the name the reader lists the session by), or a "
                f"session with a .key, not {key!r}"
            )
        tree = ArtifactTree(
            key, reader, running, task_id=task, context_id=context, build=_sdk_event
        )

    lead = _lead_plan(task, context, priming=tree is not None)
    forwarder = PlanArtifactForwarder(session, lead, event_queue.enqueue_event, running, tree=tree)
    if tree is not None and reader is not None:
        forwarder.prime(reader, tree.lead_key)
    return forwarder
