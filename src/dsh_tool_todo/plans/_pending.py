"""A person's requests in a log, followed as its events come: for a view of the plan that shows
them beside it (the MCP resource ``todo://plan``: the pending ones; the streams, ``watch`` and
the fleet tree: what was asked in the current turn, :meth:`PendingRequests.asked`).

The settlement is :func:`~dsh_tool_todo.core.requests.request_states`'s fold, the one every
reader uses, applied event by event: each event costs what the requests still pending cost,
never what the log before it did. A settled request never changes again, so its state leaves
the fold as it settles and is kept as shown (until a later ``turn/start``, at most
:data:`MAX_SETTLED` of them); the answers are those of the fold of the whole log
(``tests/plans/test_pending.py``).

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

from ..core.contract import REQUEST_TAKEN, TURN_START
from ..core.requests import SETTLING_TYPES, RequestState, _Fold, recent_events
from ..protocols import LogReader

__all__: list[str] = []

MAX_SETTLED = 20
"""Settled requests of the current turn :meth:`PendingRequests.asked` shows at most: the
newest settled."""
MAX_PENDING = 20
"""Pending requests :meth:`PendingRequests.pending` and :meth:`~PendingRequests.asked` show at
most: the newest taken (a model told 10 a call, in a long turn, can leave many pending; every
frame of a stream carries the list)."""


class PendingRequests:
    """The requests a log leaves pending, from its events handed in order (:meth:`add`)."""

    def __init__(self) -> None:
        self._fold = _Fold()
        self._taken: set[str] = set()  # every id taken: a second record of one changes nothing
        self._settled: dict[str, RequestState] = {}  # of the current turn, by id
        self._answers: tuple[list[dict[str, Any]], list[dict[str, Any]]] | None = None
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
            self._apply(event, seq)
            self._answers = None
        return True

    def _apply(self, event: Mapping[str, Any], seq: int) -> None:
        fold = self._fold
        ident = _taken_id(event)
        if ident in self._taken:
            return  # taken already: the first record stands
        if event.get("type") == TURN_START:
            self._settled.clear()
        fold.apply(event)
        if ident is not None and ident in fold.states:  # the fold took it as a request
            self._taken.add(ident)
        # Each settled state is moved out of the fold as it settles (it never changes
        # again): the fold holds only the pending ones, so an event costs what they do.
        for ident in fold.settled:
            state = fold.states.pop(ident, None)
            if state is not None:
                self._settled[ident] = state
        fold.settled.clear()
        if len(self._settled) > MAX_SETTLED:
            newest = sorted(self._settled.values(), key=_settled_seq)[-MAX_SETTLED:]
            self._settled = {s.request.id: s for s in newest}

    def pending(self) -> list[dict[str, Any]]:
        """The requests still pending, oldest taken first, each as its events give it (the
        newest :data:`MAX_PENDING`)."""
        return list(self._answered()[0])

    def asked(self) -> list[dict[str, Any]]:
        """What was asked in the current turn, oldest taken first, each with how it stands
        (:meth:`~dsh_tool_todo.core.requests.RequestState.as_json`): the pending requests,
        and the ones settled since the newest ``turn/start`` (at it too: what lapsed with the
        plan it cleared); at most the newest :data:`MAX_PENDING` and :data:`MAX_SETTLED`."""
        return list(self._answered()[1])

    def _answered(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        with self._lock:
            if self._answers is None:
                pending = sorted(self._fold.pending.values(), key=_taken_seq)[-MAX_PENDING:]
                shown = sorted([*self._settled.values(), *pending], key=_taken_seq)
                self._answers = (
                    [s.request.as_json() for s in pending],
                    [s.as_json() for s in shown],
                )
            return self._answers


def _taken_seq(state: RequestState) -> int:
    return state.taken_seq


def _settled_seq(state: RequestState) -> int:
    return state.settled_seq or 0


def _taken_id(event: Mapping[str, Any]) -> str | None:
    """The id a ``request/taken`` event names, unchecked (the fold checks the request)."""
    data = event.get("data")
    if event.get("type") != REQUEST_TAKEN or not isinstance(data, Mapping):
        return None
    ident = data.get("id")
    return ident if isinstance(ident, str) else None


async def read_pending(reader: LogReader, name: str) -> PendingRequests:
    """Session ``name``'s requests as its log's recent events leave them
    (:func:`~dsh_tool_todo.core.requests.recent_events`): to follow on from, event by event."""
    pending = PendingRequests()
    for event in await recent_events(reader, name):
        pending.add(event)
    return pending
