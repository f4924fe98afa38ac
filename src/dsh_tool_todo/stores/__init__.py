"""The picker: the only code that tells a ``postgresql://`` URL from a path (docs/stores.md)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, cast

from . import _log_file
from ._paths import source_text as _text  # a URL's scheme in any case: libpq reads lower case

if TYPE_CHECKING:
    from ..protocols import LogReader, StoreSession
    from ._log_file import Backend, LogTail, Plan, Plans, Pruning, Target, Wait
    from .owners import OwnerRegistry
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
    "pick_log",
    "prune_logs",
]


def open_reader(target: Target, *, check: bool = False) -> LogReader:
    """The reader of a directory of JSONL logs or of a database (nothing is read here; with
    ``check``, a source that cannot be read is refused first, in one line: ``dsh-todo serve``)."""
    backend = _backend(text := _text(target), conninfo=False)
    if check:
        backend.check_store(text)
    return backend.open_reader(text)


def current_plan(target: Target, session: str | None = None) -> Plan:
    """The plan now in a JSONL log, or in ``session`` of a directory or database (``show``)."""
    return _backend(text := _text(target)).show_plan(text, session)


def follow_plans(
    target: Target, session: str | None = None, *, wait: Wait = None, interval: float = 0.2
) -> Plans:
    """A title, and the plan now and after each change, forever (``dsh-todo watch``)."""
    return _backend(text := _text(target)).follow_plans(text, session, wait, interval)


def pick_log(target: Target, session: str | None = None) -> tuple[str, str | None]:
    """The ``(target, session)`` of one log: ``session``'s, or the most recently written."""
    return _backend(text := _text(target)).pick_log(text, session)


def open_session(target: Target, session: str | None = None) -> StoreSession:
    """The writer of a JSONL log, or of ``session`` in a directory or a database."""
    return _backend(text := _text(target), conninfo=False).open_session(text, session)


def open_owners(target: Target, **options: Any) -> OwnerRegistry:
    """The owner registry of a directory (``~`` expanded) or database (OwnerRegistry options)."""
    text = os.path.expanduser(_text(target))
    return _backend(text, conninfo=False).open_owners(text, **options)


def open_log(target: Target, session: str | None = None) -> tuple[LogTail, str]:
    """One log's reader and its name there: what its turn is read back through."""
    return _backend(text := _text(target)).open_log(text, session)


def open_fleet(target: Target) -> tuple[LogReader, list[str], Database | None]:
    """A source's reader, every session name in it, and its database (URL or libpq conninfo)."""
    return _backend(text := _text(target)).open_fleet(text)


def prune_logs(target: Target, days: float, *, dry_run: bool = False) -> Pruning:
    """Delete the logs last written over ``days`` days ago (``dry_run``: none): where, which, and
    each old one left, with why (a writer holds it, say)."""
    return _backend(text := _text(target)).prune_logs(text, days, dry_run)


def open_database(target: Target, *, deleting: bool = False) -> Database:
    """The database a URL or conninfo names; ``deleting`` refuses an empty source, a directory."""
    return _backend(text := _text(target), on_database=not deleting).open_database(text)


def _backend(text: str, *, on_database: bool = False, conninfo: bool = True) -> Backend:
    url = text.startswith(("postgresql://", "postgres://"))
    if on_database or url or (conninfo and _log_file.is_conninfo(text)):
        from .postgres import admin

        return cast("Backend", admin)  # a module with __all__ is no protocol's, for mypy
    return _log_file.checked(text)
