"""The plans of the scripted durable run (tests/integrations/dbos_worker.py)."""

from __future__ import annotations

PLANS: list[list[dict[str, str]]] = [
    [
        {"content": "Read the failing test", "status": "in_progress"},
        {"content": "Fix the parser", "status": "pending"},
    ],
    [
        {"content": "Read the failing test", "status": "completed"},
        {"content": "Fix the parser", "status": "in_progress"},
    ],
    [
        {"content": "Read the failing test", "status": "completed"},
        {"content": "Fix the parser", "status": "completed"},
        {"content": "Run the suite", "status": "in_progress"},
    ],
    [
        {"content": "Read the failing test", "status": "completed"},
        {"content": "Fix the parser", "status": "completed"},
        {"content": "Run the suite", "status": "completed"},
    ],
]
