"""One watcher per directory of logs, shared by every follower and list of a reader.

Where the kernel offers inotify (Linux), one inotify descriptor watches the
directory and wakes, by name, only the followers of the logs that changed; a
list learns which names changed. Elsewhere (or when the kernel refuses, e.g.
out of watches) :meth:`DirectoryWatch.start` answers ``False`` and callers poll
with ``stat`` as before. A queue overflow (thousands of files appearing at
once) wakes everyone and tells lists to read the whole directory again.

It is reached through ctypes, not a package: the calls are three, and a
dependency for them would weigh on every install of the web view.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import struct
import sys
from collections.abc import Callable

__all__ = ["DirectoryWatch"]

_IN_MODIFY = 0x2
_IN_ATTRIB = 0x4
_IN_CLOSE_WRITE = 0x8
_IN_MOVED_FROM = 0x40
_IN_MOVED_TO = 0x80
_IN_CREATE = 0x100
_IN_DELETE = 0x200
_IN_DELETE_SELF = 0x400
_IN_MOVE_SELF = 0x800
_IN_Q_OVERFLOW = 0x4000
_IN_IGNORED = 0x8000
_MASK = (
    _IN_MODIFY
    | _IN_ATTRIB
    | _IN_CLOSE_WRITE
    | _IN_MOVED_FROM
    | _IN_MOVED_TO
    | _IN_CREATE
    | _IN_DELETE
    | _IN_DELETE_SELF
    | _IN_MOVE_SELF
)
_HEADER = struct.Struct("iIII")  # wd, mask, cookie, len (struct inotify_event)
_READ_SIZE = 1 << 16

Listener = Callable[["frozenset[str] | None"], None]
"""Told the file names that changed, or ``None``: anything may have changed."""


def _inotify() -> tuple[Callable[[int], int], Callable[[int, bytes, int], int]] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        init = libc.inotify_init1
        add = libc.inotify_add_watch
    except (OSError, AttributeError):
        return None
    init.argtypes = [ctypes.c_int]
    init.restype = ctypes.c_int
    add.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
    add.restype = ctypes.c_int
    return init, add


class DirectoryWatch:
    """The changes to the files of one directory, fanned out to waiters by file name.

    Runs on one event loop; uses are counted (:meth:`start` and the function it
    returns), so the descriptor is open while anyone uses it and closed after the last.
    """

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self._fd: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._users = 0
        self._opened = 0  # descriptors opened so far: tells a user which one it counted on
        self._failed = False
        self._waiters: dict[str, set[asyncio.Event]] = {}
        self._listeners: set[Listener] = set()

    @property
    def active(self) -> bool:
        return self._fd is not None

    def start(self) -> Callable[[], None] | None:
        """Count one more user and return what ends its use; ``None`` (nothing counted)
        when the OS cannot watch. Each descriptor opened counts its own users, so a user
        of one that closed (its directory gone) never ends a later one's use."""
        loop = asyncio.get_running_loop()
        if self._fd is not None and self._loop is not loop:
            # a watch left open on a loop that is gone: its reader would never run here
            self._close()
        if self._fd is None:
            if self._failed:
                return None
            fd = self._open()
            if fd is None:
                # the OS cannot watch: never ask again; a directory gone (deleted, to be made
                # again) is asked for again by the next start
                self._failed = os.path.isdir(self.directory)
                return None
            self._fd, self._loop = fd, loop
            self._opened += 1
            loop.add_reader(fd, self._readable)
        self._users += 1
        opened = self._opened

        def stop() -> None:
            if opened != self._opened or self._fd is None:
                return  # that descriptor is closed already
            self._users -= 1
            if self._users <= 0:
                self._close()

        return stop

    def _open(self) -> int | None:
        calls = _inotify()
        if calls is None:
            return None
        init, add = calls
        fd = init(os.O_NONBLOCK | os.O_CLOEXEC)
        if fd < 0:
            return None
        if add(fd, os.fsencode(self.directory), _MASK) < 0:
            os.close(fd)
            return None
        return fd

    def _close(self) -> None:
        fd, self._fd, self._users = self._fd, None, 0
        if fd is not None:
            loop, self._loop = self._loop, None
            if loop is not None and not loop.is_closed():
                loop.remove_reader(fd)
            os.close(fd)
        # whoever still waits must not wait on a watch that no longer exists
        self._wake_all(None)

    def wait_on(self, name: str, event: asyncio.Event) -> Callable[[], None]:
        """Set ``event`` whenever file ``name`` changes; returns what stops it."""
        self._waiters.setdefault(name, set()).add(event)

        def forget() -> None:
            waiting = self._waiters.get(name)
            if waiting is not None:
                waiting.discard(event)
                if not waiting:
                    del self._waiters[name]

        return forget

    def listen(self, listener: Listener) -> Callable[[], None]:
        self._listeners.add(listener)
        return lambda: self._listeners.discard(listener)

    def drain(self) -> None:
        """Read and tell now what the kernel has queued: every change made before this call."""
        if self._fd is not None:
            self._readable()

    def _readable(self) -> None:
        names: set[str] = set()
        everything = False
        gone = False
        fd = self._fd
        while fd is not None:
            try:
                data = os.read(fd, _READ_SIZE)
            except BlockingIOError:
                break
            except OSError:
                gone = True
                break
            if not data:
                break
            offset = 0
            while offset + _HEADER.size <= len(data):
                _, mask, _, length = _HEADER.unpack_from(data, offset)
                raw = data[offset + _HEADER.size : offset + _HEADER.size + length]
                offset += _HEADER.size + length
                if mask & _IN_Q_OVERFLOW:
                    everything = True
                elif mask & (_IN_IGNORED | _IN_DELETE_SELF | _IN_MOVE_SELF):
                    gone = True  # the directory itself went: nothing more will come
                elif raw:
                    names.add(os.fsdecode(raw.rstrip(b"\0")))
        if gone:
            self._close()
            return
        if everything:
            self._wake_all(None)
            return
        if names:
            for name in names:
                for event in self._waiters.get(name, ()):
                    event.set()
            frozen = frozenset(names)
            for listener in list(self._listeners):
                listener(frozen)

    def _wake_all(self, names: frozenset[str] | None) -> None:
        for waiting in self._waiters.values():
            for event in waiting:
                event.set()
        for listener in list(self._listeners):
            listener(names)
