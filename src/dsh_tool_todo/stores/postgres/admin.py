"""Setting up a database, deleting or pruning sessions, and what the ``dsh-todo`` commands read.

The picker (``stores/__init__.py``) imports this module only when it is given a database
URL, so the ``dsh-todo`` command imports psycopg only then. Everything here returns data;
the CLI prints it. Errors are :class:`~dsh_tool_todo.errors.TodoError` subclasses, which the
CLI prints as one line and exit 2.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from functools import partial
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg_pool import PoolTimeout

from ...core.contract import EVENT_TYPE, TURN_START
from ...core.requests import SETTLING_TYPES
from ...errors import LogReplaced, UsageError
from . import _sql
from ._core import (
    MAX_SESSION_ID,
    check_session_id,
    check_version,
    conninfo_of,
    notice,
    server_name,
    store_error,
    unavailable,
    wrap,
)
from ._pools import Source
from .follow import PostgresFollower
from .reader import PostgresReader
from .session import PostgresSession, connect, current_plan, list_sessions, read_tail

if TYPE_CHECKING:
    from ...core.model import TodoItem
    from ..owners import OwnerRegistry
    from ._inbox import PostgresInbox

__all__ = ["delete_session", "setup"]


def setup(conninfo_or_pool: Source) -> int:
    """Create or upgrade the table and its indexes; safe to run again, and concurrently.

    Works on an autocommit connection, a pooled one and a conninfo string: it
    runs in one transaction of its own and never uses ``CREATE INDEX
    CONCURRENTLY``. Returns the schema version now recorded.
    """
    where = server_name(conninfo_of(conninfo_or_pool))
    try:
        with connect(conninfo_or_pool) as conn, conn.transaction():
            conn.execute(_sql.SETUP_LOCK)
            conn.execute(_sql.VERSION_DDL)
            row = conn.execute(_sql.READ_VERSION).fetchone()
            current = (row[0] if row else None) or 0
            if current > _sql.SCHEMA_VERSION:
                check_version(where, current)
            for version, statements in enumerate(
                _sql.MIGRATIONS_BY_STATEMENT[current:], current + 1
            ):
                for statement in statements:
                    conn.execute(statement.encode())
                conn.execute(_sql.RECORD_VERSION, (version,))
    except PoolTimeout as error:
        raise unavailable(where, error) from None
    except psycopg.Error as error:
        raise store_error(where, error) from None
    return _sql.SCHEMA_VERSION


def delete_session(conninfo_or_pool: Source, session_id: str) -> int:
    """Delete every row of a session (retention is the operator's choice); the rows deleted.

    Any id a row holds can be deleted, printable or not (a foreign writer's,
    say). Followers of the session are woken, read that their last event is
    gone, and start over from a snapshot. A writer still open on the session
    is stale afterwards: its next append takes a seq nobody holds, so it would
    restart a log with a gap — close writers first.
    """
    if not isinstance(session_id, str) or not session_id or len(session_id) > MAX_SESSION_ID:
        check_session_id(session_id)  # the reason, as for any other session id
    where = server_name(conninfo_of(conninfo_or_pool))
    try:
        with connect(conninfo_or_pool) as conn, conn.transaction():
            count = conn.execute(_sql.DELETE, (session_id,)).rowcount
            _delete_requests(conn, [session_id])
            conn.execute("SELECT pg_notify(%s, %s)", (_sql.CHANNEL, notice(session_id, 0)))
    except (psycopg.Error, PoolTimeout) as error:
        raise wrap(where, error) from None
    return count


def _delete_requests(conn: psycopg.Connection[Any], session_ids: list[str]) -> None:
    """A deleted session's requests go with it (a database at version 3 has none)."""
    row = conn.execute(_sql.HAS_REQUESTS).fetchone()
    if session_ids and row is not None and row[0]:
        conn.execute(_sql.DELETE_REQUESTS, (session_ids,))


# --- what the CLI's commands read, with plain arguments ---------------------------------


def _session(session_id: str | None) -> str:
    if session_id is None:
        raise UsageError("a database URL needs --session ID (list them: dsh-todo sessions URL)")
    return check_session_id(session_id)


def _last_seq(url: str, session_id: str) -> int:
    """The last seq of an existing session; a missing session is an error, as a missing file is."""
    tail = read_tail(url, session_id, limit=1)
    if not tail:
        raise UsageError(f"{server_name(url)}: no session {session_id!r}")
    last: int = tail[-1]["seq"]
    return last


def show_plan(url: str, session_id: str | None) -> list[TodoItem] | None:
    """``show``: the plan of ``session_id`` in the database ``url`` names."""
    name = _session(session_id)
    _last_seq(url, name)
    return current_plan(url, name)


def follow_plans(
    url: str,
    session_id: str | None,
    wait: Callable[[str], None] | None = None,
    interval: float = 0.2,
) -> tuple[str, Iterator[list[TodoItem] | None]]:
    """``watch``: a title, and the session's plan now and after each change, pushed by NOTIFY
    (``interval`` is how often a file is looked at: a database needs none), and the same
    plan again after each event that settles a request (``watch`` draws how they stand).

    The session is checked before this returns, so a bad URL or session fails
    before anything is drawn; the follower reconnects by itself afterwards.
    With ``wait``, a session with no rows yet is no error: ``wait`` is told
    what is awaited, and the plans start with its first row.
    """
    name = _session(session_id)
    title = f"{name} ({server_name(url)})"
    if wait is not None and not read_tail(url, name, limit=1):
        wait(f"session {name!r} in {server_name(url)}")
        return title, _plans(url, name, absent=True)
    _last_seq(url, name)
    return title, _plans(url, name)


def _plans(url: str, session_id: str, *, absent: bool = False) -> Iterator[list[TodoItem] | None]:
    loop = asyncio.new_event_loop()
    loop.set_exception_handler(_quiet_about_a_ctrl_c)
    try:
        while True:  # once, and again each time the session is deleted and written anew
            plan = None
            if absent:  # awaited: nothing to draw before its first row
                last, absent = -1, False
            else:
                last = _last_seq(url, session_id)
                yield (plan := current_plan(url, session_id))
            follower = PostgresFollower(url, session_id, after_seq=last)
            try:
                while True:
                    event = loop.run_until_complete(follower.__anext__())
                    if event["type"] == EVENT_TYPE:
                        yield (plan := event["data"]["todos"])
                    elif event["type"] == TURN_START:
                        yield (plan := None)
                    elif event["type"] in SETTLING_TYPES:
                        yield plan
            except LogReplaced:
                continue
            finally:
                loop.run_until_complete(follower.aclose())
    finally:
        loop.close()


def _quiet_about_a_ctrl_c(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """A Ctrl-C ends ``watch`` wherever it lands: the tasks it cut short (the read the
    follower waited on, the hub's) are not reported at exit as exceptions never retrieved."""
    if not isinstance(context.get("exception"), KeyboardInterrupt | StopAsyncIteration):
        loop.default_exception_handler(context)


def session_ids(url: str) -> list[str]:
    """Every session id with rows, most recently active first (what ``sessions`` lists)."""
    return [info.session_id for info in list_sessions(url)]


def check_store(url: str) -> None:
    """Fail at once, in one line, when ``url`` cannot be read (before a reader's pool, which
    would retry for its whole timeout): unreachable, refused, or not set up."""
    where = server_name(conninfo_of(url))
    try:
        with connect(url) as conn:
            conn.execute(_sql.LAST_SEQ, ("",))
    except (psycopg.Error, PoolTimeout) as error:
        raise wrap(where, error) from None


def open_reader(url: str) -> PostgresReader:
    """The :class:`~dsh_tool_todo.protocols.LogReader` of the database (nothing connects yet)."""
    return PostgresReader(url)


def open_fleet(url: str) -> tuple[PostgresReader, list[str], Database]:
    """``sessions``: the reader, every session id (the reader leaves out an id no URL can
    carry), and the database; a database that cannot be read fails here, in one line, before a
    reader's pool would retry for its whole timeout."""
    database = Database(url)
    database.check()
    return database.reader(), database.session_ids(), database


def open_database(url: str) -> Database:
    """``sessions --delete`` and ``db init``: the database the URL or conninfo names; an empty
    one is refused (libpq would read it as its default database, whichever that is)."""
    if not url.strip():
        raise UsageError(
            "the database is empty: give a postgresql:// URL or a libpq conninfo "
            "(`postgresql://` alone names libpq's default database)"
        )
    return Database(url)


def open_session(url: str, session_id: str | None) -> PostgresSession:
    """The writer of ``session_id`` in the database."""
    return PostgresSession(url, _session(session_id))


def open_owners(url: str, /, **options: Any) -> OwnerRegistry:
    """The owners of the database: an owner's key is its session id."""
    from ..owners import OwnerRegistry

    return OwnerRegistry(open_session=partial(PostgresSession, url), **options)


def open_log(url: str, session_id: str | None) -> tuple[PostgresReader, str]:
    """``show``/``watch``'s plan-health lines: a reader of the database, and the session."""
    return PostgresReader(url), _session(session_id)


def pick_log(url: str, session_id: str | None) -> tuple[str, str]:
    """``show``/``watch``: the database and ``session_id``, or with none the session written
    last (one step down the summary's index); a database with no session is refused."""
    if session_id is not None:
        return url, check_session_id(session_id)
    where = server_name(conninfo_of(url))
    try:
        with connect(url) as conn:
            row = conn.execute(_sql.LATEST).fetchone()
    except (psycopg.Error, PoolTimeout) as error:
        raise wrap(where, error) from None
    if row is None:
        raise UsageError(
            f"{where}: no session in it yet (`dsh-todo watch` waits for one: --wait --session ID)"
        )
    return url, str(row[0])


def open_inbox(url: str, session_id: str | None) -> PostgresInbox:
    """The inbox of ``session_id`` in the database: its rows of ``dsh_todo_requests``."""
    from ._inbox import PostgresInbox

    name = _session(session_id)
    _last_seq(url, name)  # a session with no rows, or a database not there, refused at once
    return PostgresInbox(url, name)


MAX_DAYS = 1e6
"""Older than this many days is as old as anything gets (some 2,700 years): a larger ``days``
is taken as this, so the cutoff stays a time the server can count."""


KEPT = "written while the prune ran"
"""Why a session seen old was not pruned: an append was under way, or had just committed."""


def prune_logs(
    url: str, days: float, dry_run: bool
) -> tuple[str, list[tuple[str, datetime]], list[tuple[str, datetime, str]]]:
    """``sessions --prune``: delete every session whose newest event is older than ``days``
    days, in one statement (``dry_run``: only name them); the database's name, each session's
    id and last write, by id, and each session seen old but kept because an append was under
    way or committed meanwhile (:data:`KEPT`). Followers of a pruned session are woken, as by
    :func:`delete_session`."""
    where = server_name(conninfo_of(url))
    days = min(float(days), MAX_DAYS)
    try:
        with connect(url) as conn, conn.transaction():
            if dry_run:
                rows = [(*row, True) for row in conn.execute(_sql.STALE, {"days": days})]
            else:
                rows = conn.execute(_sql.PRUNE, {"days": days}).fetchall()
                _delete_requests(conn, [str(row[0]) for row in rows if row[2]])
                notices = [notice(str(row[0]), 0) for row in rows if row[2]]
                conn.execute(
                    "SELECT pg_notify(%s, x) FROM unnest(%s::text[]) AS x", (_sql.CHANNEL, notices)
                )
    except (psycopg.Error, PoolTimeout) as error:
        raise wrap(where, error) from None
    pruned = [(str(row[0]), row[1].astimezone(timezone.utc)) for row in rows if row[2]]
    kept = [(str(row[0]), row[1].astimezone(timezone.utc), KEPT) for row in rows if not row[2]]
    return where, pruned, kept


class Database:
    """A database a URL or libpq conninfo names, as ``dsh-todo sessions`` and ``db init``
    administer it."""

    def __init__(self, conninfo: str) -> None:
        self.conninfo = conninfo

    @property
    def name(self) -> str:
        """Where it is, without its password: for messages."""
        return server_name(self.conninfo)

    def setup(self) -> int:
        """``db init``: create or upgrade the schema; the version now recorded."""
        return setup(self.conninfo)

    def delete_session(self, session_id: str) -> int:
        """``sessions --delete``: the rows deleted (see :func:`delete_session`)."""
        return delete_session(self.conninfo, session_id)

    def check(self) -> None:
        """Fail at once when it cannot be read (see :func:`check_store`)."""
        check_store(self.conninfo)

    def session_ids(self) -> list[str]:
        """Every session id with rows, most recently active first."""
        return session_ids(self.conninfo)

    def reader(self) -> PostgresReader:
        """Its :class:`~dsh_tool_todo.protocols.LogReader`."""
        return PostgresReader(self.conninfo)
