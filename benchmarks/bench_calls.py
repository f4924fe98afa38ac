"""Rows 1 and 2: one ``todo_write`` call in memory, against the validation floor and a peer."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pydantic import TypeAdapter
from report import Row, fmt_ns, skipped
from timing import paired
from workloads import SIZES, FloorTodo, new_host, raw_args

FLOOR_TARGET, FLOOR_AIM = 1.5, 1.2
PEER_TARGET = 15.0


def our_call(host: Any, size: int) -> tuple[str, Callable[[], object], Callable[[], None]]:
    """The model's raw arguments for ``size`` items, one call of them through the host on a
    fresh agent, and what empties that agent's session between timed batches."""
    raw = raw_args(size)
    agent = host.new_agent()

    def call() -> object:
        return host.call_tool("todo_write", raw, agent=agent)

    return raw, call, agent.session.events.clear


def floor_rows(seconds: float) -> list[Row]:
    """``host.call_tool`` on the raw JSON text vs ``json.loads`` + one TypeAdapter validation."""
    floor = TypeAdapter(list[FloorTodo])
    host = new_host()
    rows = []
    for size in SIZES:
        raw, contender, reset = our_call(host, size)
        text = contender()
        assert isinstance(text, str), text
        assert text.startswith("Updated todo list"), text

        def reference(raw: str = raw) -> object:
            return floor.validate_python(json.loads(raw)["todos"])

        result = paired(contender, reference, seconds=seconds, reset=reset)
        rows.append(
            Row(
                "1 call, in memory",
                f"{size} items",
                f"call_tool {fmt_ns(result.contender_ns)}",
                f"loads+TypeAdapter {fmt_ns(result.reference_ns)}",
                result.ratio,
                f"≤{FLOOR_TARGET}x (aim {FLOOR_AIM}x)",
                result.ratio <= FLOOR_TARGET,
                numbers=result.numbers(),
            )
        )
    return rows


def peer_tool() -> tuple[Any, Any] | None:
    """LangChain's ``write_todos`` and the runtime its ToolNode would inject, if installed."""
    try:
        from langchain.agents.middleware import TodoListMiddleware
        from langchain.tools import ToolRuntime
    except ImportError:
        return None
    (tool,) = TodoListMiddleware().tools
    runtime: Any = ToolRuntime(
        state={"messages": []},
        context=None,
        config={},
        stream_writer=lambda _chunk: None,
        tool_call_id="call_0",
        store=None,
    )
    return tool, runtime


def peer_rows(seconds: float) -> list[Row]:
    """LangChain's ``write_todos`` invoked as its ToolNode does, vs ``host.call_tool``.

    Both start from the same raw JSON text: a LangChain chat model decodes the
    arguments before the ToolCall dict exists, so the peer pays ``json.loads`` too.
    """
    peer = peer_tool()
    if peer is None:
        return [
            skipped("2 vs LangChain", f"{size} items", "langchain not installed (extra `bench`)")
            for size in SIZES
        ]
    tool, runtime = peer
    host = new_host()
    rows = []
    for size in SIZES:
        raw, ours, reset = our_call(host, size)

        def theirs(raw: str = raw) -> Any:
            args = {**json.loads(raw), "runtime": runtime}
            return tool.invoke({"type": "tool_call", "name": tool.name, "args": args, "id": "c0"})

        assert "todos" in theirs().update  # the peer really ran and wrote the list
        # the peer is the reference here: the ratio is how many times faster we are
        result = paired(theirs, ours, seconds=seconds, reset=reset)
        rows.append(
            Row(
                "2 vs LangChain",
                f"{size} items",
                f"call_tool {fmt_ns(result.reference_ns)}",
                f"write_todos.invoke {fmt_ns(result.contender_ns)}",
                result.ratio,
                f"≥{PEER_TARGET:g}x faster" if size == SIZES[0] else "info",
                result.ratio >= PEER_TARGET if size == SIZES[0] else None,
                note="ratio = LangChain time / ours",
                numbers=result.numbers(contender="langchain_ns", reference="ours_ns"),
            )
        )
    return rows
