"""The sessions of a PostgreSQL store, read-only: a :class:`~dsh_tool_todo.protocols.LogReader`."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Collection
from datetime import datetime, timedelta
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from ... import errors
from ...core.contract import SESSION_END_EVENT_TYPE
from ...core.links import End, end_of
from ...core.listeners import Event
from ...core.projection import PLAN_EVENTS, checked_deciding, progress_of
from ...errors import InvalidLog, LogReplaced, SessionNotFound, UsageError
from ...protocols import Progress, SessionSummary, Snapshot, TailPage
from .._summary import working_on
from . import _sql
from ._core import (
    check_session_id,
    check_version,
    decode_row,
    reason,
    server_name,
    through_seq,
    wrap,
)
from ._pools import APool
from .errors import PostgresStoreError
from .follow import PostgresFollower

__all__ = ["PostgresReader"]

TYPE_SCAN = 2000
"""Rows a tail page filtered by type looks at, at most, per request; ``cursor`` goes on."""

READ_ONLY = "-c default_transaction_read_only=on"
LIST_INTERVAL = 0.25
"""Seconds between looks at the summary table while a list is watched."""
MARGIN = timedelta(seconds=5)
"""How far before the newest activity seen a look starts: a row's time is its transaction's
start, so a transaction that commits late still falls inside the next look."""

_TYPED_TAIL = sql.SQL(
    "WITH w AS (SELECT seq, type, data FROM {table} WHERE session_id = %(sid)s "
    "AND seq <= %(through)s ORDER BY seq DESC LIMIT %(scan)s), "
    "s AS (SELECT min(seq) AS low, count(*) AS n FROM w) "
    "SELECT s.low, s.n, m.seq, m.type, m.data FROM s LEFT JOIN LATERAL "
    "(SELECT seq, type, data::text AS data FROM w WHERE type = ANY(%(types)s) "
    "ORDER BY seq DESC LIMIT %(limit)s) AS m ON true ORDER BY m.seq DESC"
).format(table=sql.Identifier(_sql.TABLE))

_EXISTS = sql.SQL("SELECT EXISTS (SELECT 1 FROM {table} WHERE session_id = %s)").format(
    table=sql.Identifier(_sql.TABLE)
)

# The newest row's seq and transaction id, and the deciding event, in one statement: one
# snapshot of the table. A row written again (same seq, even the same event) has another xmin.
_SNAPSHOT = sql.SQL(
    "SELECT n.seq, n.xmin, d.seq, d.type, d.data FROM (SELECT 1) AS one "
    "LEFT JOIN LATERAL (SELECT seq, xmin::text::bigint AS xmin FROM {table} "
    "WHERE session_id = %s ORDER BY seq DESC LIMIT 1) AS n ON true "
    "LEFT JOIN LATERAL ({deciding}) AS d ON true"
).format(table=sql.Identifier(_sql.TABLE), deciding=_sql.latest_query(PLAN_EVENTS))

# The deciding event of each of several sessions, in one statement (the partial index each).
# each session's deciding event, and its newest session/end when that is newer (its run ended)
_DECIDING_OF = sql.SQL(
    "SELECT n.sid, d.seq, d.type, d.data, e.data FROM unnest(%s::text[]) AS n(sid) "
    "LEFT JOIN LATERAL ({deciding}) AS d ON true LEFT JOIN LATERAL ({ended}) AS e ON true"
).format(
    deciding=sql.SQL(
        "SELECT seq, type, data::text AS data FROM {table} WHERE session_id = n.sid "
        "AND type IN ({types}) ORDER BY seq DESC LIMIT 1"
    ).format(
        table=sql.Identifier(_sql.TABLE),
        types=sql.SQL(", ").join(sql.Literal(t) for t in sorted(PLAN_EVENTS)),
    ),
    ended=sql.SQL(
        "SELECT data::text AS data FROM {table} WHERE session_id = n.sid AND type = {end} "
        "AND seq > coalesce(d.seq, -1) ORDER BY seq DESC LIMIT 1"
    ).format(table=sql.Identifier(_sql.TABLE), end=sql.Literal(SESSION_END_EVENT_TYPE)),
)

_ROW_AT = sql.SQL(
    "SELECT xmin::text::bigint, type, data::text FROM {table} WHERE session_id = %s AND seq = %s"
).format(table=sql.Identifier(_sql.TABLE))


_Figures = tuple[int, Progress | None, str | None, int | None, End | None]


def _end(data: str | None) -> End | None:
    """The end a ``session/end`` row's data (as text) records, if well formed."""
    return (
        None if data is None else end_of({"type": SESSION_END_EVENT_TYPE, "data": json.loads(data)})
    )


def read_only_options(conninfo: str) -> str:
    """The connection's ``options``: the URL's own (a search_path, say), then read-only."""
    try:
        own = conninfo_to_dict(conninfo).get("options")
    except psycopg.Error as error:
        raise UsageError(f"{server_name(conninfo)}: {reason(error)}") from None
    return f"{own} {READ_ONLY}" if own else READ_ONLY


def _typed(error: BaseException) -> errors.TodoError:
    """A store error as the read seam names it: what the view turns into its status or frame."""
    if isinstance(error, InvalidLog | errors.StoreUnavailable):
        return error
    if isinstance(error, PostgresStoreError):
        return errors.StoreUnavailable(str(error))
    raise error


class PostgresReader:
    """The sessions of a PostgreSQL store (:mod:`dsh_tool_todo.stores.postgres`), read-only.

    Reads borrow from a small pool opened on first use, whose connections are
    read-only at the server (on top of the URL's own ``options``); each stream
    follows its session with a :class:`PostgresFollower` (one ``LISTEN``
    connection per process, woken by the writers' ``NOTIFY``). Last activity
    is the time of the session's newest row. A session whose id could not be
    addressed (not printable, too long) is left out of the list. ``where`` names
    the server as messages do (``PostgreSQL at host:port/db``), never the password.
    """

    def __init__(
        self, conninfo: str, *, pool_size: int = 4, list_interval: float = LIST_INTERVAL
    ) -> None:
        self.conninfo = conninfo
        self.list_interval = list_interval
        self.where = server_name(conninfo)
        self._options = read_only_options(conninfo)
        self._pool_size = pool_size
        self._pool: APool | None = None
        # per session: the last seq its figures were read at, its progress, its item in
        # progress, the seq of its deciding event (-1: none), how its run ended
        self._progress: dict[str, _Figures] = {}

    async def _source(self) -> APool:
        if self._pool is None:
            pool: APool = AsyncConnectionPool(
                self.conninfo,
                min_size=1,
                max_size=self._pool_size,
                kwargs={"autocommit": True, "options": self._options},
                # a connection the server ended while it idled is replaced, not lent out to fail
                check=AsyncConnectionPool.check_connection,
                open=False,
            )
            await pool.open()
            self._pool = pool
        return self._pool

    async def _rows(self, query: Any, params: Any) -> list[Any]:
        # A pooled connection the server ended while it sat idle (pg_terminate_backend, a
        # restart) fails only when next used; the pool drops it, and a read is safe to repeat.
        for attempt in (1, 2):
            try:
                async with (await self._source()).connection() as conn:
                    try:
                        cursor = await conn.execute(query, params)
                        return await cursor.fetchall()
                    except psycopg.OperationalError:
                        if attempt == 1 and conn.broken:
                            continue
                        raise
            except (psycopg.Error, PoolTimeout) as error:
                raise _typed(wrap(self.where, error)) from None
        raise AssertionError("unreachable: the second attempt returns or raises")

    def owner_of(self, name: str) -> str | None:
        """``None``: a database names no session after an owner's file name."""
        return None

    def hold_list(self) -> None:
        """Nothing to hold: the summary table is the list's index, and each row's figures
        are kept by the seq they were read at whether held or not."""

    @staticmethod
    def _name(name: str) -> str:
        try:
            return check_session_id(name)
        except UsageError:
            raise SessionNotFound(name) from None

    async def sessions(self, query: str, limit: int) -> tuple[list[SessionSummary], int]:
        # The summary table (one row per session, kept by triggers): never the events table.
        await self._ready()
        rows = await self._rows(_sql.LIST_SUMMARY, ())
        needle = query.casefold()
        found = [row for row in rows if _addressable(row[0]) and needle in row[0].casefold()]
        top = found[:limit]
        stale = [
            name
            for name, last_seq, _, _ in top
            if (cached := self._progress.get(name)) is None or cached[0] != last_seq
        ]
        if stale:  # the deciding events of every changed row, in one statement
            decided = await self._rows(_DECIDING_OF, (stale,))
            for name, *deciding, ended in decided:
                summary: tuple[Progress | None, str | None, int | None, End | None]
                try:
                    event = None if deciding[0] is None else decode_row(name, *deciding)
                    checked = None if event is None else checked_deciding(event, name)
                    plan_seq = -1 if checked is None else checked["seq"]
                    summary = (progress_of(checked), working_on(checked), plan_seq, _end(ended))
                except InvalidLog:
                    summary = (None, None, None, None)
                last_seq = next(row[1] for row in top if row[0] == name)
                self._progress[name] = (last_seq, *summary)
        result = []
        for name, last_seq, last_at, parent in top:
            figures = self._progress.get(name, (last_seq, None, None, None, None))
            _, progress, doing, plan_seq, end = figures
            result.append(
                SessionSummary(
                    name,
                    last_at.timestamp(),
                    progress,
                    parent=parent,
                    last_seq=last_seq,
                    working_on=doing,
                    plan_seq=plan_seq,
                    end=end,
                )
            )
        if len(self._progress) > 2 * max(limit, len(result)):
            listed = {row[0] for row in rows}
            for gone in [name for name in self._progress if name not in listed]:
                del self._progress[gone]
        return result, len(found)

    async def changes(self) -> AsyncIterator[frozenset[str]]:
        """Sessions whose row changed, found by polling the summary table every
        ``list_interval`` seconds: the sessions active since the last look (an index
        range), and a whole look when the count says one went away."""
        await self._ready()
        known: dict[str, int] = {row[0]: row[1] for row in await self._rows(_sql.LIST_SUMMARY, ())}
        since = await self._now()
        while True:
            await asyncio.sleep(self.list_interval)
            rows = await self._rows(_sql.RECENT_SUMMARY, (since - MARGIN,))
            count = next(row[1] for row in rows if row[0] is None)
            changed = set()
            for name, last_seq, last_at in rows:
                if name is None:
                    continue
                since = max(since, last_at)
                if known.get(name) != last_seq:
                    known[name] = last_seq
                    changed.add(name)
            if count != len(known):  # deleted (or recreated unseen): look at every row
                fresh = {row[0]: row[1] for row in await self._rows(_sql.LIST_SUMMARY, ())}
                changed.update(
                    name
                    for name in fresh.keys() | known.keys()
                    if fresh.get(name) != known.get(name)
                )
                known = fresh
            changed = {name for name in changed if _addressable(name)}
            if changed:
                yield frozenset(changed)

    async def _ready(self) -> None:
        """Raise what to run when the schema has no summary table yet (or no table at all)."""
        version = (await self._rows(_sql.LIST_READY, ()))[0][0]
        try:
            check_version(self.where, version)
        except PostgresStoreError as error:
            raise _typed(error) from None

    async def _now(self) -> datetime:
        moment: datetime = (await self._rows("SELECT now()", ()))[0][0]
        return moment

    async def tail(
        self, name: str, *, before: int | None, limit: int, types: Collection[str] | None = None
    ) -> TailPage:
        name = self._name(name)
        end = through_seq(before)
        if types is None:
            rows = await self._rows(_sql.READ_BEFORE, (name, end, limit + 1))
            if not rows and before is None:
                raise SessionNotFound(name)
            events = [decode_row(name, *row) for row in rows[:limit]]
            more = len(rows) > limit
            return TailPage(events[::-1], more, events[-1]["seq"] if more else None)
        scan = max(limit + 1, TYPE_SCAN)
        rows = await self._rows(
            _TYPED_TAIL,
            {"sid": name, "through": end, "scan": scan, "types": list(types), "limit": limit + 1},
        )
        low, looked = rows[0][0], rows[0][1]
        if looked == 0 and before is None:
            raise SessionNotFound(name)
        events = [decode_row(name, *row[2:]) for row in rows if row[2] is not None]
        if len(events) > limit:
            events = events[:limit]
            return TailPage(events[::-1], True, events[-1]["seq"])
        if looked == scan and low > 0:
            return TailPage(events[::-1], True, low)
        return TailPage(events[::-1], False, None)

    async def snapshot(self, name: str) -> Snapshot:
        return await self._snapshot(self._name(name))

    async def _snapshot(self, name: str) -> Snapshot:
        last, xmin, *deciding = (await self._rows(_SNAPSHOT, (name, name)))[0]
        if last is None:
            raise SessionNotFound(name)
        if deciding[0] is None:
            return Snapshot(last, None, (xmin, last))
        event = decode_row(name, *deciding)
        where = f"session {name!r}, seq {event['seq']}"
        return Snapshot(last, checked_deciding(event, where), (xmin, last))

    async def follow(
        self, name: str, *, after: int, since: Snapshot | None = None
    ) -> AsyncIterator[Event]:
        # rows are never rewritten in place; a deleted and recreated session raises LogReplaced,
        # from the snapshot's own row on when ``since`` is given (its position: xmin, seq)
        name = self._name(name)
        # the follower alone would wait for the session to be written; a read says it is unknown
        if not (await self._rows(_EXISTS, (name,)))[0][0]:
            raise SessionNotFound(name)
        follower = PostgresFollower(self.conninfo, name, after_seq=max(after, -1))
        if since is not None and since.position is not None and since.last_seq == after >= 0:
            rows = await self._rows(_ROW_AT, (name, after))
            if not rows or rows[0][0] != since.position[0]:
                raise LogReplaced(
                    f"session {name!r}: seq {after} is not the row the snapshot read "
                    "(the session was deleted and written again)"
                )
            # the follower's first read checks that this same row is still there
            xmin, kind, data = rows[0]
            follower._last_row = (kind, data, xmin)
        try:
            while True:
                try:
                    event = await follower.__anext__()
                except PostgresStoreError as error:
                    raise _typed(error) from None
                yield event
        finally:
            await follower.aclose()

    async def aclose(self) -> None:
        pool, self._pool = self._pool, None
        self._progress.clear()
        if pool is not None:
            await pool.close()


def _addressable(name: object) -> bool:
    try:
        check_session_id(name)
    except UsageError:
        return False
    return True
