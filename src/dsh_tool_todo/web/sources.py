"""Where the web view reads session logs: a directory of JSONL logs, or PostgreSQL.

A :class:`PlanSource` answers four questions, all read-only: which sessions
exist (with their last activity and progress), what the last events before a
given seq are (the history tail page), what the newest event and the event
deciding the plan are (the snapshot a stream starts from), and which events
follow a given seq (the live follow). Everything the app serves is built on
these, so a new store needs only this seam.

Every read goes from the end of a log: the cost of a page, a snapshot or a
resume depends on how far back it reaches, never on the log's length.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Collection
from typing import Any

from ..errors import InvalidLog, SessionNotFound, StoreUnavailable, UsageError
from ..projection import PLAN_EVENTS, progress_of
from ..protocols import LogReader, Progress, SessionSummary, Snapshot, TailPage
from ..stores.jsonl import JsonlReader

Event = dict[str, Any]


# The seam and its value types live with the core; their old names stay importable here.
PlanSource = LogReader
SessionInfo = SessionSummary
SourceUnavailable = StoreUnavailable


# --- JSONL directory -------------------------------------------------------------

# The reader lives in its store's package; its old name stays importable here.
JsonlDirectorySource = JsonlReader


# --- PostgreSQL: moved to dsh_tool_todo.stores.postgres.reader ---------------------


def __getattr__(name: str) -> Any:
    if name == "PostgresSource":  # the old name, importable without importing psycopg first
        from ..stores.postgres import PostgresReader

        return PostgresReader
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def open_source(spec: str | os.PathLike[str]) -> LogReader:
    """The reader ``spec`` names: see :func:`dsh_tool_todo.stores.open_reader`."""
    from ..stores import open_reader

    return open_reader(spec)
