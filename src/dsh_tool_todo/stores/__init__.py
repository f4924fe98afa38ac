"""Where session logs live: in memory, in JSON Lines files, in PostgreSQL.

Every store speaks one session protocol (:class:`dsh_tool_todo.protocols.StoreSession`):
``append`` returns the recorded event with its ``seq``, ``subscribe`` registers a
listener called in log order, ``latest`` reads the newest event of given types
cheaply (how a host resumes a projection), and ``close`` releases the writer's
claim. Each store module imports its own dependencies only when imported.

Viewers read stored logs through one protocol,
:class:`dsh_tool_todo.protocols.LogReader`; :func:`open_reader` is the one
place that turns a directory or a ``postgresql://`` URL into a store's reader.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..protocols import LogReader

__all__ = ["open_reader"]

POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def open_reader(target: str | os.PathLike[str]) -> LogReader:
    """The reader of the logs ``target`` names: a ``postgresql://`` (or ``postgres://``)
    URL, or a directory of JSONL logs.

    Nothing is read or connected here; a backend's driver is imported only
    when its reader is asked for.
    """
    text = os.fspath(target)
    if text.startswith(POSTGRES_SCHEMES):
        from .postgres import PostgresReader

        return PostgresReader(text)
    from pathlib import Path

    from .jsonl import JsonlReader

    return JsonlReader(Path(text))
