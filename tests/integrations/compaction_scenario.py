"""The one conversation every ``test_<framework>_compaction.py`` runs.

Two writes, then tool calls until the framework's compaction summarises the writes away; the
first request after the summary is where the reminder must appear, after the newest message.
"""

from __future__ import annotations

from typing import Any

from tests.conftest import todo

PLAN_A = [todo("Read the code", "in_progress"), todo("Fix the bug")]
PLAN_B = [todo("Read the code", "completed"), todo("Fix the bug", "in_progress")]
SUMMARY = "The user asked to fix a bug; the code was read."
SYSTEM = "You fix bugs."
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("todo_write", {"todos": PLAN_A}),
    ("todo_write", {"todos": PLAN_B}),
    ("look", {"path": "a.py"}),
    ("look", {"path": "b.py"}),
    ("look", {"path": "c.py"}),  # the answer to the first request after the summary
]
