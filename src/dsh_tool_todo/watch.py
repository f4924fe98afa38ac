"""Follow a growing JSONL session log, under its documented import path.

The follower lives in :mod:`dsh_tool_todo.stores.jsonl`:
:func:`follow_plan` yields the current plan, then each new one.
"""

from __future__ import annotations

from .stores.jsonl import follow_plan

__all__ = ["follow_plan"]
