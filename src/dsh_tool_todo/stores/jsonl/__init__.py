"""Session logs in JSON Lines files: the writer, the readers and the follower, in one package.

- :class:`JsonlSession` appends one event ``{seq, type, data}`` per line (one
  writer per log);
- :func:`read_events` reads a whole log, :func:`current_plan` its plan from the end;
- :func:`follow_plan` yields each new plan of a growing log (what ``dsh-todo
  watch`` draws);
- :class:`JsonlReader` is the :class:`~dsh_tool_todo.protocols.LogReader` of a
  directory of logs (what ``dsh-todo serve DIR`` reads).

A crash can tear only the line being written: readers ignore a torn last line
(with :class:`~dsh_tool_todo.errors.TornTailWarning`), and a writer opening the log cuts it off.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._tail import current_plan, follow_plan, read_events
from .session import JsonlSession

if TYPE_CHECKING:
    from .reader import JsonlReader


def __getattr__(name: str) -> Any:
    # The reader is async: importing it would load asyncio for every one-shot read.
    if name == "JsonlReader":
        from .reader import JsonlReader

        return JsonlReader
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "JsonlReader",
    "JsonlSession",
    "current_plan",
    "follow_plan",
    "read_events",
]
