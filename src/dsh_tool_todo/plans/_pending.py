"""A person's requests in a log, followed as its events come: for a view of the plan that shows
them beside it (the MCP resource ``todo://plan``: the pending ones; the streams, ``watch`` and
the fleet tree: what was asked in the current turn, :meth:`PendingRequests.asked`).

The settlement is :func:`~dsh_tool_todo.core.requests.request_states`, the one fold every
reader uses. What it is handed is kept small: after each event, only what can still change
an answer stays (the events of the requests still pending, the newest ``turn/start``, the
newest ``todo/write`` after it). A settled request never changes again, and an older plan
decides nothing a newer one does not, so the fold of what is kept gives the same pending
requests as the fold of the whole log (``tests/plans/test_pending.py``). A request settled is
kept as its state, until a later ``turn/start`` (at most :data:`MAX_SETTLED` of them).

>>> pending = PendingRequests()
>>> plan = {"todos": [{"content": "Ship it", "status": "pending"}]}
>>> taken = {"id": "r1", "kind": "done", "content": "Ship it", "by": "ada", "planSeq": 0, "at": 0}
>>> pending.add({"seq": 0, "type": "todo/write", "data": plan})
True
>>> pending.add({"seq": 1, "type": "request/taken", "data": taken})
True
>>> [r["content"] for r in pending.pending()]
['Ship it']
>>> plan["todos"][0]["status"] = "completed"
>>> pending.add({"seq": 2, "type": "todo/write", "data": plan})
True
>>> pending.pending()
[]
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from ..core.contract import EVENT_TYPE, REQUEST_NOTIFIED, TURN_START
from ..core.requests import SETTLING_TYPES, RequestState, recent_events, request_states
from ..protocols import LogReader

__all__: list[str] = []

MAX_SETTLED = 20
"""Settled requests of the current turn :meth:`PendingRequests.asked` shows at most: the
newest settled (the pending ones are shown all)."""


class PendingRequests:
    """The requests a log leaves pending, from its events handed in order (:meth:`add`)."""

    def __init__(self) -> None:
        self._kept: list[Mapping[str, Any]] = []
        self._pending: list[dict[str, Any]] = []
        self._settled: dict[str, RequestState] = {}  # of the current turn, by id
        self._asked: list[dict[str, Any]] = []
        self._seq = -1  # the newest event handed in: an older one is not handed twice
        self._lock = threading.Lock()  # a session's listener hands events in from its thread

    def add(self, event: Mapping[str, Any]) -> bool:
        """Fold ``event`` in; whether the pending requests may have changed (an event of a
        type that settles requests, newer than the ones handed before)."""
        seq = event.get("seq")
        if event.get("type") not in SETTLING_TYPES or not isinstance(seq, int):
            return False
        with self._lock:
            if seq <= self._seq:
                return False
            self._seq = seq
            self._kept.append(event)
            states = request_states(self._kept)
            pending = {s.request.id for s in states if s.status == "pending"}
            self._pending = [s.request.as_json() for s in states if s.status == "pending"]
            self._keep_settled(event, states)
            deciding = {id(e) for e in _deciding(self._kept)}
            self._kept = [e for e in self._kept if id(e) in deciding or _names(e) & pending]
        return True

    def pending(self) -> list[dict[str, Any]]:
        """The requests still pending, oldest taken first, each as its events give it."""
        return list(self._pending)

    def asked(self) -> list[dict[str, Any]]:
        """What was asked in the current turn, oldest taken first, each with how it stands
        (:meth:`~dsh_tool_todo.core.requests.RequestState.as_json`): the pending requests,
        and the ones settled since the newest ``turn/start`` (at it too: what lapsed with the
        plan it cleared), at most the newest :data:`MAX_SETTLED` of those."""
        return list(self._asked)

    def _keep_settled(self, event: Mapping[str, Any], states: list[RequestState]) -> None:
        if event.get("type") == TURN_START:
            self._settled.clear()
        # a settled request's events are dropped once its fold has settled it: its state is
        # in this fold's answer once, and kept from here
        self._settled.update((s.request.id, s) for s in states if s.status != "pending")
        newest = sorted(self._settled.values(), key=lambda s: s.settled_seq or 0)[-MAX_SETTLED:]
        self._settled = {s.request.id: s for s in newest}
        shown = [*newest, *(s for s in states if s.status == "pending")]
        self._asked = [s.as_json() for s in sorted(shown, key=lambda s: s.taken_seq)]


def _deciding(events: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """What decides the plan from here on: the newest ``turn/start`` (the plan it cleared:
    a later request naming an older plan's item lapses) and a ``todo/write`` after it."""
    found: list[Mapping[str, Any]] = []
    for event in reversed(events):
        kind = event.get("type")
        if kind == EVENT_TYPE and not found:
            found.append(event)
        elif kind == TURN_START:
            found.append(event)
            break
    return found


def _names(event: Mapping[str, Any]) -> set[str]:
    """The request ids an event names."""
    data = event.get("data")
    if not isinstance(data, Mapping):
        return set()
    if event.get("type") == REQUEST_NOTIFIED:
        ids = data.get("ids")
        return {i for i in ids if isinstance(i, str)} if isinstance(ids, list) else set()
    ident = data.get("id")
    return {ident} if isinstance(ident, str) else set()


async def read_pending(reader: LogReader, name: str) -> PendingRequests:
    """Session ``name``'s requests as its log's recent events leave them
    (:func:`~dsh_tool_todo.core.requests.recent_events`): to follow on from, event by event."""
    pending = PendingRequests()
    for event in await recent_events(reader, name):
        pending.add(event)
    return pending
