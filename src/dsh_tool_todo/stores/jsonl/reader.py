"""The reader of a directory of JSONL logs: what a viewer (``dsh-todo serve DIR``) reads through.

:class:`JsonlReader` is the :class:`~dsh_tool_todo.protocols.LogReader` of a
directory of logs, built on the reads and the follower of :mod:`._tail`. Every
read goes from the end of a log (a page before a seq finds that seq by
bisecting the file), so its cost depends on how far back it reaches, never on
the log's length.
"""

from __future__ import annotations

import asyncio
import heapq
import os
import stat
import threading
import time
from collections.abc import AsyncIterator, Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from ...core.links import link_of
from ...core.projection import progress_of
from ...errors import InvalidLog, LogReplaced, SessionNotFound, UsageError
from ...protocols import Progress, SessionSummary, Snapshot, TailPage
from .._summary import working_on
from ._lines import Event
from ._tail import _Tail, read_snapshot, read_summary, read_tail
from ._watch import DirectoryWatch

__all__ = ["JsonlReader"]

SUFFIX = ".jsonl"
POLL_INTERVAL = 0.025  # seconds between looks at a followed log (one stat call each)
IN_LOOP_READ = 64 << 10  # new bytes read on the event loop; more are read in a worker thread
WATCH_SAFETY = 5.0  # seconds a watched log waits, at most, before it is looked at anyway
LIST_RESYNC = 60.0  # seconds between whole reads of a watched directory while a list is open
LIST_INTERVAL = 0.5  # seconds between reads of an unwatchable directory while a list is open


def _plain_name(name: str) -> bool:
    if not name or name[0] == "." or "/" in name or "\\" in name or "\0" in name:
        return False
    # an ASCII name is addressable when short enough; others are encoded to tell
    return len(name) <= 250 if name.isascii() else _addressable(name)


def _parent(head: Event | None) -> str | None:
    """The ``parent`` a log's head event names (``links.link_of``), or ``None``.

    A link counts only as the log's first event (where every store records it), so
    one short read at the start of the file tells, whatever the log's length. A head
    that is not a whole event names no parent; the readers that show the log say
    what is wrong with it.
    """
    try:
        link = link_of(head)
    except InvalidLog:
        return None
    return None if link is None else link.parent


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
    key: tuple[int, int, int, int]  # inode, size, mtime_ns, ctime_ns (a chmod changes it)
    progress: Progress | None
    parent: str | None = None
    last_seq: int | None = None
    working_on: str | None = None


class _Entry(NamedTuple):  # a tuple: 10,000 of them are built per directory read
    """One log as the directory shows it: what the list sorts and what tells a change."""

    mtime: float
    key: tuple[int, int, int, int]  # inode, size, mtime_ns, ctime_ns (a chmod changes it)
    path: str


def _newest_first(item: tuple[str, _Entry]) -> tuple[float, str]:
    return -item[1].mtime, item[0]


class _Kept:
    """A held list's index: the directory as a list last read it, and the file names the
    watcher reported since, looked at again by the next list instead of every log."""

    def __init__(self, loop: asyncio.AbstractEventLoop, stop: Callable[[], None]) -> None:
        self.loop = loop
        self.stop = stop  # ends this index's use of the watch
        self.forget: Callable[[], None] | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.entries: dict[str, _Entry] | None = None
        self.linked: set[str] = set()  # symlinks: they change under their target's name
        self.read_at = 0.0  # when the whole directory was last read (monotonic)
        self._names: set[str] = set()
        self._whole = True  # the next list reads the whole directory
        self._lock = threading.Lock()  # told on the loop, taken in a worker thread

    def told(self, names: frozenset[str] | None) -> None:
        with self._lock:
            if names is None:
                self._whole = True
            else:
                self._names.update(names)

    def taken(self) -> set[str] | None:
        """The file names to look at again, now forgotten (``None``: the whole directory)."""
        with self._lock:
            names, whole = self._names, self._whole
            self._names, self._whole = set(), False
        return None if whole else names


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
    _progress: dict[str, _Cached] = field(init=False, default_factory=dict)
    _progress_lock: threading.Lock = field(init=False, default_factory=threading.Lock)
    _watcher: DirectoryWatch | None = field(init=False, default=None)
    _streams: int = field(init=False, default=0)  # changes() iterators running
    _held: bool = field(init=False, default=False)
    _kept: _Kept | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.directory = Path(self.directory)
        if not self.directory.is_dir():
            raise UsageError(f"{self.directory}: not a directory of session logs")
        self._root = self.directory.resolve(strict=True)

    def path_of(self, name: str) -> Path:
        """The log of session ``name``; :class:`SessionNotFound` if none, or it leads outside."""
        return Path(self._located(name)[0])

    def _located(self, name: str) -> tuple[str, int]:
        """:meth:`path_of` as a string, and the log's size then (what a read can expect)."""
        if not _plain_name(name):
            raise SessionNotFound(name)
        # A plain name is one entry of the (resolved) directory: a regular file there is the
        # log as named, and only a symlink needs resolving (resolving a path costs a syscall
        # per component, paid by every read of a list's rows).
        path = os.path.join(self._root, name + SUFFIX)
        try:
            info = os.lstat(path)
            if not stat.S_ISREG(info.st_mode):
                real = Path(path).resolve(strict=True)
                info = real.stat()
                if real.parent != self._root or not stat.S_ISREG(info.st_mode):
                    raise SessionNotFound(name)
                path = str(real)
        except (OSError, RuntimeError):
            raise SessionNotFound(name) from None
        return path, info.st_size

    def _entry(self, name: str, path: str, link: os.stat_result | None) -> _Entry | None:
        """The list's view of log ``name`` at ``path`` given its ``lstat`` (``None``: gone);
        ``None`` when it is not a session the list shows."""
        if link is None or not _plain_name(name):
            return None
        if stat.S_ISREG(link.st_mode):  # the common case: no path to resolve
            info = link
        elif stat.S_ISLNK(link.st_mode):
            try:
                real = self.path_of(name)
                info = real.stat()
            except (SessionNotFound, OSError):
                return None
            path = str(real)
        else:
            return None
        key = (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
        return _Entry(info.st_mtime, key, path)

    def _scan(self, links: set[str] | None = None) -> dict[str, _Entry]:
        """The list's view of every log; the names of the files that are symlinks (even
        those that lead nowhere yet) are added to ``links``."""
        found: dict[str, _Entry] = {}
        cut = len(SUFFIX)
        regular = stat.S_ISREG
        with os.scandir(self._root) as entries:
            # The loop every list without a watch runs over the whole directory: the plain
            # case (a short ASCII name of a regular file) is decided inline, the rest by _entry.
            for item in entries:
                file = item.name
                if not file.endswith(SUFFIX) or file[0] == ".":
                    continue
                name = file[:-cut]
                try:
                    link = item.stat(follow_symlinks=False)
                except OSError:
                    continue
                if regular(link.st_mode) and name.isascii() and len(name) <= 250 and name:
                    if "\\" not in name:  # a directory entry never holds "/" or NUL
                        key = (link.st_ino, link.st_size, link.st_mtime_ns, link.st_ctime_ns)
                        found[name] = _Entry(link.st_mtime, key, item.path)
                    continue
                if links is not None and stat.S_ISLNK(link.st_mode):
                    links.add(file)
                entry = self._entry(name, item.path, link)
                if entry is not None:
                    found[name] = entry
        return found

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

    def _keep(self) -> _Kept | None:
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
            kept = self._kept = _Kept(loop, stop)
            kept.forget = watch.listen(kept.told)
        else:
            watch.drain()  # what changed before this list and the loop has not read yet
        if kept.timer is not None:
            kept.timer.cancel()
        kept.timer = loop.call_later(self.list_resync, self._drop, kept)
        return kept

    def _drop(self, kept: _Kept) -> None:
        if self._kept is kept:
            self._kept = None
        if kept.timer is not None:
            kept.timer.cancel()
        if kept.forget is not None:
            kept.forget()
        kept.stop()

    def _locked_sessions(
        self, query: str, limit: int, kept: _Kept | None
    ) -> tuple[list[SessionSummary], int]:
        with self._progress_lock:  # list requests run in worker threads, maybe several at once
            # While a list is watched the index is kept current by the watcher: no directory read.
            index = self._scan() if kept is None else self._kept_entries(kept)
            return self._sessions(query, limit, index)

    def _kept_entries(self, kept: _Kept) -> dict[str, _Entry]:
        names = kept.taken()
        now = time.monotonic()
        if names is None or kept.entries is None or now - kept.read_at > self.list_resync:
            kept.linked = set()
            kept.entries, kept.read_at = self._scan(kept.linked), now
        else:
            self._update(kept.entries, kept.linked, names)
        return kept.entries

    def _sessions(
        self, query: str, limit: int, index: dict[str, _Entry]
    ) -> tuple[list[SessionSummary], int]:
        needle = query.casefold()
        found: Collection[tuple[str, _Entry]] = index.items()
        if needle:
            found = [(name, entry) for name, entry in found if needle in name.casefold()]
        top = heapq.nsmallest(limit, found, key=_newest_first)
        rows = [self._summary(name, entry) for name, entry in top]
        if len(self._progress) > 2 * max(limit, len(rows)):
            for stale in [name for name in self._progress if name not in index]:
                del self._progress[stale]
        return rows, len(found)

    def _summary(self, name: str, entry: _Entry) -> SessionSummary:
        cached = self._progress.get(name)
        if cached is None or cached.key != entry.key:
            try:
                snapshot, head = read_summary(entry.path)
                parent = _parent(head)
            except (OSError, InvalidLog):
                cached = _Cached(entry.key, None)
            else:
                cached = _Cached(
                    entry.key,
                    progress_of(snapshot.deciding),
                    parent,
                    snapshot.last_seq,
                    working_on(snapshot.deciding),
                )
            self._progress[name] = cached
        return SessionSummary(
            name,
            entry.mtime,
            cached.progress,
            parent=cached.parent,
            last_seq=cached.last_seq,
            working_on=cached.working_on,
        )

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

        def told(names: frozenset[str] | None) -> None:
            nonlocal everything
            if names is None:
                everything = True
            else:
                pending.update(names)
            wake.set()

        forget = watch.listen(told) if watch is not None and stop is not None else None
        # this stream's own index: what it last told, so that it tells what changed since
        index: dict[str, _Entry] = {}
        linked: set[str] = set()
        self._streams += 1
        try:
            await asyncio.to_thread(self._reindex, index, linked, None)
            while True:
                if watch is not None and watch.active:
                    timer = asyncio.get_running_loop().call_later(self.list_resync, told, None)
                    try:
                        await wake.wait()
                    finally:
                        timer.cancel()
                else:
                    await asyncio.sleep(self.list_interval)
                    everything = True
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
        self, index: dict[str, _Entry], linked: set[str], files: set[str] | None
    ) -> set[str]:
        """Bring a stream's ``index`` (and ``linked``, its symlinks) up to date for
        ``files`` (file names; ``None``: the whole directory) and say which sessions
        changed."""
        if files is not None:
            return self._update(index, linked, files)
        links: set[str] = set()
        fresh = self._scan(links)
        changed = {
            name for name in fresh.keys() | index.keys() if fresh.get(name) != index.get(name)
        }
        index.clear()
        index.update(fresh)
        linked.clear()
        linked.update(links)
        return changed

    def _update(self, entries: dict[str, _Entry], linked: set[str], files: set[str]) -> set[str]:
        """Look again at ``files`` (the file names a watcher told) in ``entries``, and at
        every other name the change may show under: the symlinks (``linked``, updated
        here) and the other names of a hard-linked file (a watcher tells only the name
        written, or the new name of a link). Says which sessions changed."""
        links: set[str] = set()
        shared: set[int] = set()
        files = files | linked
        looked = self._looked(files, links, shared)
        for name, entry in looked.items():
            old = entries.get(name)
            if old is not None and (entry is None or entry.key[0] != old.key[0]):
                shared.add(old.key[0])  # gone or replaced: written through just before, maybe
        if shared:  # rare: the inodes of hard-linked files told; one pass finds their names
            others = {name + SUFFIX for name, entry in entries.items() if entry.key[0] in shared}
            looked.update(self._looked(others - files, links))
        changed = set()
        for name, entry in looked.items():
            if entries.get(name) == entry:
                continue
            changed.add(name)
            if entry is None:
                entries.pop(name, None)
            else:
                entries[name] = entry
        linked.difference_update(files)
        linked.update(links)
        return changed

    def _looked(
        self, files: Collection[str], links: set[str] | None = None, shared: set[int] | None = None
    ) -> dict[str, _Entry | None]:
        """The list's view of each log among ``files`` (file names), by session name. The
        names that are symlinks are added to ``links``; the inodes of those (any file, a
        session or not) that are one of several hard links, to ``shared``."""
        looked: dict[str, _Entry | None] = {}
        for file in files:
            path = os.path.join(self._root, file)
            try:
                link: os.stat_result | None = os.lstat(path)
            except OSError:
                link = None
            if link is not None and shared is not None and link.st_nlink > 1:
                shared.add(link.st_ino)  # a directory's too: a spare look, never a miss
            if not file.endswith(SUFFIX) or file.startswith("."):
                continue
            if link is not None and links is not None and stat.S_ISLNK(link.st_mode):
                links.add(file)
            name = file[: -len(SUFFIX)]
            looked[name] = self._entry(name, path, link)
        return looked

    async def tail(
        self,
        name: str,
        *,
        before: int | None,
        limit: int,
        types: Collection[str] | None = None,
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
        loop = asyncio.get_running_loop()
        while True:
            changed.clear()  # before the look: a change after it sets the event again
            new = tail.look()
            if new is None:
                raise _replaced(path)
            if new == 0:
                if watch is not None and watch.active:
                    timer = loop.call_later(self.watch_safety, changed.set)
                    try:
                        await changed.wait()
                    finally:
                        timer.cancel()
                else:
                    await asyncio.sleep(self.poll_interval)
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
        self._progress.clear()
