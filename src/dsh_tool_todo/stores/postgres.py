"""Session logs in PostgreSQL, for hosts that run many agents on many machines.

The names other modules build on (web view, CLI)::

    PostgresSession(conninfo_or_pool, session_id)        # the StoreSession protocol, sync
    AsyncPostgresSession(conninfo_or_pool, session_id)   # the same, coroutine append
    PostgresFollower(conninfo_or_pool, session_id, *, after_seq=-1)
        # async iterator of the session's events with seq > after_seq, in order;
        # one LISTEN connection per process and event loop; catches up after a reconnect
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
- An append is one transaction: ``BEGIN``, one statement that inserts the
  row and calls ``pg_notify`` with ``"<seq>:<session id>"`` on channel
  ``dsh_todo_events``, ``COMMIT``. (Measured under load, an explicit
  transaction commits notifying rows at about twice the rate of the same
  statement in autocommit.) A connection that breaks before ``COMMIT`` was
  sent recorded nothing, and the append is sent once more on a fresh
  connection; one that breaks after leaves the outcome unknown, so the session
  reads the row back before it answers, and tells the caller only what it
  knows.
- The current plan is one probe of a partial index over the ``todo/write``
  and ``turn/start`` rows, whatever the log's length.

>>> # the examples in docs/postgres.md run against a live server
"""

from __future__ import annotations

import asyncio
import atexit
import json
import os
import threading
import weakref
from collections import deque
from collections.abc import AsyncIterator, Callable, Collection, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager, suppress
from datetime import datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any, NamedTuple, TypeAlias

from ..errors import missing_extra

try:
    import psycopg
    from psycopg import sql
    from psycopg_pool import AsyncConnectionPool, ConnectionPool, PoolTimeout
except ImportError as _import_error:
    raise missing_extra(
        "dsh_tool_todo.stores.postgres", "postgres", _import_error, module="psycopg"
    ) from _import_error
from pydantic_core import PydanticSerializationError, to_json

from ..contract import EVENT_TYPE, TURN_START
from ..errors import InvalidLog, LogBusy, TodoError, UsageError
from ..listeners import Event, Listener, Listeners
from ..projection import check_logged_write
from ._closing import ClosedOnExit

if TYPE_CHECKING:
    from ..model import TodoItem

__all__ = [
    "CHANNEL",
    "DEFAULT_POOL_SIZE",
    "RESUME_TYPES",
    "SCHEMA_VERSION",
    "TABLE",
    "AsyncPostgresSession",
    "CommitUnknown",
    "PostgresFollower",
    "PostgresSession",
    "PostgresStoreError",
    "SessionInfo",
    "StoreUnavailable",
    "WriterConflict",
    "acurrent_plan",
    "alatest_event",
    "alist_sessions",
    "aread_tail",
    "check_session_id",
    "close_async_shared_pools",
    "close_shared_pools",
    "current_plan",
    "decode_row",
    "delete_session",
    "latest_event",
    "list_sessions",
    "read_tail",
    "server_name",
    "setup",
]

TABLE = "dsh_todo_events"
VERSION_TABLE = "dsh_todo_schema"
CHANNEL = "dsh_todo_events"
RESUME_TYPES: tuple[str, ...] = (EVENT_TYPE, TURN_START)
"""The event types that each fix the whole plan: what the partial index covers."""

MAX_SESSION_ID = 200
"""Characters; keeps a notification's payload far below PostgreSQL's 8,000 bytes."""

DEFAULT_POOL_SIZE = 10
DEFAULT_TIMEOUT = 10.0
"""Seconds to wait for a pooled connection before an append fails."""

# The position of a migration in this list is the schema version it brings.
MIGRATIONS: tuple[str, ...] = (
    f"""
    CREATE TABLE IF NOT EXISTS {TABLE} (
        session_id text NOT NULL,
        seq bigint NOT NULL CHECK (seq >= 0),
        type text NOT NULL,
        data json NOT NULL,
        recorded_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (session_id, seq)
    );
    CREATE INDEX IF NOT EXISTS {TABLE}_resume ON {TABLE} (session_id, seq DESC)
        WHERE type IN ('{EVENT_TYPE}', '{TURN_START}')
    """,
)
SCHEMA_VERSION = len(MIGRATIONS)

Pool: TypeAlias = "ConnectionPool[psycopg.Connection[Any]]"
APool: TypeAlias = "AsyncConnectionPool[psycopg.AsyncConnection[Any]]"
Source: TypeAlias = "str | ConnectionPool[Any] | psycopg.Connection[Any]"
ASource: TypeAlias = "str | AsyncConnectionPool[Any] | psycopg.AsyncConnection[Any]"


class PostgresStoreError(TodoError):
    """The PostgreSQL store could not do what was asked; the message says why."""


class StoreUnavailable(PostgresStoreError, ConnectionError):
    """The server could not be reached, or the connection broke: nothing was recorded."""


class CommitUnknown(StoreUnavailable):
    """The connection broke while an event was being committed, and reading it back failed.

    The event may or may not be in the log; the session checks again before
    its next append, and then tells its listeners if it was recorded.
    """


class WriterConflict(PostgresStoreError, LogBusy):
    """Another writer recorded this seq first: one writer per session, this one is stale."""


class SessionInfo(NamedTuple):
    """One session of a database, as ``dsh-todo sessions`` lists it."""

    session_id: str
    events: int
    last_activity: datetime


# --- the shared core: SQL, encoding, decoding, decisions (no I/O) -------------------------

_ESCAPING_ENCODER = json.JSONEncoder(ensure_ascii=True, separators=(",", ":"))

_BEGIN = "BEGIN"
_INSERT = (
    f"WITH row AS (INSERT INTO {TABLE} (session_id, seq, type, data) "
    "VALUES (%(sid)s, %(seq)s, %(type)s, %(data)s) RETURNING seq) "
    f"SELECT pg_notify('{CHANNEL}', %(payload)s) FROM row"
)
_OPEN = (
    f"SELECT (SELECT max(version) FROM {VERSION_TABLE}), "
    f"(SELECT max(seq) FROM {TABLE} WHERE session_id = %s)"
)
_READ_ONE = f"SELECT type, data::text FROM {TABLE} WHERE session_id = %s AND seq = %s"
_READ_AFTER = (
    f"SELECT seq, type, data::text FROM {TABLE} "
    "WHERE session_id = %s AND seq > %s ORDER BY seq LIMIT %s"
)
_READ_BEFORE = (
    f"SELECT seq, type, data::text FROM {TABLE} "
    "WHERE session_id = %s AND seq < %s ORDER BY seq DESC LIMIT %s"
)
_LIST = (
    f"SELECT session_id, count(*), max(recorded_at) FROM {TABLE} "
    "GROUP BY session_id ORDER BY max(recorded_at) DESC, session_id"
)
_DELETE = f"DELETE FROM {TABLE} WHERE session_id = %s"
_VERSION_DDL = (
    f"CREATE TABLE IF NOT EXISTS {VERSION_TABLE} "
    "(version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
)
_SETUP_LOCK = "SELECT pg_advisory_xact_lock(hashtext('dsh_todo_events setup'))"
_MAX_BATCH = 500


def _latest_query(types: Collection[str]) -> sql.Composed:
    # Literal types (not a parameter), so the planner sees they imply the partial index's predicate.
    return sql.SQL(
        "SELECT seq, type, data::text FROM {} WHERE session_id = %s AND type IN ({}) "
        "ORDER BY seq DESC LIMIT 1"
    ).format(sql.Identifier(TABLE), sql.SQL(", ").join(sql.Literal(t) for t in sorted(types)))


def encode_data(data: Mapping[str, Any]) -> str:
    """The JSON text stored for ``data``: UTF-8 as written, escaping only what cannot travel."""
    try:
        return to_json(data).decode()
    except PydanticSerializationError:  # lone surrogates: escape, as \\udxxx
        return _ESCAPING_ENCODER.encode(data)
    except UnicodeDecodeError:  # pragma: no cover - to_json writes valid UTF-8
        return _ESCAPING_ENCODER.encode(data)


def check_session_id(session_id: object) -> str:
    if not isinstance(session_id, str):
        raise UsageError(f"a session id must be a str, not {type(session_id).__name__}")
    if not session_id or len(session_id) > MAX_SESSION_ID:
        raise UsageError(f"a session id must have 1 to {MAX_SESSION_ID} characters")
    if "\0" in session_id or not session_id.isprintable():
        raise UsageError(f"a session id must be printable text: {session_id!r}")
    try:
        session_id.encode()
    except UnicodeEncodeError:
        raise UsageError(f"a session id must be valid Unicode: {session_id!r}") from None
    return session_id


def _check_types(types: Collection[str]) -> Collection[str]:
    if isinstance(types, str) or not all(isinstance(t, str) for t in types):
        raise UsageError("latest() takes a collection of event types, not one string")
    return types


def decode_row(session_id: str, seq: object, kind: object, text: object) -> Event:
    """The event a row holds; :class:`InvalidLog` naming session and seq if it holds none.

    Rows written by something else are checked as the JSONL readers check
    lines: ``data`` must be a JSON object, and a ``todo/write`` must keep the
    plan's invariant.
    """
    where = f"session {session_id!r}, seq {seq}"
    if type(seq) is not int or not isinstance(kind, str) or not isinstance(text, str):
        raise InvalidLog(f"{where}: not a session event {{seq, type, data}}")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        raise InvalidLog(f"{where}: data is not JSON") from None
    if not isinstance(data, dict):
        raise InvalidLog(f"{where}: data must be a JSON object")
    event: Event = {"seq": seq, "type": kind, "data": data}
    if kind == EVENT_TYPE:
        try:
            check_logged_write(event, seq)
        except InvalidLog as error:
            reason = str(error).removeprefix(f"event {seq}: ")
            raise InvalidLog(f"{where}: {reason}") from None
    return event


def plan_of(event: Event | None) -> list[TodoItem] | None:
    if event is None or event["type"] != EVENT_TYPE:
        return None
    todos: list[TodoItem] = event["data"]["todos"]
    return todos


def _payload(session_id: str, seq: int) -> str:
    return f"{seq}:{session_id}"


def _parse_payload(payload: str) -> tuple[str, int] | None:
    seq, _, session_id = payload.partition(":")
    return (session_id, int(seq)) if seq.isdigit() else None


def server_name(conninfo: str) -> str:
    """Where a conninfo points, without its password: for messages."""
    try:
        params = psycopg.conninfo.conninfo_to_dict(conninfo)
    except psycopg.Error:
        return "PostgreSQL (unparsable conninfo)"
    host = params.get("host") or params.get("hostaddr") or "localhost"
    port = params.get("port") or "5432"
    return f"PostgreSQL at {host}:{port}/{params.get('dbname') or params.get('user') or ''}"


def _reason(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__


def _unavailable(where: str, error: BaseException) -> StoreUnavailable:
    return StoreUnavailable(f"{where}: {_reason(error)}")


def _store_error(where: str, error: psycopg.Error) -> PostgresStoreError:
    if isinstance(error, psycopg.errors.UndefinedTable):
        return PostgresStoreError(
            f"{where}: no {TABLE} table: run `dsh-todo db init DSN` or setup() first"
        )
    if isinstance(error, psycopg.errors.QueryCanceled):
        return PostgresStoreError(f"{where}: statement cancelled ({_reason(error)}): not recorded")
    if isinstance(error, psycopg.OperationalError):
        return _unavailable(where, error)
    return PostgresStoreError(f"{where}: {_reason(error)}")


def _check_version(where: str, version: object) -> None:
    if version is None:
        raise PostgresStoreError(
            f"{where}: the {TABLE} schema is not set up: run `dsh-todo db init DSN` or setup()"
        )
    if not isinstance(version, int) or version < SCHEMA_VERSION:
        raise PostgresStoreError(
            f"{where}: schema version {version} is older than {SCHEMA_VERSION}: "
            "run `dsh-todo db init DSN` or setup() to upgrade"
        )
    if version > SCHEMA_VERSION:
        raise PostgresStoreError(
            f"{where}: schema version {version} was written by a newer dsh-tool-todo "
            f"(this one knows {SCHEMA_VERSION}): upgrade the library"
        )


def _conflict(session_id: str, seq: int) -> WriterConflict:
    return WriterConflict(
        f"session {session_id!r}: seq {seq} was recorded by another writer; this session "
        "is stale and refuses to append (one writer per session: open a new one to continue)"
    )


def _conninfo_of(source: object) -> str:
    if isinstance(source, str):
        return source
    if isinstance(source, ConnectionPool | AsyncConnectionPool):
        return str(source.conninfo)
    if isinstance(source, psycopg.Connection | psycopg.AsyncConnection):
        return source.info.dsn
    raise UsageError(
        "expected a conninfo string, a psycopg_pool pool or a psycopg connection, "
        f"not {type(source).__name__}"
    )


# --- connections ----------------------------------------------------------------------


class _SharedPools:
    """The per-process pools that sessions given a conninfo string share, one per conninfo.

    Created on first use (no I/O at import), re-created in a forked child,
    closed at interpreter exit.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._pools: dict[str, Pool] = {}
        self._registered = False

    def get(self, conninfo: str) -> Pool:
        with self._lock:
            if self._pid != os.getpid():  # a forked child must not share its parent's sockets
                self._pid, self._pools = os.getpid(), {}
            pool = self._pools.get(conninfo)
            if pool is None:
                if not self._registered:
                    atexit.register(self.close)
                    self._registered = True
                pool = ConnectionPool(
                    conninfo,
                    min_size=1,
                    max_size=DEFAULT_POOL_SIZE,
                    kwargs={"autocommit": True},
                    timeout=DEFAULT_TIMEOUT,
                    name="dsh-todo",
                    open=True,
                )
                self._pools[conninfo] = pool
            return pool

    def close(self) -> None:
        with self._lock:
            pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            pool.close()


_SHARED = _SharedPools()


def close_shared_pools() -> None:
    """Close the pools sessions opened for conninfo strings (they reopen when next used)."""
    _SHARED.close()


@contextmanager
def _connect(source: Source) -> Iterator[psycopg.Connection[Any]]:
    """A connection for one module-level call: borrowed from a pool, or opened and closed."""
    if isinstance(source, ConnectionPool):
        with source.connection() as conn:
            yield conn
    elif isinstance(source, psycopg.Connection):
        yield source
    else:
        with psycopg.Connection.connect(
            _conninfo_of(source), autocommit=True, connect_timeout=10
        ) as conn:
            yield conn


@asynccontextmanager
async def _aconnect(source: ASource) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    if isinstance(source, AsyncConnectionPool):
        async with source.connection() as conn:
            yield conn
    elif isinstance(source, psycopg.AsyncConnection):
        yield source
    else:
        conn = await psycopg.AsyncConnection.connect(
            _conninfo_of(source), autocommit=True, connect_timeout=10
        )
        async with conn:
            yield conn


def _rollback_quietly(conn: psycopg.Connection[Any]) -> None:
    """End a failed append's transaction, so the pool gets a clean connection (or a dead one)."""
    if not conn.closed:
        with suppress(psycopg.Error):
            conn.rollback()


async def _arollback_quietly(conn: psycopg.AsyncConnection[Any]) -> None:
    if not conn.closed:
        with suppress(psycopg.Error):
            await conn.rollback()


def _explained(pool: ConnectionPool[Any], error: PoolTimeout) -> PoolTimeout:
    """The pool's timeout, with why: the server's own refusal, or every connection in use.

    The pool logs its failed connection attempts but its timeout does not say
    them, so one direct attempt (an error path only) finds the reason.
    """
    if not isinstance(pool.conninfo, str):
        return error  # a conninfo function: nothing to probe with
    try:
        with psycopg.Connection.connect(pool.conninfo, **_probe_kwargs(pool)):
            reason = f"the server answers; all {pool.max_size} connections of the pool are in use"
    except psycopg.Error as probe:
        reason = _reason(probe)
    return PoolTimeout(f"{_reason(error)}: {reason}")


async def _aexplained(pool: AsyncConnectionPool[Any], error: PoolTimeout) -> PoolTimeout:
    if not isinstance(pool.conninfo, str):
        return error
    try:
        probe_conn = await psycopg.AsyncConnection.connect(pool.conninfo, **_probe_kwargs(pool))
        await probe_conn.close()
        reason = f"the server answers; all {pool.max_size} connections of the pool are in use"
    except psycopg.Error as probe:
        reason = _reason(probe)
    return PoolTimeout(f"{_reason(error)}: {reason}")


def _probe_kwargs(pool: ConnectionPool[Any] | AsyncConnectionPool[Any]) -> dict[str, Any]:
    kwargs = dict(pool.kwargs) if isinstance(pool.kwargs, dict) else {}
    kwargs["connect_timeout"] = 3
    return kwargs


def _finish(conn: psycopg.Connection[Any]) -> None:
    if not conn.autocommit:
        conn.commit()


async def _afinish(conn: psycopg.AsyncConnection[Any]) -> None:
    if not conn.autocommit:
        await conn.commit()


# --- setup ----------------------------------------------------------------------------


def setup(conninfo_or_pool: Source) -> int:
    """Create or upgrade the table and its indexes; safe to run again, and concurrently.

    Works on an autocommit connection, a pooled one and a conninfo string: it
    runs in one transaction of its own and never uses ``CREATE INDEX
    CONCURRENTLY``. Returns the schema version now recorded.
    """
    where = server_name(_conninfo_of(conninfo_or_pool))
    try:
        with _connect(conninfo_or_pool) as conn, conn.transaction():
            conn.execute(_SETUP_LOCK)
            conn.execute(_VERSION_DDL)
            row = conn.execute(f"SELECT max(version) FROM {VERSION_TABLE}").fetchone()
            current = (row[0] if row else None) or 0
            if current > SCHEMA_VERSION:
                _check_version(where, current)
            for version, ddl in enumerate(MIGRATIONS[current:], current + 1):
                for statement in ddl.split(";"):
                    if statement.strip():
                        conn.execute(statement.encode())
                conn.execute(f"INSERT INTO {VERSION_TABLE} (version) VALUES (%s)", (version,))
    except PoolTimeout as error:
        raise _unavailable(where, error) from None
    except psycopg.Error as error:
        raise _store_error(where, error) from None
    return SCHEMA_VERSION


# --- module-level readers -------------------------------------------------------------


def list_sessions(conninfo_or_pool: Source) -> list[SessionInfo]:
    """Every session with rows, most recently active first (scans the table: an operator's view)."""
    where = server_name(_conninfo_of(conninfo_or_pool))
    try:
        with _connect(conninfo_or_pool) as conn:
            rows = conn.execute(_LIST).fetchall()
            _finish(conn)
    except (psycopg.Error, PoolTimeout) as error:
        raise _wrap(where, error) from None
    return [SessionInfo(str(r[0]), int(r[1]), r[2]) for r in rows]


def read_tail(
    conninfo_or_pool: Source,
    session_id: str,
    *,
    before_seq: int | None = None,
    limit: int = 100,
) -> list[Event]:
    """The newest ``limit`` events before ``before_seq`` (default: the end), in log order."""
    check_session_id(session_id)
    before, limit = _tail_bounds(before_seq, limit)
    where = server_name(_conninfo_of(conninfo_or_pool))
    try:
        with _connect(conninfo_or_pool) as conn:
            rows = conn.execute(_READ_BEFORE, (session_id, before, limit)).fetchall()
            _finish(conn)
    except (psycopg.Error, PoolTimeout) as error:
        raise _wrap(where, error) from None
    return [decode_row(session_id, *row) for row in reversed(rows)]


def latest_event(conninfo_or_pool: Source, session_id: str, types: Collection[str]) -> Event | None:
    """The newest event of ``session_id`` whose type is in ``types``, or ``None``."""
    check_session_id(session_id)
    if not _check_types(types):
        return None
    where = server_name(_conninfo_of(conninfo_or_pool))
    try:
        with _connect(conninfo_or_pool) as conn:
            row = conn.execute(_latest_query(types), (session_id,)).fetchone()
            _finish(conn)
    except (psycopg.Error, PoolTimeout) as error:
        raise _wrap(where, error) from None
    return None if row is None else decode_row(session_id, *row)


def current_plan(conninfo_or_pool: Source, session_id: str) -> list[TodoItem] | None:
    """The plan replaying the session would give, from one index probe (``None``: no plan)."""
    return plan_of(latest_event(conninfo_or_pool, session_id, RESUME_TYPES))


def delete_session(conninfo_or_pool: Source, session_id: str) -> int:
    """Delete every row of a session (retention is the operator's choice); the rows deleted.

    A writer still open on the session is stale afterwards: its next append
    takes a seq nobody holds, so it would restart a log with a gap — close
    writers first.
    """
    check_session_id(session_id)
    where = server_name(_conninfo_of(conninfo_or_pool))
    try:
        with _connect(conninfo_or_pool) as conn:
            count = conn.execute(_DELETE, (session_id,)).rowcount
            _finish(conn)
    except (psycopg.Error, PoolTimeout) as error:
        raise _wrap(where, error) from None
    return count


async def alist_sessions(conninfo_or_pool: ASource) -> list[SessionInfo]:
    """:func:`list_sessions` for asyncio."""
    where = server_name(_conninfo_of(conninfo_or_pool))
    try:
        async with _aconnect(conninfo_or_pool) as conn:
            rows = await (await conn.execute(_LIST)).fetchall()
            await _afinish(conn)
    except (psycopg.Error, PoolTimeout) as error:
        raise _wrap(where, error) from None
    return [SessionInfo(str(r[0]), int(r[1]), r[2]) for r in rows]


async def aread_tail(
    conninfo_or_pool: ASource,
    session_id: str,
    *,
    before_seq: int | None = None,
    limit: int = 100,
) -> list[Event]:
    """:func:`read_tail` for asyncio."""
    check_session_id(session_id)
    before, limit = _tail_bounds(before_seq, limit)
    where = server_name(_conninfo_of(conninfo_or_pool))
    try:
        async with _aconnect(conninfo_or_pool) as conn:
            cursor = await conn.execute(_READ_BEFORE, (session_id, before, limit))
            rows = await cursor.fetchall()
            await _afinish(conn)
    except (psycopg.Error, PoolTimeout) as error:
        raise _wrap(where, error) from None
    return [decode_row(session_id, *row) for row in reversed(rows)]


async def alatest_event(
    conninfo_or_pool: ASource, session_id: str, types: Collection[str]
) -> Event | None:
    """:func:`latest_event` for asyncio."""
    check_session_id(session_id)
    if not _check_types(types):
        return None
    where = server_name(_conninfo_of(conninfo_or_pool))
    try:
        async with _aconnect(conninfo_or_pool) as conn:
            row = await (await conn.execute(_latest_query(types), (session_id,))).fetchone()
            await _afinish(conn)
    except (psycopg.Error, PoolTimeout) as error:
        raise _wrap(where, error) from None
    return None if row is None else decode_row(session_id, *row)


async def acurrent_plan(conninfo_or_pool: ASource, session_id: str) -> list[TodoItem] | None:
    """:func:`current_plan` for asyncio."""
    return plan_of(await alatest_event(conninfo_or_pool, session_id, RESUME_TYPES))


def _tail_bounds(before_seq: int | None, limit: int) -> tuple[int, int]:
    if before_seq is not None and (type(before_seq) is not int or before_seq < 0):
        raise UsageError(f"before_seq must be an int >= 0 or None, not {before_seq!r}")
    if type(limit) is not int or limit < 1:
        raise UsageError(f"limit must be an int >= 1, not {limit!r}")
    return (2**63 - 1 if before_seq is None else before_seq), limit


def _wrap(where: str, error: BaseException) -> PostgresStoreError:
    if isinstance(error, psycopg.Error):
        return _store_error(where, error)
    return _unavailable(where, error)


# --- the sessions ---------------------------------------------------------------------


class _Pending(NamedTuple):
    """An append whose commit outcome is unknown: checked before the next one."""

    event: Event
    text: str


class _SessionCore:
    """What the sync and async sessions share: identity, bookkeeping and the decisions."""

    def __init__(self, where: str, session_id: str) -> None:
        self.session_id = check_session_id(session_id)
        self.where = where
        self._listeners = Listeners()
        self._seq = 0
        self._closed = False
        self._stale: int | None = None  # the seq another writer took
        self._pending: _Pending | None = None

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def next_seq(self) -> int:
        """The seq the next append will take."""
        return self._seq

    def subscribe(self, listener: Listener, /) -> Callable[[], None]:
        return self._listeners.add(listener)

    def _opened(self, version: object, last_seq: object) -> None:
        _check_version(self.where, version)
        self._seq = 0 if last_seq is None else int(last_seq) + 1  # type: ignore[call-overload]

    def _check_writable(self) -> None:
        if self._closed:
            raise UsageError(f"session {self.session_id!r}: the session log is closed")
        if self._stale is not None:
            raise _conflict(self.session_id, self._stale)

    def _params(self, event: Event, text: str) -> dict[str, Any]:
        seq: int = event["seq"]
        return {
            "sid": self.session_id,
            "seq": seq,
            "type": event["type"],
            "data": text,
            "payload": _payload(self.session_id, seq),
        }

    def _judge(self, pending: _Pending, row: tuple[Any, ...] | None) -> bool:
        """Whether the row read back is the pending event (``False``: nothing recorded)."""
        if row is None:
            return False
        if tuple(row) == (pending.event["type"], pending.text):
            return True
        self._stale = pending.event["seq"]
        raise _conflict(self.session_id, pending.event["seq"])

    def _recorded(self, event: Event) -> Event:
        self._pending = None
        self._seq = event["seq"] + 1
        self._listeners.notify(event)
        return event

    def _unknown(self, pending: _Pending, error: BaseException) -> CommitUnknown:
        self._pending = pending
        return CommitUnknown(
            f"session {self.session_id!r}, seq {pending.event['seq']}: the connection broke "
            f"while the event was being committed and {self.where} could not be asked whether "
            f"it was recorded ({_reason(error)}); the next append checks first"
        )

    def _failed(self, error: BaseException) -> PostgresStoreError:
        if isinstance(error, psycopg.errors.UniqueViolation):
            self._stale = self._seq
            return _conflict(self.session_id, self._seq)
        if isinstance(error, PoolTimeout):
            return StoreUnavailable(
                f"session {self.session_id!r}: no connection to {self.where} "
                f"({_reason(error)}): not recorded"
            )
        assert isinstance(error, psycopg.Error)
        return _store_error(f"session {self.session_id!r} on {self.where}", error)


class PostgresSession(_SessionCore, ClosedOnExit):
    """A session log in PostgreSQL speaking the store protocol, for threaded hosts.

    ``conninfo_or_pool`` is a conninfo string (sessions of one process given
    the same string share one pool of :data:`DEFAULT_POOL_SIZE` connections)
    or a ``psycopg_pool.ConnectionPool`` the host owns. Opening reads the next
    seq; :meth:`append` holds a connection for one statement only. Safe to
    append from several threads.
    """

    def __init__(self, conninfo_or_pool: str | ConnectionPool[Any], session_id: str) -> None:
        if isinstance(conninfo_or_pool, str):
            self._pool: Pool = _SHARED.get(conninfo_or_pool)
        elif isinstance(conninfo_or_pool, ConnectionPool):
            self._pool = conninfo_or_pool
        else:
            raise UsageError(
                "PostgresSession takes a conninfo string or a psycopg_pool.ConnectionPool, "
                f"not {type(conninfo_or_pool).__name__}"
            )
        super().__init__(server_name(_conninfo_of(conninfo_or_pool)), session_id)
        self._lock = threading.Lock()
        try:
            with self._pool.connection() as conn:
                row = conn.execute(_OPEN, (self.session_id,)).fetchone()
                _finish(conn)
        except PoolTimeout as error:
            where = f"session {self.session_id!r} on {self.where}"
            raise _wrap(where, _explained(self._pool, error)) from None
        except psycopg.Error as error:
            raise _wrap(f"session {self.session_id!r} on {self.where}", error) from None
        assert row is not None
        self._opened(*row)

    def append(self, type: str, data: Mapping[str, Any], /) -> Event:
        """Record one event and return it with its seq; listeners run before this returns."""
        text = encode_data(data)
        with self._lock:
            self._check_writable()
            if self._pending is not None:
                self._settle_pending()
            pending = _Pending({"seq": self._seq, "type": type, "data": data}, text)
            self._write(pending)
            return self._recorded(pending.event)

    def latest(self, types: Collection[str], /) -> Event | None:
        """The newest recorded event whose type is in ``types``: one index probe."""
        return latest_event(self._pool, self.session_id, types)

    def close(self) -> None:
        """Refuse further appends (the pool is shared, so nothing else to release)."""
        self._closed = True

    def _write(self, pending: _Pending, *, retry: bool = True) -> None:
        committing = False
        try:
            with self._pool.connection() as conn:
                try:
                    if conn.autocommit:
                        conn.execute(_BEGIN)
                    conn.execute(_INSERT, self._params(pending.event, pending.text))
                except BaseException:
                    _rollback_quietly(conn)
                    raise
                committing = True
                conn.commit()
            return
        except PoolTimeout as error:  # (an OperationalError) no connection: nothing was sent
            raise self._failed(_explained(self._pool, error)) from None
        except psycopg.OperationalError as error:
            if isinstance(error, psycopg.errors.QueryCanceled):
                raise self._failed(error) from None  # the statement's transaction rolled back
            if not committing:  # no COMMIT was sent, so nothing was recorded
                if not retry:
                    raise self._failed(error) from None
                self._pool.check()  # after a restart, the idle connections are dead too
                self._write(pending, retry=False)
                return
            broken: BaseException = error
        except psycopg.Error as error:
            raise self._failed(error) from None
        # COMMIT was sent and its answer lost: ask on a fresh connection before answering.
        self._pool.check()
        if self._read_back(pending, broken):
            return
        if not retry:
            raise StoreUnavailable(
                f"session {self.session_id!r} on {self.where}: {_reason(broken)}: not recorded"
            ) from None
        self._write(pending, retry=False)  # absent: the same event, at the same seq

    def _read_back(self, pending: _Pending, broken: BaseException) -> bool:
        for attempt in (1, 2):  # an idle pooled connection may be as dead as the first one
            try:
                with self._pool.connection() as conn:
                    row = conn.execute(
                        _READ_ONE, (self.session_id, pending.event["seq"])
                    ).fetchone()
                    _finish(conn)
                return self._judge(pending, row)
            except PoolTimeout as error:
                raise self._unknown(pending, error) from broken
            except psycopg.Error as error:
                if attempt == 2 or not isinstance(error, psycopg.OperationalError):
                    raise self._unknown(pending, error) from broken
                self._pool.check()
        raise AssertionError("unreachable")  # pragma: no cover

    def _settle_pending(self) -> None:
        pending = self._pending
        assert pending is not None
        if self._read_back(pending, CommitUnknown("still unknown")):
            self._recorded(pending.event)
        else:
            self._pending = None


class AsyncPostgresSession(_SessionCore, ClosedOnExit):
    """:class:`PostgresSession` for asyncio hosts: ``append`` is a coroutine.

    Open it with ``async with`` (or ``await session.open()``): opening reads
    the next seq and the newest ``todo/write`` and ``turn/start``, so that the
    synchronous :meth:`latest` a host calls to resume answers without I/O.
    ``alatest`` asks the database for any types. ``conninfo_or_pool`` is a
    conninfo string (sessions on one event loop share a pool) or an opened
    ``psycopg_pool.AsyncConnectionPool``.
    """

    def __init__(self, conninfo_or_pool: str | AsyncConnectionPool[Any], session_id: str) -> None:
        if not isinstance(conninfo_or_pool, str | AsyncConnectionPool):
            raise UsageError(
                "AsyncPostgresSession takes a conninfo string or a "
                f"psycopg_pool.AsyncConnectionPool, not {type(conninfo_or_pool).__name__}"
            )
        super().__init__(server_name(_conninfo_of(conninfo_or_pool)), session_id)
        self._source = conninfo_or_pool
        self._apool: APool | None = None
        self._alock: asyncio.Lock | None = None
        self._resume: dict[str, Event] = {}  # the newest event of each resume type
        self._resume_rows: dict[str, tuple[Any, ...]] = {}  # the same, as read at open
        self._opened_once = False

    async def open(self) -> AsyncPostgresSession:
        """Read the next seq and the resume events; returns the session."""
        if self._opened_once:
            return self
        pool = await self._pool()
        try:
            async with pool.connection() as conn:
                row = await (await conn.execute(_OPEN, (self.session_id,))).fetchone()
                for kind in RESUME_TYPES:  # one index probe each; decoded when asked for
                    cursor = await conn.execute(_latest_query([kind]), (self.session_id,))
                    found = await cursor.fetchone()
                    if found is not None:
                        self._resume_rows[kind] = tuple(found)
                await _afinish(conn)
        except PoolTimeout as error:
            where = f"session {self.session_id!r} on {self.where}"
            raise _wrap(where, await _aexplained(pool, error)) from None
        except psycopg.Error as error:
            raise _wrap(f"session {self.session_id!r} on {self.where}", error) from None
        assert row is not None
        self._opened(*row)
        self._alock = asyncio.Lock()
        self._opened_once = True
        return self

    async def append(self, type: str, data: Mapping[str, Any], /) -> Event:
        """Record one event and return it with its seq; listeners run before this returns."""
        text = encode_data(data)
        await self.open()
        assert self._alock is not None
        async with self._alock:
            self._check_writable()
            if self._pending is not None:
                await self._settle_pending()
            pending = _Pending({"seq": self._seq, "type": type, "data": data}, text)
            await self._write(pending)
            return self._recorded(pending.event)

    def latest(self, types: Collection[str], /) -> Event | None:
        """The newest ``todo/write`` / ``turn/start`` in ``types``, known since :meth:`open`."""
        _check_types(types)
        if not self._opened_once:
            raise UsageError(
                f"session {self.session_id!r}: open it first (`async with` or `await open()`)"
            )
        if not set(types) <= set(RESUME_TYPES):
            raise UsageError(
                f"latest() answers for {', '.join(RESUME_TYPES)} only: "
                "use `await session.alatest(types)`"
            )
        newest: tuple[int, str] | None = None
        for kind in types:
            if kind in self._resume:
                seq = int(self._resume[kind]["seq"])
            elif kind in self._resume_rows:
                seq = int(self._resume_rows[kind][0])
            else:
                continue
            if newest is None or seq > newest[0]:
                newest = (seq, kind)
        if newest is None:
            return None
        kind = newest[1]
        if kind not in self._resume:  # a row read at open, checked only when it matters
            self._resume[kind] = decode_row(self.session_id, *self._resume_rows.pop(kind))
        return self._resume[kind]

    def _recorded(self, event: Event) -> Event:
        if event["type"] in RESUME_TYPES:
            self._resume[event["type"]] = event
            self._resume_rows.pop(event["type"], None)
        return super()._recorded(event)

    async def alatest(self, types: Collection[str], /) -> Event | None:
        """The newest recorded event whose type is in ``types``: one index probe."""
        return await alatest_event(await self._pool(), self.session_id, types)

    def close(self) -> None:
        """Refuse further appends."""
        self._closed = True

    async def __aenter__(self) -> AsyncPostgresSession:
        return await self.open()

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    async def _pool(self) -> APool:
        if self._apool is None:
            if isinstance(self._source, AsyncConnectionPool):
                self._apool = self._source
            else:
                self._apool = await _async_shared_pool(self._source)
        return self._apool

    async def _write(self, pending: _Pending, *, retry: bool = True) -> None:
        pool = await self._pool()
        committing = False
        try:
            async with pool.connection() as conn:
                try:
                    if conn.autocommit:
                        await conn.execute(_BEGIN)
                    await conn.execute(_INSERT, self._params(pending.event, pending.text))
                except BaseException:
                    await _arollback_quietly(conn)
                    raise
                committing = True
                await conn.commit()
            return
        except PoolTimeout as error:  # (an OperationalError) no connection: nothing was sent
            raise self._failed(await _aexplained(pool, error)) from None
        except psycopg.OperationalError as error:
            if isinstance(error, psycopg.errors.QueryCanceled):
                raise self._failed(error) from None
            if not committing:
                if not retry:
                    raise self._failed(error) from None
                await pool.check()
                await self._write(pending, retry=False)
                return
            broken: BaseException = error
        except psycopg.Error as error:
            raise self._failed(error) from None
        await pool.check()
        if await self._read_back(pending, broken):
            return
        if not retry:
            raise StoreUnavailable(
                f"session {self.session_id!r} on {self.where}: {_reason(broken)}: not recorded"
            ) from None
        await self._write(pending, retry=False)

    async def _read_back(self, pending: _Pending, broken: BaseException) -> bool:
        pool = await self._pool()
        for attempt in (1, 2):
            try:
                async with pool.connection() as conn:
                    cursor = await conn.execute(_READ_ONE, (self.session_id, pending.event["seq"]))
                    row = await cursor.fetchone()
                    await _afinish(conn)
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


_ASYNC_POOLS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, APool]] = (
    weakref.WeakKeyDictionary()
)


async def _async_shared_pool(conninfo: str) -> APool:
    pools = _ASYNC_POOLS.setdefault(asyncio.get_running_loop(), {})
    pool = pools.get(conninfo)
    if pool is None:
        pool = AsyncConnectionPool(
            conninfo,
            min_size=1,
            max_size=DEFAULT_POOL_SIZE,
            kwargs={"autocommit": True},
            timeout=DEFAULT_TIMEOUT,
            name="dsh-todo-async",
            open=False,
        )
        pools[conninfo] = pool
        await pool.open()
    return pool


async def close_async_shared_pools() -> None:
    """Close the pools async sessions opened for conninfo strings on this event loop."""
    pools = _ASYNC_POOLS.pop(asyncio.get_running_loop(), {})
    for pool in pools.values():
        await pool.close()


# --- the follower ---------------------------------------------------------------------


class _Hub:
    """One ``LISTEN`` connection per process and event loop, shared by every follower.

    Notifications wake the followers of their session; after the connection
    is lost and made again, every follower is woken to catch up from its last
    seq (a notification sent while nobody listened is never delivered).
    Reads go through one more connection of the hub's own, so followers never
    hold a writer's pooled connection.
    """

    def __init__(self, conninfo: str, kwargs: Mapping[str, Any], delay: float) -> None:
        self.conninfo = conninfo
        self.kwargs = {**kwargs, "autocommit": True}
        self.where = server_name(conninfo)
        self.delay = delay
        self.wakers: dict[str, set[asyncio.Event]] = {}
        self.users = 0
        self._read: psycopg.AsyncConnection[Any] | None = None
        self._read_lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self._listening = asyncio.Event()
        self._first_error: BaseException | None = None

    async def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._listen())
        await self._listening.wait()
        if self._first_error is not None:
            error, self._first_error = self._first_error, None
            self._task = None
            self._listening.clear()
            raise _unavailable(self.where, error)

    def register(self, session_id: str, waker: asyncio.Event) -> None:
        self.wakers.setdefault(session_id, set()).add(waker)

    def unregister(self, session_id: str, waker: asyncio.Event) -> None:
        wakers = self.wakers.get(session_id)
        if wakers is not None:
            wakers.discard(waker)
            if not wakers:
                del self.wakers[session_id]

    async def read_after(self, session_id: str, after: int, limit: int) -> list[Any]:
        async with self._read_lock:
            try:
                if self._read is None or self._read.closed:
                    self._read = await psycopg.AsyncConnection.connect(self.conninfo, **self.kwargs)
                cursor = await self._read.execute(_READ_AFTER, (session_id, after, limit))
                return await cursor.fetchall()
            except psycopg.Error:
                if self._read is not None:
                    await self._read.close()
                    self._read = None
                raise

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with suppress(asyncio.CancelledError):
                await task
        if self._read is not None:
            await self._read.close()
            self._read = None

    async def _listen(self) -> None:
        first = True
        while True:
            conn: psycopg.AsyncConnection[Any] | None = None
            try:
                conn = await psycopg.AsyncConnection.connect(self.conninfo, **self.kwargs)
                await conn.execute(f"LISTEN {CHANNEL}")
                first = False
                self._listening.set()
                self._wake_all()  # catch up on whatever was sent while nobody listened
                async for notify in conn.notifies():
                    parsed = _parse_payload(notify.payload)
                    if parsed is not None:
                        for waker in self.wakers.get(parsed[0], ()):
                            waker.set()
            except psycopg.Error as error:
                if first:
                    self._first_error = error
                    self._listening.set()
                    return
            finally:
                if conn is not None:
                    await conn.close()
            await asyncio.sleep(self.delay)

    def _wake_all(self) -> None:
        for wakers in self.wakers.values():
            for waker in wakers:
                waker.set()


_HUBS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, _Hub]] = (
    weakref.WeakKeyDictionary()
)


class PostgresFollower:
    """The events of one session as they are recorded, for viewers in other processes.

    An async iterator: ``async for event in PostgresFollower(dsn, "agent-7")``
    yields every event with ``seq > after_seq`` in log order, then waits for
    new ones (woken by ``NOTIFY``; all followers of a process and event loop
    share one ``LISTEN`` connection). When the server goes away it keeps
    trying, and catches up from the last seq it yielded, so nothing is
    skipped or repeated. It only reads: it never takes the writer's role.
    Rows that are not valid events raise :class:`InvalidLog` naming session
    and seq. Close it with ``aclose()`` or ``async with``.
    """

    def __init__(
        self,
        conninfo_or_pool: str | ConnectionPool[Any] | AsyncConnectionPool[Any],
        session_id: str,
        *,
        after_seq: int = -1,
        reconnect_delay: float = 0.5,
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
        self._conninfo = _conninfo_of(conninfo_or_pool)
        self.last_seq = after_seq
        self._delay = reconnect_delay
        self._buffer: deque[Event] = deque()
        self._waker = asyncio.Event()
        self._hub: _Hub | None = None
        self._error: InvalidLog | None = None
        self._closed = False

    def __aiter__(self) -> PostgresFollower:
        return self

    async def __anext__(self) -> Event:
        if self._closed:
            raise StopAsyncIteration
        while not self._buffer:
            if self._error is not None:
                raise self._error  # a bad row stops the follower where it is, every time
            hub = await self._join()
            self._waker.clear()  # before reading: a notification during the read is kept
            try:
                rows = await hub.read_after(self.session_id, self.last_seq, _MAX_BATCH)
            except psycopg.OperationalError:
                await asyncio.sleep(self._delay)  # the hub's LISTEN reconnects meanwhile
                continue
            except psycopg.Error as error:
                raise _store_error(f"session {self.session_id!r} on {hub.where}", error) from None
            if rows:
                self._take(rows)
            else:
                await self._waker.wait()
        return self._buffer.popleft()

    async def aclose(self) -> None:
        """Stop following; the shared connection closes with its last follower."""
        self._closed = True
        hub, self._hub = self._hub, None
        if hub is None:
            return
        hub.unregister(self.session_id, self._waker)
        hub.users -= 1
        if hub.users == 0:
            hubs = _HUBS.get(asyncio.get_running_loop(), {})
            if hubs.get(self._conninfo) is hub:
                del hubs[self._conninfo]
            await hub.close()

    async def __aenter__(self) -> PostgresFollower:
        await self._join()
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def _join(self) -> _Hub:
        if self._hub is not None:
            return self._hub
        hubs = _HUBS.setdefault(asyncio.get_running_loop(), {})
        hub = hubs.get(self._conninfo)
        if hub is None:
            hub = hubs[self._conninfo] = _Hub(self._conninfo, self._kwargs, self._delay)
        hub.users += 1
        hub.register(self.session_id, self._waker)
        try:
            await hub.start()  # listening before the backlog is read
        except BaseException:
            hub.unregister(self.session_id, self._waker)
            hub.users -= 1
            if hub.users == 0 and hubs.get(self._conninfo) is hub:
                del hubs[self._conninfo]
            raise
        self._hub = hub
        return hub

    def _take(self, rows: list[Any]) -> None:
        """Buffer the rows' events; the events before a bad row are yielded before its error."""
        try:
            for row in rows:
                event = decode_row(self.session_id, *row)
                if event["seq"] != self.last_seq + 1 and self.last_seq >= 0:
                    raise InvalidLog(
                        f"session {self.session_id!r}, seq {event['seq']}: follows seq "
                        f"{self.last_seq} (events are missing)"
                    )
                self.last_seq = event["seq"]
                self._buffer.append(event)
        except InvalidLog as error:
            self._error = error
