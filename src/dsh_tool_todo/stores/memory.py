"""The in-memory session log: the reference host's default, pinned down by the contract tests."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from ..listeners import Event, Listener, Listeners

__all__ = ["AsyncMemorySession", "MemorySession"]


class MemorySession:
    """An append-only, in-memory session log; safe to append from several threads."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self._listeners = Listeners()
        self._lock = threading.Lock()

    def append(self, type: str, data: Mapping[str, Any], /) -> Event:
        event: Event = {"type": type, "data": data}
        with self._lock:  # listeners see events in log order
            self.events.append(event)
            self._listeners.notify(event)
        return event

    def subscribe(self, listener: Listener, /) -> Callable[[], None]:
        return self._listeners.add(listener)


class AsyncMemorySession(MemorySession):
    """The same log behind a coroutine ``append``, as asyncio hosts have."""

    async def append(self, type: str, data: Mapping[str, Any], /) -> Event:  # type: ignore[override]
        return MemorySession.append(self, type, data)
