"""The lead's plan as a forwarder of plans sends it, and what was asked beside it.

What the forwarders of ACP (:func:`~dsh_tool_todo.plans.acp.forward_plans`) and A2A
(:func:`~dsh_tool_todo.integrations.a2a.forward_plan_artifacts`) make of
:class:`~._asked.AskedBeside`, for a subscription rather than a stream: each event that
decides the lead's plan is sent, with what was asked once a request was seen; a request event
that changes that list sends the plan again, as the client holds it; and, given a reader, what
was asked in the lead's log before the subscription counts too (:meth:`AskedForwarder.prime`),
sent at once with the plan the log holds when it says something (docs/requests.md).
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from ..core.requests import SETTLING_TYPES, recent_events
from ..errors import SessionNotFound
from ._asked import AskedBeside
from ._follow_tree import TreeFollower, TreeForwarder
from .forwarding import Subscribable, running_loop

if TYPE_CHECKING:
    import asyncio

    from ..protocols import LogReader

__all__: list[str] = []

Update = TypeVar("Update")
Requests = list[dict[str, Any]] | None
"""What was asked, as :meth:`~._asked.AskedBeside.shown` gives it (``None``: nothing shown)."""


class LeadAsked(Generic[Update]):
    """The lead's plan, from the events ``decides`` says set it, as ``build(event, requests)``
    makes each update; ``priming``: :meth:`prime` is still to come."""

    def __init__(
        self,
        build: Callable[[Mapping[str, Any], Requests], Update | None],
        decides: Callable[[Mapping[str, Any]], bool],
        *,
        priming: bool,
    ) -> None:
        self._build = build
        self._decides = decides
        self._asked = AskedBeside()
        self._plan: Mapping[str, Any] | None = None  # the event the client's plan comes from
        # held while an update is made and queued: the prime ends on the loop, events come
        # from any thread, and each update goes out in the order it was made
        self.lock = threading.RLock()
        self._followed: list[Mapping[str, Any]] | None = [] if priming else None

    def convert(self, event: Mapping[str, Any]) -> Update | None:
        with self.lock:
            if self._followed is not None and event.get("type") in SETTLING_TYPES:
                self._followed.append(event)  # replayed over the log's when the prime ends
            moved = self._asked.add(event)
            if self._decides(event):
                return self._update(event)
            if not moved or self._plan is None:
                return None  # a plan not sent yet: the list goes with the first one
            return self._update(self._plan)

    def prime(self, recent: Iterable[Mapping[str, Any]]) -> Update | None:
        """Fold in the log's recent events from before the events followed; the plan again
        when that changes what was asked (call it holding :attr:`lock`)."""
        recent = list(recent)
        followed, self._followed = self._followed or [], None
        self._asked.prime([*recent, *followed])  # an event in both is folded once
        if self._plan is None:  # the plan the log holds: a request from here sends it
            plans = [event for event in recent if self._decides(event)]
            self._plan = plans[-1] if plans else None
        if self._plan is None or not self._asked.changed():
            return None
        return self._update(self._plan)

    def primed_without(self) -> None:
        """No prime is coming (the log could not be read): stop keeping events for it."""
        self._followed = None

    def _update(self, source: Mapping[str, Any]) -> Update | None:
        update = self._build(source, self._asked.shown())
        # kept once it converts: a write no reader shows leaves the client the plan before it
        self._plan = source
        return update


class AskedForwarder(TreeForwarder[Update]):
    """A :class:`TreeForwarder` whose lead is a :class:`LeadAsked`: its events are converted
    and queued under the lead's lock, which the prime takes too, so the prime's update keeps
    its place among them."""

    def __init__(
        self,
        session: Subscribable,
        lead: LeadAsked[Update],
        send: Callable[[Update], Awaitable[None]],
        loop: asyncio.AbstractEventLoop,
        *,
        tree: TreeFollower | None = None,
    ) -> None:
        self._lead = lead
        self._priming: asyncio.Task[None] | None = None
        super().__init__(session, lead.convert, send, loop, tree=tree)

    def _on_event(self, event: Mapping[str, Any]) -> None:
        with self._lead.lock:
            super()._on_event(event)

    def prime(self, reader: LogReader, key: str) -> None:
        """Read what was asked in session ``key``'s log before this forwarder started (on its
        loop; :meth:`drain` waits for it)."""

        def start() -> None:
            self._priming = self._loop.create_task(self._primed(reader, key))

        if running_loop() is self._loop:
            start()
        else:
            self._loop.call_soon_threadsafe(start)

    async def _primed(self, reader: LogReader, key: str) -> None:
        try:
            try:
                recent = await recent_events(reader, key)
            except SessionNotFound:  # a lead the reader does not hold: no request it can see
                recent = []
            with self._lead.lock:
                update = self._lead.prime(recent)
                if update is not None and self._unsubscribe is not None:
                    self._put(update)
        except Exception as error:  # drain raises it; the events followed still go
            with self._lead.lock:
                self._lead.primed_without()
            self._record(error)

    async def drain(self) -> None:
        """Wait for the prime (when there is one), then as :meth:`TreeForwarder.drain`."""
        priming = self._priming
        if priming is not None and running_loop() is self._loop:
            import asyncio

            await asyncio.wait({priming})
        await super().drain()
