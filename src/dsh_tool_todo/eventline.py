"""``json.loads`` of one log line, under its former import path.

It lives in :mod:`dsh_tool_todo.stores.jsonl._lines` now; see docs/benchmarks.md.
"""

from __future__ import annotations

from .stores.jsonl._lines import loads_line

__all__ = ["loads_line"]
