"""The scripted agent session that ``dsh-todo demo`` plays through the reference host."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Mapping
from contextlib import closing
from pathlib import Path
from typing import Any, TextIO

from ..core.contract import EVENT_TYPE
from ..core.options import PLUGIN_NAME
from ..host import Host
from ..host.loader import discover_plugins
from ..plans.checklist import render_checklist
from ..stores import open_session

__all__: list[str] = []

Todo = dict[str, str]


def _todos(*items: tuple[str, str]) -> dict[str, list[Todo]]:
    return {"todos": [{"content": content, "status": status} for content, status in items]}


READ, FLAG, TESTS, DOCS = (
    "Read the report command",
    "Add the --json flag",
    "Write tests for --json",
    "Document --json in the README",
)
FIND, PASS = "Find where CI runs report", "Pass --json there"

# Each turn: what the user asked, then the model's todo_write calls in order.
SCRIPT: list[tuple[str, list[Any]]] = [
    (
        "Add a --json flag to the report command.",
        [
            _todos((READ, "in_progress"), (FLAG, "pending"), (TESTS, "pending"), (DOCS, "pending")),
            # Two tasks active at once: refused unless the deployment allows parallel work.
            _todos(
                (READ, "completed"),
                (FLAG, "in_progress"),
                (TESTS, "in_progress"),
                (DOCS, "pending"),
            ),
            _todos(
                (READ, "completed"), (FLAG, "in_progress"), (TESTS, "pending"), (DOCS, "pending")
            ),
            # A status borrowed from another tool: refused, and the error says what to send.
            '{"todos": [{"content": "Read the report command", "status": "done"}]}',
            _todos(
                (READ, "completed"), (FLAG, "completed"), (TESTS, "in_progress"), (DOCS, "pending")
            ),
            _todos(
                (READ, "completed"),
                (FLAG, "completed"),
                (TESTS, "completed"),
                (DOCS, "in_progress"),
            ),
            _todos(
                (READ, "completed"), (FLAG, "completed"), (TESTS, "completed"), (DOCS, "completed")
            ),
        ],
    ),
    (
        "Make CI call report with --json too.",
        [
            _todos((FIND, "in_progress"), (PASS, "pending")),
            _todos((FIND, "completed"), (PASS, "in_progress")),
            _todos((FIND, "completed"), (PASS, "completed")),
        ],
    ),
]


def run_demo(
    log: Path,
    out: TextIO,
    *,
    parallel: bool = False,
    draw: Callable[[list[Todo]], str] = render_checklist,
) -> None:
    """Play :data:`SCRIPT` for one agent whose session is the JSONL log at ``log``."""
    host = Host(discover_plugins(), {PLUGIN_NAME: {"allowParallelInProgress": parallel}})
    with closing(open_session(log)) as session:
        agent = host.new_agent(session)
        session.subscribe(lambda event: _redraw(event, out, draw))
        for number, (prompt, calls) in enumerate(SCRIPT, start=1):
            print(f"\n=== turn {number} — user: {prompt}", file=out)
            session.append("turn/start", {"prompt": prompt})
            for args in calls:
                print(f"\nmodel → todo_write {_summary(args)}", file=out)
                print(f"tool  → {host.call_tool('todo_write', args, agent=agent)}", file=out)
            session.append("turn/end", {})
    print(f"\nsession log: {log}", file=out)


def _redraw(event: Mapping[str, Any], out: TextIO, draw: Callable[[list[Todo]], str]) -> None:
    if event["type"] == EVENT_TYPE:  # as a UI does: from the session event, not the result
        print(textwrap.indent(draw(event["data"]["todos"]), "    "), file=out)


def _summary(args: Any) -> str:
    """The raw text where the model sent one, else the size of the list it sent."""
    if isinstance(args, str):
        return args
    statuses = [item["status"] for item in args["todos"]]
    counted = ", ".join(f"{statuses.count(s)} {s}" for s in dict.fromkeys(statuses))
    return f"with {len(statuses)} todos ({counted})"
