"""The session stream in other ecosystems' forms: AG-UI events and AI SDK UI message chunks.

``GET /api/sessions/{name}/stream?format=ag-ui`` (or ``ai-sdk``) carries the
same plan changes as the library's own ``projection`` frames, each converted by
:mod:`dsh_tool_todo.plans.wire`, in the SSE encoding that protocol's client reads:
one ``data:`` line of JSON per event, no ``event:`` name (both clients, and a
browser's ``EventSource.onmessage``, read unnamed events), and the seq the
frame reflects as its ``id``.

Once the stream has seen a person's request (in the log's recent events at its
start, or followed), each plan it sends says what was asked beside it
(:mod:`dsh_tool_todo.plans._asked`, docs/requests.md): the AG-UI activity's
content and state carry ``requests`` beside ``todos``, the AI SDK's data part
too; a request event that changes the list sends the plan again, with its seq.

Frames are separated by a bare ``\\n``: AG-UI's client splits the body on
``"\\n\\n"`` and nothing else, so the ``\\r\\n`` the library's own stream uses
would run every event into the next.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Literal

from sse_starlette import ServerSentEvent

from ..core.contract import EVENT_TYPE
from ..core.projection import PLAN_EVENTS
from ..core.requests import SETTLING_TYPES
from ..errors import InvalidLog, UsageError
from ..plans import wire
from ..plans._asked import AskedBeside
from ..protocols import Event, Snapshot

__all__ = ["FORMATS", "SEP", "WireFormat", "WireStream", "wire_format"]

WireFormat = Literal["ag-ui", "ai-sdk"]
FORMATS: tuple[WireFormat, ...] = ("ag-ui", "ai-sdk")
SEP = "\n"
RUN_ERROR_CODES = {"deleted": "session_deleted", "invalid": "invalid_log", "io": "read_failed"}
FOLLOWED = frozenset({*PLAN_EVENTS, *SETTLING_TYPES})
"""The events a wire stream follows: the plan's, and those that settle requests."""
Recent = Iterable[Mapping[str, Any]]


def wire_format(values: Sequence[str]) -> WireFormat | None:
    """The stream form the ``format`` query values ask for; none is this library's own frames.

    Raises :class:`ValueError` saying what is accepted for anything else,
    ``format`` given twice included: which one counts is not for a server to guess.
    """
    if len(values) > 1:
        shown = [value[:40] for value in values[:3]]
        raise ValueError(
            f"give `format` once (got {len(values)}: {shown!r}): one of {', '.join(FORMATS)}, "
            "or leave it out for this library's own projection frames"
        )
    if not values or values[0] == "":
        return None
    for known in FORMATS:
        if values[0] == known:
            return known
    raise ValueError(
        f"`format` must be one of {', '.join(FORMATS)}, or left out for this library's own "
        f"projection frames (got {values[0][:40]!r})"
    )


def _frame(payload: Any, seq: int | None) -> ServerSentEvent:
    # ensure_ascii: model-written text may hold lone surrogates, which UTF-8 cannot carry.
    data = json.dumps(payload, ensure_ascii=True, separators=(",", ":"))
    return ServerSentEvent(data, id=None if seq is None else str(seq), sep=SEP)


def _plan(source: Snapshot | Event) -> wire.PlanSource:
    """The plan a snapshot leaves, or the deciding event itself."""
    if isinstance(source, Snapshot):
        deciding = source.deciding
        if deciding is None or deciding["type"] != EVENT_TYPE:
            return None
        todos: wire.PlanSource = deciding["data"]["todos"]
        return todos
    return source


class WireStream:
    """The frames of one connection's stream in ``format`` for session ``name``.

    Each method returns the frames for one step: the opening, a snapshot
    (fresh, resumed, or after the log was replaced), one event followed, and the
    error that ends the stream. ``recent`` is the log's
    :func:`~dsh_tool_todo.core.requests.recent_events` up to the snapshot.
    """

    def __init__(self, format: WireFormat, name: str) -> None:
        self.format = format
        self.name = name
        # One AG-UI run per connection; the id only has to be unique among this thread's runs.
        self.run_id = f"{name}:{uuid.uuid4().hex}"
        self.asked = AskedBeside()
        self._current: Snapshot | Event | None = None  # what the plan sent last was

    def opening(self, snapshot: Snapshot, recent: Recent = ()) -> list[ServerSentEvent]:
        """The first frames: the run (or message) starting, then the plan as it is now."""
        if self.format == "ag-ui":
            start: dict[str, Any] = {
                "type": "RUN_STARTED",
                "threadId": self.name,
                "runId": self.run_id,
            }
        else:
            start = {"type": "start", "messageId": wire.plan_id(self.name)}
        return [_frame(start, None), *self.snapshot(snapshot, recent)]

    def snapshot(self, snapshot: Snapshot, recent: Recent = ()) -> list[ServerSentEvent]:
        """The whole plan, replacing whatever the client holds."""
        self.asked.prime(recent)
        self._current = snapshot
        return self._plan_frames(snapshot.last_seq, snapshot, wire.ag_ui_state_snapshot)

    def change(self, event: Event) -> list[ServerSentEvent]:
        """A ``todo/write`` or ``turn/start``: the new plan, and for AG-UI the state's delta.
        Another event: the plan again when it changed what was asked, else nothing."""
        moved = self.asked.add(event)
        if event["type"] in PLAN_EVENTS:
            self._current = event
        elif not moved or self._current is None:
            return []
        # The activity replaces the one in the client's messages; the delta sets
        # only the state's `todos` (and `requests`) key, leaving any other the client keeps.
        return self._plan_frames(event["seq"], self._current, wire.ag_ui_state_delta)

    def _plan_frames(
        self, seq: int, source: Snapshot | Event, state: Callable[..., Any]
    ) -> list[ServerSentEvent]:
        """The plan ``source`` leaves, framed at ``seq``: for AG-UI its activity, then
        ``state`` of it (the state's snapshot or delta); for the AI SDK its data part."""
        with self._checked(seq):
            plan = _plan(source)
            requests = self.asked.shown()
            if self.format == "ag-ui":
                payloads: list[Any] = [
                    wire.ag_ui_activity_snapshot(self.name, plan, requests=requests),
                    state(plan, requests=requests),
                ]
            else:
                payloads = [wire.ai_sdk_data_part(self.name, plan, requests=requests)]
        return [_frame(payload, seq) for payload in payloads]

    def fatal(self, message: str, cause: str) -> Iterator[ServerSentEvent]:
        """The error that ends the stream, in the protocol's own error event."""
        if self.format == "ag-ui":
            payload = {"type": "RUN_ERROR", "message": message, "code": RUN_ERROR_CODES[cause]}
        else:
            payload = {"type": "error", "errorText": message}
        yield _frame(payload, None)

    @contextlib.contextmanager
    def _checked(self, seq: int) -> Iterator[None]:
        # The readers check every deciding write already; a converter refusing one
        # anyway is a log the tool could not have written, reported the same way.
        try:
            yield
        except UsageError as error:
            raise InvalidLog(f"session {self.name!r}, seq {seq}: {error}") from None
