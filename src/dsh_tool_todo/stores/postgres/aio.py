"""The PostgreSQL I/O of a session and of the module readers, written once.

``aio.py`` (asyncio) is the source; ``session.py`` (threads) is generated
from it by ``scripts/unasync.py``: edit ``aio.py``, then run
``python scripts/unasync.py``; ``--check`` fails when ``session.py`` is stale.
A line ``# unasync: CODE`` becomes ``CODE`` in the sync file; a line ending in
``# async only`` is left out of it.

Why an append is written as it is:

- An append is one transaction holding the insert alone: on an autocommit
  connection (the shared pools') one statement, one round trip; on one that
  is not, the insert then ``COMMIT``. It sends no notification: a notifying
  commit takes a cluster-wide lock until its WAL is flushed. Once committed,
  the seq is posted to the process's notifier (``_notify.py``), which sends
  ``"<seq>:<session id>"`` coalesced, from a connection of its own.
- A connection that breaks before ``COMMIT`` was sent recorded nothing: the
  append is sent once more, on a fresh connection, at the same seq. (The
  one-statement insert commits itself, so once it is sent there is no such
  "before".)
- One that breaks after leaves the outcome unknown: the session reads the row
  back on a fresh connection before it answers. Found and equal: recorded.
  Found and different: another writer's (:class:`WriterConflict`). Absent: sent
  once more at the same seq; if that meets the seq taken, the server may have
  finished our first COMMIT meanwhile, so the row is read back and judged
  again. A question that cannot be asked is :class:`CommitUnknown`, settled
  before the next append.
"""

from __future__ import annotations

# unasync: import threading
import asyncio  # async only
from collections.abc import AsyncIterator, Collection, Mapping
from contextlib import asynccontextmanager, suppress
from time import monotonic
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from ...core.contract import LINK_EVENT_TYPE
from ...core.links import decide_link, link_data
from ...core.listeners import Event
from ...errors import UsageError
from .._closing import ClosedOnExit
from . import _pools, _sql
from ._core import (
    Pending,
    ResumeCache,  # async only
    SessionCore,
    SessionInfo,
    check_session_id,
    check_types,
    conninfo_of,
    decode_row,
    encode_data,
    plan_of,
    probe_kwargs,
    reason,
    server_name,
    tail_bounds,
    wrap,
)
from ._pools import APool, ASource, Probe, async_shared_pool, notifier_for
from .errors import CommitUnknown, PostgresUnavailable

if TYPE_CHECKING:
    from ...core.model import TodoItem

__all__ = [
    "AsyncPostgresSession",
    "acurrent_plan",
    "alatest_event",
    "alist_sessions",
    "aread_tail",
]


@asynccontextmanager
async def aconnect(source: ASource) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    """A connection for one module-level call: borrowed from a pool, or opened and closed."""
    if isinstance(source, AsyncConnectionPool):
        async with aborrowed(source) as conn:
            yield conn
    elif isinstance(source, psycopg.AsyncConnection):
        yield source
    else:
        conn = await psycopg.AsyncConnection.connect(
            conninfo_of(source), autocommit=True, connect_timeout=10
        )
        async with conn:
            yield conn


async def arollback_quietly(conn: psycopg.AsyncConnection[Any]) -> None:
    """End a failed append's transaction, so the pool gets a clean connection (or a dead one)."""
    if not conn.closed:
        with suppress(psycopg.Error):
            await conn.rollback()


@asynccontextmanager
async def aborrowed(pool: AsyncConnectionPool[Any]) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    """What ``pool.connection()`` lends, but a server that refuses connections fails the wait
    after ``_pools.FIRST_WAIT`` s, not the pool's whole timeout: only then is it probed."""
    deadline = monotonic() + pool.timeout
    wait = _pools.first_wait(pool)
    try:
        conn = await pool.getconn(wait)
    except PoolTimeout:
        if wait >= pool.timeout or (await aprobe(pool)).refused:
            raise  # the caller says why from this probe's answer, kept for it
        conn = await pool.getconn(max(deadline - monotonic(), 0.0))
    try:
        async with conn:
            yield conn
    finally:
        await pool.putconn(conn)


async def aprobe(pool: AsyncConnectionPool[Any]) -> Probe:
    """Whether the pool's server takes a connection now, and why not: one direct attempt (an
    error path only: the pool's timeout does not say why), its answer kept for a second."""
    known = _pools.probed(pool)
    if known is None and isinstance(pool.conninfo, str):
        try:
            conn = await psycopg.AsyncConnection.connect(pool.conninfo, **probe_kwargs(pool))
            await conn.close()
            known = _pools.remember(pool, None)
        except psycopg.Error as refused:
            known = _pools.remember(pool, refused)
    return known or Probe(None, refused=False)  # a conninfo function: nothing to probe with


async def aexplained(pool: AsyncConnectionPool[Any], error: PoolTimeout) -> PoolTimeout:
    """The pool's timeout, with why: the server's own refusal, or every connection in use."""
    if not isinstance(pool.conninfo, str):
        return error  # a conninfo function: nothing to probe with
    why = (await aprobe(pool)).why
    busy = f"the server answers; all {pool.max_size} connections of the pool are in use"
    return PoolTimeout(f"{reason(error)}: {why or busy}")


async def afinish(conn: psycopg.AsyncConnection[Any]) -> None:
    """End the read's transaction on a connection that is not in autocommit."""
    if not conn.autocommit:
        await conn.commit()


# --- module-level readers -------------------------------------------------------------


async def alist_sessions(conninfo_or_pool: ASource) -> list[SessionInfo]:
    """Every session with rows, most recently active first (scans the table: an operator's view)."""
    where = server_name(conninfo_of(conninfo_or_pool))
    try:
        async with aconnect(conninfo_or_pool) as conn:
            cursor = await conn.execute(_sql.LIST)
            rows = await cursor.fetchall()
            await afinish(conn)
    except (psycopg.Error, PoolTimeout) as error:
        raise wrap(where, error) from None
    return [SessionInfo(str(r[0]), int(r[1]), r[2]) for r in rows]


async def aread_tail(
    conninfo_or_pool: ASource,
    session_id: str,
    *,
    before_seq: int | None = None,
    limit: int = 100,
) -> list[Event]:
    """The newest ``limit`` events before ``before_seq`` (default: the end), in log order."""
    check_session_id(session_id)
    before, limit = tail_bounds(before_seq, limit)
    where = server_name(conninfo_of(conninfo_or_pool))
    try:
        async with aconnect(conninfo_or_pool) as conn:
            cursor = await conn.execute(_sql.READ_BEFORE, (session_id, before, limit))
            rows = await cursor.fetchall()
            await afinish(conn)
    except (psycopg.Error, PoolTimeout) as error:
        raise wrap(where, error) from None
    return [decode_row(session_id, *row) for row in reversed(rows)]


async def alatest_event(
    conninfo_or_pool: ASource, session_id: str, types: Collection[str]
) -> Event | None:
    """The newest event of ``session_id`` whose type is in ``types``, or ``None``."""
    check_session_id(session_id)
    if not check_types(types):
        return None
    where = server_name(conninfo_of(conninfo_or_pool))
    try:
        async with aconnect(conninfo_or_pool) as conn:
            cursor = await conn.execute(_sql.latest_query(types), (session_id,))
            row = await cursor.fetchone()
            await afinish(conn)
    except (psycopg.Error, PoolTimeout) as error:
        raise wrap(where, error) from None
    return None if row is None else decode_row(session_id, *row)


async def acurrent_plan(conninfo_or_pool: ASource, session_id: str) -> list[TodoItem] | None:
    """The plan replaying the session would give, from one index probe (``None``: no plan)."""
    return plan_of(await alatest_event(conninfo_or_pool, session_id, _sql.RESUME_TYPES))


# --- the session ----------------------------------------------------------------------


class AsyncPostgresSession(ResumeCache, SessionCore, ClosedOnExit):
    """A session log in PostgreSQL speaking the store protocol.

    ``conninfo_or_pool`` is a conninfo string (sessions given the same string
    share one pool of ``DEFAULT_POOL_SIZE`` connections: per process for the
    sync session, per event loop for the async one) or a pool the host owns.
    Opening reads the next seq; an append holds a pooled connection for one
    transaction only, under the session's lock. A ``todo/write`` whose
    ``callId`` and list equal one the current turn holds is a retry and records
    nothing: the unique index on ``(session_id, turn_seq, call_key)`` (a digest
    of id and list) finds the earlier one, whose event ``append`` returns. The
    same id with another list is a new call, recorded as usual.

    A sync session opens when it is made. An async one opens when it is
    entered, by ``open()`` or at its first append, and reads the newest
    ``todo/write`` and ``turn/start`` too, so that the ``latest()`` a host calls
    synchronously to resume answers without I/O (see ``_core.ResumeCache``).
    """

    def __init__(
        self,
        conninfo_or_pool: str | AsyncConnectionPool[Any],
        session_id: str,
        *,
        parent: str | None = None,
        parent_call_id: str | None = None,
    ) -> None:
        if parent is None and parent_call_id is not None:
            raise UsageError("parent_call_id names a call of the parent: pass parent= too")
        # Checked before any I/O; recorded when the session opens (see dsh_tool_todo.core.links).
        self._wanted_link = None if parent is None else link_data(parent, parent_call_id)
        if not isinstance(conninfo_or_pool, str | AsyncConnectionPool):
            raise UsageError(
                "AsyncPostgresSession takes a conninfo string or a "
                f"psycopg_pool.AsyncConnectionPool, not {type(conninfo_or_pool).__name__}"
            )
        super().__init__(server_name(conninfo_of(conninfo_or_pool)), session_id)
        self._source = conninfo_or_pool
        self._pool_now: APool | None = None
        self._lock = asyncio.Lock()  # async only
        # unasync: self._lock = threading.Lock()
        # unasync: self.open()

    async def open(self) -> AsyncPostgresSession:
        """Read the next seq (and the resume events); returns the session. Safe to call again.

        A session made with ``parent=`` records its link here, in a new log, or checks
        the one its log holds (:class:`~dsh_tool_todo.errors.LinkConflict`).
        """
        async with self._lock:  # concurrent first appends open it once
            if not self._opened_once:
                await self._open_linked()
        return self

    @property
    def key(self) -> str:
        """The name a viewer knows this session by (its id); a child's ``parent``."""
        return self.session_id

    async def link(self, parent: str, *, parent_call_id: str | None = None) -> Event | None:
        """Record that this session works for ``parent`` (see :mod:`dsh_tool_todo.core.links`).

        Returns the link event, or ``None`` when the log records this parent
        already; raises :class:`~dsh_tool_todo.errors.LinkConflict`, writing
        nothing, for a log started for another parent or holding events and no link.
        """
        data = link_data(parent, parent_call_id)
        async with self._lock:
            if not self._opened_once:
                await self._open()
            return await self._link(data)

    async def _open_linked(self) -> None:
        await self._open()
        if self._wanted_link is not None:
            try:
                await self._link(self._wanted_link)
            except BaseException:
                self.close()
                raise

    async def _link(self, data: dict[str, str]) -> Event | None:
        # Under self._lock, opened: decided and appended under one hold.
        self._check_writable()
        if self._pending is not None:
            await self._settle_pending()
        head = None
        if self._seq > 0:
            where = f"session {self.session_id!r} on {self.where}"
            try:
                async with aborrowed(await self._pool()) as conn:
                    cursor = await conn.execute(_sql.READ_ONE, (self.session_id, 0))
                    row = await cursor.fetchone()
                    await afinish(conn)
            except (psycopg.Error, PoolTimeout) as error:
                raise wrap(where, error) from None
            head = None if row is None else decode_row(self.session_id, 0, *row)
        if not decide_link(f"session {self.session_id!r}", head, self._seq, data):
            return None
        pending = Pending(
            {"seq": self._seq, "type": LINK_EVENT_TYPE, "data": data}, encode_data(data)
        )
        await self._write(pending)
        return self._recorded(pending.event)

    async def append(self, type: str, data: Mapping[str, Any], /) -> Event:
        """Record one event and return it with its seq; listeners run before this returns."""
        text = encode_data(data)
        async with self._lock:
            if not self._opened_once:
                await self._open_linked()
            self._check_writable()
            if self._pending is not None:
                await self._settle_pending()
            pending = self._prepare(type, data, text)
            first = await self._write(pending)
            if first is not None:  # a repeated call id: nothing recorded, nobody told
                return first
            return self._recorded(pending.event)

    async def alatest(self, types: Collection[str], /) -> Event | None:
        """The newest recorded event whose type is in ``types``: one index probe."""
        return await alatest_event(await self._pool(), self.session_id, types)

    async def __aenter__(self) -> AsyncPostgresSession:
        return await self.open()

    async def __aexit__(self, *exc_info: object) -> None:  # async only
        self.close()  # async only

    async def _pool(self) -> APool:
        if self._pool_now is None:
            if isinstance(self._source, AsyncConnectionPool):
                self._pool_now = self._source
            else:
                self._pool_now = await async_shared_pool(self._source)
            self._notifier = notifier_for(self._pool_now)
        return self._pool_now

    async def _open(self) -> None:
        pool = await self._pool()
        where = f"session {self.session_id!r} on {self.where}"
        resume: dict[str, Any] = {}
        try:
            async with aborrowed(pool) as conn:
                cursor = await conn.execute(_sql.OPEN, (self.session_id, self.session_id))
                row = await cursor.fetchone()
                for kind in self.resume_kinds:  # one index probe each; decoded when asked for
                    cursor = await conn.execute(_sql.latest_query([kind]), (self.session_id,))
                    found = await cursor.fetchone()
                    if found is not None:
                        resume[kind] = found
                await afinish(conn)
        except PoolTimeout as error:
            raise wrap(where, await aexplained(pool, error)) from None
        except psycopg.Error as error:
            raise wrap(where, error) from None
        assert row is not None
        self._opened(row[0], row[1], row[2], resume)

    async def _write(
        self, pending: Pending, *, retry: bool = True, lost: BaseException | None = None
    ) -> Event | None:
        """Record ``pending`` (``lost``: the error that lost the answer to an earlier COMMIT).

        Returns ``None`` once it is recorded, or the event an earlier append of its
        call id recorded in this turn (then nothing was).
        """
        pool = await self._pool()
        committing = False
        repeated = False
        try:
            async with aborrowed(pool) as conn:
                if pending.key is None:
                    statement, params = _sql.INSERT, self._params(pending.event, pending.text)
                else:  # the unique index, not a read first, tells a repeat: writers race
                    statement, params = _sql.INSERT_CALL, self._call_params(pending)
                if conn.autocommit:
                    # One statement, its own transaction: one round trip. Once it is sent,
                    # the row may be committed, so a break is an unknown outcome.
                    committing = True
                    cursor = await conn.execute(statement, params)
                    repeated = cursor.rowcount == 0
                else:
                    try:
                        cursor = await conn.execute(statement, params)
                        repeated = cursor.rowcount == 0
                    except BaseException:
                        await arollback_quietly(conn)
                        raise
                    committing = True
                    await conn.commit()
            if repeated:
                return await self._find_call(pending, lost)
            return None
        except PoolTimeout as error:  # (an OperationalError) no connection: nothing was sent
            raise self._failed(await aexplained(pool, error)) from None
        except psycopg.OperationalError as error:
            if isinstance(error, psycopg.errors.QueryCanceled):
                raise self._failed(error) from None  # the statement's transaction rolled back
            if not committing:  # no COMMIT was sent, so nothing was recorded
                if not retry:
                    raise self._failed(error) from None
                await pool.check()  # after a restart, the idle connections are dead too
                return await self._write(pending, retry=False, lost=lost)
            broken: BaseException = error
        except psycopg.errors.UniqueViolation as error:
            if lost is None:
                if pending.key is not None:  # another writer took the seq: maybe with this call
                    first = await self._find_call(pending, None, error)
                    if first is not None:
                        return first
                raise self._failed(error) from None
            # The seq was free when read back, taken now: maybe by our own first COMMIT,
            # which the server was still finishing (slow fsync, a synchronous standby).
            if await self._read_back(pending, lost):
                return None
            raise self._unknown(pending, error) from lost
        except psycopg.Error as error:
            raise self._failed(error) from None
        # COMMIT was sent and its answer lost: ask on a fresh connection before answering.
        await pool.check()
        if await self._read_back(pending, broken):
            return None
        if not retry:
            raise PostgresUnavailable(
                f"session {self.session_id!r} on {self.where}: {reason(broken)}: not recorded"
            ) from None
        return await self._write(pending, retry=False, lost=broken)  # absent: same event, seq

    async def _find_call(
        self,
        pending: Pending,
        lost: BaseException | None,
        missing: BaseException | None = None,
    ) -> Event | None:
        """The answer to ``pending`` when its call id is recorded in this turn (see
        ``SessionCore._repeat``); with ``missing`` (the error that refused the insert),
        ``None`` when it is not, to be reported as that error."""
        pool = await self._pool()
        params = (self.session_id, pending.turn, pending.key)
        try:
            async with aborrowed(pool) as conn:
                cursor = await conn.execute(_sql.READ_CALL, params)
                row = await cursor.fetchone()
                await afinish(conn)
        except PoolTimeout as error:
            raise self._failed(await aexplained(pool, error)) from None
        except psycopg.Error as error:
            raise self._failed(error) from None
        if row is None and missing is not None:
            return None
        return self._repeat(pending, row, ours=lost is not None)

    async def _read_back(self, pending: Pending, broken: BaseException) -> bool:
        """Whether ``pending`` is recorded; :class:`CommitUnknown` when that cannot be asked."""
        pool = await self._pool()
        for attempt in (1, 2):  # an idle pooled connection may be as dead as the first one
            try:
                async with aborrowed(pool) as conn:
                    params = (self.session_id, pending.event["seq"])
                    cursor = await conn.execute(_sql.READ_ONE, params)
                    row = await cursor.fetchone()
                    await afinish(conn)
                return self._judge(pending, row)
            except PoolTimeout as error:
                raise self._unknown(pending, error) from broken
            except psycopg.Error as error:
                if attempt == 2 or not isinstance(error, psycopg.OperationalError):
                    raise self._unknown(pending, error) from broken
                await pool.check()
        raise AssertionError("unreachable")  # pragma: no cover

    async def _settle_pending(self) -> None:
        pending = self._pending
        assert pending is not None
        if await self._read_back(pending, CommitUnknown("still unknown")):
            self._recorded(pending.event)
        else:
            self._pending = None
