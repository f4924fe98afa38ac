"""The JSONL session log, under its original import path.

The store lives in :mod:`dsh_tool_todo.stores.jsonl`; this module keeps
``dsh_tool_todo.sessionlog`` working for hosts that import it.
"""

from __future__ import annotations

from .stores.jsonl import JsonlSession, TornTailWarning, current_plan, read_events

__all__ = ["JsonlSession", "TornTailWarning", "current_plan", "read_events"]
