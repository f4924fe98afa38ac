"""Pruning a directory of logs: the ``*.jsonl`` files last written (modified) before a time are
deleted, what ``dsh-todo sessions DIR --prune --older-than DAYS`` does.

Only regular files directly in the directory are candidates: a symlink is never followed (nor
deleted), and neither is a hidden file. A log is deleted only as it was when it was judged old:
it is opened without following a link, locked as a writer locks it (a log a session holds open
is left), looked at again (a log written, cut or replaced meanwhile is left), and the name is
checked to still be that file just before it is unlinked.
"""

from __future__ import annotations

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


def prune_directory(
    directory: str, days: float, *, dry_run: bool = False, now: float | None = None
) -> list[tuple[str, datetime]]:
    """Delete the logs of ``directory`` last written over ``days`` days before ``now`` (the
    clock by default); each one's session name (the file's stem) and last write, by name. With
    ``dry_run``, nothing is deleted: the logs that would be are named."""
    cutoff = (time.time() if now is None else now) - days * DAY
    pruned: list[tuple[str, datetime]] = []
    for name, seen in _old_logs(directory, cutoff):
        if dry_run or _delete_unchanged(os.path.join(directory, name), seen):
            last = datetime.fromtimestamp(seen.st_mtime, timezone.utc)
            pruned.append((name[: -len(SUFFIX)], last))
    return pruned


def _old_logs(directory: str, cutoff: float) -> list[tuple[str, os.stat_result]]:
    """Each regular, visible ``*.jsonl`` file of ``directory`` modified before ``cutoff``, by
    name, with what ``lstat`` said of it."""
    old: list[tuple[str, os.stat_result]] = []
    with os.scandir(directory) as entries:
        for entry in entries:
            if not entry.name.endswith(SUFFIX) or entry.name.startswith("."):
                continue
            try:
                seen = entry.stat(follow_symlinks=False)
            except FileNotFoundError:  # deleted since the directory was read
                continue
            if stat.S_ISREG(seen.st_mode) and seen.st_mtime < cutoff:
                old.append((entry.name, seen))
    return sorted(old, key=lambda found: found[0])


def _delete_unchanged(path: str, seen: os.stat_result) -> bool:
    """Unlink ``path`` if it is still the file ``seen`` described, unwritten and held by no
    writer; whether it was."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError:  # gone, or a symlink now (O_NOFOLLOW), or unreadable: left
        return False
    try:
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:  # a session holds it: it is being written
                return False
        if not _same(seen, os.fstat(fd)):
            return False
        try:
            named = os.stat(path, follow_symlinks=False)
        except FileNotFoundError:
            return False
        if (named.st_dev, named.st_ino) != (seen.st_dev, seen.st_ino):
            return False  # the name was given to another file meanwhile
        os.unlink(path)
        return True
    finally:
        os.close(fd)  # the lock goes with it


def _same(seen: os.stat_result, now: os.stat_result) -> bool:
    """Whether ``now`` is the file ``seen`` was, not written nor cut since."""
    return stat.S_ISREG(now.st_mode) and (
        now.st_dev,
        now.st_ino,
        now.st_size,
        now.st_mtime_ns,
    ) == (seen.st_dev, seen.st_ino, seen.st_size, seen.st_mtime_ns)
