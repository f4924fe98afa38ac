"""A lead session's stream with its sub-agents (``?format=ag-ui&tree=1``, ``format=ai-sdk``).

One run (AG-UI) or one message (AI SDK) per connection, as the plain stream: the
lead's plan and each change of it, exactly as without ``tree`` (what was asked
beside it too; a sub-agent's plan goes without). Beside it, each
session under the lead in the fleet's tree of links
(:func:`~dsh_tool_todo.plans.fleet.descendants` of the reader's session rows, the
rows ``dsh-todo sessions`` builds its tree from) is followed from its log, and what
it says becomes the format's own sub-agent events: AG-UI's ``SUBAGENT_*`` events and
attributed activities (:mod:`dsh_tool_todo.plans._ag_ui_tree`), or a data part per
agent (:mod:`dsh_tool_todo.plans._ai_sdk_tree`). The rows are read again whenever the
reader says the list changed (the list stream's hub), so a sub-agent linked while the
stream is open is followed from then on.

The stream never finishes: it follows the logs until the client leaves. So AG-UI's
``RUN_FINISHED``, which AG-UI refuses while a sub-agent is active, is never sent; a
lead log that can no longer be read ends the stream with the format's error
(``RUN_ERROR``, which AG-UI takes with sub-agents still active, ending them with the
run; the AI SDK's ``error`` chunk). A sub-agent's log that can no longer be read
ends that sub-agent alone (``SUBAGENT_ERROR``; its data part emptied, ``unreadable``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.responses import Response

from ..core.contract import EVENT_TYPE, SESSION_END_EVENT_TYPE
from ..core.links import End, end_of
from ..core.projection import PLAN_EVENTS, checked_deciding
from ..core.requests import recent_events
from ..errors import InvalidLog, LogReplaced, SessionNotFound
from ..plans import wire
from ..plans._ag_ui_tree import SubAgents
from ..plans._agents import Agent, placed
from ..plans._ai_sdk_tree import SubAgentParts
from ..plans.fleet import descendants
from ..protocols import Event, LogReader, Snapshot
from ._listhub import ListHub
from ._streams import Timing, _changes, _closing, _fatal_message
from ._wire_stream import FOLLOWED, RUN_ERROR_CODES, SEP, WireStream, _frame, _plan

__all__ = ["tree_stream"]

_log = logging.getLogger("dsh_tool_todo")
LIST_LIMIT = 1_000_000  # rows per list: the fleet's own bound
LIST_GAP = 0.2  # seconds between two reads of the rows: a busy store rings many times a second
RETRY = 2.0  # seconds before rows that could not be read are asked for again
BACKLOG = 1000  # steps waiting to be framed: a follower ahead of a slow client waits
_TOLD = (*PLAN_EVENTS, SESSION_END_EVENT_TYPE)


class _Teller(Protocol):
    """What turns the sub-agents' steps into a format's events: AG-UI's or the AI SDK's."""

    def place(self, name: str, parent: str, agent: str, call_id: str | None) -> None: ...
    def read(
        self, name: str, plan: wire.PlanSource, written: bool, end: End | None
    ) -> list[Any]: ...
    def write(self, name: str, source: wire.PlanSource) -> list[Any]: ...
    def clear(self, name: str, event: wire.PlanSource) -> list[Any]: ...
    def end(self, name: str, end: End) -> list[Any]: ...
    def broken(self, name: str, message: str, code: str) -> list[Any]: ...


@dataclass(frozen=True)
class _Placed:
    agent: Agent


@dataclass(frozen=True)
class _Read:
    name: str
    snapshot: Snapshot
    end: End | None


@dataclass(frozen=True)
class _Told:
    name: str
    event: Event


@dataclass(frozen=True)
class _Broken:
    name: str
    error: Exception


@dataclass(frozen=True)
class _Lead:
    change: Snapshot | Event | Exception
    recent: Sequence[Mapping[str, Any]] = ()  # a snapshot's: the requests as it stands


_Step = _Placed | _Read | _Told | _Broken | _Lead


def tree_stream(
    plans: LogReader, hub: ListHub, form: WireStream, first: Snapshot, timing: Timing
) -> Response:
    """Session ``form.name``'s stream with its sub-agents; ``first`` is its snapshot."""

    async def frames() -> AsyncIterator[ServerSentEvent]:
        yield ServerSentEvent(
            comment=f"dsh-todo {form.format} tree stream", retry=timing.retry_ms, sep=SEP
        )
        steps: asyncio.Queue[_Step] = asyncio.Queue(BACKLOG)
        tree = _Tree(plans, hub, form.name, steps, form.format)
        try:
            recent = await recent_events(plans, form.name, through=first.last_seq)
            for frame in form.opening(first, recent):
                yield frame
            tree.start(first)
            while True:
                step = await steps.get()
                if isinstance(step, _Lead) and isinstance(step.change, Exception):
                    raise step.change
                for frame in tree.frames(step, form):
                    yield frame
        except (InvalidLog, SessionNotFound, OSError) as error:
            for frame in form.fatal(*_fatal_message(form.name, error)):
                yield frame
        finally:
            await tree.stop()

    return EventSourceResponse(
        frames(), ping=timing.ping, send_timeout=timing.send_timeout, sep=SEP
    )


class _Tree:
    """The followers of one tree stream (the lead's, the rows', each sub-agent's), all
    putting what they read into ``steps``, and the sub-agents' state those steps move."""

    def __init__(
        self,
        plans: LogReader,
        hub: ListHub,
        lead: str,
        steps: asyncio.Queue[_Step],
        form: str = "ag-ui",
    ) -> None:
        self.plans = plans
        self.hub = hub
        self.lead = lead
        self.steps = steps
        self.agents: _Teller = SubAgentParts(lead) if form == "ai-sdk" else SubAgents(lead)
        self.followed: set[str] = set()
        self.tasks: set[asyncio.Task[None]] = set()

    def start(self, first: Snapshot) -> None:
        self._spawn(self._lead(first))
        self._spawn(self._rows())

    async def stop(self) -> None:
        tasks = list(self.tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _spawn(self, work: Any) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def frames(self, step: _Step, form: WireStream) -> list[ServerSentEvent]:
        """The frames one step gives: the lead's as the plain stream's, the others' events."""
        if isinstance(step, _Lead):
            change = step.change
            assert not isinstance(change, Exception)
            if isinstance(change, Snapshot):
                return form.snapshot(change, step.recent)
            return form.change(change)
        return [_frame(payload, None) for payload in self._events(step)]

    def _events(self, step: _Step) -> list[Any]:
        agents = self.agents
        if isinstance(step, _Placed):
            agent = step.agent
            agents.place(agent.session, agent.parent, agent.name, agent.call_id)
            return []
        if isinstance(step, _Read):
            deciding = step.snapshot.deciding
            written = deciding is not None and deciding["type"] == EVENT_TYPE
            return agents.read(step.name, _plan(step.snapshot), written, step.end)
        if isinstance(step, _Broken):
            message, cause = _fatal_message(step.name, step.error)
            return agents.broken(step.name, message, RUN_ERROR_CODES[cause])
        assert isinstance(step, _Told)
        event = step.event
        if event["type"] == EVENT_TYPE:
            return agents.write(step.name, event)
        if event["type"] == SESSION_END_EVENT_TYPE:
            end = end_of(event)
            return [] if end is None else agents.end(step.name, end)
        return agents.clear(step.name, event)

    async def _lead(self, first: Snapshot) -> None:
        """The lead's plan changes, as the plain stream reads them."""
        try:
            following = _changes(self.plans, self.lead, first, None, FOLLOWED)
            async with _closing(following) as changes:
                async for change in changes:
                    if isinstance(change, Snapshot) and change is not first:
                        recent = await recent_events(self.plans, self.lead, through=change.last_seq)
                        await self.steps.put(_Lead(change, recent))
                    elif change is not first:
                        await self.steps.put(_Lead(change))
        except (InvalidLog, SessionNotFound, OSError) as error:
            await self.steps.put(_Lead(error))

    async def _rows(self) -> None:
        """Follow each session that comes under the lead, reading the rows again on each
        change the list hub tells."""
        async with self.hub.open("") as handle:
            while True:
                handle.rung.clear()
                try:
                    rows, _ = await self.plans.sessions("", LIST_LIMIT)
                except Exception as error:  # a store gone for a while: the lead's stream goes on
                    _log.warning("sub-agents of %r: the session list: %s", self.lead, error)
                    await asyncio.sleep(RETRY)
                    continue
                for name, parent in descendants(rows, self.lead):
                    if name not in self.followed:
                        self.followed.add(name)
                        await self.steps.put(_Placed(await placed(self.plans, name, parent)))
                        self._spawn(self._follow(name))
                await handle.rung.wait()
                await asyncio.sleep(LIST_GAP)

    async def _follow(self, name: str) -> None:
        """A sub-agent's log: as it is now (its plan, its end), then each plan event and end."""
        try:
            snapshot = await self._read(name)
            while True:
                try:
                    following = self.plans.follow(name, after=snapshot.last_seq, since=snapshot)
                    async with _closing(following) as events:
                        async for event in events:
                            if event["type"] not in _TOLD:
                                continue
                            if event["type"] in PLAN_EVENTS:
                                event = checked_deciding(event, f"session {name!r}")
                            await self.steps.put(_Told(name, event))
                    return
                except LogReplaced:
                    snapshot = await self._read(name)
        except (InvalidLog, SessionNotFound, OSError) as error:
            await self.steps.put(_Broken(name, error))

    async def _read(self, name: str) -> Snapshot:
        """The log's snapshot and whether its newest plan event or end is an end, told."""
        snapshot = await self.plans.snapshot(name)
        newest = await self.plans.tail(name, before=snapshot.last_seq + 1, limit=1, types=_TOLD)
        end = end_of(newest.events[-1]) if newest.events else None
        await self.steps.put(_Read(name, snapshot, end))
        return snapshot
