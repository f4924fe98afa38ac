"""The picker: the only code that tells a ``postgresql://`` URL from a path (docs/stores.md)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, cast

from ..errors import UsageError

if TYPE_CHECKING:
    from ..core.projection import Plan
    from ..protocols import LogReader, StoreSession
    from .owners import OwnerRegistry
    from ._log_file import Backend, LogTail, Plans, Target, Wait
    from .postgres.admin import Database

__all__ = [
    "current_plan",
    "follow_plans",
    "open_database",
    "open_fleet",
    "open_log",
    "open_owners",
    "open_reader",
    "open_session",
]


def open_reader(target: Target) -> LogReader:
    """The reader of a directory of JSONL logs or of a database (nothing is read here)."""
    return _backend(text := os.fspath(target)).open_reader(text)


def current_plan(target: Target, session: str | None = None) -> Plan:
    """The plan now in a JSONL log or in ``session`` of a database (``dsh-todo show``)."""
    return _backend(text := os.fspath(target), session).show_plan(text, session)


def follow_plans(
    target: Target, session: str | None = None, *, wait: Wait = None, interval: float = 0.2
) -> Plans:
    """A title, and the plan now and after each change, forever (``dsh-todo watch``)."""
    return _backend(text := os.fspath(target), session).follow_plans(text, session, wait, interval)


def open_session(target: Target, session: str | None = None) -> StoreSession:
    """The writer of a JSONL log, or of ``session`` in a database."""
    return _backend(text := os.fspath(target), session).open_session(text, session)


def open_owners(target: Target, **options: Any) -> OwnerRegistry:
    """An owner registry whose sessions live in a directory (``~`` expanded) or a database;
    ``options`` are :class:`~dsh_tool_todo.stores.owners.OwnerRegistry`'s."""
    text = os.path.expanduser(os.fspath(target)) if os.fspath(target) else ""
    return _backend(text).open_owners(text, **options)


def open_log(target: Target, session: str | None = None) -> tuple[LogTail, str]:
    """One log's reader and its name there: what its turn is read back through."""
    return _backend(text := os.fspath(target), session).open_log(text, session)


def open_fleet(target: Target) -> tuple[LogReader, list[str], Database | None]:
    """A source's reader, every session name in it, and its database (URL or libpq conninfo)."""
    conninfo = "=" in (text := os.fspath(target)) and not os.path.isdir(text)
    return _backend(text, on_database=conninfo).open_fleet(text)


def open_database(target: Target, *, deleting: bool = False) -> Database:
    """The database a URL or conninfo names; ``deleting`` refuses an empty source, a directory."""
    text = os.fspath(target)
    elsewhere = deleting and not (text and not os.path.isdir(text))
    return _backend(text, on_database=not elsewhere).open_database(text)


def _backend(text: str, session: str | None = None, *, on_database: bool = False) -> Backend:
    if on_database or text.startswith(("postgresql://", "postgres://")):
        from .postgres import admin

        return cast("Backend", admin)  # a module with __all__ is no protocol's, for mypy
    from . import _log_file

    if not text:  # would be read as the current directory
        raise UsageError(_log_file.EMPTY)
    if session is not None:
        _log_file.log_path(text)  # a conninfo is said to be one
        raise UsageError("--session goes with a postgresql:// URL, not a file")
    return cast("Backend", _log_file)
