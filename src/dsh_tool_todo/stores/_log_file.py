"""JSONL logs named by a path, as the picker opens them: a directory's reader and names, one
log's plan, plans and tail (what ``dsh-todo sessions``, ``show`` and ``watch`` read), the log a
directory and an owner key name, and the logs pruned. A database's side of the same
:class:`Backend` is ``postgres/admin.py``."""

from __future__ import annotations

import errno
import os
import re
import sys
from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

from ..errors import UsageError

if TYPE_CHECKING:
    from datetime import datetime

    from ..core.projection import Plan as Plan
    from ..protocols import LogReader, StoreSession, TailPage
    from ._inbox import Inbox
    from .owners import OwnerRegistry
    from .postgres.admin import Database

    Target = str | os.PathLike[str]
    Wait = Callable[[str], None] | None
    Plans = tuple[str, Iterator[Plan]]
    Pruned = tuple[str, datetime]
    """A log pruned (or, in a dry run, to be): its session name and when it was last written."""
    Left = tuple[str, datetime, str]
    """An old log the prune left: its session name, when it was last written, and why."""
    Pruning = tuple[str, list[Pruned], list[Left]]
    """What a prune did: where, the logs deleted (or to be), and the old logs left."""

__all__: list[str] = []

EMPTY = (
    "the source is empty: name a JSONL log or directory (`.` for the current one) "
    "or a postgresql:// URL"
)
"""An empty path would be read as the current directory: the picker refuses it."""

CONNINFO_PAIR = re.compile(r"\s*[A-Za-z_]+\s*=")  # a libpq conninfo starts `key=`
FILE_SESSION = "--session goes with a directory of logs or a postgresql:// URL, not a file"
"""A file is one log: a session names one of a directory's or a database's."""


def checked(path: str) -> Backend:
    """This module, as the backend of ``path``; an empty path is refused, not read as the
    current directory, and a path the system refuses is said as the library's error, naming
    it and what to do (``_paths.path_failure``)."""
    from ._paths import Guarded

    if not path:
        raise UsageError(EMPTY)
    return cast("Backend", Guarded(sys.modules[__name__]))


def is_conninfo(text: str) -> bool:
    """Whether ``text`` is a libpq ``key=value`` conninfo: it starts so, and no file has it as
    its name."""
    return bool(CONNINFO_PAIR.match(text)) and not os.path.exists(text)


def log_path(path: str) -> Path:
    """The path of one log; a libpq conninfo is refused, not taken for a file name, and not
    repeated (it may hold a password)."""
    if CONNINFO_PAIR.match(path) and not os.path.exists(path):
        raise UsageError(
            "SOURCE looks like a key=value conninfo, not a log's path: "
            "give it as a postgresql:// URL, with --session"
        )
    return Path(path)


class Backend(Protocol):
    """What the picker asks of a backend's module: this one, or ``postgres/admin.py``. A
    session names one log of a database, or here an owner's log in a directory (a file, one
    log, takes none)."""

    def open_reader(self, target: str, /) -> LogReader: ...

    def check_store(self, target: str, /) -> None: ...

    def show_plan(self, target: str, session: str | None, /) -> Plan: ...

    def follow_plans(
        self, target: str, session: str | None, wait: Wait, interval: float, /
    ) -> Plans: ...

    def open_session(self, target: str, session: str | None, /) -> StoreSession: ...

    def open_owners(self, target: str, /, **options: Any) -> OwnerRegistry: ...

    def open_log(self, target: str, session: str | None, /) -> tuple[LogTail, str]: ...

    def open_fleet(self, target: str, /) -> tuple[LogReader, list[str], Database | None]: ...

    def open_database(self, target: str, /) -> Database: ...

    def pick_log(self, target: str, session: str | None, /) -> tuple[str, str | None]: ...

    def open_inbox(self, target: str, session: str | None, /) -> Inbox: ...

    def prune_logs(self, target: str, days: float, dry_run: bool, /) -> Pruning: ...


class LogTail(Protocol):
    """What reading one log back from its end takes: its pages, then closing the reader."""

    async def tail(
        self, name: str, *, before: int | None, limit: int, types: Collection[str] | None = None
    ) -> TailPage: ...

    async def aclose(self) -> None: ...


class FileTail:
    """The :class:`LogTail` of one JSONL log, whatever the name it is asked for."""

    def __init__(self, path: str) -> None:
        self.path = path

    async def tail(
        self, name: str, *, before: int | None, limit: int, types: Collection[str] | None = None
    ) -> TailPage:
        from .jsonl._tail import read_tail

        return read_tail(self.path, before, limit, types)

    async def aclose(self) -> None:
        return None


def open_reader(directory: str) -> LogReader:
    """The reader of a directory of logs."""
    from .jsonl import JsonlReader

    check_store(directory)
    return JsonlReader(Path(directory))


def check_store(directory: str) -> None:
    """Refuse, in one line, what is no directory of logs (a database's check connects)."""
    if not os.path.isdir(directory):
        raise not_a_directory(directory)


_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


def not_a_directory(directory: str) -> UsageError:
    """What a source that should be a directory of logs is instead, and what to give."""
    if _URL.match(directory):
        return UsageError(
            f"{directory.split('://', 1)[0]}:// is not a source: give a directory of session "
            "logs or a postgresql:// URL"
        )
    if CONNINFO_PAIR.match(directory):
        return UsageError(  # said without the text: a conninfo may hold a password
            "SOURCE looks like a key=value conninfo, which serve does not take: "
            "give it as a postgresql:// URL"
        )
    if os.path.isfile(directory):
        parent = os.path.dirname(directory) or "."
        return UsageError(
            f"{directory} is one session log, not a directory of them: give its directory "
            f"({parent}), or follow this log alone with `dsh-todo watch {directory}`"
        )
    if not os.path.exists(directory):
        return UsageError(f"{directory}: not a directory of session logs (there is nothing there)")
    return UsageError(f"{directory}: not a directory of session logs")


def open_fleet(directory: str) -> tuple[LogReader, list[str], Database | None]:
    """The directory's reader, and the stem of every log in it (the reader leaves out a name
    no URL can carry); a directory is no database."""
    return open_reader(directory), _log_names(directory), None


def open_database(directory: str, /) -> Database:
    """A directory has no database: ``dsh-todo sessions DIR --delete`` is refused."""
    raise UsageError(
        f"{directory}: --delete goes with a database URL; in a directory, delete the file"
    )


def open_log(path: str, session: str | None, /) -> tuple[LogTail, str]:
    """The tail of the log ``path`` and ``session`` name (:func:`_log_of`), and its name."""
    log = _existing(_log_of(path, session))
    return FileTail(str(log)), path if session is None else str(log)


def open_session(path: str, session: str | None, /) -> StoreSession:
    """The writer of the log ``path`` and ``session`` name (a new one is created)."""
    from .jsonl import JsonlSession

    return JsonlSession(_log_of(path, session, named=False))


def pick_log(path: str, session: str | None, /) -> tuple[str, None]:
    """The one log to read, by its path: the file ``path``; in a directory, the log of owner
    ``session``, or with no ``session`` the most recently written (by modification time)."""
    if session is not None or not os.path.isdir(path):
        return (path if session is None else str(_log_of(path, session))), None
    return str(_latest(Path(path))), None


def open_inbox(path: str, session: str | None, /) -> Inbox:
    """The inbox of the log ``path`` and ``session`` name: a file beside it."""
    from ._inbox import FileInbox

    return FileInbox(str(_existing(_log_of(path, session))))


def prune_logs(directory: str, days: float, dry_run: bool, /) -> Pruning:
    """Delete the logs of ``directory`` last written over ``days`` days ago (``dry_run``: only
    name them): where, and each log's session name and last write. A log that is written, locked
    by a writer, or replaced meanwhile is left, and so is a symlink (never followed) and a log
    the system refuses to open or delete: each old one left is named, with why."""
    from .jsonl._prune import prune_directory

    if not os.path.isdir(directory):
        raise not_a_directory(directory)
    return directory, *prune_directory(directory, days, dry_run=dry_run)


def open_owners(directory: str, /, **options: Any) -> OwnerRegistry:
    """The owners of a directory: each owner's log a file in it, created on first use."""
    from .owners import OwnerRegistry

    if is_conninfo(directory):  # never a directory named after it: it may hold a password
        raise UsageError(
            "the place looks like a key=value conninfo, not a directory: record in a database "
            "by its postgresql:// URL (a directory named so: write it ./NAME)"
        )
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise UsageError(f"{directory}: not a directory: plans are kept in a directory of logs")
    return OwnerRegistry(directory, **options)


def show_plan(path: str, session: str | None, /) -> Plan:
    """The plan now in the log at ``path``; ``None`` if none was written since the last turn."""
    from .jsonl import current_plan

    return current_plan(_existing(_log_of(path, session)))


def follow_plans(path: str, session: str | None, wait: Wait, interval: float, /) -> Plans:
    """The log's name, and its plan now and after each change, polled every ``interval`` s
    (and again after each event that settles a request: ``watch`` draws how they stand
    under it); with ``wait``, a log not there yet is awaited (``wait`` is told so) instead
    of refused."""
    import time

    from .jsonl import follow_plan

    log = _log_of(path, session)
    if wait is not None and not log.exists():
        wait(str(log))
        while not log.exists():
            time.sleep(interval)
    from ..core.requests import SETTLING_TYPES

    plans = follow_plan(_existing(log), interval=interval, sleep=time.sleep, also=SETTLING_TYPES)
    return str(log), plans


def _log_names(directory: str) -> list[str]:
    """The stem of every regular ``*.jsonl`` file in ``directory``, sorted: the logs the
    reader leaves out (a name no URL can carry) are told apart from these."""
    from .jsonl.reader import SUFFIX

    with os.scandir(directory) as entries:
        return sorted(
            entry.name[: -len(SUFFIX)]
            for entry in entries
            if entry.name.endswith(SUFFIX)
            and not entry.name.startswith(".")
            and entry.is_file(follow_symlinks=False)
        )


def _log_of(path: str, session: str | None, *, named: bool = True) -> Path:
    """The log at ``path``; with a ``session``, the log of that owner key in the directory
    ``path`` (``owner_file_name``), which need not exist yet. A file takes no session.

    ``named``: when the owner's log is not there, a log the directory holds under the file
    name ``session`` (as ``dsh-todo sessions`` and the web view list it) is the one read. A
    writer (``named=False``) always writes its owner's log."""
    log = log_path(path)
    if session is None:
        return log
    from ._owner_names import owner_file_name

    if os.path.exists(path) and not os.path.isdir(path):
        raise UsageError(f"{path} is one log: {FILE_SESSION}")
    owned = log / owner_file_name(session)
    if not os.path.lexists(owned) and named:
        from ._owner_names import SUFFIX
        from .jsonl._index import plain_name

        # a log named by hand (`Bob Smith.jsonl`): the view lists it by its file name
        literal = log / (session + SUFFIX)
        owned = literal if plain_name(session) and os.path.lexists(literal) else owned
    if os.path.isdir(owned):  # never the logs in it: a session is one file of the directory
        from ..errors import path_error

        raise path_error(
            IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR)),
            f"{owned}: is a directory, not the log of session {session!r}",
        )
    if os.path.islink(owned) and os.path.dirname(os.path.realpath(owned)) != os.path.realpath(path):
        # as the directory's reader, list and prune: a session's log is a file of the directory
        raise UsageError(
            f"{owned} is a symlink leading outside {path}: refused as the log of session "
            f"{session!r}, as `dsh-todo sessions` and `serve` refuse it"
        )
    return owned


def _latest(directory: Path) -> Path:
    """The regular ``*.jsonl`` file of ``directory`` written last (a symlink is no log here),
    among those holding an event: an empty log (made by a writer that never wrote, such as an
    MCP server no call reached) is picked only when every log is empty."""
    from ._owner_names import SUFFIX

    logs: list[tuple[bool, int, str]] = []
    with os.scandir(directory) as entries:
        for entry in entries:
            if not entry.name.endswith(SUFFIX) or entry.name.startswith("."):
                continue
            try:
                if entry.is_file(follow_symlinks=False):
                    info = entry.stat(follow_symlinks=False)
                    logs.append((info.st_size > 0, info.st_mtime_ns, entry.name))
            except FileNotFoundError:  # deleted since the directory was read
                continue
    if not logs:
        raise UsageError(
            f"{directory}: no session log in it yet (to wait for one: dsh-todo watch --wait "
            "--session KEY)"
        )
    return directory / max(logs)[2]


def _existing(log: Path) -> Path:
    """``log`` if something is there; the readers refuse what is not a regular file."""
    try:
        log.stat()
    except FileNotFoundError as error:
        from ..errors import path_error

        raise path_error(error, f"{log}: no such session log", log=True) from None
    return log
