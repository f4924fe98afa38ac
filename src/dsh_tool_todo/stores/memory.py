"""The in-memory session log: the reference host's default, pinned down by the contract tests."""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Mapping
from typing import Any

from ..core.contract import CALL_ID_KEY, EVENT_TYPE, TURN_START
from ..core.listeners import Event, Listener, Listeners, report
from ..errors import UsageError
from ._calls import call_id_of, call_key
from ._closing import ClosedOnExit
from ._inbox import MemoryInbox

__all__ = ["AsyncMemorySession", "MemorySession"]

_FIRST_SUBSCRIBER = threading.Lock()


class MemorySession(ClosedOnExit):
    """An append-only, in-memory session log; safe to append from several threads.

    It speaks the store protocol (:class:`~dsh_tool_todo.protocols.StoreSession`):
    ``append`` returns the event ``{seq, type, data}`` (``seq`` from 0),
    listeners run in log order in the appending thread, ``latest`` reads from
    the end, and a closed session refuses appends as a durable one does.
    A ``todo/write`` whose call id and list equal one of the current turn is a
    retry, not recorded again: ``append`` returns that event (see ``_calls.py``).

    ``events`` holds the recorded event objects themselves, not copies: this
    store keeps no encoded form because encoding each append would cost about
    a sixth of a call. Hosts must not mutate event data (the reference host's
    :meth:`~dsh_tool_todo.host.Host.projection` hands out copies).
    """

    def __init__(
        self,
        *,
        key: str | None = None,
        parent: str | None = None,
        parent_call_id: str | None = None,
    ) -> None:
        self.key = key
        """The name a viewer knows this session by (``None``: none); a child's ``parent``."""
        self.events: list[Event] = []
        self._seq = 0
        self._closed = False
        # Made by the first subscribe: until then an append has no listener to look for.
        self._listeners: Listeners | None = None
        self._lock = threading.Lock()
        self._calls: dict[bytes, Event] = {}  # the current turn's keyed todo/writes by call_key
        self.requests = MemoryInbox()
        """A person's requests waiting for this session's writer (in this process only)."""
        if parent is not None:
            self.link(parent, parent_call_id=parent_call_id)
        elif parent_call_id is not None:
            raise UsageError("parent_call_id names a call of the parent: pass parent= too")

    def link(self, parent: str, *, parent_call_id: str | None = None) -> Event | None:
        """Record that this session works for ``parent`` (see :mod:`dsh_tool_todo.core.links`).

        Returns the link event, or ``None`` when the log records this parent already;
        raises :class:`~dsh_tool_todo.errors.LinkConflict` for another parent.
        """
        from ..core.contract import LINK_EVENT_TYPE
        from ..core.links import decide_link, link_data

        data = link_data(parent, parent_call_id)
        with self._lock:  # decided and recorded at once: no append can come between
            if self._closed:
                raise UsageError("the in-memory session log is closed")
            head = self.events[0] if self.events else None
            if not decide_link("in-memory session", head, self._seq, data):
                return None
            event: Event = {"seq": self._seq, "type": LINK_EVENT_TYPE, "data": data}
            self.events.append(event)
            self._seq += 1
            if self._listeners is not None:
                self._listeners.notify(event)
        return event

    @property
    def closed(self) -> bool:
        return self._closed

    def append(self, type: str, data: Mapping[str, Any], /) -> Event:
        # The tool's own data, a dict without a call id, needs no call to call_id_of.
        key = None
        if type == EVENT_TYPE and (data.__class__ is not dict or CALL_ID_KEY in data):
            key = None if call_id_of(type, data) is None else call_key(data)
        lock = self._lock
        lock.acquire()  # listeners see events in log order; try/finally: half a `with`'s cost
        try:
            if self._closed:
                raise UsageError("the in-memory session log is closed")
            if key is not None and key in self._calls:  # same id and list: a retry
                return self._calls[key]
            event: Event = {"seq": self._seq, "type": type, "data": data}
            self.events.append(event)
            self._seq += 1
            if key is not None:
                self._calls[key] = event
            elif type == TURN_START:
                self._calls = {}
            listeners = self._listeners
            if listeners is not None:  # Listeners.notify written out: one call fewer per append
                for listener in listeners.callbacks:
                    try:
                        listener(event)
                    except Exception:  # the append has succeeded: report, never propagate
                        report(listener, event)
        finally:
            lock.release()
        return event

    def subscribe(self, listener: Listener, /) -> Callable[[], None]:
        listeners = self._listeners
        if listeners is None:
            with _FIRST_SUBSCRIBER:  # not the session's lock: a listener may subscribe
                listeners = self._listeners
                if listeners is None:
                    listeners = self._listeners = Listeners()
        return listeners.add(listener)

    def latest(self, types: Collection[str], /) -> Event | None:
        """The newest event whose type is in ``types`` (searched from the end), or ``None``."""
        if isinstance(types, str):
            raise UsageError("latest() takes a collection of event types, not one string")
        with self._lock:
            for event in reversed(self.events):
                if event["type"] in types:
                    return event
        return None

    def close(self) -> None:
        """Refuse further appends; the recorded events stay readable. Safe to call twice."""
        with self._lock:
            self._closed = True


class AsyncMemorySession(MemorySession):
    """The same log behind a coroutine ``append``, as asyncio hosts have."""

    async def append(self, type: str, data: Mapping[str, Any], /) -> Event:  # type: ignore[override]
        return MemorySession.append(self, type, data)
