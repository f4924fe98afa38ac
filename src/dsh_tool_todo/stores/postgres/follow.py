"""Following a session as it is recorded: one shared ``LISTEN`` hub per loop, and the follower."""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Mapping
from contextlib import suppress
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from ...core.listeners import Event
from ...errors import InvalidLog, LogReplaced, UsageError
from .._closing import ClosedOnAsyncExit
from . import _sql
from ._core import (
    check_session_id,
    conninfo_of,
    decode_row,
    parse_notice,
    server_name,
    store_error,
)
from ._pools import HUBS

__all__ = ["PostgresFollower"]

_LOG = logging.getLogger("dsh_tool_todo")

BUSY_POLL = 0.05
"""Seconds between the polls of the sessions that moved in the last ``ACTIVE_FOR`` seconds."""
ACTIVE_FOR = 1.0


_Wanted = tuple[str, int, int, "asyncio.Future[tuple[list[Any], bool] | None]"]
"""A read asked of the hub: session, first seq, row limit, and where its answer goes."""


def _unanswered(reads: list[_Wanted]) -> None:
    """Answer ``None`` (the hub closed) to each of ``reads`` not yet answered."""
    for *_, wanted in reads:
        if not wanted.done():
            wanted.set_result(None)


class Hub:
    """One ``LISTEN`` connection per process, event loop and conninfo, shared by every follower.

    Notifications wake the followers of their session; after the connection
    is lost and made again, every follower is woken to catch up from its last
    seq (a notification sent while nobody listened is never delivered). Any
    role may NOTIFY on the channel: a payload that names no session and seq is
    ignored, and nothing one notification does stops the listening. Reads go
    through one more connection of the hub's own, so followers never hold a
    writer's pooled connection.

    Writers notify after they commit, from their process's notifier, so a
    commit can go unannounced (a writer killed between the two, a notifier
    whose connection broke). Every ``poll`` seconds the hub asks for the newest
    seq of each session it follows, in one query (a primary-key probe each),
    and wakes the followers of a session whose newest seq is not the last it
    heard of: such an event arrives late, never lost.
    """

    def __init__(
        self, conninfo: str, kwargs: Mapping[str, Any], delay: float, poll: float = 1.0
    ) -> None:
        self.conninfo = conninfo
        # Any str can be sent: an id the database's encoding cannot hold is the server's
        # error about that id, not a client-side encoding error.
        self.kwargs = {**kwargs, "autocommit": True, "client_encoding": "utf8"}
        self.where = server_name(conninfo)
        self.delay = delay
        self.poll = poll
        self.wakers: dict[str, set[asyncio.Event]] = {}
        self.heard: dict[str, int] = {}  # the newest seq a notification or a poll named
        self.active: dict[str, float] = {}  # loop time a session was last heard to move
        self.users = 0
        self._read: psycopg.AsyncConnection[Any] | None = None
        self._read_lock = asyncio.Lock()
        self._wanted: list[_Wanted] = []
        self._reader: asyncio.Task[None] | None = None
        self._task: asyncio.Task[None] | None = None
        self._poller: asyncio.Task[None] | None = None
        self._ready: asyncio.Future[None] | None = None

    async def start(self) -> None:
        """Listening, from now on; the first connection's error if it could not be made.

        A task that ended (it never should) is started again: a follower never
        joins a hub that nobody listens for.
        """
        if self._task is None or self._task.done():
            loop = asyncio.get_running_loop()
            self._ready = loop.create_future()
            self._task = loop.create_task(self._listen(self._ready))
        if self._poller is None or self._poller.done():
            self._poller = asyncio.get_running_loop().create_task(self._poll())
        assert self._ready is not None
        ready = self._ready
        try:
            await asyncio.shield(ready)  # every follower joining now gets the same answer
        except psycopg.Error as error:
            if self._ready is ready:
                self._task = self._ready = None
            raise store_error(self.where, error) from None

    def register(self, session_id: str, waker: asyncio.Event) -> None:
        self.wakers.setdefault(session_id, set()).add(waker)

    def unregister(self, session_id: str, waker: asyncio.Event) -> None:
        wakers = self.wakers.get(session_id)
        if wakers is not None:
            wakers.discard(waker)
            if not wakers:
                del self.wakers[session_id]
                self.heard.pop(session_id, None)
                self.active.pop(session_id, None)

    async def read_from(
        self, session_id: str, first: int, limit: int
    ) -> tuple[list[Any], bool] | None:
        """Up to ``limit`` rows of the session from seq ``first`` on, in order, and whether
        they reach its newest row; ``None`` if the hub closed meanwhile (its last follower
        was closed while this read waited).

        The reads asked for while one is under way go together in the next
        query: one notifying transaction wakes the followers of many sessions
        at once, and one at a time on the hub's connection the last of them
        would wait for all the others' round trips.
        """
        wanted = asyncio.get_running_loop().create_future()
        self._wanted.append((session_id, first, limit, wanted))
        if self._reader is None or self._reader.done():
            self._reader = asyncio.get_running_loop().create_task(self._read_wanted())
        answer: tuple[list[Any], bool] | None = await wanted
        return answer

    async def _read_wanted(self) -> None:
        while self._wanted:
            batch, self._wanted = self._wanted, []
            await self._answer([item for item in batch if not item[3].done()])  # not cancelled

    async def _answer(self, batch: list[_Wanted]) -> None:
        if not batch:
            return
        # About one follower's read of rows in all, at least the last row and the next each:
        # hundreds of backlogs in one statement were many reads' time and memory, over a
        # statement_timeout that every retry of the same batch met again.
        share = min(max(2, _sql.MAX_BATCH // len(batch)), max(limit for *_, limit, _ in batch))
        try:
            rows = await self._query(
                _sql.READ_AFTER_EACH,
                (
                    [session_id for session_id, *_ in batch],
                    [first - 1 for _, first, *_ in batch],
                    share,
                ),
            )
        except Exception as error:  # each reader decides what the error means to it
            if len(batch) > 1 and not isinstance(error, psycopg.OperationalError):
                # One read's own fault (an id the server cannot hold) is its alone.
                try:
                    for item in batch:
                        await self._answer([item])
                finally:  # the hub is closing: nobody waits forever
                    _unanswered(batch)
                return
            for *_, wanted in batch:
                if not wanted.done():
                    wanted.set_exception(error)
            return
        except BaseException:  # the hub is closing: nobody waits forever
            _unanswered(batch)
            raise
        found: list[list[Any]] = [[] for _ in batch]
        for number, *row in rows:
            found[number - 1].append(tuple(row))
        for (session_id, first, limit, wanted), own in zip(batch, found, strict=True):
            # A read that reached the newest row shows what a notification naming a later
            # seq was: a claim, not a commit (anyone may NOTIFY). The poll must not take
            # that seq, once it commits unannounced, for one already heard of.
            if len(own) < share:
                newest = own[-1][0] if own else first - 1
                if self.heard.get(session_id, -1) > newest:
                    self.heard[session_id] = newest
            if not wanted.done():
                wanted.set_result((own[:limit], len(own) < share and len(own) <= limit))

    async def _query(self, statement: str, params: tuple[Any, ...]) -> list[Any]:
        async with self._read_lock:
            try:
                if self._read is None or self._read.closed:
                    self._read = await psycopg.AsyncConnection.connect(self.conninfo, **self.kwargs)
                cursor = await self._read.execute(statement, params)
                return await cursor.fetchall()
            except psycopg.Error:
                if self._read is not None:
                    await self._read.close()
                    self._read = None
                raise

    async def close(self) -> None:
        for task in (self._task, self._poller, self._reader):
            if task is not None:
                task.cancel()
                with suppress(asyncio.CancelledError):
                    await task
        self._task = self._poller = self._reader = None
        _unanswered(self._wanted)
        self._wanted = []
        if self._read is not None:
            await self._read.close()
            self._read = None

    async def _listen(self, ready: asyncio.Future[None]) -> None:
        while True:
            conn: psycopg.AsyncConnection[Any] | None = None
            try:
                conn = await psycopg.AsyncConnection.connect(self.conninfo, **self.kwargs)
                await conn.execute(f"LISTEN {_sql.CHANNEL}")
                if not ready.done():
                    ready.set_result(None)
                self._wake_all()  # catch up on whatever was sent while nobody listened
                async for notify in conn.notifies():
                    self._wake(notify.payload)
            except Exception as error:
                if not ready.done():
                    ready.set_exception(error)
                    return
                if not isinstance(error, psycopg.Error):
                    _LOG.exception("listening on %s failed; listening again", self.where)
            finally:
                if conn is not None:
                    with suppress(Exception):
                        await conn.close()
            await asyncio.sleep(self.delay)

    async def _poll(self) -> None:
        """Wake the followers of every session whose newest seq is not the one last heard of.

        Every session followed, every ``poll`` seconds; the sessions active in the
        last second, every ``BUSY_POLL`` seconds: under load a notification can
        trail its commit (the writer's notifier waits for its process's GIL and
        its turn), and the busy sessions' few probes bound that wait.
        """
        loop = asyncio.get_running_loop()
        tick = min(BUSY_POLL, self.poll)
        last_full = loop.time()
        while True:
            await asyncio.sleep(tick)
            now = loop.time()
            if now - last_full >= self.poll:
                last_full = now
                sessions = list(self.wakers)
            else:
                for session_id in [s for s, at in self.active.items() if now - at > ACTIVE_FOR]:
                    del self.active[session_id]
                sessions = [s for s in self.active if s in self.wakers]
            if not sessions:
                continue
            try:
                rows = await self._query(_sql.NEWEST, (sessions,))
            except psycopg.OperationalError:
                continue  # the server is away: the LISTEN reconnects and wakes everyone
            except psycopg.Error:  # one id the server cannot hold fails the query: ask alone
                rows = []
                for session_id in sessions:
                    with suppress(psycopg.Error):
                        rows += await self._query(_sql.NEWEST, ([session_id],))
            except Exception:
                _LOG.exception("polling %s failed; polling again", self.where)
                continue
            for session_id, newest in rows:
                seq = -1 if newest is None else int(newest)
                if self.heard.get(session_id) != seq and session_id in self.wakers:
                    self.heard[session_id] = seq
                    self.active[session_id] = now
                    for waker in self.wakers[session_id]:
                        waker.set()

    def _wake(self, payload: object) -> None:
        try:
            parsed = parse_notice(payload)
            if parsed is not None:
                session_id, seq = parsed
                wakers = self.wakers.get(session_id)
                if wakers:
                    self.active[session_id] = asyncio.get_running_loop().time()
                    if seq > self.heard.get(session_id, -1):
                        self.heard[session_id] = seq
                    for waker in wakers:
                        waker.set()
        except Exception:  # one notification never stops the listening
            _LOG.exception("a notification on %s could not be handled", self.where)

    def _wake_all(self) -> None:
        for wakers in self.wakers.values():
            for waker in wakers:
                waker.set()


class PostgresFollower(ClosedOnAsyncExit):
    """The events of one session as they are recorded, for viewers in other processes.

    An async iterator: ``async for event in PostgresFollower(dsn, "agent-7")``
    yields every event with ``seq > after_seq`` in log order, then waits for
    new ones (woken by ``NOTIFY``; all followers of a process and event loop
    share one ``LISTEN`` connection). When the server goes away it keeps
    trying, and catches up from the last seq it yielded, so nothing is
    skipped or repeated. It only reads: it never takes the writer's role.

    Each read starts at the last seq it yielded: when that row is gone or is
    another one (the session was deleted, and maybe written again), it raises
    :class:`~dsh_tool_todo.errors.LogReplaced`: start over from a snapshot.
    Rows that are not valid events raise :class:`InvalidLog` naming session
    and seq; other store errors raise :class:`PostgresStoreError`. Close it
    with ``aclose()`` or ``async with``.

    Writers notify after they commit; an event whose notification never came
    (its writer was killed in between) is found by the hub's poll of the
    newest seqs, every ``poll_interval`` seconds (the first follower of a hub
    sets it for all).
    """

    def __init__(
        self,
        conninfo_or_pool: str | ConnectionPool[Any] | AsyncConnectionPool[Any],
        session_id: str,
        *,
        after_seq: int = -1,
        reconnect_delay: float = 0.5,
        poll_interval: float = 1.0,
    ) -> None:
        self.session_id = check_session_id(session_id)
        if type(after_seq) is not int or after_seq < -1:
            raise UsageError(f"after_seq must be an int >= -1, not {after_seq!r}")
        if isinstance(conninfo_or_pool, ConnectionPool | AsyncConnectionPool):
            kwargs = conninfo_or_pool.kwargs
            self._kwargs: dict[str, Any] = dict(kwargs) if isinstance(kwargs, dict) else {}
            self._kwargs.pop("row_factory", None)
        else:
            self._kwargs = {}
        self._conninfo = conninfo_of(conninfo_or_pool)
        self.last_seq = after_seq
        self._last_row: tuple[Any, ...] | None = None  # (type, data, xmin) of the row at last_seq
        self._delay = reconnect_delay
        if type(poll_interval) not in (int, float) or not 0 < poll_interval <= 3600:
            raise UsageError(f"poll_interval must be seconds in (0, 3600], not {poll_interval!r}")
        self._poll = float(poll_interval)
        self._buffer: deque[Event] = deque()
        self._limit = _sql.MAX_BATCH  # rows to read at once: fewer after a read timed out
        self._waker = asyncio.Event()
        self._hub: Hub | None = None
        self._error: InvalidLog | LogReplaced | None = None
        self._closed = False
        self._at_end = False  # whether the last read found the newest row (then wait to read)

    def __aiter__(self) -> PostgresFollower:
        return self

    async def __anext__(self) -> Event:
        while not self._buffer:
            if self._closed:  # also when closed by another task while this one waited
                raise StopAsyncIteration
            if self._error is not None:
                raise self._error  # a bad row stops the follower where it is, every time
            hub = await self._join()
            if self._closed:
                continue
            if self._at_end:  # the last read reached the newest row and nothing moved since
                await self._waker.wait()
                self._at_end = False
                continue  # closed meanwhile: the check above
            self._waker.clear()  # before reading: a notification during the read is kept
            asked = self.last_seq
            first = max(asked, 0)
            try:
                answer = await hub.read_from(self.session_id, first, self._limit)
            except psycopg.errors.QueryCanceled:
                if self._limit > 2:  # a statement_timeout shorter than reading that many rows
                    self._limit //= 2
                else:  # or a lock held on the table: wait until it is released
                    await asyncio.sleep(self._delay)
                continue
            except psycopg.OperationalError:
                await asyncio.sleep(self._delay)  # the hub's LISTEN reconnects meanwhile
                continue
            except psycopg.Error as error:
                raise store_error(f"session {self.session_id!r} on {hub.where}", error) from None
            if answer is None or self._closed or self.last_seq != asked:
                continue  # (another wait on this follower took newer rows meanwhile)
            rows, self._at_end = answer
            self._take(rows)
        if self._closed:
            raise StopAsyncIteration
        return self._buffer.popleft()

    async def aclose(self) -> None:
        """Stop following; the shared connection closes with its last follower."""
        self._closed = True
        self._waker.set()  # an iteration waiting in another task ends
        hub, self._hub = self._hub, None
        if hub is not None:
            await self._leave(hub)

    async def _leave(self, hub: Hub) -> None:
        hub.unregister(self.session_id, self._waker)
        hub.users -= 1
        if hub.users == 0:
            hubs = HUBS.here()
            if hubs.get(self._conninfo) is hub:
                del hubs[self._conninfo]
            await hub.close()  # its poll, and a LISTEN a cancelled join left connecting

    async def __aenter__(self) -> PostgresFollower:
        await self._join()
        return self

    async def _join(self) -> Hub:
        hub = self._hub
        if hub is not None:
            await hub.start()  # at once if it listens; started again if its task ended
            return hub
        hubs = HUBS.here()
        hub = hubs.get(self._conninfo)
        if hub is None:
            hub = hubs[self._conninfo] = Hub(self._conninfo, self._kwargs, self._delay, self._poll)
        hub.users += 1
        hub.register(self.session_id, self._waker)
        try:
            await hub.start()  # listening before the backlog is read
        except BaseException:
            await self._leave(hub)
            raise
        if self._closed:  # by another task while this one joined
            await self._leave(hub)
        else:
            self._hub = hub
        return hub

    def _take(self, rows: list[Any]) -> None:
        """Buffer the rows' new events.

        The first row must be the one last yielded (or, before anything was
        yielded, the one at ``after_seq``): otherwise the log was replaced. The
        events before a bad row are yielded before its error.
        """
        try:
            if self.last_seq >= 0:
                if not rows or rows[0][0] != self.last_seq:
                    raise LogReplaced(
                        f"session {self.session_id!r}: seq {self.last_seq} is gone "
                        "(the session was deleted, and maybe written again)"
                    )
                if self._last_row is not None and tuple(rows[0][1:]) != self._last_row:
                    raise LogReplaced(
                        f"session {self.session_id!r}: seq {self.last_seq} holds another "
                        "event (the session was deleted and written again)"
                    )
                rows = rows[1:]
            for row in rows:
                event = decode_row(self.session_id, *row[:3])
                if event["seq"] != self.last_seq + 1:
                    after = f"seq {self.last_seq}" if self.last_seq >= 0 else "the start"
                    raise InvalidLog(
                        f"session {self.session_id!r}, seq {event['seq']}: follows {after} "
                        "(events are missing)"
                    )
                self.last_seq = event["seq"]
                self._last_row = tuple(row[1:])
                self._buffer.append(event)
        except (InvalidLog, LogReplaced) as error:
            self._error = error
