"""A directory of logs as a session list sees it: which files are sessions, and what changed.

A list row is read from a log only when the log's ``(inode, size, mtime, ctime)``
changed since it was last read (:class:`Rows`); a list the reader holds keeps the
directory's index between lists (:class:`Kept`) and looks again only at the file
names a watcher reported, or every name when told to (:func:`update`, :func:`scan`).
Nothing here runs on the event loop: the reader calls it from worker threads.
"""

from __future__ import annotations

import asyncio
import heapq
import os
import stat
import threading
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from ...core.links import End, link_of
from ...core.projection import progress_of
from ...errors import InvalidLog, SessionNotFound
from ...protocols import Progress, SessionSummary, Snapshot
from .._summary import working_on
from ._lines import Event
from ._tail import read_summary

__all__: list[str] = []

SUFFIX = ".jsonl"

Key = tuple[int, int, int, int]  # inode, size, mtime_ns, ctime_ns (a chmod changes it)


def plain_name(name: str) -> bool:
    """Whether ``name`` can be a session: one plain file name a page can address."""
    if not name or name[0] == "." or "/" in name or "\\" in name or "\0" in name:
        return False
    # an ASCII name is addressable when short enough; others are encoded to tell
    return len(name) <= 250 if name.isascii() else _addressable(name)


def _addressable(name: str) -> bool:
    """Whether a page can name the session: UTF-8 (a file name that is not decodes to lone
    surrogates, which no URL can carry) and at most 250 bytes."""
    try:
        return len(name.encode("utf-8")) <= 250
    except UnicodeEncodeError:
        return False


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


def locate(root: Path, name: str) -> tuple[str, int]:
    """The log of session ``name`` in the (resolved) directory ``root``, and its size then
    (what a read can expect); :class:`SessionNotFound` if none, or it leads outside."""
    if not plain_name(name):
        raise SessionNotFound(name)
    # A plain name is one entry of the (resolved) directory: a regular file there is the
    # log as named, and only a symlink needs resolving (resolving a path costs a syscall
    # per component, paid by every read of a list's rows).
    path = os.path.join(root, name + SUFFIX)
    try:
        info = os.lstat(path)
        if not stat.S_ISREG(info.st_mode):
            real = Path(path).resolve(strict=True)
            info = real.stat()
            if real.parent != root or not stat.S_ISREG(info.st_mode):
                raise SessionNotFound(name)
            path = str(real)
    except (OSError, RuntimeError):
        raise SessionNotFound(name) from None
    return path, info.st_size


class Entry(NamedTuple):  # a tuple: 10,000 of them are built per directory read
    """One log as the directory shows it: what the list sorts and what tells a change."""

    mtime: float
    key: Key
    path: str


def _newest_first(item: tuple[str, Entry]) -> tuple[float, str]:
    return -item[1].mtime, item[0]


def entry(root: Path, name: str, path: str, link: os.stat_result | None) -> Entry | None:
    """The list's view of log ``name`` at ``path`` given its ``lstat`` (``None``: gone);
    ``None`` when it is not a session the list shows."""
    if link is None or not plain_name(name):
        return None
    if stat.S_ISREG(link.st_mode):  # the common case: no path to resolve
        info = link
    elif stat.S_ISLNK(link.st_mode):
        try:
            path = locate(root, name)[0]
            info = os.stat(path)
        except (SessionNotFound, OSError):
            return None
    else:
        return None
    key = (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
    return Entry(info.st_mtime, key, path)


def scan(root: Path, links: set[str] | None = None) -> dict[str, Entry]:
    """The list's view of every log in ``root``; the names of the files that are symlinks
    (even those that lead nowhere yet) are added to ``links``."""
    found: dict[str, Entry] = {}
    cut = len(SUFFIX)
    regular = stat.S_ISREG
    with os.scandir(root) as entries:
        # The loop every list without a watch runs over the whole directory: the plain
        # case (a short ASCII name of a regular file) is decided inline, the rest by entry().
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
                    found[name] = Entry(link.st_mtime, key, item.path)
                continue
            if links is not None and stat.S_ISLNK(link.st_mode):
                links.add(file)
            seen = entry(root, name, item.path, link)
            if seen is not None:
                found[name] = seen
    return found


def update(root: Path, entries: dict[str, Entry], linked: set[str], files: set[str]) -> set[str]:
    """Look again at ``files`` (the file names a watcher told) in ``entries``, and at
    every other name the change may show under: the symlinks (``linked``, updated
    here) and the other names of a hard-linked file (a watcher tells only the name
    written, or the new name of a link). Says which sessions changed."""
    links: set[str] = set()
    shared: set[int] = set()
    files = files | linked
    seen = _looked(root, files, links, shared)
    for name, now in seen.items():
        old = entries.get(name)
        if old is not None and (now is None or now.key[0] != old.key[0]):
            shared.add(old.key[0])  # gone or replaced: written through just before, maybe
    if shared:  # rare: the inodes of hard-linked files told; one pass finds their names
        others = {name + SUFFIX for name, kept in entries.items() if kept.key[0] in shared}
        seen.update(_looked(root, others - files, links))
    changed = set()
    for name, now in seen.items():
        if entries.get(name) == now:
            continue
        changed.add(name)
        if now is None:
            entries.pop(name, None)
        else:
            entries[name] = now
    linked.difference_update(files)
    linked.update(links)
    return changed


def _looked(
    root: Path,
    files: Collection[str],
    links: set[str] | None = None,
    shared: set[int] | None = None,
) -> dict[str, Entry | None]:
    """The list's view of each log among ``files`` (file names), by session name. The
    names that are symlinks are added to ``links``; the inodes of those (any file, a
    session or not) that are one of several hard links, to ``shared``."""
    looked: dict[str, Entry | None] = {}
    for file in files:
        path = os.path.join(root, file)
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
        looked[name] = entry(root, name, path, link)
    return looked


@dataclass
class _Row:
    key: Key
    progress: Progress | None
    parent: str | None = None
    last_seq: int | None = None
    working_on: str | None = None
    plan_seq: int | None = None
    end: End | None = None


class Rows:
    """Each listed log's row, read again only when its key changed (list requests run in
    worker threads, maybe several at once: :attr:`lock` is held around a list)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._rows: dict[str, _Row] = {}

    def top(
        self, query: str, limit: int, index: dict[str, Entry]
    ) -> tuple[list[SessionSummary], int]:
        """The rows of the sessions in ``index`` whose name holds ``query``, newest first, at
        most ``limit``; and how many matched."""
        needle = query.casefold()
        found: Collection[tuple[str, Entry]] = index.items()
        if needle:
            found = [(name, seen) for name, seen in found if needle in name.casefold()]
        top = heapq.nsmallest(limit, found, key=_newest_first)
        rows = [self._summary(name, seen) for name, seen in top]
        if len(self._rows) > 2 * max(limit, len(rows)):
            for stale in [name for name in self._rows if name not in index]:
                del self._rows[stale]
        return rows, len(found)

    def _summary(self, name: str, seen: Entry) -> SessionSummary:
        row = self._rows.get(name)
        if row is None or row.key != seen.key:
            try:
                row = _row(seen.key, read_summary(seen.path))
            except (OSError, InvalidLog):
                row = _Row(seen.key, None)
            self._rows[name] = row
        return _as_summary(name, seen.mtime, row)

    def clear(self) -> None:
        self._rows.clear()


Read = tuple[Snapshot, Event | None, End | None]  # what _tail.read_summary answers


def _row(key: Key, read: Read) -> _Row:
    """A log's row from what :func:`._tail.read_summary` answered of it."""
    return _Row(key, *_fields(read))


def summary_of(name: str, mtime: float, read: Read | None) -> SessionSummary:
    """The row of log ``name`` from what :func:`._tail.read_summary` answered of it (``None``:
    the read failed), as :class:`Rows` gives it, kept nowhere."""
    if read is None:
        return SessionSummary(name, mtime, None)
    progress, parent, last_seq, doing, plan_seq, end = _fields(read)
    return SessionSummary(
        name,
        mtime,
        progress,
        parent=parent,
        last_seq=last_seq,
        working_on=doing,
        plan_seq=plan_seq,
        end=end,
    )


def _fields(
    read: Read,
) -> tuple[Progress, str | None, int, str | None, int, End | None]:
    snapshot, head, ended = read
    deciding = snapshot.deciding
    return (
        progress_of(deciding),
        _parent(head),
        snapshot.last_seq,
        working_on(deciding),
        -1 if deciding is None else deciding["seq"],
        ended,
    )


def _as_summary(name: str, mtime: float, row: _Row) -> SessionSummary:
    return SessionSummary(
        name,
        mtime,
        row.progress,
        parent=row.parent,
        last_seq=row.last_seq,
        working_on=row.working_on,
        plan_seq=row.plan_seq,
        end=row.end,
    )


class Kept:
    """A held list's index: the directory as a list last read it, and the file names the
    watcher reported since, looked at again by the next list instead of every log."""

    def __init__(self, loop: asyncio.AbstractEventLoop, stop: Callable[[], None]) -> None:
        self.loop = loop
        self.stop = stop  # ends this index's use of the watch
        self.forget: Callable[[], None] | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.entries: dict[str, Entry] | None = None
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
