"""The sans-I/O core: encoding and decoding rows, id checks, error mapping, the session's decisions.

The async session (``aio.py``) and its generated sync twin (``session.py``)
do the I/O; everything they decide without I/O is here, written once.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple

import psycopg
from psycopg_pool import AsyncConnectionPool, ConnectionPool, PoolTimeout
from pydantic_core import PydanticSerializationError, to_json

from ...core.contract import EVENT_TYPE, TURN_START
from ...core.listeners import Event, Listener, Listeners
from ...core.projection import check_logged_write
from ...errors import InvalidLog, UsageError
from .._calls import call_id_of, call_key
from ._sql import RESUME_TYPES, SCHEMA_VERSION, TABLE
from .errors import (
    CommitUnknown,
    PostgresStoreError,
    PostgresUnavailable,
    SchemaNotReady,
    WriterConflict,
)

if TYPE_CHECKING:
    from ...core.model import TodoItem
    from ._notify import Notifier

MAX_SESSION_ID = 200
"""Characters; keeps a notification's payload far below PostgreSQL's 8,000 bytes."""


class SessionInfo(NamedTuple):
    """One session of a database, as ``dsh-todo sessions`` lists it."""

    session_id: str
    events: int
    last_activity: datetime


_ESCAPING_ENCODER = json.JSONEncoder(ensure_ascii=True, separators=(",", ":"))


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


def check_types(types: Collection[str]) -> Collection[str]:
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


def notice(session_id: str, seq: int) -> str:
    """The NOTIFY payload of an append."""
    return f"{seq}:{session_id}"


def parse_notice(payload: object) -> tuple[str, int] | None:
    """The session and seq a NOTIFY payload names; ``None`` for anything else.

    Any role may NOTIFY on the channel, so nothing about the payload is trusted.
    """
    if not isinstance(payload, str):
        return None
    seq, colon, session_id = payload.partition(":")
    if not colon or not seq or len(seq) > 19 or not (seq.isascii() and seq.isdigit()):
        return None
    return session_id, int(seq)


def server_name(conninfo: str) -> str:
    """Where a conninfo points, without its password: for messages."""
    try:
        params = psycopg.conninfo.conninfo_to_dict(conninfo)
    except psycopg.Error:
        return "PostgreSQL (unparsable conninfo)"
    host = params.get("host") or params.get("hostaddr") or "localhost"
    port = params.get("port") or "5432"
    return f"PostgreSQL at {host}:{port}/{params.get('dbname') or params.get('user') or ''}"


def reason(error: BaseException) -> str:
    if _unparsable(error) and not str(error).startswith("invalid connection option"):
        # libpq quotes the URL, or the part it stopped at, which may hold the password
        return "the URL or conninfo does not parse (libpq's words are left out: they quote it)"
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__


def _unparsable(error: BaseException) -> bool:
    """A conninfo libpq could not read: refused before any server answered (no SQLSTATE)."""
    return type(error) is psycopg.ProgrammingError and error.sqlstate is None


def unavailable(where: str, error: BaseException) -> PostgresUnavailable:
    return PostgresUnavailable(f"{where}: {reason(error)}")


def store_error(where: str, error: psycopg.Error) -> PostgresStoreError:
    if isinstance(error, psycopg.errors.UndefinedTable):
        return SchemaNotReady(
            f"{where}: no {TABLE} table: run `dsh-todo db init DSN` or setup() first"
        )
    if isinstance(error, psycopg.errors.QueryCanceled):
        return PostgresStoreError(f"{where}: statement cancelled ({reason(error)}): not recorded")
    if isinstance(error, psycopg.OperationalError):
        return unavailable(where, error)
    return PostgresStoreError(f"{where}: {reason(error)}")


def wrap(where: str, error: BaseException) -> PostgresStoreError:
    if isinstance(error, psycopg.Error):
        return store_error(where, error)
    return unavailable(where, error)


OLDEST_WORKING_VERSION = 3
"""The oldest schema sessions and readers work on: version 4 adds only the requests table
(``_inbox.py``), which a session does without until ``db init`` adds it (its inbox is empty)."""


def check_version(where: str, version: object) -> None:
    if version is None:
        raise SchemaNotReady(
            f"{where}: the {TABLE} schema is not set up: run `dsh-todo db init DSN` or setup()"
        )
    if not isinstance(version, int) or version < OLDEST_WORKING_VERSION:
        raise SchemaNotReady(
            f"{where}: schema version {version} is older than {OLDEST_WORKING_VERSION}: "
            "run `dsh-todo db init DSN` or setup() to upgrade"
        )
    if version > SCHEMA_VERSION:
        raise SchemaNotReady(
            f"{where}: schema version {version} was written by a newer dsh-tool-todo "
            f"(this one knows {SCHEMA_VERSION}): upgrade the library"
        )


def conflict(session_id: str, seq: int) -> WriterConflict:
    return WriterConflict(
        f"session {session_id!r}: seq {seq} was recorded by another writer; this session "
        "is stale and refuses to append (one writer per session: open a new one to continue)"
    )


def conninfo_of(source: object) -> str:
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


def tail_bounds(before_seq: int | None, limit: int) -> tuple[int, int]:
    if before_seq is not None and (type(before_seq) is not int or before_seq < 0):
        raise UsageError(f"before_seq must be an int >= 0 or None, not {before_seq!r}")
    if type(limit) is not int or limit < 1:
        raise UsageError(f"limit must be an int >= 1, not {limit!r}")
    return through_seq(before_seq), limit


MAX_SEQ = 2**63 - 1  # the largest bigint: a row a foreign writer put there is still read


def through_seq(before: int | None) -> int:
    """The last seq a read "before ``before``" includes (``None``: the end), as a bigint.

    Reads take ``seq <= through_seq(before)``, not ``seq < before``: with no
    ``before`` a row at the largest bigint is included, and any int is in range.
    """
    if before is None:
        return MAX_SEQ
    return min(max(before, 0), MAX_SEQ) - 1


def probe_kwargs(pool: ConnectionPool[Any] | AsyncConnectionPool[Any]) -> dict[str, Any]:
    kwargs = dict(pool.kwargs) if isinstance(pool.kwargs, dict) else {}
    kwargs["connect_timeout"] = 3
    return kwargs


# --- the session's decisions ---------------------------------------------------------


class Pending(NamedTuple):
    """An append on its way: its event and data text (and, with a call id, its keys)."""

    event: Event
    text: str
    key: bytes | None = None  # digest of the call id and list (call_key), for a keyed todo/write
    turn: int = -1  # the seq of the turn/start the call belongs to (turn_seq)


class SessionCore:
    """What the sync and async sessions share: identity, bookkeeping and the decisions."""

    resume_kinds: tuple[str, ...] = ()  # the deciding events read at open (async: for latest())

    def __init__(self, where: str, session_id: str) -> None:
        self.session_id = check_session_id(session_id)
        self.where = where
        self._listeners = Listeners()
        self._seq = 0
        self._turn = -1  # the seq of the newest turn/start: what a call id is keyed by
        self._closed = False
        self._opened_once = False
        self._stale: int | None = None  # the seq another writer took
        self._pending: Pending | None = None
        self._notifier: Notifier | None = None  # set with the pool; announces each commit

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def next_seq(self) -> int:
        """The seq the next append will take."""
        return self._seq

    def subscribe(self, listener: Listener, /) -> Callable[[], None]:
        return self._listeners.add(listener)

    def close(self) -> None:
        """Refuse further appends (a pool the session was given stays open: it is the host's)."""
        self._closed = True

    def _opened(
        self, version: object, last_seq: object, turn: object, resume: Mapping[str, Any]
    ) -> None:
        check_version(self.where, version)
        self._seq = 0 if last_seq is None else int(last_seq) + 1  # type: ignore[call-overload]
        self._turn = -1 if turn is None else int(turn)  # type: ignore[call-overload]
        self._resume_read(resume)
        self._opened_once = True

    def _resume_read(self, rows: Mapping[str, Any]) -> None:
        """Rows of the deciding events read at open (none unless ``resume_kinds`` asks)."""

    def _check_writable(self) -> None:
        if self._closed:
            raise UsageError(f"session {self.session_id!r}: the session log is closed")
        if self._stale is not None:
            raise conflict(self.session_id, self._stale)

    def _params(self, event: Event, text: str) -> dict[str, Any]:
        seq: int = event["seq"]
        return {
            "sid": self.session_id,
            "seq": seq,
            "type": event["type"],
            "data": text,
        }

    def _prepare(self, kind: str, data: Mapping[str, Any], text: str) -> Pending:
        event: Event = {"seq": self._seq, "type": kind, "data": data}
        if call_id_of(kind, data) is None:
            return Pending(event, text)
        return Pending(event, text, call_key(data), self._turn)

    def _call_params(self, pending: Pending) -> dict[str, Any]:
        params = self._params(pending.event, pending.text)
        params["turn"] = pending.turn
        params["call"] = pending.key
        return params

    def _repeat(self, pending: Pending, row: tuple[Any, ...] | None, ours: bool) -> Event | None:
        """The answer to an append whose call id the turn holds: the row found for it.

        ``None`` when that row is this very append, recorded by a COMMIT whose
        answer was lost (``ours``: the append is being sent again); else the
        first append's event, and the next seq follows it.
        """
        if row is None:  # deleted between the insert that met it and this read
            raise PostgresStoreError(
                f"session {self.session_id!r}: this call id's first row in the turn was "
                "deleted before it could be read: not recorded"
            )
        first = decode_row(self.session_id, *row)  # same call_key: same id and list
        if ours and first["seq"] == pending.event["seq"]:
            return None
        if first["seq"] >= self._seq:  # another writer's row, racing this very call
            self._seq = first["seq"] + 1
            self._adopted(first)
        return first

    def _adopted(self, event: Event) -> None:
        """An event another writer recorded at this session's next seq, now known."""

    def _judge(self, pending: Pending, row: tuple[Any, ...] | None) -> bool:
        """Whether the row read back is the pending event (``False``: nothing recorded)."""
        if row is None:
            return False
        if tuple(row) == (pending.event["type"], pending.text):
            return True
        self._stale = pending.event["seq"]
        raise conflict(self.session_id, pending.event["seq"])

    def _recorded(self, event: Event) -> Event:
        self._pending = None
        self._seq = event["seq"] + 1
        if event["type"] == TURN_START:
            self._turn = event["seq"]
        if self._notifier is not None:  # first: followers elsewhere wait on it, listeners don't
            self._notifier.post(self.session_id, event["seq"])
        self._listeners.notify(event)
        return event

    def _unknown(self, pending: Pending, error: BaseException) -> CommitUnknown:
        self._pending = pending
        return CommitUnknown(
            f"session {self.session_id!r}, seq {pending.event['seq']}: the connection broke "
            f"while the event was being committed and {self.where} could not be asked whether "
            f"it was recorded ({reason(error)}); the next append checks first"
        )

    def _failed(self, error: BaseException) -> PostgresStoreError:
        if isinstance(error, psycopg.errors.UniqueViolation):
            self._stale = self._seq
            return conflict(self.session_id, self._seq)
        if isinstance(error, PoolTimeout):
            return PostgresUnavailable(
                f"session {self.session_id!r}: no connection to {self.where} "
                f"({reason(error)}): not recorded"
            )
        assert isinstance(error, psycopg.Error)
        return store_error(f"session {self.session_id!r} on {self.where}", error)


class ResumeCache(SessionCore):
    """The newest ``todo/write`` and ``turn/start``, kept since open: ``latest()`` without I/O.

    The async session's ``latest`` is called synchronously by a host resuming
    a projection, so it cannot ask the database; it answers from the rows read
    at open and the events recorded since. (The sync session asks the index.)
    """

    resume_kinds = RESUME_TYPES

    def __init__(self, where: str, session_id: str) -> None:
        super().__init__(where, session_id)
        self._resume: dict[str, Event] = {}  # the newest event of each resume type
        self._resume_rows: dict[str, tuple[Any, ...]] = {}  # the same, as read at open

    def _resume_read(self, rows: Mapping[str, Any]) -> None:
        self._resume_rows = {kind: tuple(row) for kind, row in rows.items()}

    def latest(self, types: Collection[str], /) -> Event | None:
        """The newest ``todo/write`` / ``turn/start`` in ``types``, known since ``open()``."""
        check_types(types)
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

    def _adopted(self, event: Event) -> None:
        self._resume[event["type"]] = event
        self._resume_rows.pop(event["type"], None)

    def _recorded(self, event: Event) -> Event:
        if event["type"] in RESUME_TYPES:
            self._resume[event["type"]] = event
            self._resume_rows.pop(event["type"], None)
        return super()._recorded(event)
