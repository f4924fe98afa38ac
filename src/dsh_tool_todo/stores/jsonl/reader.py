"""The reader of a directory of JSONL logs: what a viewer (``dsh-todo serve DIR``) reads through.

:class:`JsonlReader` is the :class:`~dsh_tool_todo.protocols.LogReader` of a
directory of logs, built on the reads and the follower of :mod:`._tail`. Every
read goes from the end of a log (a page before a seq finds that seq by
bisecting the file), so its cost depends on how far back it reaches, never on
the log's length.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import AsyncIterator, Collection
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import InvalidLog, LogReplaced, SessionNotFound, UsageError
from ...links import link_of
from ...projection import progress_of
from ...protocols import Progress, SessionSummary, Snapshot, TailPage
from ._lines import Event
from ._tail import _Tail, read_head, read_snapshot, read_tail

__all__ = ["JsonlReader"]

SUFFIX = ".jsonl"
POLL_INTERVAL = 0.025  # seconds between looks at a followed log (one stat call each)
IN_LOOP_READ = 64 << 10  # new bytes read on the event loop; more are read in a worker thread


def _addressable(name: str) -> bool:
    """Whether a page can name the session: UTF-8 (a file name that is not decodes to lone
    surrogates, which no URL can carry) and at most 250 bytes."""
    try:
        return len(name.encode("utf-8")) <= 250
    except UnicodeEncodeError:
        return False


def _replaced(path: str) -> LogReplaced:
    return LogReplaced(f"{path}: no longer the log read so far (replaced, cut short or deleted)")


@dataclass
class _Cached:
    key: tuple[int, int, int]  # inode, size, mtime_ns
    progress: Progress | None
    parent: str | None = None


@dataclass
class JsonlReader:
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
            or not _addressable(name)
        ):
            raise SessionNotFound(name)
        try:
            real = (self._root / (name + SUFFIX)).resolve(strict=True)
        except (OSError, RuntimeError):
            raise SessionNotFound(name) from None
        if real.parent != self._root or not real.is_file():
            raise SessionNotFound(name)
        return real

    async def sessions(self, query: str, limit: int) -> tuple[list[SessionSummary], int]:
        return await asyncio.to_thread(self._locked_sessions, query, limit)

    def _locked_sessions(self, query: str, limit: int) -> tuple[list[SessionSummary], int]:
        with self._progress_lock:  # list requests run in worker threads, maybe several at once
            return self._sessions(query, limit)

    def _sessions(self, query: str, limit: int) -> tuple[list[SessionSummary], int]:
        found: list[tuple[float, str, Path, os.stat_result]] = []
        needle = query.casefold()
        with os.scandir(self._root) as entries:
            for entry in entries:
                if not entry.name.endswith(SUFFIX) or entry.name.startswith("."):
                    continue
                name = entry.name[: -len(SUFFIX)]
                if needle and needle not in name.casefold():
                    continue
                try:
                    path = self.path_of(name)
                    info = path.stat()
                except (SessionNotFound, OSError):
                    continue
                found.append((info.st_mtime, name, path, info))
        found.sort(key=lambda row: (-row[0], row[1]))
        rows = []
        for mtime, name, path, info in found[:limit]:
            cached = self._cached(name, path, info)
            rows.append(SessionSummary(name, mtime, cached.progress, cached.parent))
        live = {row.name for row in rows}
        for stale in [name for name in self._progress if name not in live]:
            del self._progress[stale]
        return rows, len(found)

    def _cached(self, name: str, path: Path, info: os.stat_result) -> _Cached:
        key = (info.st_ino, info.st_size, info.st_mtime_ns)
        cached = self._progress.get(name)
        if cached is None or cached.key != key:
            try:
                progress: Progress | None = progress_of(read_snapshot(str(path)).deciding)
            except (OSError, InvalidLog):
                progress = None
            try:
                link = link_of(read_head(str(path)))
            except (OSError, InvalidLog):
                link = None
            parent = None if link is None else link.parent
            cached = self._progress[name] = _Cached(key, progress, parent)
        return cached

    async def tail(
        self,
        name: str,
        *,
        before: int | None,
        limit: int,
        types: Collection[str] | None = None,
    ) -> TailPage:
        path = str(self.path_of(name))
        return await asyncio.to_thread(read_tail, path, before, limit, types)

    async def snapshot(self, name: str) -> Snapshot:
        path = str(self.path_of(name))
        return await asyncio.to_thread(read_snapshot, path)

    async def follow(
        self, name: str, *, after: int, since: Snapshot | None = None
    ) -> AsyncIterator[Event]:
        path = str(self.path_of(name))
        tail: _Tail | None
        if since is not None and since.position is not None and since.last_seq == after:
            inode, end = since.position  # on from where the snapshot was read
            tail = await asyncio.to_thread(_Tail.at, path, inode, end, after)
        else:
            tail = await asyncio.to_thread(_Tail.after_seq, path, after)
        if tail is None:
            raise _replaced(path)
        while True:
            new = tail.look()
            if new is None:
                raise _replaced(path)
            if new == 0:
                await asyncio.sleep(self.poll_interval)
                continue
            # a few appends: cheaper than a thread hop
            events = tail.read() if new <= IN_LOOP_READ else await asyncio.to_thread(tail.read)
            if events is None:
                raise _replaced(path)
            for event in events:
                yield event

    async def aclose(self) -> None:
        self._progress.clear()
