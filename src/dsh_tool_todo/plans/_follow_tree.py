"""The sub-agents under a lead session, found and followed for a forwarder of plans.

What ACP's identified plans (:mod:`._acp_tree`) and A2A's per-agent artifacts
(:mod:`._a2a_tree`) share: the sessions under the lead are found the way the
fleet view finds them (the :class:`~dsh_tool_todo.protocols.LogReader`'s rows
and the parents their head links name, through
:func:`~dsh_tool_todo.plans.fleet.descendants`), listed again after each change
the reader names and every :data:`RESCAN` seconds, and each one's log is
followed by a task of its own on the forwarder's loop. A subclass says what
each step sends (:meth:`TreeFollower._opening`, :meth:`TreeFollower._send`,
:meth:`TreeFollower._gone`); :class:`TreeForwarder` runs a tree beside a
forwarder's own subscription to the lead.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from ..core.contract import EVENT_TYPE, SESSION_END_EVENT_TYPE, TURN_START
from ..core.links import End, end_of
from ..errors import LogReplaced, SessionNotFound
from ..protocols import LogReader, Snapshot
from .fleet import descendants
from .forwarding import OrderedForwarder, Subscribable, running_loop

if TYPE_CHECKING:
    # imported where it runs: plans.acp, which builds on this module, is imported by a CLI
    # start that has no loop to pay 20 ms of asyncio for
    import asyncio

__all__: list[str] = []

Update = TypeVar("Update")

RESCAN = 5.0
"""Seconds between listings of the reader's sessions when its changes name nothing new: a
sub-agent linked unseen (a change stream that failed, or one that started late) is still
found."""
REPLACED_PAUSE = 0.1  # seconds before a log replaced under its follower is read anew
LIST_LIMIT = 1_000_000  # as many rows as the fleet view lists
_DECIDING = (EVENT_TYPE, TURN_START, SESSION_END_EVENT_TYPE)


async def ended_by(reader: LogReader, name: str, snapshot: Snapshot) -> End | None:
    """The end of session ``name`` when the newest of its plan events and ends is its
    ``session/end``, as ``dsh-todo sessions`` reads it (a write after an end is a run
    started again); ``None`` otherwise."""
    before: int | None = snapshot.last_seq + 1
    while before is not None and before > 0:
        page = await reader.tail(name, before=before, limit=1, types=_DECIDING)
        if page.events:
            return end_of(page.events[-1])
        before = page.cursor if page.more else None
    return None


@dataclass
class _Follower:
    """One sub-agent's log being followed: the newest seq handled, and how often it was
    read anew (a log replaced under it)."""

    task: asyncio.Task[None] | None = None
    seen: int = -1
    restarts: int = 0


class TreeFollower:
    """The sessions under ``lead_key`` in ``reader`` (once :meth:`start` runs, on ``loop``),
    each told to the subclass's hooks as its log says it."""

    def __init__(
        self, lead_key: str, reader: LogReader | None, loop: asyncio.AbstractEventLoop
    ) -> None:
        self.lead_key = lead_key
        self._reader = reader
        self._loop = loop
        self._followers: dict[str, _Follower] = {}
        self._parents: dict[str, str] = {}  # each sub-agent's parent, as the rows place it
        self._decided: set[str] = set()  # rows whose parent can no longer change
        self._tasks: set[asyncio.Task[None]] = set()
        self._cancelled: set[asyncio.Task[None]] = set()
        import asyncio

        self._moved = asyncio.Event()  # set, and replaced, each time a follower moves on
        self._put: Callable[[Any], None] = _nowhere
        self._record: Callable[[Exception], None] = _nowhere
        self._stopped = False

    # --- what a subclass sends ---------------------------------------------------------------

    def convert(self, key: str, event: Mapping[str, Any]) -> Any:
        """The update ``event`` of session ``key`` sends, or ``None``."""
        raise NotImplementedError

    def _opening(self, name: str, snapshot: Snapshot, end: End | None, first: bool) -> None:
        """What a sub-agent's log holds when it is (re)read (``first``: the first time)."""
        raise NotImplementedError

    def _gone(self, name: str) -> None:
        """Its log was deleted."""
        raise NotImplementedError

    async def _placed(self, name: str, parent: str) -> None:
        """Before its log is first read: ``name`` sits under ``parent``."""

    # --- running -----------------------------------------------------------------------------

    def start(self, put: Callable[[Any], None], record: Callable[[Exception], None]) -> None:
        """Begin finding and following the sub-agents (call it on the loop)."""
        self._put, self._record = put, record
        if self._reader is not None and not self._stopped:
            self._spawn(self._watch())

    def stop(self) -> None:
        """Stop every task (from any thread); what they queued is still sent."""
        self._stopped = True
        if self._loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):  # a loop closed meanwhile: nothing runs
            self._loop.call_soon_threadsafe(self._cancel)

    async def stopped(self) -> None:
        """Wait until every task has ended (after :meth:`stop`)."""
        import asyncio

        self._cancel()
        while self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def catch_up(self) -> None:
        """List the sub-agents now, then wait until each one's follower has handled every
        event its log held at that moment (or has ended)."""
        if self._reader is None or self._stopped:
            return
        await self._discover()
        targets: dict[str, tuple[int, int]] = {}
        for name, follower in list(self._followers.items()):
            try:
                last = (await self._reader.snapshot(name)).last_seq
            except Exception:  # gone, or broken: its follower says so, once
                continue
            targets[name] = (last, follower.restarts)
        while any(self._behind(name, target) for name, target in targets.items()):
            await self._moved.wait()

    def _behind(self, name: str, target: tuple[int, int]) -> bool:
        follower = self._followers[name]
        ended = follower.task is None or follower.task.done()
        return not ended and follower.restarts == target[1] and follower.seen < target[0]

    def _spawn(self, work: Any) -> asyncio.Task[None]:
        task: asyncio.Task[None] = self._loop.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._ended)
        return task

    def _ended(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        self._cancelled.discard(task)
        self._wake_waiters()

    def _cancel(self) -> None:
        # once each: a second cancel would cut short the clean-up the first one started
        for task in self._tasks - self._cancelled:
            self._cancelled.add(task)
            task.cancel()

    def _wake_waiters(self) -> None:
        import asyncio

        moved, self._moved = self._moved, asyncio.Event()
        moved.set()

    # --- finding -----------------------------------------------------------------------------

    async def _discover(self) -> None:
        """List the reader's sessions and follow each new one under the lead."""
        assert self._reader is not None
        rows, _ = await self._reader.sessions("", LIST_LIMIT)
        # a log with an event has its link (seq 0) or none for good; an empty or unreadable
        # one may still be linked, so a change of it asks for a new listing
        self._decided = {row.name for row in rows if row.last_seq is not None and row.last_seq >= 0}
        for name, parent in descendants(rows, self.lead_key):
            if name not in self._followers and not self._stopped:
                self._parents[name] = parent
                follower = self._followers[name] = _Follower()
                follower.task = self._spawn(self._follow(name, follower))

    async def _watch(self) -> None:
        """Find sub-agents as they are linked: after each change the reader names of a session
        whose link may be new, and every :data:`RESCAN` seconds."""
        import asyncio

        changed = asyncio.Event()
        names: set[str] = set()
        self._spawn(self._listen(changed, names))
        while True:
            try:
                await self._discover()
            except Exception as error:  # a store away for now: listed again later
                self._record(error)
            await self._next_listing(changed, names)

    async def _next_listing(self, changed: asyncio.Event, names: set[str]) -> None:
        """Wait for a change naming a session whose link may be new, or :data:`RESCAN`
        seconds. A timer sets ``changed`` rather than ``wait_for`` timing the wait: on
        Python 3.11 a ``wait_for`` cancelled as its event is set can swallow the cancel, and
        the forwarder would never stop."""
        late = False

        def rescan() -> None:
            nonlocal late
            late = True
            changed.set()

        timer = self._loop.call_later(RESCAN, rescan)
        try:
            while True:
                await changed.wait()
                changed.clear()
                fresh = not names <= self._decided
                names.clear()
                if fresh or late:
                    return
        finally:
            timer.cancel()

    async def _listen(self, changed: asyncio.Event, names: set[str]) -> None:
        assert self._reader is not None
        changes = self._reader.changes()
        try:
            async for batch in changes:
                names.update(batch)
                changed.set()
        except Exception as error:  # listed every RESCAN seconds instead
            self._record(error)
        finally:
            aclose = getattr(changes, "aclose", None)
            if aclose is not None:
                with contextlib.suppress(Exception):
                    await aclose()

    # --- following ---------------------------------------------------------------------------

    async def _follow(self, name: str, follower: _Follower) -> None:
        """Tell sub-agent ``name``'s log as it stands, then each change, until stopped."""
        import asyncio

        assert self._reader is not None
        first = True
        try:
            await self._placed(name, self._parents[name])
        except Exception as error:
            self._record(error)
            return
        while True:
            try:
                snapshot = await self._reader.snapshot(name)
                self._opening(name, snapshot, await ended_by(self._reader, name, snapshot), first)
                follower.seen = snapshot.last_seq
                self._wake_waiters()
                events = self._reader.follow(name, after=snapshot.last_seq, since=snapshot)
                try:
                    async for event in events:
                        self._send(name, event)
                        follower.seen = event["seq"]
                        self._wake_waiters()
                finally:
                    aclose = getattr(events, "aclose", None)
                    if aclose is not None:
                        await aclose()
                return
            except LogReplaced:  # read the new log from its own snapshot
                first = False
                follower.restarts += 1
                await asyncio.sleep(REPLACED_PAUSE)
            except SessionNotFound:  # deleted: its plan goes with it
                self._gone(name)
                return
            except Exception as error:
                self._record(error)
                return

    def _send(self, name: str, event: Mapping[str, Any]) -> None:
        try:
            update = self.convert(name, event)
        except Exception as error:  # a write no reader shows: the next one supersedes it
            self._record(error)
            return
        if update is not None:
            self._put(update)


def _nowhere(_: object) -> None:
    return None


class TreeForwarder(OrderedForwarder[Update]):
    """A forwarder of the lead's session and, with ``tree``, of the sub-agents under it: the
    tree's followers put their updates on the same queue, so one sender sends them all."""

    def __init__(
        self,
        session: Subscribable,
        convert: Callable[[Mapping[str, Any]], Update | None],
        send: Callable[[Update], Awaitable[None]],
        loop: asyncio.AbstractEventLoop,
        *,
        tree: TreeFollower | None = None,
    ) -> None:
        self._tree = tree
        super().__init__(session, convert, send, loop)
        if tree is not None:
            if running_loop() is loop:
                tree.start(self._put, self._record)
            else:
                loop.call_soon_threadsafe(tree.start, self._put, self._record)

    def __call__(self) -> None:
        """Stop forwarding; updates already queued are still sent. Safe to call twice."""
        super().__call__()
        if self._tree is not None:
            self._tree.stop()

    async def drain(self) -> None:
        """Wait until every update queued before this call has been sent (or has failed),
        and, with sub-agents, every event each sub-agent's log held at this call (its list
        read anew); raise the first failure since the last drain."""
        if self._tree is not None and running_loop() is self._loop:
            try:
                await self._tree.catch_up()
            except Exception as error:
                self._record(error)
        await super().drain()

    async def aclose(self) -> None:
        """Stop forwarding and wait until the sub-agents' followers have ended."""
        self()
        if self._tree is not None:
            await self._tree.stopped()
