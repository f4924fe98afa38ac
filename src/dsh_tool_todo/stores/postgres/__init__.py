"""Session logs in PostgreSQL, for hosts that run many agents on many machines.

The names other modules build on (web view, CLI)::

    PostgresSession(conninfo_or_pool, session_id)        # the StoreSession protocol, sync
    AsyncPostgresSession(conninfo_or_pool, session_id)   # the same, coroutine append
    PostgresFollower(conninfo_or_pool, session_id, *, after_seq=-1)
        # async iterator of the session's events with seq > after_seq, in order;
        # one LISTEN connection per process and event loop; catches up after a reconnect
    PostgresReader(conninfo)                             # the LogReader a viewer reads through
    setup(conninfo_or_pool) -> int                       # create/upgrade; the schema version
    list_sessions(conninfo_or_pool) -> list[SessionInfo(session_id, events, last_activity)]
    read_tail(conninfo_or_pool, session_id, *, before_seq=None, limit=100) -> list[Event]
    latest_event(conninfo_or_pool, session_id, types) -> Event | None
    current_plan(conninfo_or_pool, session_id) -> list[TodoItem] | None
    delete_session(conninfo_or_pool, session_id) -> int  # rows deleted
    alist_sessions / aread_tail / alatest_event / acurrent_plan   # asyncio twins

``conninfo_or_pool`` is a libpq connection string or URL (``postgresql://...``;
TLS and passwords as psycopg documents), a ``psycopg_pool.ConnectionPool``
(``AsyncConnectionPool`` for the async names), or, for the module functions,
an open ``psycopg.Connection``.

Why the design is what it is:

- One row per event, ``(session_id, seq, type, data, recorded_at)``, primary
  key ``(session_id, seq)``: a seq can never be recorded twice, so a second
  (or stale) writer is refused by the database itself, at its first append,
  with :class:`WriterConflict` naming the session. No claim is held between
  appends, so no connection is pinned per session: sessions borrow from a
  pool for the length of one append.
- ``data`` is ``json``, not ``jsonb``: ``json`` keeps the text as written
  (key order, ``\\u0000``, lone surrogates the tool accepts), ``jsonb``
  rejects or rewrites them.
- An append is one transaction, sent again or read back when its connection
  breaks (``aio.py`` says how). It does not notify: the process's notifier
  sends the ``NOTIFY`` after the commit, coalesced (``_notify.py`` says why).
- The current plan is one probe of a partial index over the ``todo/write``
  and ``turn/start`` rows, whatever the log's length.

The package (see docs/stores.md): ``_sql`` (schema, migrations, statements),
``_core`` (no I/O), ``_pools`` (the connection state), ``_notify`` (the
notifier), ``aio`` (the I/O, async: the source), ``session`` (generated from
``aio``), ``follow``, ``reader``, ``admin``.

>>> # the examples in docs/postgres.md run against a live server
"""

from __future__ import annotations

from ...errors import needs_extra

with needs_extra("dsh_tool_todo.stores.postgres", "postgres", module="psycopg"):
    import psycopg  # noqa: F401
    import psycopg_pool  # noqa: F401

from ._core import SessionInfo as SessionInfo
from ._core import check_session_id as check_session_id
from ._core import decode_row as decode_row
from ._core import encode_data as encode_data
from ._core import server_name as server_name
from ._pools import DEFAULT_POOL_SIZE as DEFAULT_POOL_SIZE
from ._pools import close_async_shared_pools as close_async_shared_pools
from ._pools import close_shared_pools as close_shared_pools
from ._sql import CHANNEL as CHANNEL
from ._sql import RESUME_TYPES as RESUME_TYPES
from ._sql import SCHEMA_VERSION as SCHEMA_VERSION
from ._sql import TABLE as TABLE
from ._sql import VERSION_TABLE as VERSION_TABLE
from .admin import delete_session as delete_session
from .admin import setup as setup
from .aio import AsyncPostgresSession as AsyncPostgresSession
from .aio import acurrent_plan as acurrent_plan
from .aio import alatest_event as alatest_event
from .aio import alist_sessions as alist_sessions
from .aio import aread_tail as aread_tail
from .errors import CommitUnknown as CommitUnknown
from .errors import PostgresStoreError as PostgresStoreError
from .errors import PostgresUnavailable as PostgresUnavailable
from .errors import SchemaNotReady as SchemaNotReady
from .errors import WriterConflict as WriterConflict
from .follow import PostgresFollower as PostgresFollower
from .reader import PostgresReader as PostgresReader
from .session import PostgresSession as PostgresSession
from .session import current_plan as current_plan
from .session import latest_event as latest_event
from .session import list_sessions as list_sessions
from .session import read_tail as read_tail

__all__ = [
    "AsyncPostgresSession",
    "CommitUnknown",
    "PostgresFollower",
    "PostgresReader",
    "PostgresSession",
    "PostgresStoreError",
    "PostgresUnavailable",
    "WriterConflict",
    "current_plan",
    "setup",
]
