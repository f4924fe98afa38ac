"""JSONL logs named by a path, as the picker opens them: a directory's reader and names, one
log's plan, plans and tail (what ``dsh-todo sessions``, ``show`` and ``watch`` read). A
database's side of the same :class:`Backend` is ``postgres/admin.py``."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import UsageError

if TYPE_CHECKING:
    from ..core.projection import Plan
    from ..protocols import LogReader, StoreSession, TailPage
    from .owners import OwnerRegistry
    from .postgres.admin import Database

    Target = str | os.PathLike[str]
    Wait = Callable[[str], None] | None
    Plans = tuple[str, Iterator[Plan]]

__all__: list[str] = []

EMPTY = (
    "the source is empty: name a JSONL log or directory (`.` for the current one) "
    "or a postgresql:// URL"
)
"""An empty path would be read as the current directory: the picker refuses it."""

CONNINFO_PAIR = re.compile(r"\s*[A-Za-z_]+\s*=")  # a libpq conninfo starts `key=`


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
    session is a database's: the picker refuses one for a file, so here it is ``None``."""

    def open_reader(self, target: str, /) -> LogReader: ...

    def show_plan(self, target: str, session: str | None, /) -> Plan: ...

    def follow_plans(
        self, target: str, session: str | None, wait: Wait, interval: float, /
    ) -> Plans: ...

    def open_session(self, target: str, session: str | None, /) -> StoreSession: ...

    def open_owners(self, target: str, /, **options: Any) -> OwnerRegistry: ...

    def open_log(self, target: str, session: str | None, /) -> tuple[LogTail, str]: ...

    def open_fleet(self, target: str, /) -> tuple[LogReader, list[str], Database | None]: ...

    def open_database(self, target: str, /) -> Database: ...


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

    return JsonlReader(Path(directory))


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
    """The tail of the log at ``path``, and its name."""
    return FileTail(str(log_path(path))), path


def open_session(path: str, session: str | None, /) -> StoreSession:
    """The writer of the log at ``path`` (a new one is created)."""
    from .jsonl import JsonlSession

    return JsonlSession(log_path(path))


def open_owners(directory: str, /, **options: Any) -> OwnerRegistry:
    """The owners of a directory: each owner's log a file in it, created on first use."""
    from .owners import OwnerRegistry

    if os.path.exists(directory) and not os.path.isdir(directory):
        raise UsageError(f"{directory}: not a directory: plans are kept in a directory of logs")
    return OwnerRegistry(directory, **options)


def show_plan(path: str, session: str | None, /) -> Plan:
    """The plan now in the log at ``path``; ``None`` if none was written since the last turn."""
    from .jsonl import current_plan

    return current_plan(_existing(log_path(path)))


def follow_plans(path: str, session: str | None, wait: Wait, interval: float, /) -> Plans:
    """The log's name, and its plan now and after each change, polled every ``interval`` s;
    with ``wait``, a log not there yet is awaited (``wait`` is told so) instead of refused."""
    import time

    from .jsonl import follow_plan

    log = log_path(path)
    if wait is not None and not log.exists():
        wait(str(log))
        while not log.exists():
            time.sleep(interval)
    return str(log), follow_plan(_existing(log), interval=interval, sleep=time.sleep)


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


def _existing(log: Path) -> Path:
    """``log`` if something is there; the readers refuse what is not a regular file."""
    try:
        log.stat()
    except FileNotFoundError:
        raise FileNotFoundError(f"{log}: no such session log") from None
    return log
