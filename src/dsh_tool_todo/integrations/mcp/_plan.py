"""The owner's plan as the MCP resource ``todo://plan``: read, subscribed to, told of changes;
and ``todo://plan?tree=1``, that plan with the sub-agents' under it.

Version-neutral: the server module wires these pieces into the 1.x or the 2.x
SDK's handlers. A subscriber is told through a *channel*: one per connection
that sent ``resources/subscribe`` (the handshake-era wire), plus one for the
2.x ``subscriptions/listen`` streams (the 2026-07-28 wire), which the SDK's own
bus fans out. Channels coalesce: a write while a notification is being sent
makes exactly one more, sent after it, so a burst of writes ends with a
notification sent after its last write and a read then returns the last plan.

The tree resource names the owner's session and lists each session under it in
the store's reader (the fleet's tree of links, ``plans._agents.read_tree``), each
attributed to its agent; its subscribers are told of the owner's changes and of
each change the reader names of a session under it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import threading
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any, ParamSpec, TypeVar

from ...core.contract import EVENT_TYPE, TURN_START
from ...plans._agents import read_tree
from ...plans._follow_tree import LIST_LIMIT
from ...plans._pending import PendingRequests, read_pending
from ...plans.fleet import descendants
from ...plans.wire import plan_of
from .._binding import Binding, LogReader, OwnerRegistry, StoreSession

P = ParamSpec("P")
T = TypeVar("T")

PLAN_URI = "todo://plan"
TREE_URI = PLAN_URI + "?tree=1"
MIME_TYPE = "application/json"

_log = Binding.log
_PLAN_EVENTS = (EVENT_TYPE, TURN_START)  # the events that decide the plan


def unknown_resource_message(uri: str) -> str:
    # Cut: the URI is the client's, of any length, and the error goes back over the wire.
    shown = repr(uri[:80]) + (f" (cut from {len(uri)} characters)" if len(uri) > 80 else "")
    return f"unknown resource {shown}: this server offers only {PLAN_URI}"


def plan_text(session: StoreSession) -> str:
    """The plan the owner's log decides, as the resource's JSON: ``{"todos": [...]}``.

    ASCII-escaped: a lone surrogate the model wrote has no UTF-8 form.
    """
    return json.dumps({"todos": plan_of(session.latest(_PLAN_EVENTS))})


class _Channel:
    """One way to tell subscribers the plan changed: notifications sent one at a time,
    a write during a send coalesced into one more send after it."""

    __slots__ = ("_gone", "_send", "_task", "closed", "dirty", "loop")

    def __init__(
        self,
        send: Callable[[], Awaitable[None]],
        loop: asyncio.AbstractEventLoop,
        gone: Callable[[_Channel], None],
    ) -> None:
        self._send = send
        self._gone = gone
        self._task: asyncio.Task[None] | None = None
        self.loop = loop
        self.dirty = False
        self.closed = False

    def poke(self) -> None:
        """Schedule a notification; callable from any thread (a session's listener)."""
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self.loop:
            self._wake()
            return
        try:
            self.loop.call_soon_threadsafe(self._wake)
        except RuntimeError:  # the loop has closed: its connection is gone with it
            self.closed = True

    def _wake(self) -> None:
        if self.closed:
            return
        self.dirty = True
        if self._task is None:
            self._task = self.loop.create_task(self._run())

    async def _run(self) -> None:
        try:
            while self.dirty and not self.closed:
                self.dirty = False
                await self._send()
        except Exception as error:
            # The client went away (a closed stream or pipe): nobody is left to tell.
            _log.debug("todo://plan: dropping a subscriber that cannot be told: %r", error)
            self.closed = True
            self._gone(self)
        finally:
            self._task = None


class PlanResource:
    """``todo://plan`` for one owner of one registry: what a read returns, who is told.

    The server's owner is the only one: with several owners in ``--log-dir``
    the resource is this server's ``--owner``'s plan, never another's.
    """

    def __init__(
        self, registry: OwnerRegistry, owner: str, reader: LogReader | None = None
    ) -> None:
        self._registry = registry
        self._owner = owner
        self._reader = reader  # where the sub-agents are found; else the registry's directory
        self._tree_watch: asyncio.Task[None] | None = None
        self._lock = threading.Lock()  # the channels; taken inside a session's append lock
        # The watched session; held while subscribing to a session, which may take that
        # session's lock: never taken by the listener, so never inside a session's lock.
        self._watch_lock = threading.Lock()
        self._watched: StoreSession | None = None
        self._unwatch: Callable[[], None] | None = None
        # (connection, or the listen bus; the URI) -> channel
        self._channels: dict[tuple[object, str], _Channel] = {}
        self._late = False  # subscribed before the owner's session was open: tell on opening
        self._requests = PendingRequests()  # a person's, taken by the owner's writer
        self._primed: StoreSession | None = None  # the session whose log they were read from
        self._heard: list[Mapping[str, Any]] | None = None  # the events heard while reading it

    @property
    def description(self) -> str:
        return (
            f"The current todo plan of owner {self._owner!r}, as todo_write last recorded it: "
            '{"todos": [{"content", "status"}, ...]}; [] when there is none; with "requests" '
            "while a person's requests wait for the agent's answer. Subscribe to be told when "
            "it changes."
        )

    async def read(self) -> str:
        if self._not_made_yet():
            return json.dumps({"todos": plan_of(None)})
        # Under the owner's lock: a read never sees a call half-recorded.
        async with self._registry.alocked(self._owner) as session:
            self.watch(session)
            await self._prime(session)
            text = plan_text(session)
        pending = self._requests.pending()
        return json.dumps({**json.loads(text), "requests": pending}) if pending else text

    async def read_tree(self) -> str:
        """``todo://plan?tree=1``: ``{"session", "todos", "subagents": [...]}``, the owner's
        plan as :meth:`read` gives it and each session under it, attributed."""
        todos = json.loads(await self.read())["todos"]
        lead = self._registry.key(self._owner)
        reader = self._tree_reader()
        subagents = [] if reader is None else await read_tree(reader, lead)
        return json.dumps({"session": lead, "todos": todos, "subagents": subagents})

    def _tree_reader(self) -> LogReader | None:
        if self._reader is None:
            self._reader = Binding.reader_of(self._registry)
        return self._reader

    async def subscribe(
        self, connection: object, send: Callable[[], Awaitable[None]], uri: str = PLAN_URI
    ) -> None:
        """Tell ``connection`` of each change of ``uri`` by ``send()`` until it unsubscribes
        or is gone.

        A second subscribe on one connection keeps the one subscription: the
        protocol counts none.
        """
        if self._not_made_yet():
            with self._watch_lock:
                self._late = True  # watched once a call opens the session, and told then
        else:
            async with self._registry.alocked(self._owner) as session:
                self.watch(session)
                await self._prime(session)
        loop = asyncio.get_running_loop()
        with self._lock:
            existing = self._channels.get((connection, uri))
            # A channel on another loop belongs to a run that has ended (a server object
            # served again under a new asyncio.run): it could never send.
            if existing is None or existing.closed or existing.loop is not loop:
                if existing is not None:
                    existing.closed = True
                self._channels[(connection, uri)] = _Channel(send, loop, self._drop)
        if uri == TREE_URI:
            self._watch_tree(loop)

    def unsubscribe(self, connection: object, uri: str = PLAN_URI) -> None:
        with self._lock:
            channel = self._channels.pop((connection, uri), None)
        if channel is not None:
            channel.closed = True

    def _watch_tree(self, loop: asyncio.AbstractEventLoop) -> None:
        """Follow the reader's changes on ``loop`` while the tree has subscribers."""
        watch = self._tree_watch
        if watch is not None and not watch.done() and watch.get_loop() is loop:
            return
        reader = self._tree_reader()
        if reader is not None:
            self._tree_watch = loop.create_task(self._tree_changes(reader))

    async def _tree_changes(self, reader: LogReader) -> None:
        """Tell the tree's subscribers of each change the reader names of a session under the
        owner's (or one that was: a log deleted, a link gone with it)."""
        lead = self._registry.key(self._owner)
        changes = reader.changes()
        try:
            known = await _under(reader, lead)
            async for batch in changes:
                under = await _under(reader, lead)
                if batch & (under | known):
                    self._poke_all(TREE_URI)
                known = under
                with self._lock:
                    if not any(uri == TREE_URI for _, uri in self._channels):
                        return
        except Exception as error:  # the store away: the owner's changes are still told
            _log.debug("todo://plan?tree=1: the sub-agents cannot be watched: %r", error)
        finally:
            aclose = getattr(changes, "aclose", None)
            if aclose is not None:
                with contextlib.suppress(Exception):
                    await aclose()

    def watching(self, call: Callable[P, Awaitable[T]]) -> Callable[P, Coroutine[Any, Any, T]]:
        """``call``, then the owner's session watched again.

        A registry that evicts idle owners opens a new session object on the
        owner's next call: the listener moves to it after that call.
        """

        @functools.wraps(call)
        async def watched(*args: P.args, **kwargs: P.kwargs) -> T:
            try:
                return await call(*args, **kwargs)
            finally:
                try:
                    if self._owner in self._registry:
                        self.watch(self._registry.session(self._owner))
                except Exception as error:  # the call's answer stands, whatever happens here
                    _log.debug("todo://plan: the owner's session cannot be watched: %r", error)

        return watched

    def watch(self, session: StoreSession) -> None:
        """Listen to ``session``, the owner's open session, if not already.

        A registry that evicts idle owners opens a new session object on the
        next call: the listener moves to it, and subscribers are told once,
        since a change could have come and gone in between.
        """
        with self._watch_lock:
            if session is self._watched:
                return
            previous, self._unwatch = self._unwatch, None
            self._watched = session
            # what decides the plan now, for the requests the listener sees taken from here on
            seeds = [session.latest((TURN_START,)), session.latest(_PLAN_EVENTS)]
            for event in sorted((e for e in seeds if e is not None), key=lambda e: e["seq"]):
                self._requests.add(event)
            self._unwatch = session.subscribe(self._on_event)
            unseen = previous is not None or self._late  # a change may have come unheard
            self._late = False
        if previous is not None:
            # a closed session may refuse: it calls nobody any more anyway
            with contextlib.suppress(Exception):
                previous()
        if unseen:
            self._poke_all()

    async def _prime(self, session: StoreSession) -> None:
        """The requests the owner's log leaves pending, read from the log once per session
        opened (the caller holds the owner): the listener hears only what is taken from then
        on, and a server restarted over a session with requests pending must list them. The
        events heard while the log is read are folded in after its own."""
        if self._primed is session:
            return
        self._primed = session
        reader = self._tree_reader()
        if reader is None:  # in memory, or open_session without reader=: what it hears only
            return
        with self._lock:
            self._heard = []
        try:
            primed = await read_pending(reader, self._registry.key(self._owner))
            with self._lock:
                for event in self._heard or ():
                    primed.add(event)
                self._requests = primed
        except Exception as error:  # the plan is still read; the requests are what it hears
            _log.debug("todo://plan: the owner's requests cannot be read: %r", error)
        finally:
            with self._lock:
                self._heard = None

    def _not_made_yet(self) -> bool:
        """Whether the owner's log is not there and no call has opened it: its plan is empty,
        and reading it must not make an empty log (a server no call reaches leaves none)."""
        registry = self._registry
        if registry.directory is None or self._owner in registry:
            return False
        return not os.path.lexists(registry.path(self._owner))

    def _on_event(self, event: Mapping[str, Any]) -> None:
        # Called under the session's append lock, in the appending thread: only schedule.
        with self._lock:
            requests = self._requests
            if self._heard is not None:  # the log is being read: folded in after it
                self._heard.append(event)
        if requests.add(event) or event.get("type") in _PLAN_EVENTS:
            self._poke_all()

    def _poke_all(self, uri: str | None = None) -> None:
        """Poke every channel (the owner's plan is in both resources), or those of ``uri``."""
        with self._lock:
            channels = [held for (_, on), held in self._channels.items() if uri in (None, on)]
        for channel in channels:
            channel.poke()

    def _drop(self, channel: _Channel) -> None:
        with self._lock:
            for connection, held in list(self._channels.items()):
                if held is channel:
                    del self._channels[connection]


async def _under(reader: LogReader, lead: str) -> set[str]:
    rows, _ = await reader.sessions("", LIST_LIMIT)
    return {name for name, _ in descendants(rows, lead)}
