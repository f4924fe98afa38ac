"""The reader of a directory of JSONL logs: what a viewer (``dsh-todo serve DIR``) reads through.

:class:`JsonlReader` is the :class:`~dsh_tool_todo.protocols.LogReader` of a
directory of logs, built on the reads and the follower of :mod:`._tail` and on
the list's view of the directory in :mod:`._index`. Every read goes from the
end of a log (a page before a seq finds that seq by bisecting the file), so its
cost depends on how far back it reaches, never on the log's length.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import (
    InvalidLog,
    LogReplaced,
    OwnerNameError,
    SessionNotFound,
    StoreUnavailable,
    UsageError,
)
from ...protocols import SessionSummary, Snapshot, TailPage
from .._log_file import CONNINFO_PAIR
from ..owners import owner_key
from . import _index, _paged
from ._index import SUFFIX as SUFFIX
from ._index import Entry, Kept, Rows
from ._lines import Event
from ._tail import _Tail, read_snapshot, read_tail
from ._watch import DirectoryWatch

__all__ = ["JsonlReader"]

POLL_INTERVAL = 0.025  # seconds between looks at a followed log (one stat call each)
IN_LOOP_READ = 64 << 10  # new bytes read on the event loop; more are read in a worker thread
WATCH_SAFETY = 5.0  # seconds a watched log waits, at most, before it is looked at anyway
LIST_RESYNC = 60.0  # seconds between whole reads of a watched directory while a list is open
LIST_INTERVAL = 0.5  # seconds between reads of an unwatchable directory while a list is open


def _replaced(path: str) -> LogReplaced:
    return LogReplaced(f"{path}: no longer the log read so far (replaced, cut short or deleted)")


DIRECTORY_BACK = 0.5
"""Seconds between looks for a served directory that is gone, to watch it again once back."""


async def _woken(
    watch: DirectoryWatch | None,
    wake: asyncio.Event,
    safety: float,
    unseen: Callable[[], object],
    interval: float,
) -> bool:
    """Wait for ``wake`` when ``watch`` is active, calling ``unseen()`` after ``safety``
    seconds in case a change went unseen; without a watch, sleep ``interval`` seconds.
    Whether it waited on the watch."""
    if watch is not None and watch.active:
        timer = asyncio.get_running_loop().call_later(safety, unseen)
        try:
            await wake.wait()
        finally:
            timer.cancel()
        return True
    await asyncio.sleep(interval)
    return False


@dataclass
class JsonlReader:
    """The ``*.jsonl`` files directly in ``directory``; each session named by its file's stem.

    This is the layout :class:`~dsh_tool_todo.stores.owners.OwnerRegistry`
    writes. Names that are not a plain file name, and files (or symlinks) that
    lead outside the directory or are not regular files, are refused as
    unknown sessions.

    New lines are noticed through one watcher of the directory shared by every
    follower and list (inotify, on Linux): a followed log is looked at when it
    changes, and every ``watch_safety`` seconds in case a change went unseen (a
    watched list reads the whole directory every ``list_resync`` seconds).
    Where the directory cannot be watched (or ``watch`` is false), each
    followed log is polled every ``poll_interval`` seconds (a ``stat`` call)
    and a list every ``list_interval`` seconds (a ``stat`` per log).
    """

    directory: Path
    poll_interval: float = POLL_INTERVAL
    watch: bool = True
    watch_safety: float = WATCH_SAFETY
    list_interval: float = LIST_INTERVAL
    list_resync: float = LIST_RESYNC
    _root: Path = field(init=False)
    _rows: Rows = field(init=False, default_factory=Rows)
    _watcher: DirectoryWatch | None = field(init=False, default=None)
    _streams: int = field(init=False, default=0)  # changes() iterators running
    _held: bool = field(init=False, default=False)
    _kept: Kept | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.directory = Path(self.directory)
        if not self.directory.is_dir():
            if CONNINFO_PAIR.match(str(self.directory)):
                # Said without the text: a conninfo may hold a password.
                raise UsageError(
                    "SOURCE looks like a key=value conninfo, which serve does not take: "
                    "give it as a postgresql:// URL"
                )
            raise UsageError(f"{self.directory}: not a directory of session logs")
        self._root = self.directory.resolve(strict=True)

    @property
    def where(self) -> str:
        """The directory, as messages name it."""
        return str(self.directory)

    def owner_of(self, name: str) -> str | None:
        """The owner key ``name`` decodes to, when it is exactly an owner's file name
        (:func:`~dsh_tool_todo.stores.owners.owner_key`)."""
        try:
            return owner_key(name)
        except OwnerNameError:
            return None

    def path_of(self, name: str) -> Path:
        """The log of session ``name``; :class:`SessionNotFound` if none, or it leads outside."""
        return Path(self._located(name)[0])

    def _located(self, name: str) -> tuple[str, int]:
        """:meth:`path_of` as a string, and the log's size then (what a read can expect)."""
        return _index.locate(self._root, name)

    def _scan(self, links: set[str] | None = None) -> dict[str, Entry]:
        """The list's view of every log (:func:`._index.scan`); a directory deleted or
        replaced since is :class:`~dsh_tool_todo.errors.StoreUnavailable`, not a crash."""
        try:
            return _index.scan(self._root, links)
        except (FileNotFoundError, NotADirectoryError):
            raise self._gone() from None

    def _gone(self) -> StoreUnavailable:
        return StoreUnavailable(
            f"{self.directory}: the directory of session logs is gone (deleted, or replaced "
            "by a file); the list comes back once it is there again"
        )

    def hold_list(self) -> None:
        """Keep the list's index between lists (``dsh-todo serve`` holds it from its start).

        A held list reads the whole directory once, then, where the directory is watched,
        only the logs the watcher saw change since the last list (every change made before a
        list is asked for is counted: the watcher's queue is read first), and the whole
        directory again every ``list_resync`` seconds. The index is let go after
        ``list_resync`` seconds without a list, and by :meth:`aclose`.
        """
        self._held = True

    async def sessions(self, query: str, limit: int) -> tuple[list[SessionSummary], int]:
        # Not a stream's index: it may not have read yet what the watcher saw before this list.
        kept = self._keep() if self._held or self._streams else None
        return await asyncio.to_thread(self._locked_sessions, query, limit, kept)

    async def sessions_paged(
        self, query: str, limit: int, *, types: Collection[str], page: int
    ) -> AsyncIterator[tuple[SessionSummary, TailPage | InvalidLog | None]]:
        """The rows :meth:`sessions` gives, one at a time, each with the first page of its
        tail (``tail(name, before=None, limit=page, types=types)``) when the read of its row
        held it: a log shorter than 16 KiB is read once for both. That is the page, or the
        :class:`~dsh_tool_todo.errors.InvalidLog` its read raised; ``None`` for a longer log
        (or a row that could not be read): ask :meth:`tail` then.

        What ``dsh-todo sessions`` reads: the directory once, then each log in turn (a short
        one on the event loop, as :meth:`tail` reads it), each row handed on before the next
        log is read: nothing of a row is kept here, so what it read is let go at once (not
        piled up in batches, where the collector would walk it again and again).
        """
        # the list is emptied as its rows are read: what wakes this task with it keeps it
        top = await asyncio.to_thread(self._oldest_last, query, limit)
        root = str(self._root)
        while top:
            log = top.pop()
            if log[2] <= IN_LOOP_READ:  # its size: a short log, cheaper here than a thread hop
                yield _paged.paged(root, log, page, types)
            else:
                yield await asyncio.to_thread(_paged.paged, root, log, page, types)

    def _oldest_last(self, query: str, limit: int) -> list[_paged.Unread]:
        """:meth:`sessions`'s rows, unread, newest last (a row is taken with ``pop()``)."""
        try:
            top = _paged.newest_unread(self._root, query, limit)
        except (FileNotFoundError, NotADirectoryError):
            raise self._gone() from None
        top.reverse()
        return top

    def _keep(self) -> Kept | None:
        """The held list's index, the watcher's queue read into it; ``None`` when unwatched."""
        watch = self._watch()
        if watch is None:
            return None
        loop = asyncio.get_running_loop()
        kept = self._kept
        if kept is not None and (kept.loop is not loop or not watch.active):
            self._drop(kept)
            kept = None
        if kept is None:
            stop = watch.start()
            if stop is None:
                return None
            kept = self._kept = Kept(loop, stop)
            kept.forget = watch.listen(kept.told)
        else:
            watch.drain()  # what changed before this list and the loop has not read yet
        if kept.timer is not None:
            kept.timer.cancel()
        kept.timer = loop.call_later(self.list_resync, self._drop, kept)
        return kept

    def _drop(self, kept: Kept) -> None:
        if self._kept is kept:
            self._kept = None
        if kept.timer is not None:
            kept.timer.cancel()
        if kept.forget is not None:
            kept.forget()
        kept.stop()

    def _locked_sessions(
        self, query: str, limit: int, kept: Kept | None
    ) -> tuple[list[SessionSummary], int]:
        with self._rows.lock:  # list requests run in worker threads, maybe several at once
            # While a list is watched the index is kept current by the watcher: no directory read.
            index = self._scan() if kept is None else self._kept_entries(kept)
            return self._rows.top(query, limit, index)

    def _kept_entries(self, kept: Kept) -> dict[str, Entry]:
        names = kept.taken()
        now = time.monotonic()
        if names is None or kept.entries is None or now - kept.read_at > self.list_resync:
            kept.linked = set()
            kept.entries, kept.read_at = self._scan(kept.linked), now
        else:
            _index.update(self._root, kept.entries, kept.linked, names)
        return kept.entries

    def _watch(self) -> DirectoryWatch | None:
        if not self.watch:
            return None
        if self._watcher is None:
            self._watcher = DirectoryWatch(str(self._root))
        return self._watcher

    async def changes(self) -> AsyncIterator[frozenset[str]]:
        """The names of sessions whose list row may have changed (appended to, created,
        deleted, replaced), a set at a time, as they change; forever.

        While one runs, the list is held as by :meth:`hold_list`, so a list costs no
        directory read. Reads only what the shared watcher names; where there is
        none, reads the directory every ``list_interval`` seconds.
        """
        watch = self._watch()
        stop = None if watch is None else watch.start()
        pending: set[str] = set()
        everything = False
        wake = asyncio.Event()

        def told(names: frozenset[str] | None = None) -> None:  # None: every session
            nonlocal everything
            if names is None:
                everything = True
            else:
                pending.update(names)
            wake.set()

        forget = watch.listen(told) if watch is not None and stop is not None else None
        # this stream's own index: what it last told, so that it tells what changed since
        index: dict[str, Entry] = {}
        linked: set[str] = set()
        self._streams += 1
        try:
            await asyncio.to_thread(self._reindex, index, linked, None)
            while True:
                interval = self.list_interval
                if watch is not None and not watch.active:
                    # the directory went (its watch with it) and is polled: watch it again
                    # once it is back, so a log made in it is told at once
                    restarted = watch.start()
                    if restarted is not None:
                        stop = restarted
                        if forget is None:
                            forget = watch.listen(told)
                        told()  # what was made before the new watch: one full read
                    elif not os.path.isdir(self.directory):
                        # looked for again soon, not a whole interval on: a directory made
                        # again meanwhile would otherwise wait that long to be watched
                        interval = min(interval, DIRECTORY_BACK)
                if not await _woken(watch, wake, self.list_resync, told, interval):
                    everything = True  # polled: nothing names what changed
                wake.clear()
                names: set[str] | None = None if everything else pending.copy()
                pending.clear()
                everything = False
                changed = await asyncio.to_thread(self._reindex, index, linked, names)
                if changed:
                    yield frozenset(changed)
        finally:
            if forget is not None:
                forget()
            if stop is not None:
                stop()
            self._streams -= 1

    def _reindex(
        self, index: dict[str, Entry], linked: set[str], files: set[str] | None
    ) -> set[str]:
        """Bring a stream's ``index`` (and ``linked``, its symlinks) up to date for
        ``files`` (file names; ``None``: the whole directory) and say which sessions
        changed."""
        if files is not None:
            return _index.update(self._root, index, linked, files)
        links: set[str] = set()
        try:
            fresh = self._scan(links)
        except StoreUnavailable:  # the directory is gone: every session with it, for now
            fresh, links = {}, set()
        changed = {
            name for name in fresh.keys() | index.keys() if fresh.get(name) != index.get(name)
        }
        index.clear()
        index.update(fresh)
        linked.clear()
        linked.update(links)
        return changed

    async def tail(
        self, name: str, *, before: int | None, limit: int, types: Collection[str] | None = None
    ) -> TailPage:
        path, size = self._located(name)
        if size <= IN_LOOP_READ:  # a short log: cheaper read here than a thread hop
            return read_tail(path, before, limit, types)
        return await asyncio.to_thread(read_tail, path, before, limit, types)

    async def snapshot(self, name: str) -> Snapshot:
        path, size = self._located(name)
        try:
            if size <= IN_LOOP_READ:
                return read_snapshot(path)
            return await asyncio.to_thread(read_snapshot, path)
        except FileNotFoundError:  # deleted since it was located
            raise SessionNotFound(name) from None

    async def follow(
        self, name: str, *, after: int, since: Snapshot | None = None
    ) -> AsyncIterator[Event]:
        path = self._located(name)[0]
        tail: _Tail | None
        try:
            if since is not None and since.position is not None and since.last_seq == after:
                tail = await asyncio.to_thread(_Tail.at, path, since)  # on from where it was read
            else:
                tail = await asyncio.to_thread(_Tail.after_seq, path, after)
        except FileNotFoundError:  # deleted since it was located
            raise SessionNotFound(name) from None
        if tail is None:
            raise _replaced(path)
        stop = None
        forgets = []
        try:
            watch = self._watch()
            stop = None if watch is None else watch.start()
            changed = asyncio.Event()
            if watch is not None and stop is not None:
                # a symlinked log changes under its target's name
                for file in {name + SUFFIX, os.path.basename(path)}:
                    forgets.append(watch.wait_on(file, changed))
            async for event in self._follow(tail, path, watch, changed):
                yield event
        finally:
            tail.close()  # the log it held open
            for forget in forgets:
                forget()
            if stop is not None:
                stop()

    async def _follow(
        self, tail: _Tail, path: str, watch: DirectoryWatch | None, changed: asyncio.Event
    ) -> AsyncIterator[Event]:
        while True:
            changed.clear()  # before the look: a change after it sets the event again
            new = tail.look()
            if new is None:
                raise _replaced(path)
            if new == 0:
                await _woken(watch, changed, self.watch_safety, changed.set, self.poll_interval)
                continue
            # a few appends: cheaper than a thread hop
            events = tail.read() if new <= IN_LOOP_READ else await asyncio.to_thread(tail.read)
            if events is None:
                raise _replaced(path)
            for event in events:
                yield event

    async def aclose(self) -> None:
        if self._kept is not None:
            self._drop(self._kept)
        self._rows.clear()
