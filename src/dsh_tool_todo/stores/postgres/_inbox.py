"""A session's inbox in PostgreSQL: rows of ``dsh_todo_requests``, positioned by their id.

Filing inserts a row and notifies ``dsh_todo_requests`` with the session id, in one
statement; the session's writer reads the rows after the id its log took last
(stores/_inbox.py). Rows stay after they are taken: the log says which were.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from .._inbox import Admit, Entry, Read, _admit_all, _entry
from . import _sql
from ._core import check_session_id, conninfo_of, server_name, wrap
from .errors import SchemaNotReady

__all__: list[str] = []


class PostgresInbox:
    """The inbox of session ``session_id`` in the database ``source`` (conninfo or pool)."""

    def __init__(self, source: Any, session_id: str) -> None:
        self.source = source
        self.session_id = check_session_id(session_id)
        self.where = f"{server_name(conninfo_of(source))} ({_sql.REQUESTS})"

    def file(
        self,
        entry: Mapping[str, Any],
        admit: Admit = _admit_all,
        after: tuple[int, str | None] = (0, None),
    ) -> int:
        from .session import connect

        text = json.dumps(entry, ensure_ascii=False, separators=(",", ":"))
        try:
            with connect(self.source) as conn, conn.transaction():
                # one filer of the session at a time, each judging the rows before its own;
                # a row id is taken and committed under the lock: none commits behind another
                conn.execute(_sql.REQUESTS_LOCK, (self.session_id,))
                rows = conn.execute(_sql.READ_REQUESTS, (self.session_id, after[0])).fetchall()
                admit([found for _, found in _entries(rows) if found is not None])
                row = conn.execute(
                    _sql.FILE_REQUEST, (self.session_id, text, self.session_id)
                ).fetchone()
        except psycopg.errors.UndefinedTable:
            raise SchemaNotReady(
                f"{self.where}: this database keeps no requests yet (schema version 3): "
                "run `dsh-todo db init DSN` or setup() to add the table"
            ) from None
        except (psycopg.Error, PoolTimeout) as error:
            raise wrap(self.where, error) from None
        assert row is not None  # an INSERT ... RETURNING of one row
        return int(row[0])

    def read_after(self, position: int, identity: str | None = None) -> Read:
        from .session import connect

        try:
            with connect(self.source) as conn:
                try:
                    rows = conn.execute(_sql.READ_REQUESTS, (self.session_id, position)).fetchall()
                except psycopg.errors.UndefinedTable:  # version 3: no request can wait yet
                    rows = []
                    conn.rollback()
                if not conn.autocommit:
                    conn.commit()
        except (psycopg.Error, PoolTimeout) as error:
            raise wrap(self.where, error) from None
        return _entries(rows), max(position, 0), None

    async def aread_after(self, position: int, identity: str | None = None) -> Read:
        if not isinstance(self.source, AsyncConnectionPool) and not isinstance(self.source, str):
            return self.read_after(position)
        from .aio import aconnect

        try:
            async with aconnect(self.source) as conn:
                try:
                    cursor = await conn.execute(_sql.READ_REQUESTS, (self.session_id, position))
                    rows = await cursor.fetchall()
                except psycopg.errors.UndefinedTable:  # version 3: no request can wait yet
                    rows = []
                    await conn.rollback()
                if not conn.autocommit:
                    await conn.commit()
        except (psycopg.Error, PoolTimeout) as error:
            raise wrap(self.where, error) from None
        return _entries(rows), max(position, 0), None


def _entries(rows: list[tuple[Any, ...]]) -> list[tuple[int, Entry | None]]:
    return [(int(ident), _entry(text)) for ident, text in rows]
