"""The callbacks a session calls with each event it appends: how hosts drive projections."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Event = dict[str, Any]
Listener = Callable[[Event], None]


class Listeners:
    """Subscribers of one session, notified by the session under its append lock.

    The list is replaced, never mutated, so subscribing during a notification is
    safe and takes effect from the next event.
    """

    def __init__(self) -> None:
        self._callbacks: tuple[Listener, ...] = ()

    def add(self, listener: Listener) -> Callable[[], None]:
        """Subscribe ``listener``; call the returned function to unsubscribe it."""
        self._callbacks = (*self._callbacks, listener)
        return lambda: self._remove(listener)

    def notify(self, event: Event) -> None:
        for listener in self._callbacks:
            listener(event)

    def _remove(self, listener: Listener) -> None:
        callbacks = list(self._callbacks)
        callbacks.remove(listener)
        self._callbacks = tuple(callbacks)
