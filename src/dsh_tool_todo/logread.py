"""Reading a JSON Lines session log, under its former import path.

The readers live in :mod:`dsh_tool_todo.stores.jsonl`; this module keeps the
names it used to hold importable.
"""

from __future__ import annotations

from .stores.jsonl._lines import (
    BLOCK_SIZE,
    LINE_START,
    Event,
    TornTailWarning,
    check_regular,
    invalid_line,
    line_number,
    line_start,
    lines_backwards,
    looks_torn,
    not_a_file,
    open_log,
    parse_event,
    warn_torn,
    whole_end,
    whole_lines_backwards,
)
from .stores.jsonl._tail import current_plan, read_events

__all__ = [
    "BLOCK_SIZE",
    "LINE_START",
    "Event",
    "TornTailWarning",
    "check_regular",
    "current_plan",
    "invalid_line",
    "line_number",
    "line_start",
    "lines_backwards",
    "looks_torn",
    "not_a_file",
    "open_log",
    "parse_event",
    "read_events",
    "warn_torn",
    "whole_end",
    "whole_lines_backwards",
]
