"""The PostgreSQL store's exceptions: each is also one of :mod:`dsh_tool_todo.errors`' kinds.

Catch :class:`~dsh_tool_todo.errors.StoreUnavailable` (or ``LogBusy``,
``StoreNotReady``) to handle every store alike; these say that PostgreSQL was
the one that failed.
"""

from __future__ import annotations

from ...errors import LogBusy, StoreNotReady, StoreUnavailable, TodoError

__all__ = [
    "CommitUnknown",
    "PostgresStoreError",
    "PostgresUnavailable",
    "SchemaNotReady",
    "WriterConflict",
]


class PostgresStoreError(TodoError):
    """The PostgreSQL store could not do what was asked; the message says why."""


class PostgresUnavailable(PostgresStoreError, StoreUnavailable):
    """The server could not be reached, or the connection broke: nothing was recorded."""


class CommitUnknown(PostgresUnavailable):
    """The connection broke while an event was being committed, and reading it back failed.

    The event may or may not be in the log; the session checks again before
    its next append, and then tells its listeners if it was recorded.
    """


class SchemaNotReady(PostgresStoreError, StoreNotReady):
    """The database has no table of this library, or an older or newer schema."""


class WriterConflict(PostgresStoreError, LogBusy):
    """Another writer recorded this seq first: one writer per session, this one is stale."""
