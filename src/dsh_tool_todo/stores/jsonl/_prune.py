"""Pruning a directory of logs: the ``*.jsonl`` files last written (modified) before a time are
deleted, what ``dsh-todo sessions DIR --prune --older-than DAYS`` does.

Only regular files directly in the directory are candidates: a symlink is never followed (nor
deleted), and neither is a hidden file. A log is deleted only as it was when it was judged old:
it is opened without following a link, locked as a writer locks it (a log a session holds open
is left), looked at again (a log written, cut or replaced meanwhile is left), and the name is
checked to still be that file just before it is unlinked. Every old log left is named with
why, never skipped in silence: a symlink or other entry that is no regular file, a log a writer
holds or that changed meanwhile, one the system refuses to open or delete.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import time
from datetime import datetime, timezone

from .._owner_names import SUFFIX

try:
    import fcntl
except ImportError:  # no flock (Windows): no JSONL writer runs there to hold a log
    fcntl = None  # type: ignore[assignment]

__all__: list[str] = []

DAY = 86400.0  # seconds
_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_NOCTTY", 0)
)


GONE = ""
"""Why a log was left when it is gone (deleted by another meanwhile): nothing to report."""
CHANGED = "written or replaced while the prune ran"


def prune_directory(
    directory: str, days: float, *, dry_run: bool = False, now: float | None = None
) -> tuple[list[tuple[str, datetime]], list[tuple[str, datetime, str]]]:
    """Delete the logs of ``directory`` last written over ``days`` days before ``now`` (the
    clock by default): each one's session name (the file's stem) and last write, by name; and
    each old one left, with why (a writer holds it, it changed meanwhile, it is no regular
    file, the system refuses to open or delete it). With ``dry_run``, nothing is deleted: the
    logs that would be are named, and those that could not be."""
    cutoff = (time.time() if now is None else now) - days * DAY
    pruned: list[tuple[str, datetime]] = []
    left: list[tuple[str, datetime, str]] = []
    for name, seen, why in _old_logs(directory, cutoff):
        path = os.path.join(directory, name)
        if why is None:
            why = _openable(path) if dry_run else _delete_unchanged(path, seen)
        last = datetime.fromtimestamp(seen.st_mtime, timezone.utc)
        if why is None:
            pruned.append((name[: -len(SUFFIX)], last))
        elif why:  # GONE: deleted by another meanwhile, as asked
            left.append((name[: -len(SUFFIX)], last, why))
    return pruned, left


def _old_logs(directory: str, cutoff: float) -> list[tuple[str, os.stat_result, str | None]]:
    """Each visible ``*.jsonl`` entry of ``directory`` modified before ``cutoff``, by name, with
    what ``lstat`` said of it and, for one that is no regular file, why it is left."""
    old: list[tuple[str, os.stat_result, str | None]] = []
    with os.scandir(directory) as entries:
        for entry in entries:
            if not entry.name.endswith(SUFFIX) or entry.name.startswith("."):
                continue
            try:
                seen = entry.stat(follow_symlinks=False)
            except FileNotFoundError:  # deleted since the directory was read
                continue
            if seen.st_mtime >= cutoff:
                continue
            why = None
            if stat.S_ISLNK(seen.st_mode):
                why = "a symlink: never followed nor deleted"
            elif not stat.S_ISREG(seen.st_mode):
                why = "not a regular file"
            old.append((entry.name, seen, why))
    return sorted(old, key=lambda found: found[0])


def _openable(path: str) -> str | None:
    """Why the prune could not open ``path``, or ``None`` (a dry run: nothing is locked)."""
    try:
        os.close(os.open(path, _OPEN_FLAGS))
    except OSError as error:
        return _refused("opened", error)
    return None


def _delete_unchanged(path: str, seen: os.stat_result) -> str | None:
    """Unlink ``path`` if it is still the file ``seen`` described, unwritten and held by no
    writer: ``None`` once it is, or why it was left (:data:`GONE`: it is gone already)."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as error:  # gone, or a symlink now (O_NOFOLLOW), or unreadable: left
        return _refused("opened", error)
    try:
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:  # a session holds it: it is being written
                return "a writer holds it open"
        if not _same(seen, os.fstat(fd)):
            return CHANGED
        try:
            named = os.stat(path, follow_symlinks=False)
        except FileNotFoundError:
            return GONE
        if (named.st_dev, named.st_ino) != (seen.st_dev, seen.st_ino):
            return CHANGED  # the name was given to another file meanwhile
        try:
            os.unlink(path)
        except OSError as error:
            return _refused("deleted", error)
        _delete_inbox(path)
        return None
    finally:
        os.close(fd)  # the lock goes with it


INBOX = ".requests"  # stores/_inbox.py: a person's requests wait beside the log


def _delete_inbox(path: str) -> None:
    """The pruned log's inbox goes with it (requests to a session no one will run again)."""
    with contextlib.suppress(OSError):  # none, or refused: beside no log, no writer reads it
        os.unlink(path + INBOX)


def _refused(done: str, error: OSError) -> str:
    """Why a log could not be ``done`` (opened, deleted): :data:`GONE` when it is not there."""
    if isinstance(error, FileNotFoundError):
        return GONE
    if error.errno == errno.ELOOP:  # O_NOFOLLOW met a symlink put in its place meanwhile
        return CHANGED
    return f"cannot be {done}: {error.strerror or error}"


def _same(seen: os.stat_result, now: os.stat_result) -> bool:
    """Whether ``now`` is the file ``seen`` was, not written nor cut since."""
    return stat.S_ISREG(now.st_mode) and (
        now.st_dev,
        now.st_ino,
        now.st_size,
        now.st_mtime_ns,
    ) == (seen.st_dev, seen.st_ino, seen.st_size, seen.st_mtime_ns)
