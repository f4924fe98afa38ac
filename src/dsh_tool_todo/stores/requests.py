"""A person's requests, filed from outside the agent: ask, withdraw, and see how they stand.

The sources are those of ``dsh-todo show``: a JSONL log, a directory and a session
name, or a ``postgresql://`` URL and a session id. Nothing here writes a log: a
request waits in the session's inbox (docs/requests.md) until the session's own
writer takes it.

>>> import tempfile, os
>>> from dsh_tool_todo.stores.jsonl import JsonlSession
>>> from dsh_tool_todo.stores._inbox import take_requests
>>> log = os.path.join(tempfile.mkdtemp(), "ada.jsonl")
>>> with JsonlSession(log) as agent:
...     _ = agent.append("todo/write", {"todos": [{"content": "Ship it", "status": "pending"}]})
...     asked = PlanRequests(log).file("done", "Ship it", by="grace")
...     [r.content for r in take_requests(agent)]
['Ship it']
>>> [(s.request.kind, s.status) for s in PlanRequests(log).read().taken]
[('done', 'pending')]
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from ..core.contract import EVENT_TYPE, TURN_START
from ..core.requests import (
    MAX_BY,
    Request,
    RequestState,
    _check_request,
    _check_text,
    _match_key,
    recent_events,
    request_states,
)
from ..errors import StoreUnavailable, TodoError, UsageError
from ._inbox import (
    ID_DIGITS,
    IDENTITY_KEY,
    MAX_WAITING,
    POSITION_KEY,
    TAKEN_TYPES,
    Admit,
    _admit_all,
    waiting_of,
)

if TYPE_CHECKING:
    from ..protocols import Event
    from ._inbox import Inbox
    from ._log_file import LogTail, Target

__all__ = ["PlanRequests", "Requests"]

T = TypeVar("T")


@dataclass(frozen=True)
class Requests:
    """How a session's requests stand: the ones its log took (``taken``, oldest first, each
    with its status) and the ones still waiting in its inbox (``waiting``)."""

    taken: list[RequestState]
    waiting: list[Request]

    def as_json(self) -> dict[str, Any]:
        return {
            "taken": [state.as_json() for state in self.taken],
            "waiting": [request.as_json() for request in self.waiting],
        }


class PlanRequests:
    """A person's requests against one session's plan: ``PlanRequests(source, session)``,
    with the sources of ``dsh-todo show`` (a JSONL log, a directory and a session name, a
    ``postgresql://`` URL and a session id; no session: the one written last).

    Each method has an ``a``-prefixed coroutine twin for code on an event loop.
    """

    def __init__(self, source: Target, session: str | None = None) -> None:
        self.source = source
        self.session = session

    async def afile(self, kind: str, content: str, *, by: str) -> Request:
        """File a request against the plan now in the log (kinds: ``done``, ``reopen``,
        ``remove``, ``add``, ``note``); :class:`~dsh_tool_todo.errors.UsageError`, filing
        nothing, for one that names no item of the plan, is too long, or finds the inbox
        full."""
        inbox, tail, name = _open(self.source, self.session)
        try:
            deciding = await _newest(tail, name, (EVENT_TYPE, TURN_START))
            kind, content, by = _check_request(kind, content, by, _plan_of(deciding))
            states = request_states(await recent_events(tail, name))
            taken = [s.request for s in states if s.status == "pending"]
            plan_seq = -1 if deciding is None else int(deciding["seq"])
            ident = secrets.token_hex(ID_DIGITS // 2)
            request = Request(ident, kind, content, by, plan_seq, time.time())

            def admit(entries: list[dict[str, Any]]) -> None:  # under the inbox's lock
                waiting = waiting_of(entries)
                if len(waiting) >= MAX_WAITING:
                    raise UsageError(
                        f"{MAX_WAITING} requests wait for this agent already: "
                        "wait for it to take them, or withdraw one"
                    )
                for earlier in [*waiting, *taken]:
                    if earlier.kind == kind and _match_key(earlier.content) == _match_key(content):
                        raise UsageError(
                            f"the same request is open already ({earlier.id}, by "
                            f"{earlier.by}): it waits for the agent's answer"
                        )

            _filed(inbox, request.as_json(), admit, await _through(tail, name))
            return request
        finally:
            await tail.aclose()

    async def awithdraw(self, request_id: str, *, by: str) -> None:
        """Withdraw a request still pending (waiting, or taken and not settled);
        :class:`~dsh_tool_todo.errors.UsageError` for one that is not."""
        if not isinstance(by, str) or not by.strip():
            raise UsageError("a withdrawal names who withdraws it (by=), a non-empty string")
        by = by.strip()
        _check_text("by", by, MAX_BY)  # as a filing's: what every view then shows
        inbox, tail, name = _open(self.source, self.session)
        try:
            found = await _list(inbox, tail, name)
        finally:
            await tail.aclose()
        pending = {r.id for r in found.waiting} | {
            s.request.id for s in found.taken if s.status == "pending"
        }
        if request_id not in pending:
            long = isinstance(request_id, str) and len(request_id) > 40
            shown = f"{request_id[:40]}..." if long else request_id
            raise UsageError(f"no pending request {shown!r} of this session")
        entry = {"withdraw": request_id, "by": by, "at": time.time()}
        _filed(inbox, entry, _admit_all, (0, None))

    async def aread(self) -> Requests:
        """How the session's requests stand: taken (in its current and previous turn) and
        waiting."""
        inbox, tail, name = _open(self.source, self.session)
        try:
            return await _list(inbox, tail, name)
        finally:
            await tail.aclose()

    def file(self, kind: str, content: str, *, by: str) -> Request:
        """:meth:`afile`, outside an event loop."""
        return _run(self.afile(kind, content, by=by))

    def withdraw(self, request_id: str, *, by: str) -> None:
        """:meth:`awithdraw`, outside an event loop."""
        _run(self.awithdraw(request_id, by=by))

    def read(self) -> Requests:
        """:meth:`aread`, outside an event loop."""
        return _run(self.aread())


def _run(work: Coroutine[Any, Any, T]) -> T:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(work)
    work.close()
    raise UsageError("an event loop is running here: await the a-prefixed function instead")


def _open(target: Target, session: str | None) -> tuple[Inbox, LogTail, str]:
    from . import _backend, pick_log

    picked, name = pick_log(target, session)
    backend = _backend(picked)
    inbox = backend.open_inbox(picked, name)
    tail, log_name = backend.open_log(picked, name)
    return inbox, tail, log_name


async def _list(inbox: Inbox, tail: LogTail, name: str) -> Requests:
    events = await recent_events(tail, name)
    return Requests(request_states(events), await _waiting(inbox, tail, name))


async def _through(tail: LogTail, name: str) -> tuple[int, str | None]:
    """Where the log's writer took the inbox last: its position and the inbox's identity."""
    newest = await _newest(tail, name, TAKEN_TYPES)
    data = newest["data"] if newest is not None else {}
    position, identity = data.get(POSITION_KEY, 0), data.get(IDENTITY_KEY)
    return (
        position if isinstance(position, int) else 0,
        identity if isinstance(identity, str) else None,
    )


async def _waiting(inbox: Inbox, tail: LogTail, name: str) -> list[Request]:
    entries, _, _ = inbox.read_after(0, None)
    if not waiting_of([entry for _, entry in entries if entry is not None]):
        return []  # nothing waits whatever the writer took: the log is not read back for it
    entries, _, _ = inbox.read_after(*await _through(tail, name))
    return waiting_of([entry for _, entry in entries if entry is not None])


def _filed(
    inbox: Inbox, entry: dict[str, Any], admit: Admit, after: tuple[int, str | None]
) -> None:
    """``inbox.file``, its system errors said as the store's (a view answers 503)."""
    try:
        inbox.file(entry, admit, after)
    except TodoError:
        raise  # the store's own (a database not ready), said as it says it
    except OSError as error:
        raise StoreUnavailable(
            f"the session's requests cannot be written: {error.strerror or error}"
        ) from None


async def _newest(tail: LogTail, name: str, types: tuple[str, ...]) -> Event | None:
    before: int | None = None
    while True:
        page = await tail.tail(name, before=before, limit=1, types=types)
        if page.events:
            return page.events[-1]
        if not page.more or page.cursor is None:
            return None
        before = page.cursor


def _plan_of(deciding: Event | None) -> list[dict[str, Any]] | None:
    if deciding is None or deciding["type"] != EVENT_TYPE:
        return None
    todos = deciding["data"].get("todos")
    return todos if isinstance(todos, list) else None
