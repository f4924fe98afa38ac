"""Where the web view reads session logs: a directory of JSONL logs, or PostgreSQL.

A :class:`PlanSource` answers four questions, all read-only: which sessions
exist (with their last activity and progress), what the last events before a
given seq are (the history tail page), what the newest event and the event
deciding the plan are (the snapshot a stream starts from), and which events
follow a given seq (the live follow). Everything the app serves is built on
these, so a new store needs only this seam.

Every read goes from the end of a log: the cost of a page, a snapshot or a
resume depends on how far back it reaches, never on the log's length.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Collection
from typing import Any

from ..errors import InvalidLog, SessionNotFound, StoreUnavailable, UsageError
from ..projection import PLAN_EVENTS, progress_of
from ..protocols import LogReader, Progress, SessionSummary, Snapshot, TailPage
from ..stores.jsonl import JsonlReader

Event = dict[str, Any]


# The seam and its value types live with the core; their old names stay importable here.
PlanSource = LogReader
SessionInfo = SessionSummary
SourceUnavailable = StoreUnavailable


# --- JSONL directory -------------------------------------------------------------

# The reader lives in its store's package; its old name stays importable here.
JsonlDirectorySource = JsonlReader


# --- PostgreSQL ------------------------------------------------------------------


class PostgresSource:
    """The sessions of a PostgreSQL store (:mod:`dsh_tool_todo.stores.postgres`), read-only.

    Reads borrow from a small pool opened on first use; each stream follows
    its session with a :class:`~dsh_tool_todo.stores.postgres.PostgresFollower`
    (one ``LISTEN`` connection per process, woken by the writers' ``NOTIFY``).
    Last activity is the time of the session's newest row.
    """

    def __init__(self, conninfo: str, *, pool_size: int = 4) -> None:
        from ..stores import postgres  # the postgres extra, imported only when used

        self._pg = postgres
        self.conninfo = conninfo
        self._pool_size = pool_size
        self._pool: Any = None
        self._progress: dict[str, tuple[tuple[int, float], Progress | None]] = {}

    async def _source(self) -> Any:
        if self._pool is None:
            from psycopg_pool import AsyncConnectionPool

            pool = AsyncConnectionPool(
                self.conninfo,
                min_size=1,
                max_size=self._pool_size,
                # read-only at the server too: nothing this view runs can write
                kwargs={"autocommit": True, "options": "-c default_transaction_read_only=on"},
                open=False,
            )
            await pool.open()
            self._pool = pool
        return self._pool

    async def _call(self, name: str | None, function: Any, *args: Any, **kwargs: Any) -> Any:
        pg = self._pg
        try:
            if name is not None:
                pg.check_session_id(name)
            return await function(await self._source(), *args, **kwargs)
        except UsageError:
            raise SessionNotFound(name) from None
        except InvalidLog:
            raise
        except (pg.PostgresStoreError, OSError) as error:
            raise SourceUnavailable(str(error)) from None

    async def sessions(self, query: str, limit: int) -> tuple[list[SessionInfo], int]:
        rows = await self._call(None, self._pg.alist_sessions)
        needle = query.casefold()
        found = [row for row in rows if needle in row.session_id.casefold()]
        result = []
        for row in found[:limit]:
            stamp = row.last_activity.timestamp()
            key = (row.events, stamp)
            cached = self._progress.get(row.session_id)
            if cached is None or cached[0] != key:
                try:
                    deciding = await self._call(
                        row.session_id, self._pg.alatest_event, row.session_id, PLAN_EVENTS
                    )
                    progress: Progress | None = progress_of(deciding)
                except InvalidLog:
                    progress = None
                cached = self._progress[row.session_id] = (key, progress)
            result.append(SessionInfo(row.session_id, stamp, cached[1]))
        return result, len(found)

    async def tail(
        self,
        name: str,
        *,
        before: int | None,
        limit: int,
        types: Collection[str] | None = None,
    ) -> TailPage:
        picked: list[Event] = []
        position = before
        batch = limit + 1 if types is None else max(limit + 1, 500)
        while True:
            events: list[Event] = await self._call(
                name, self._pg.aread_tail, name, before_seq=position, limit=batch
            )
            if not events and position is None:
                await self._exists(name)
            for event in reversed(events):
                if types is not None and event["type"] not in types:
                    continue
                if len(picked) == limit:
                    return TailPage(picked[::-1], more=True)
                picked.append(event)
            if len(events) < batch:
                return TailPage(picked[::-1], more=False)
            position = events[0]["seq"]

    async def _exists(self, name: str) -> None:
        last = await self._call(name, self._pg.aread_tail, name, limit=1)
        if not last:
            raise SessionNotFound(name)

    async def snapshot(self, name: str) -> Snapshot:
        last: list[Event] = await self._call(name, self._pg.aread_tail, name, limit=1)
        if not last:
            raise SessionNotFound(name)
        deciding = await self._call(name, self._pg.alatest_event, name, PLAN_EVENTS)
        return Snapshot(last[0]["seq"], deciding)

    async def follow(
        self, name: str, *, after: int, since: Snapshot | None = None
    ) -> AsyncIterator[Event]:
        # rows are never rewritten in place: the follower goes on from ``after`` alone
        try:
            self._pg.check_session_id(name)
        except UsageError:
            raise SessionNotFound(name) from None
        follower = self._pg.PostgresFollower(self.conninfo, name, after_seq=max(after, -1))
        try:
            async for event in follower:
                yield event
        finally:
            await follower.aclose()

    async def aclose(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()


def open_source(spec: str | os.PathLike[str]) -> LogReader:
    """The reader ``spec`` names: see :func:`dsh_tool_todo.stores.open_reader`."""
    from ..stores import open_reader

    return open_reader(spec)
