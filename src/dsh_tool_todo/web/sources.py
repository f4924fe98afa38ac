"""The old home of the web view's readers; their names stay importable here.

The read seam is :class:`dsh_tool_todo.protocols.LogReader`; each store's
reader lives in its own package (:mod:`dsh_tool_todo.stores.jsonl`,
:mod:`dsh_tool_todo.stores.postgres`), and :func:`dsh_tool_todo.stores.open_reader`
picks one from a path or URL.
"""

from __future__ import annotations

import os
from typing import Any

from ..errors import LogReplaced, SessionNotFound, StoreUnavailable
from ..projection import PLAN_EVENTS, checked_deciding, progress_of
from ..protocols import Event, LogReader, Progress, SessionSummary, Snapshot, TailPage
from ..stores.jsonl import JsonlReader

__all__ = [
    "PLAN_EVENTS",
    "Event",
    "JsonlDirectorySource",
    "LogReplaced",
    "PlanSource",
    "Progress",
    "SessionInfo",
    "SessionNotFound",
    "Snapshot",
    "SourceUnavailable",
    "TailPage",
    "checked_deciding",
    "open_source",
    "progress_of",
]

PlanSource = LogReader
SessionInfo = SessionSummary
SourceUnavailable = StoreUnavailable
JsonlDirectorySource = JsonlReader


def __getattr__(name: str) -> Any:
    if name == "PostgresSource":  # importable without importing psycopg first
        from ..stores.postgres import PostgresReader

        return PostgresReader
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def open_source(spec: str | os.PathLike[str]) -> LogReader:
    """The reader ``spec`` names: see :func:`dsh_tool_todo.stores.open_reader`."""
    from ..stores import open_reader

    return open_reader(spec)
