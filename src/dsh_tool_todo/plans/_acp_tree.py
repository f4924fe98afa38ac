"""ACP's identified plans for a lead session and the sub-agents linked under it.

What :func:`~dsh_tool_todo.plans.acp.forward_plans` sends to a client whose
``initialize`` capabilities include ``plan``: each session's plan under its
own ``planId`` (:func:`~dsh_tool_todo.plans.wire.plan_id` of its key, so the
same after a reconnect), ``plan_update`` for each write and ``plan_removed``
when a turn clears it or a sub-agent's session ends. The lead comes through
the forwarder's subscription; its sub-agents through a
:class:`~dsh_tool_todo.protocols.LogReader`, found the way the fleet view finds
them (the reader's rows and the parents they name, through
:func:`~dsh_tool_todo.plans.fleet.descendants`), and followed one task each.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..core.contract import EVENT_TYPE, SESSION_END_EVENT_TYPE, TURN_START
from ..core.links import end_of
from ..errors import AcpUnavailable, LogReplaced, SessionNotFound, UsageError, missing_extra
from ..protocols import LogReader, Snapshot
from .fleet import descendants
from .wire import acp_plan_operation, plan_id

if TYPE_CHECKING:
    from acp.schema import AgentPlanContentUpdate, AgentPlanRemovedUpdate

    Operation = AgentPlanContentUpdate | AgentPlanRemovedUpdate

RESCAN = 5.0
"""Seconds between listings of the reader's sessions when its changes name nothing new: a
sub-agent linked unseen (a change stream that failed, or one that started late) is still
found."""
REPLACED_PAUSE = 0.1  # seconds before a log replaced under its follower is read anew
LIST_LIMIT = 1_000_000  # as many rows as the fleet view lists
_DECIDING = (EVENT_TYPE, TURN_START, SESSION_END_EVENT_TYPE)


def plans_supported(capabilities: object) -> bool:
    """Whether a client's ``initialize`` capabilities declare identified plans (``plan``).

    ``capabilities`` is the SDK's ``ClientCapabilities``, their JSON
    (``clientCapabilities``), or ``None`` (nothing declared). ACP says ``plan``
    omitted or ``null`` means no support, and ``{}`` support for both updates.
    """
    if capabilities is None:
        return False
    if isinstance(capabilities, Mapping):
        plan = capabilities.get("plan")
    else:
        plan = getattr(capabilities, "plan", _NOT_CAPABILITIES)
        if plan is _NOT_CAPABILITIES:
            raise UsageError(
                "client_capabilities must be the ClientCapabilities the client sent with "
                f"initialize (or their JSON), or None, not {type(capabilities).__name__}"
            )
    if plan is None:
        return False
    if isinstance(plan, Mapping) or hasattr(plan, "model_dump"):
        return True
    raise UsageError(
        f"client_capabilities' plan must be an object ({{}}: plans supported) or None, not {plan!r}"
    )


_NOT_CAPABILITIES = object()


@dataclass
class _Follower:
    """One sub-agent's log being followed: the newest seq handled, and how often it was
    read anew (a log replaced under it)."""

    task: asyncio.Task[None] | None = None
    seen: int = -1
    restarts: int = 0


class PlanTree:
    """The identified plans of the lead (``convert``) and of its sub-agents (followed
    through ``reader`` once :meth:`start` runs, on the forwarder's loop)."""

    def __init__(
        self,
        lead_key: str,
        priority: str,
        reader: LogReader | None,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        plan_id(lead_key)  # a UsageError now, not at the first write
        self.lead_key = lead_key
        self._priority = priority
        self._reader = reader
        self._loop = loop
        self._update_model, self._removed_model = _sdk_models()
        self._followers: dict[str, _Follower] = {}
        self._decided: set[str] = set()  # rows whose parent can no longer change
        self._tasks: set[asyncio.Task[None]] = set()
        self._cancelled: set[asyncio.Task[None]] = set()
        self._moved = asyncio.Event()  # set, and replaced, each time a follower moves on
        self._put: Callable[[Operation], None] = _nowhere
        self._record: Callable[[Exception], None] = _nowhere
        self._stopped = False

    def convert(self, key: str, event: Mapping[str, Any]) -> Operation | None:
        """The update ``event`` of session ``key`` sends, or ``None``: a write updates its
        plan; a ``turn/start``, or the session's end, removes it."""
        if end_of(event) is not None:
            return self._removed_model.model_validate(
                {"sessionUpdate": "plan_removed", "planId": plan_id(key)}
            )
        if event.get("type") not in (EVENT_TYPE, TURN_START):
            return None
        operation = acp_plan_operation(key, event, priority=self._priority)
        if operation["sessionUpdate"] == "plan_removed":
            return self._removed_model.model_validate(operation)
        return self._update_model.model_validate(operation)

    # --- the sub-agents --------------------------------------------------------------------

    def start(self, put: Callable[[Operation], None], record: Callable[[Exception], None]) -> None:
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
        moved, self._moved = self._moved, asyncio.Event()
        moved.set()

    async def _discover(self) -> None:
        """List the reader's sessions and follow each new one under the lead."""
        assert self._reader is not None
        rows, _ = await self._reader.sessions("", LIST_LIMIT)
        # a log with an event has its link (seq 0) or none for good; an empty or unreadable
        # one may still be linked, so a change of it asks for a new listing
        self._decided = {row.name for row in rows if row.last_seq is not None and row.last_seq >= 0}
        for name, _parent in descendants(rows, self.lead_key):
            if name not in self._followers and not self._stopped:
                follower = self._followers[name] = _Follower()
                follower.task = self._spawn(self._follow(name, follower))

    async def _watch(self) -> None:
        """Find sub-agents as they are linked: after each change the reader names of a session
        whose link may be new, and every :data:`RESCAN` seconds."""
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

    async def _follow(self, name: str, follower: _Follower) -> None:
        """Send sub-agent ``name``'s plan as it stands, then each change, until stopped."""
        assert self._reader is not None
        first = True
        while True:
            try:
                snapshot = await self._reader.snapshot(name)
                self._opening(name, snapshot, await self._ended_already(name, snapshot), first)
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
                self._put(self._removed_model.model_validate(_removed(name)))
                return
            except Exception as error:
                self._record(error)
                return

    async def _ended_already(self, name: str, snapshot: Snapshot) -> bool:
        """Whether the newest of the log's plan events and ends is its ``session/end``, as
        ``dsh-todo sessions`` reads it (a write after an end is a run started again)."""
        assert self._reader is not None
        before: int | None = snapshot.last_seq + 1
        while before is not None and before > 0:
            page = await self._reader.tail(name, before=before, limit=1, types=_DECIDING)
            if page.events:
                return end_of(page.events[-1]) is not None
            before = page.cursor if page.more else None
        return False

    def _opening(self, name: str, snapshot: Snapshot, ended: bool, first: bool) -> None:
        """The plan a sub-agent's log holds when it is (re)read: sent when it has one; a
        cleared or ended plan is removed only when it replaces what was read before."""
        deciding = snapshot.deciding
        if not ended and deciding is not None and deciding.get("type") == EVENT_TYPE:
            self._send(name, deciding)
        elif not first:
            self._put(self._removed_model.model_validate(_removed(name)))

    def _send(self, name: str, event: Mapping[str, Any]) -> None:
        try:
            update = self.convert(name, event)
        except Exception as error:  # a write no reader shows: the next one supersedes it
            self._record(error)
            return
        if update is not None:
            self._put(update)


def _removed(name: str) -> dict[str, str]:
    return {"sessionUpdate": "plan_removed", "planId": plan_id(name)}


def _nowhere(_: object) -> None:
    return None


def _sdk_models() -> tuple[type[AgentPlanContentUpdate], type[AgentPlanRemovedUpdate]]:
    try:
        from acp.schema import AgentPlanContentUpdate, AgentPlanRemovedUpdate
    except ImportError as error:
        raise AcpUnavailable(
            str(missing_extra("the ACP plan bridge", "acp", error, module="acp"))
        ) from error
    return AgentPlanContentUpdate, AgentPlanRemovedUpdate
