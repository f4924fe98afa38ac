"""The web view's push streams: a session's plan, in this library's frames or another form,
and the session list's ``changed`` rings.

A session stream sends the plan it starts from (unless it resumes close
behind), then one frame per ``todo/write`` or ``turn/start`` the reader's
``follow`` yields, and the plan again whenever the log was replaced under it.
Every stream holds its follower open only while its client is there: one whose
client left stops at its next frame, not at the end of the backlog it replays.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
from collections.abc import AsyncIterator, Collection
from dataclasses import dataclass
from typing import Any

from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.responses import Response

from ..core.contract import EVENT_TYPE
from ..core.projection import PLAN_EVENTS, TodosProjection, checked_deciding
from ..core.requests import recent_events
from ..errors import InvalidLog, LogReplaced, SessionNotFound
from ..plans.checklist import escape_content
from ..protocols import Event, LogReader, Snapshot
from ._listhub import ListHub
from ._wire_stream import FOLLOWED, WireStream
from ._wire_stream import SEP as WIRE_SEP

__all__ = [
    "Timing",
    "deciding_at",
    "list_stream",
    "plan_mark",
    "plan_stream",
    "projection_frame",
    "shown_name",
    "wire_stream",
]

MAX_REPLAY = 10_000  # events a resume may replay; a client further behind gets a snapshot
SHOWN_NAME = 80  # characters of a session name an error message quotes
LIST_GAP = 0.1  # seconds between two rings of one list stream: a busy fleet rings at most 10/s


@dataclass(frozen=True)
class Timing:
    """How every stream of an app keeps its connection: the keep-alive period (``ping``, s),
    the reconnect delay it advises (``retry_ms``), how long a send may take (s)."""

    ping: float
    retry_ms: int
    send_timeout: float


def projection_frame(snapshot_or_event: Snapshot | Event) -> dict[str, Any]:
    """The ``todos`` projection as a push frame: its state version, the seq it reflects, the plan.

    >>> projection_frame({"seq": 4, "type": "turn/start", "data": {}})
    {'key': 'todos', 'stateVersion': 2, 'seq': 4, 'cause': 'turn/start', 'plan': None}
    """
    if isinstance(snapshot_or_event, Snapshot):
        deciding = snapshot_or_event.deciding
        plan = None
        if deciding is not None and deciding["type"] == EVENT_TYPE:
            plan = deciding["data"]["todos"]
        return {
            "key": "todos",
            "stateVersion": TodosProjection.state_version,
            "seq": snapshot_or_event.last_seq,
            "cause": "snapshot",
            "plan": plan,
            "decidedBy": None
            if deciding is None
            else {
                "seq": deciding["seq"],
                "type": deciding["type"],
            },
        }
    event = snapshot_or_event
    return {
        "key": "todos",
        "stateVersion": TodosProjection.state_version,
        "seq": event["seq"],
        "cause": event["type"],
        "plan": event["data"]["todos"] if event["type"] == EVENT_TYPE else None,
    }


def _sse(frame: dict[str, Any], deciding: Event | None) -> ServerSentEvent:
    return ServerSentEvent(
        json.dumps(frame, ensure_ascii=True, separators=(",", ":")),
        event="projection",
        id=f"{frame['seq']}.{plan_mark(deciding)}",
    )


def plan_mark(deciding: Event | None) -> str:
    """What a frame's id says of the plan it carries: 12 hex digits of the SHA-256 of the event
    that decided it (``none`` before any). A resume checks it against the log it reads now, so a
    log replaced under a client never resumes on a plan it no longer holds."""
    if deciding is None:
        return "none"
    text = json.dumps(
        [deciding["seq"], deciding["type"], deciding["data"]],
        ensure_ascii=True,
        separators=(",", ":"),
        sort_keys=True,
    )
    return hashlib.sha256(text.encode("ascii")).hexdigest()[:12]


async def deciding_at(plans: LogReader, name: str, seq: int) -> Event | bool | None:
    """The event that decided the plan as of ``seq`` in the log as it is now (``None``: no plan
    event up to there; ``False``: not found within :data:`MAX_REPLAY` events looked at)."""
    before: int | None = seq + 1
    looked = 0
    while before is not None and looked <= MAX_REPLAY:
        page = await plans.tail(name, before=before, limit=1, types=PLAN_EVENTS)
        if page.events:
            return page.events[-1]
        if not page.more:
            return None
        looked += before - (page.cursor if page.cursor is not None else before)
        before = page.cursor
    return False


def shown_name(name: object) -> str:
    """A session name as a message quotes it: at most :data:`SHOWN_NAME` characters of it,
    controls and bidi overrides escaped (a URL can name anything, of any length).
    """
    text = name if isinstance(name, str) else repr(name)
    if len(text) <= SHOWN_NAME:
        return f"'{escape_content(text)}'"
    return f"'{escape_content(text[:SHOWN_NAME])}'... ({len(text)} characters)"


@contextlib.asynccontextmanager
async def _closing(events: AsyncIterator[Any]) -> AsyncIterator[AsyncIterator[Any]]:
    """``events``, closed on the way out (a reader's ``follow`` is an async generator that holds
    its log open: left to the garbage collector, it would close only when collected)."""
    try:
        yield events
    finally:
        close = getattr(events, "aclose", None)
        if close is not None:
            await close()


def _fatal_message(name: str, error: Exception) -> tuple[str, str]:
    """What a stream's closing error says, and its cause (``deleted``, ``invalid``, ``io``)."""
    if isinstance(error, SessionNotFound):  # it carries only the name: say what happened
        return f"session {shown_name(name)}: its log was deleted", "deleted"
    return str(error), "invalid" if isinstance(error, InvalidLog) else "io"


async def _changes(
    plans: LogReader,
    name: str,
    snapshot: Snapshot | None,
    after: int | None,
    types: Collection[str] = PLAN_EVENTS,
) -> AsyncIterator[Snapshot | Event]:
    """``snapshot`` (when given), then each event that decides the plan after it (or after
    seq ``after``), and a fresh snapshot whenever the log was replaced, forever. ``types``
    adds events of other types to follow (the wire streams': those settling requests)."""
    position = after
    while True:
        if snapshot is not None:
            yield snapshot
            position = snapshot.last_seq
        assert position is not None
        try:
            # closed at once when the client goes: the follower holds its log open
            following = plans.follow(name, after=position, since=snapshot)
            async with _closing(following) as events:
                async for event in events:
                    if event["type"] in PLAN_EVENTS:
                        where = f"session {name!r}, seq {event['seq']}"
                        event = checked_deciding(event, where)
                    if event["type"] in types:
                        yield event
                        # A backlog is read in batches and its frames sent without a pause:
                        # a client gone meanwhile is only seen (and its stream cancelled)
                        # when the loop runs, so run it between two frames.
                        await asyncio.sleep(0)
        except LogReplaced:
            snapshot = await plans.snapshot(name)


def plan_stream(
    plans: LogReader,
    name: str,
    now: Snapshot,
    after: int | None,
    timing: Timing,
    *,
    resumed_on: Event | bool | None = True,
    requests: bool = False,
) -> Response:
    """Session ``name``'s stream of ``projection`` frames, resumed after seq ``after`` (a
    ``Last-Event-ID``) when given; ``now`` is its snapshot, read before the answer starts.
    ``resumed_on`` is ``False`` when the id's plan mark does not match the log read now.
    ``requests``: also a ``requests`` frame, ``{"seq", "cause"}`` and no id (a resume goes on
    from the plan), per other event that may change what was asked (``request/taken``, ...)."""
    # Past the end, a plan the log no longer holds (both: a replaced log), or too far behind
    # for every step to be worth sending: the current plan. One rule for every store.
    fresh = after is None or resumed_on is False or not 0 <= now.last_seq - after <= MAX_REPLAY
    first = now if fresh else None

    async def frames() -> AsyncIterator[ServerSentEvent]:
        yield ServerSentEvent(comment="dsh-todo projection stream", retry=timing.retry_ms)
        try:
            followed = FOLLOWED if requests else PLAN_EVENTS
            async with _closing(_changes(plans, name, first, after, followed)) as changes:
                async for change in changes:
                    if not isinstance(change, Snapshot) and change["type"] not in PLAN_EVENTS:
                        told = {"seq": change["seq"], "cause": change["type"]}
                        yield ServerSentEvent(json.dumps(told), event="requests")
                        continue
                    deciding = change.deciding if isinstance(change, Snapshot) else change
                    yield _sse(projection_frame(change), deciding)
        except (InvalidLog, SessionNotFound, OSError) as error:
            message = _fatal_message(name, error)[0]
            yield ServerSentEvent(json.dumps({"error": message}), event="fatal")

    return EventSourceResponse(frames(), ping=timing.ping, send_timeout=timing.send_timeout)


def wire_stream(plans: LogReader, form: WireStream, first: Snapshot, timing: Timing) -> Response:
    """The session stream in another protocol's form (``?format=``): see ``_wire_stream``.

    Every connection, a resumed one too, opens with the plan as it is: each
    form replaces the whole plan per frame, so the current one is all a
    client that missed steps needs, and a new connection is a new AG-UI run
    or AI SDK message that must be given it anyway.
    """

    async def frames() -> AsyncIterator[ServerSentEvent]:
        hello = f"dsh-todo {form.format} stream"
        yield ServerSentEvent(comment=hello, retry=timing.retry_ms, sep=WIRE_SEP)
        try:
            async with _closing(_changes(plans, form.name, first, None, FOLLOWED)) as changes:
                async for change in changes:
                    if isinstance(change, Snapshot):
                        # what was asked as the snapshot stands, so the plan says it at once
                        recent = await recent_events(plans, form.name, through=change.last_seq)
                        opened = form.opening if change is first else form.snapshot
                        frames_now = opened(change, recent)
                    else:
                        frames_now = form.change(change)
                    for frame in frames_now:
                        yield frame
        except (InvalidLog, SessionNotFound, OSError) as error:
            for frame in form.fatal(*_fatal_message(form.name, error)):
                yield frame

    headers = {"x-vercel-ai-ui-message-stream": "v1"} if form.format == "ai-sdk" else None
    return EventSourceResponse(
        frames(),
        ping=timing.ping,
        send_timeout=timing.send_timeout,
        sep=WIRE_SEP,
        headers=headers,
    )


def list_stream(hub: ListHub, query: str, timing: Timing) -> Response:
    """The session list's stream: one ``changed`` frame when rows of the list filtered by
    ``query`` may have changed, at most one per :data:`LIST_GAP` seconds."""

    async def frames() -> AsyncIterator[ServerSentEvent]:
        yield ServerSentEvent(comment="dsh-todo session list stream", retry=timing.retry_ms)
        async with hub.open(query) as handle:
            while True:
                await handle.rung.wait()
                handle.rung.clear()
                yield ServerSentEvent("{}", event="changed")
                await asyncio.sleep(LIST_GAP)

    return EventSourceResponse(frames(), ping=timing.ping, send_timeout=timing.send_timeout)
