"""A person's requests against an agent's plan: what was asked, and whether it was honoured.

A plan has one writer, the agent session that owns it. A person watching does
not change the plan; they **ask**: mark an item done, reopen it, remove it, add
one, or leave a note. A request waits in the session's inbox (a store's own
place beside the log) until the session's writer takes it, recording
``request/taken`` in its own log (``"told": true`` when the model is told of it then),
and tells the model once, in a short notice. A host that tells the model later records
``request/notified`` (``{"ids": [...]}``) instead. The agent answers with its next ``todo_write``.

How each request is settled is a fold of the log, so every reader and every
replay gives the same answer:

``honoured``
    the first ``todo/write`` after the request was taken has what was asked
    (matched on content, ignoring case and runs of spaces: items have no ids):
    ``done`` an item of that content ``completed``, ``reopen`` one not
    completed, ``remove`` none of it, ``add`` one of it. A plan that already
    has it when the request is taken honours it at once.
``not_honoured``
    the turn ended (``turn/end``, or the next ``turn/start`` when the model had
    been told) with the request still unmatched: a health signal.
``void``
    ``done``, ``reopen`` and ``remove`` name items of one plan: a ``turn/start``
    clears that plan before the model was told, so they lapse. ``add`` and
    notes are carried into the next turn's notice instead.
``delivered``
    a note reached a model request (``told``, or ``request/notified``).
``withdrawn``
    the person withdrew it while it was pending.

Every request is settled at most once; a settled one never changes again.

>>> taken = {"id": "r1", "kind": "done", "content": "Ship it", "by": "ada", "planSeq": 0, "at": 0}
>>> def write(seq, status, content="Ship it"):
...     todos = [{"content": content, "status": status}]
...     return {"seq": seq, "type": "todo/write", "data": {"todos": todos}}
>>> log = [
...     write(0, "pending"),
...     {"seq": 1, "type": "request/taken", "data": taken},
...     write(2, "completed", "ship  it"),
... ]
>>> [(s.request.id, s.status, s.settled_seq) for s in request_states(log)]
[('r1', 'honoured', 2)]
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, Protocol, cast

from ..errors import UsageError
from ..protocols import TailPage
from .contract import (
    EVENT_TYPE,
    REQUEST_NOTIFIED,
    REQUEST_TAKEN,
    REQUEST_WITHDRAWN,
    TURN_START,
)

__all__ = [
    "Request",
    "RequestState",
    "request_states",
]

RequestKind = Literal["done", "reopen", "remove", "add", "note"]
KINDS: tuple[RequestKind, ...] = ("done", "reopen", "remove", "add", "note")
ITEM_KINDS = frozenset({"done", "reopen", "remove"})  # name an item of one plan
Status = Literal["pending", "honoured", "not_honoured", "void", "delivered", "withdrawn"]
TURN_END = "turn/end"
SETTLING_TYPES = frozenset(
    {EVENT_TYPE, TURN_START, TURN_END, REQUEST_TAKEN, REQUEST_WITHDRAWN, REQUEST_NOTIFIED}
)
"""The event types that file, tell or settle a request: what a reader of them needs."""
MAX_CONTENT = 300  # as the reminder cuts an item: what a person asks fits a todo's line
MAX_BY = 64
MAX_TOLD = 10
"""Requests one notice names at most: a writer takes at most this many inbox entries before
a model call, and the rest wait for the next one (so every request taken is told)."""
RECENT_EVENTS = 2000
"""How far back :func:`recent_events` reads a log: the requests of the current and the
previous turn, within this many events of the kinds that settle them..."""
RECENT_LOOK = 20_000
"""...and within this many events of the log, of any kind (a log of other events is not
read back to its start)."""


@dataclass(frozen=True)
class Request:
    """One request as filed: ``kind``, ``content`` (the item's content, or the note's
    text), who asked (``by``), the seq of the plan it was filed against (``plan_seq``,
    -1 for none) and when (``at``, seconds since the epoch)."""

    id: str
    kind: RequestKind
    content: str
    by: str
    plan_seq: int
    at: float

    def as_json(self) -> dict[str, Any]:
        """The request as its events and the web API give it."""
        return {
            "id": self.id,
            "kind": self.kind,
            "content": self.content,
            "by": self.by,
            "planSeq": self.plan_seq,
            "at": self.at,
        }

    @classmethod
    def from_json(cls, data: object) -> Request | None:
        """The request ``data`` holds, or ``None`` when it is not one (a reader skips it)."""
        if not isinstance(data, Mapping):
            return None
        ident, kind, content, by = (data.get(k) for k in ("id", "kind", "content", "by"))
        plan_seq, at = data.get("planSeq"), data.get("at")
        if not (isinstance(ident, str) and ident and kind in KINDS and isinstance(content, str)):
            return None
        if not isinstance(by, str) or isinstance(plan_seq, bool) or not isinstance(plan_seq, int):
            return None
        if isinstance(at, bool) or not isinstance(at, (int, float)):
            return None
        try:
            when = float(at)  # an int too large for a float is no time: OverflowError
        except OverflowError:
            return None
        if not math.isfinite(when):
            return None
        return cls(ident, cast(RequestKind, kind), content, by, plan_seq, when)


@dataclass(frozen=True)
class RequestState:
    """A taken request, how it stands (``status``), and the seqs that took and settled it."""

    request: Request
    status: Status
    taken_seq: int
    settled_seq: int | None = None
    notified: bool = False

    def as_json(self) -> dict[str, Any]:
        return {
            **self.request.as_json(),
            "status": self.status,
            "takenSeq": self.taken_seq,
            "settledSeq": self.settled_seq,
            "notified": self.notified,
        }


def _check_request(
    kind: object, content: object, by: object, plan: Sequence[Mapping[str, Any]] | None
) -> tuple[RequestKind, str, str]:
    """``(kind, content, by)`` checked against the plan now (``None``: no plan), or
    :class:`~dsh_tool_todo.errors.UsageError` saying what to ask instead."""
    if kind not in KINDS:
        raise UsageError(f"a request's kind is one of {', '.join(KINDS)}, not {kind!r}")
    if not isinstance(content, str) or not content.strip():
        what = "the note's text" if kind == "note" else "the item's content"
        raise UsageError(f"a {kind} request needs {what}, a non-empty string")
    content = content.strip()
    _check_text("content", content, MAX_CONTENT)
    if not isinstance(by, str) or not by.strip():
        raise UsageError("a request names who asks (by=), a non-empty string")
    by = by.strip()
    _check_text("by", by, MAX_BY)
    if kind == "note":
        return kind, content, by
    items = {_match_key(str(i.get("content", ""))): i.get("status") for i in plan or ()}
    status = items.get(_match_key(content))
    known = _match_key(content) in items
    if kind == "add" and known:
        raise UsageError(f"the plan already has {content!r}: there is nothing to add")
    if kind != "add" and not known:
        raise UsageError(
            f"the plan has no item {content!r}: name an item of the current plan (or ask to add it)"
        )
    if kind == "done" and status == "completed":
        raise UsageError(f"{content!r} is completed already")
    if kind == "reopen" and status != "completed":
        raise UsageError(f"{content!r} is not completed: there is nothing to reopen")
    return kind, content, by


def _check_text(name: str, text: str, limit: int) -> None:
    if len(text) > limit:
        raise UsageError(f"a request's {name} is at most {limit} characters, not {len(text)}")
    if "\x00" in text or any("\ud800" <= c <= "\udfff" for c in text):
        raise UsageError(f"a request's {name} holds NUL or a lone surrogate")


def _match_key(content: str) -> str:
    return " ".join(content.split()).casefold()


def request_states(events: Iterable[Mapping[str, Any]]) -> list[RequestState]:
    """Every request taken in ``events`` (a log, oldest first), in the order taken, as it
    stands after the last of them. Events of other types, and ones that are not
    well-formed, leave the requests as they are."""
    fold = _Fold()
    for event in events:
        fold.apply(event)
    return list(fold.states.values())


class _Fold:
    def __init__(self) -> None:
        self.states: dict[str, RequestState] = {}
        self.pending: dict[str, RequestState] = {}
        self.plan: dict[str, object] | None = None
        self.cleared_at = -1  # the newest turn/start's seq
        self.settled: list[str] = []  # ids settled, in order, for a follower to drain

    def pending_copy(self) -> _Fold:
        """A fold that goes on from this one, knowing only its pending requests (health
        steps copy it, so that a state it made earlier never changes)."""
        copy = _Fold()
        copy.states, copy.pending = dict(self.pending), dict(self.pending)
        copy.plan, copy.cleared_at = self.plan, self.cleared_at
        return copy

    def apply(self, event: Mapping[str, Any]) -> None:
        if not isinstance(event, Mapping):
            return
        kind, seq, data = event.get("type"), event.get("seq"), event.get("data")
        if not isinstance(seq, int):
            return
        if kind == EVENT_TYPE:
            self._write(seq, data)
        elif kind == TURN_START:
            self._turn_start(seq)
        elif kind == TURN_END:
            self._end_turn(seq, cleared=False)
        elif kind == REQUEST_TAKEN:
            self._take(seq, data)
        elif kind == REQUEST_WITHDRAWN and isinstance(data, Mapping):
            self._settle(str(data.get("id")), "withdrawn", seq)
        elif kind == REQUEST_NOTIFIED and isinstance(data, Mapping):
            ids = data.get("ids")
            for ident in ids if isinstance(ids, list) else ():
                self._notified(str(ident), seq)

    def _write(self, seq: int, data: object) -> None:
        todos = data.get("todos") if isinstance(data, Mapping) else None
        if not isinstance(todos, list):
            return
        self.plan = {
            _match_key(item["content"]): item.get("status")
            for item in todos
            if isinstance(item, Mapping) and isinstance(item.get("content"), str)
        }
        for state in list(self.pending.values()):
            if _honours(self.plan, state.request):
                self._settle(state.request.id, "honoured", seq)

    def _turn_start(self, seq: int) -> None:
        self.cleared_at = seq
        self.plan = None
        self._end_turn(seq, cleared=True)

    def _end_turn(self, seq: int, *, cleared: bool) -> None:
        # Told and not honoured: the turn it was shown in ended. Not told: it waits for the
        # next notice, except an item of a plan a turn/start cleared, which lapses.
        for state in list(self.pending.values()):
            if state.request.kind == "note":
                continue
            if state.notified:
                self._settle(state.request.id, "not_honoured", seq)
            elif cleared and state.request.kind in ITEM_KINDS:
                self._settle(state.request.id, "void", seq)

    def _take(self, seq: int, data: object) -> None:
        request = Request.from_json(data)
        if request is None or request.id in self.states:
            return  # not a request, or taken already: the first record stands
        state = RequestState(request, "pending", seq)
        self.states[request.id] = self.pending[request.id] = state
        if request.kind in ITEM_KINDS and self.cleared_at > request.plan_seq:
            self._settle(request.id, "void", seq)
        elif self.plan is not None and _honours(self.plan, request):
            self._settle(request.id, "honoured", seq)
        elif isinstance(data, Mapping) and data.get("told") is True:
            self._notified(request.id, seq)  # taken and told in one event

    def _notified(self, ident: str, seq: int) -> None:
        state = self.pending.get(ident)
        if state is None:
            return
        state = self.states[ident] = self.pending[ident] = replace(state, notified=True)
        if state.request.kind == "note":
            self._settle(ident, "delivered", seq)

    def _settle(self, ident: str, status: Status, seq: int) -> None:
        state = self.pending.pop(ident, None)
        if state is not None:
            self.states[ident] = replace(state, status=status, settled_seq=seq)
            self.settled.append(ident)


def _honours(plan: Mapping[str, object], request: Request) -> bool:
    key = _match_key(request.content)
    if request.kind == "done":
        return plan.get(key) == "completed"
    if request.kind == "reopen":
        return key in plan and plan[key] != "completed"
    if request.kind == "remove":
        return key not in plan
    if request.kind == "add":
        return key in plan
    return False


class _Tail(Protocol):
    async def tail(
        self, name: str, *, before: int | None, limit: int, types: Collection[str] | None = None
    ) -> TailPage: ...


async def recent_events(
    reader: _Tail, name: str, *, through: int | None = None
) -> list[Mapping[str, Any]]:
    """The events of session ``name`` that settle requests, oldest first, back to the
    ``turn/start`` before the newest one (at most :data:`RECENT_EVENTS`, looking back at most
    :data:`RECENT_LOOK` events), up to seq ``through`` (``None``: the newest): what
    :func:`request_states` needs of a log for how the requests of its current turn stand."""
    found: list[Mapping[str, Any]] = []
    before = None if through is None else through + 1
    starts = 0
    newest: int | None = None
    while len(found) < RECENT_EVENTS:
        page = await reader.tail(name, before=before, limit=200, types=SETTLING_TYPES)
        for event in reversed(page.events):
            found.append(event)
            newest = event["seq"] if newest is None else newest
            starts += event["type"] == TURN_START
            if starts == 2:
                return found[::-1]
        if not page.more or page.cursor is None:
            break
        before = page.cursor
        newest = page.cursor if newest is None else newest
        if newest - before >= RECENT_LOOK:
            break
    return found[::-1]
