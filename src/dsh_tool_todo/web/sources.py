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

import asyncio
import os
import threading
from collections.abc import AsyncIterator, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Protocol

from ..contract import EVENT_TYPE, TURN_START
from ..errors import InvalidLog, UsageError
from ..logread import open_log, parse_event, whole_end, whole_lines_backwards
from ..projection import check_logged_write

Event = dict[str, Any]
PLAN_EVENTS = (EVENT_TYPE, TURN_START)
SUFFIX = ".jsonl"
POLL_INTERVAL = 0.025  # seconds between looks at a followed log (one stat call each)
READ_CHUNK = 1 << 20  # bytes a follower reads at once
IN_LOOP_READ = 64 << 10  # new bytes read on the event loop; more are read in a worker thread
MAX_REPLAY = 10_000  # events a resume may replay; a client further behind gets a snapshot


class SessionNotFound(LookupError):
    """No session of that name is served (also: a name that leads outside the directory)."""


class LogReplaced(Exception):
    """The log a follower reads was replaced or cut short: start over from a snapshot."""


@dataclass(frozen=True)
class Progress:
    """The current plan in figures: what the session list shows per session."""

    completed: int
    total: int
    in_progress: int
    cleared: bool  # the latest deciding event was a turn/start (or nothing was ever written)


@dataclass(frozen=True)
class SessionInfo:
    """One row of the session list."""

    name: str
    last_activity: float  # seconds since the epoch
    progress: Progress | None  # None when the log could not be read


@dataclass(frozen=True)
class Snapshot:
    """What a stream starts from: the newest seq and the event that fixes the plan."""

    last_seq: int  # -1 for an empty log
    deciding: Event | None  # the latest todo/write or turn/start, None if neither
    # Where the read ended, for a source whose log can change under it: (inode, offset of
    # the end of its whole lines) for a JSONL file; None where there is no such place.
    position: tuple[int, int] | None = None


@dataclass(frozen=True)
class TailPage:
    """Events before a seq, oldest first, and whether older ones exist."""

    events: list[Event]
    more: bool


class PlanSource(Protocol):
    """The read-only seam between the web app and a store of session logs."""

    async def sessions(self, query: str, limit: int) -> tuple[list[SessionInfo], int]:
        """Sessions whose name contains ``query``, newest activity first, at most ``limit``;
        and how many matched in all."""
        ...

    async def tail(
        self,
        name: str,
        *,
        before: int | None,
        limit: int,
        types: Collection[str] | None = None,
    ) -> TailPage: ...

    async def snapshot(self, name: str) -> Snapshot: ...

    def follow(
        self, name: str, *, after: int, since: Snapshot | None = None
    ) -> AsyncIterator[Event]:
        """Every event with a seq above ``after``, in order, then each new one, forever.

        ``since`` is the snapshot the stream just sent, when ``after`` is its seq: a
        source whose log can be rewritten under it goes on from exactly where that
        snapshot was read. Raises :class:`LogReplaced` when the log no longer continues
        the one read so far.
        """
        ...

    async def aclose(self) -> None: ...


def progress_of(deciding: Event | None) -> Progress:
    """The figures of the plan a deciding event leaves (``None``: a cleared or empty plan)."""
    if deciding is None or deciding["type"] != EVENT_TYPE:
        return Progress(0, 0, 0, cleared=True)
    todos: Sequence[Mapping[str, Any]] = deciding["data"]["todos"]
    completed = sum(1 for todo in todos if todo["status"] == "completed")
    active = sum(1 for todo in todos if todo["status"] == "in_progress")
    return Progress(completed, len(todos), active, cleared=False)


def checked_deciding(event: Event, where: str) -> Event:
    """``event`` if it is a ``todo/write`` the tool could have written (or a turn/start)."""
    if event["type"] == EVENT_TYPE:
        try:
            check_logged_write(event, event["seq"])
        except InvalidLog as error:
            raise InvalidLog(f"{where}: {error}") from None
    return event


# --- JSONL directory -------------------------------------------------------------


@dataclass
class _Cached:
    key: tuple[int, int, int]  # inode, size, mtime_ns
    progress: Progress | None


@dataclass
class JsonlDirectorySource:
    """The ``*.jsonl`` files directly in ``directory``; each session named by its file's stem.

    This is the layout :class:`~dsh_tool_todo.stores.owners.OwnerRegistry`
    writes. Names that are not a plain file name, and files (or symlinks) that
    lead outside the directory or are not regular files, are refused as
    unknown sessions. New lines are noticed by polling every ``poll_interval``
    seconds (a stat call per followed log).
    """

    directory: Path
    poll_interval: float = POLL_INTERVAL
    _root: Path = field(init=False)
    _progress: dict[str, _Cached] = field(init=False, default_factory=dict)
    _progress_lock: threading.Lock = field(init=False, default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.directory = Path(self.directory)
        if not self.directory.is_dir():
            raise UsageError(f"{self.directory}: not a directory of session logs")
        self._root = self.directory.resolve(strict=True)

    def path_of(self, name: str) -> Path:
        """The log of session ``name``; :class:`SessionNotFound` if none, or it leads outside."""
        if (
            not name
            or name.startswith(".")
            or any(char in name for char in "/\\\0")
            or len(name.encode("utf-8", "surrogatepass")) > 250
        ):
            raise SessionNotFound(name)
        try:
            real = (self._root / (name + SUFFIX)).resolve(strict=True)
        except (OSError, RuntimeError):
            raise SessionNotFound(name) from None
        if real.parent != self._root or not real.is_file():
            raise SessionNotFound(name)
        return real

    async def sessions(self, query: str, limit: int) -> tuple[list[SessionInfo], int]:
        return await asyncio.to_thread(self._locked_sessions, query, limit)

    def _locked_sessions(self, query: str, limit: int) -> tuple[list[SessionInfo], int]:
        with self._progress_lock:  # list requests run in worker threads, maybe several at once
            return self._sessions(query, limit)

    def _sessions(self, query: str, limit: int) -> tuple[list[SessionInfo], int]:
        found: list[tuple[float, str, Path, os.stat_result]] = []
        needle = query.casefold()
        with os.scandir(self._root) as entries:
            for entry in entries:
                if not entry.name.endswith(SUFFIX) or entry.name.startswith("."):
                    continue
                name = entry.name[: -len(SUFFIX)]
                if _undecodable(name):
                    continue  # no URL can name it: a page could not address it
                if needle and needle not in name.casefold():
                    continue
                try:
                    path = self.path_of(name)
                    info = path.stat()
                except (SessionNotFound, OSError):
                    continue
                found.append((info.st_mtime, name, path, info))
        found.sort(key=lambda row: (-row[0], row[1]))
        rows = [
            SessionInfo(name, mtime, self._cached_progress(name, path, info))
            for mtime, name, path, info in found[:limit]
        ]
        live = {row.name for row in rows}
        for stale in [name for name in self._progress if name not in live]:
            del self._progress[stale]
        return rows, len(found)

    def _cached_progress(self, name: str, path: Path, info: os.stat_result) -> Progress | None:
        key = (info.st_ino, info.st_size, info.st_mtime_ns)
        cached = self._progress.get(name)
        if cached is None or cached.key != key:
            try:
                progress: Progress | None = progress_of(_snapshot(path).deciding)
            except (OSError, InvalidLog):
                progress = None
            cached = self._progress[name] = _Cached(key, progress)
        return cached.progress

    async def tail(
        self,
        name: str,
        *,
        before: int | None,
        limit: int,
        types: Collection[str] | None = None,
    ) -> TailPage:
        path = self.path_of(name)
        return await asyncio.to_thread(_tail, path, before, limit, types)

    async def snapshot(self, name: str) -> Snapshot:
        path = self.path_of(name)
        return await asyncio.to_thread(_snapshot, path)

    async def follow(
        self, name: str, *, after: int, since: Snapshot | None = None
    ) -> AsyncIterator[Event]:
        path = self.path_of(name)
        missed: list[Event] = []
        if since is not None and since.position is not None and since.last_seq == after:
            identity, offset = since.position  # on from where the snapshot was read
        else:
            identity, offset, missed = await asyncio.to_thread(_events_after, path, after)
        last = after
        for event in missed:
            last = event["seq"]
            yield event
        while True:
            await asyncio.sleep(self.poll_interval)
            try:
                info = os.stat(path)
            except FileNotFoundError:
                continue  # being replaced: the next look decides
            if info.st_ino != identity or info.st_size < offset:
                raise LogReplaced(name)
            if info.st_size == offset:
                continue
            if info.st_size - offset <= IN_LOOP_READ:  # a few appends: cheaper than a thread hop
                events, offset = _read_whole_lines(path, identity, offset, info.st_size)
            else:
                read = await asyncio.to_thread(
                    _read_whole_lines, path, identity, offset, info.st_size
                )
                events, offset = read
            for event in events:
                if event["seq"] <= last:
                    raise LogReplaced(name)
                last = event["seq"]
                yield event

    async def aclose(self) -> None:
        self._progress.clear()


def _undecodable(name: str) -> bool:
    """Whether a file name held bytes that are not UTF-8 (read back as lone surrogates)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _open_regular(path: Path) -> BinaryIO:
    return open_log(str(path))  # refuses FIFOs, devices and directories on the descriptor


def _whole_lines_backwards(file: BinaryIO, path: Path) -> tuple[int, Iterator[tuple[int, bytes]]]:
    """The end of the last whole line, and the whole lines from there back to the start.

    A torn tail (an append cut short) is skipped, in bounded memory whatever its length.
    """
    end, _ = whole_end(file, str(path), file.seek(0, os.SEEK_END))
    return end, whole_lines_backwards(file, end)


def _event_at(path: Path, offset: int, line: bytes) -> Event:
    event = parse_event(line)
    if event is None:
        raise InvalidLog(f"{path}, byte {offset}: not a session event {{seq, type, data}}")
    return event


def _snapshot(path: Path) -> Snapshot:
    with _open_regular(path) as file:
        end, lines = _whole_lines_backwards(file, path)
        position = (os.fstat(file.fileno()).st_ino, end)
        last_seq = -1
        for offset, line in lines:
            event = _event_at(path, offset, line)
            if last_seq < 0:
                last_seq = event["seq"]
            if event["type"] in PLAN_EVENTS:
                deciding = checked_deciding(event, f"{path}, byte {offset}")
                return Snapshot(last_seq, deciding, position)
        return Snapshot(last_seq, None, position)


def _tail(path: Path, before: int | None, limit: int, types: Collection[str] | None) -> TailPage:
    """The last ``limit`` events (of ``types``) with a seq below ``before``, read backwards."""
    picked: list[Event] = []
    with _open_regular(path) as file:
        _, lines = _whole_lines_backwards(file, path)
        for offset, line in lines:
            event = _event_at(path, offset, line)
            if before is not None and event["seq"] >= before:
                continue
            if types is not None and event["type"] not in types:
                continue
            if len(picked) == limit:
                return TailPage(picked[::-1], more=True)
            picked.append(event)
    return TailPage(picked[::-1], more=False)


def _events_after(path: Path, after: int) -> tuple[int, int, list[Event]]:
    """The log's inode, the end of its whole lines, and its events with a seq above ``after``.

    Raises :class:`LogReplaced` (start from a snapshot) rather than hold more
    than :data:`MAX_REPLAY` events: a client that far behind is better served
    by the current plan than by every step it missed.
    """
    with _open_regular(path) as file:
        identity = os.fstat(file.fileno()).st_ino
        end, lines = _whole_lines_backwards(file, path)
        missed: list[Event] = []
        for offset, line in lines:
            event = _event_at(path, offset, line)
            if event["seq"] <= after:
                break
            if len(missed) == MAX_REPLAY:
                raise LogReplaced(f"{path}: more than {MAX_REPLAY} events after seq {after}")
            missed.append(event)
    missed.reverse()
    return identity, end, missed


def _read_whole_lines(path: Path, identity: int, offset: int, size: int) -> tuple[list[Event], int]:
    """The whole lines between ``offset`` and ``size`` (a torn last line waits for its newline).

    Nothing is remembered between calls but the offset of the last whole line,
    so a torn append cut off and rewritten by a new writer is read afresh.
    """
    events: list[Event] = []
    with _open_regular(path) as file:
        if os.fstat(file.fileno()).st_ino != identity:
            raise LogReplaced(str(path))
        if offset > 0:  # the bytes consumed must still end a line, or the file was rewritten
            file.seek(offset - 1)
            if file.read(1) != b"\n":
                raise LogReplaced(str(path))
        while offset < size:
            file.seek(offset)
            chunk = file.read(min(READ_CHUNK, size - offset))
            if not chunk:
                break
            cut = chunk.rfind(b"\n")
            if cut < 0:
                if len(chunk) == READ_CHUNK:  # one line longer than a chunk
                    chunk = _read_line(file, offset)
                    cut = len(chunk) - 1 if chunk.endswith(b"\n") else -1
                if cut < 0:
                    break
            for line in chunk[:cut].split(b"\n"):
                events.append(_event_at(path, offset, line))
                offset += len(line) + 1
    return events, offset


def _read_line(file: BinaryIO, offset: int) -> bytes:
    file.seek(offset)
    return file.readline()


# --- PostgreSQL ------------------------------------------------------------------


class SourceUnavailable(ConnectionError):
    """The store cannot be reached now (the PostgreSQL server is down, say)."""


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


def open_source(spec: str | os.PathLike[str]) -> PlanSource:
    """The source ``spec`` names: a ``postgresql://`` (or ``postgres://``) URL, or a directory."""
    text = os.fspath(spec)
    if text.startswith(("postgresql://", "postgres://")):
        return PostgresSource(text)
    return JsonlDirectorySource(Path(text))
