"""The callbacks a session calls with each event it appends: how hosts drive projections."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["LOGGER_NAME", "Listeners"]

Event = dict[str, Any]
Listener = Callable[[Event], None]

LOGGER_NAME = "dsh_tool_todo"


class Listeners:
    """Subscribers of one session, notified by the session under its append lock.

    Listeners run in subscription order, each with the event just recorded. A
    listener that raises is reported on the ``dsh_tool_todo`` logger, with its
    traceback, and the remaining listeners still run: by then the event is in
    the log, so a failing UI redraw or forwarder must never turn a recorded
    call into a failed one. (``KeyboardInterrupt`` and other ``BaseException``
    s that are not ``Exception`` still propagate.)

    The list is replaced, never mutated, so subscribing during a notification is
    safe and takes effect from the next event.
    """

    # Read by a store that loops over them itself (MemorySession, on its hot path). A class
    # default until the first subscription: no __init__ to run for each new session.
    callbacks: tuple[Listener, ...] = ()

    def add(self, listener: Listener) -> Callable[[], None]:
        """Subscribe ``listener``; call the returned function to unsubscribe it (once or more)."""
        self.callbacks = (*self.callbacks, listener)
        return lambda: self._remove(listener)

    def notify(self, event: Event) -> None:
        for listener in self.callbacks:
            try:
                listener(event)
            except Exception:  # the append has succeeded: report, never propagate
                report(listener, event)

    def _remove(self, listener: Listener) -> None:
        callbacks = list(self.callbacks)
        if listener in callbacks:
            callbacks.remove(listener)
        self.callbacks = tuple(callbacks)


def report(listener: Listener, event: Event) -> None:
    import logging  # only on failure: keeps `import dsh_tool_todo` light

    logging.getLogger(LOGGER_NAME).error(
        "session listener %r raised on event seq=%s type=%r; the event is recorded "
        "and the other listeners ran",
        listener,
        event.get("seq"),
        event.get("type"),
        exc_info=True,
    )
