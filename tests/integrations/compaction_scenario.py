"""The one conversation every ``test_<framework>_compaction.py`` runs.

Two writes, then tool calls until the framework's compaction summarises the writes away; the
first request after the summary is where the reminder must appear, after the newest message.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

from dsh_tool_todo.plans.reminder import plan_reminder
from tests._builders import PLAN_A, PLAN_B

SUMMARY = "The user asked to fix a bug; the code was read."
SYSTEM = "You fix bugs."
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("todo_write", {"todos": PLAN_A}),
    ("todo_write", {"todos": PLAN_B}),
    ("look", {"path": "a.py"}),
    ("look", {"path": "b.py"}),
    ("look", {"path": "c.py"}),  # the answer to the first request after the summary
]


def reminder_text() -> str:
    """The reminder of the plan the conversation ends on."""
    text = plan_reminder(PLAN_B)
    assert text is not None
    return text


def as_user_message(text: str) -> bytes:
    """``text`` as the OpenAI-style user message the requests are compared in."""
    return json.dumps({"role": "user", "content": text}, sort_keys=True).encode()


def assert_unchanged_until_the_summary(
    plain: list[list[bytes]], reminded: list[list[bytes]], *, summary_at: int = 1
) -> None:
    """What each framework's run shows before the reminder: six requests each; across each
    write the next request starts with every byte of the previous one; until the summary
    the option changes nothing; the summary replaced the old turns, the writes with them."""
    assert len(plain) == len(reminded) == 6
    for before, after in itertools.pairwise(reminded[:4]):
        assert after[: len(before)] == before
    assert reminded[:4] == plain[:4]
    summarised = plain[4][summary_at] if summary_at >= 0 else b"".join(plain[4])
    assert SUMMARY.encode() in summarised
    assert b"todo_write" not in b"".join(plain[4])


def assert_added_last_and_kept(
    plain: list[list[bytes]], reminded: list[list[bytes]], reminder: bytes
) -> None:
    """The reminder is the one message after the newest: every byte before it is as without
    it, the system prompt first and unchanged; the next request starts with all of this one,
    the reminder in it once."""
    assert reminded[4][-1] == reminder
    assert reminded[4][:-1] == plain[4]
    assert reminded[4][0] == reminded[0][0] == b'{"content": "You fix bugs.", "role": "system"}'
    assert reminded[5][: len(reminded[4])] == reminded[4]
    assert reminded[5].count(reminder) == 1
