"""Rows 1 and 2: one ``todo_write`` call in memory, against the strict limit, the lax floor
and a peer.

The limit is one strict ``validate_json`` pass of ``{todos: list[Todo]}`` over the same
bytes, unknown keys refused: decoding and the schema, what every call must do. The
lax floor (``json.loads`` + a default-mode ``TypeAdapter(list[TypedDict])``) is kept
for continuity with earlier figures; it is slower than the limit.
"""

from __future__ import annotations

import json
from collections.abc import Coroutine
from typing import Any

from pydantic import TypeAdapter
from pydantic_core import from_json
from report import Row, fmt_ns, skipped
from timing import Call, batched, cache_walker, cold, interleaved, threaded
from workloads import CALL_SIZES, FloorTodo, limit_validator, new_host, real_args

from dsh_tool_todo.core._accept import accept_counted
from dsh_tool_todo.host import AsyncMemorySession

LIMIT_TARGET, LIMIT_AIM = 1.8, 1.5
FLOOR_TARGET = 1.5
PEER_TARGET = 15.0
HEADLINE = CALL_SIZES[0]


def our_call(host: Any, raw: str) -> tuple[Call, Call]:
    """One call of ``raw`` through the host on a fresh agent, and what empties that agent's
    session between timed batches."""
    agent = host.new_agent()

    def call() -> object:
        return host.call_tool("todo_write", raw, agent=agent)

    text = call()
    assert isinstance(text, str), text
    assert text.startswith("Updated todo list"), text
    return call, agent.session.events.clear


def references(raw: str) -> tuple[Call, Call]:
    """The strict limit and the lax floor, on the same raw text."""
    limit = limit_validator()
    floor = TypeAdapter(list[FloorTodo])

    def strict() -> object:
        return limit.validate_json(raw)

    def lax() -> object:
        return floor.validate_python(json.loads(raw)["todos"])

    return strict, lax


def _row(section: str, case: str, contender: str, reference: str, ratio: Any, **kw: Any) -> Row:
    note = f"middle half of rounds {ratio.text()}"
    if kw.get("note"):
        note = f"{kw.pop('note')}; {note}"
    return Row(section, case, contender, reference, ratio.median, note=note, **kw)


def limit_rows(seconds: float) -> list[Row]:
    """``host.call_tool`` on the raw JSON text vs the strict limit and the lax floor."""
    host = new_host()
    rows = []
    floor_rows = []
    for size in CALL_SIZES:
        raw = real_args(size)
        call, reset = our_call(host, raw)
        strict, lax = references(raw)
        result = interleaved(
            {"call": batched(call), "limit": batched(strict), "floor": batched(lax)},
            reference="limit",
            seconds=seconds,
            reset=reset,
        )
        ns = result.per_call_ns
        headline = size == HEADLINE
        ratio = result.ratio("call", "limit")
        rows.append(
            _row(
                "1 call vs strict limit",
                f"{size} items",
                f"call_tool {fmt_ns(ns['call'])}",
                f"validate_json {fmt_ns(ns['limit'])}",
                ratio,
                target=f"≤{LIMIT_TARGET}x (aim {LIMIT_AIM}x)" if headline else "info",
                met=ratio.median <= LIMIT_TARGET if headline else None,
                numbers=result.numbers("call", "limit"),
            )
        )
        ratio = result.ratio("call", "floor")
        floor_rows.append(
            _row(
                "1 call vs lax floor",
                f"{size} items",
                f"call_tool {fmt_ns(ns['call'])}",
                f"loads+TypeAdapter {fmt_ns(ns['floor'])}",
                ratio,
                target=f"≤{FLOOR_TARGET}x",
                met=ratio.median <= FLOOR_TARGET,
                note=f"limit/floor {result.ratio('limit', 'floor').median:.2f}x",
                numbers=result.numbers("call", "floor"),
            )
        )
    return rows + floor_rows


def cold_rows(seconds: float) -> list[Row]:
    """Each call timed alone after walking 32 MB, as between two model turns."""
    host = new_host()
    walk = cache_walker(32)
    rows = []
    for size in CALL_SIZES[:2]:
        raw = real_args(size)
        call, reset = our_call(host, raw)
        strict, lax = references(raw)
        result = interleaved(
            {"call": cold(call, walk), "limit": cold(strict, walk), "floor": cold(lax, walk)},
            reference="limit",
            seconds=seconds,
            batch=3,
            reset=reset,
            min_rounds=21,
            warmup=3,
        )
        ns = result.per_call_ns
        rows.append(
            _row(
                "1 call, caches disturbed",
                f"{size} items",
                f"call_tool {fmt_ns(ns['call'])}",
                f"validate_json {fmt_ns(ns['limit'])}",
                result.ratio("call", "limit"),
                target="info",
                note=f"vs lax floor {result.ratio('call', 'floor').median:.2f}x"
                "; each call alone after a 32 MB walk",
                numbers=result.numbers("call", "limit"),
            )
        )
    return rows


def _drive(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """Run a coroutine that never suspends, as an event loop's task step runs it."""
    try:
        coroutine.send(None)
    except StopIteration as stop:
        return stop.value
    coroutine.close()
    raise RuntimeError("the call suspended: it needs a running event loop")


def async_rows(seconds: float) -> list[Row]:
    """``await host.acall_tool`` on an asyncio session (coroutine ``append``)."""
    host = new_host()
    raw = real_args(HEADLINE)
    agent = host.new_agent(session=AsyncMemorySession())

    def call() -> object:
        return _drive(host.acall_tool("todo_write", raw, agent=agent))

    assert str(call()).startswith("Updated todo list")
    strict, _ = references(raw)
    result = interleaved(
        {"call": batched(call), "limit": batched(strict)},
        reference="limit",
        seconds=seconds,
        reset=agent.session.events.clear,
    )
    ns = result.per_call_ns
    return [
        _row(
            "1 call via acall_tool",
            f"{HEADLINE} items",
            f"acall_tool {fmt_ns(ns['call'])}",
            f"validate_json {fmt_ns(ns['limit'])}",
            result.ratio("call", "limit"),
            target="info",
            note="AsyncMemorySession; the coroutine stepped as a task steps it",
            numbers=result.numbers("call", "limit"),
        )
    ]


def thread_rows(seconds: float) -> list[Row]:
    """Two threads calling at once, each on its own agent of one host."""
    host = new_host()
    raw = real_args(HEADLINE)
    first, reset_first = our_call(host, raw)
    second, reset_second = our_call(host, raw)
    strict, _ = references(raw)

    def reset() -> None:
        reset_first()
        reset_second()

    result = interleaved(
        {"call": threaded(first, second), "limit": threaded(strict, strict)},
        reference="limit",
        seconds=seconds,
        batch_ns=20_000_000,
        reset=reset,
    )
    ns = result.per_call_ns
    return [
        _row(
            "1 call, two threads",
            f"{HEADLINE} items",
            f"call_tool {fmt_ns(ns['call'])}",
            f"validate_json {fmt_ns(ns['limit'])}",
            result.ratio("call", "limit"),
            target="info",
            note="wall time per call, two agents, both sides on two threads",
            numbers=result.numbers("call", "limit"),
        )
    ]


class _SilentSession:
    """A session whose append records nothing: the tool's own cost, without a store."""

    def append(self, type: str, data: Any, /) -> None:
        return None


class _SilentAgent:
    session = _SilentSession()

    @property
    def agent(self) -> _SilentAgent:
        return self


# The call's layers, innermost first, by case (each its own, so repeat.py keeps them apart);
# each layer's cost is the step from the one before, and the last is the whole call.
LAYERS = {
    "1 the parser": "pydantic_core.from_json",
    "2 the shortcut": "_accept.py's decode and checks",
    "3 the tool": "tool.run, append does nothing",
    "4 the call": "call_tool, MemorySession + projection",
}


def call_layers(host: Any, raw: str) -> tuple[dict[str, Call], Call]:
    """Each of :data:`LAYERS` on ``raw``, and what empties the session of the whole call."""
    call, reset = our_call(host, raw)
    tool = host.tools["todo_write"]
    silent = _SilentAgent()
    sides = [
        lambda: from_json(raw),
        lambda: accept_counted(raw, False),
        lambda: tool.run(raw, silent),
        call,
    ]
    return dict(zip(LAYERS, sides, strict=True)), reset


def anatomy_rows(seconds: float) -> list[Row]:
    """The 6-item call taken apart: each layer timed against the limit in the same rounds,
    with no other side between them (so the call's ratio here is the pair's)."""
    raw = real_args(HEADLINE)
    layers, reset = call_layers(new_host(), raw)
    strict, _ = references(raw)
    sides = {"limit": batched(strict)} | {name: batched(side) for name, side in layers.items()}
    result = interleaved(sides, reference="limit", seconds=seconds, reset=reset)
    ns = result.per_call_ns
    return [
        _row(
            "1 call, taken apart",
            f"{HEADLINE} items, {name}",
            f"{LAYERS[name]} {fmt_ns(ns[name])}",
            f"validate_json {fmt_ns(ns['limit'])}",
            result.ratio(name, "limit"),
            target="info",
            numbers=result.numbers(name, "limit"),
        )
        for name in layers
    ]


def floor_rows(seconds: float) -> list[Row]:
    """Every in-memory call row: vs the limit and floor, taken apart, cold, async, threads."""
    return [
        *limit_rows(seconds),
        *anatomy_rows(seconds),
        *cold_rows(seconds),
        *async_rows(seconds),
        *thread_rows(seconds),
    ]


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
            for size in CALL_SIZES
        ]
    tool, runtime = peer
    host = new_host()
    rows = []
    for size in CALL_SIZES:
        raw = real_args(size)
        ours, reset = our_call(host, raw)

        def theirs(raw: str = raw) -> Any:
            args = {**json.loads(raw), "runtime": runtime}
            return tool.invoke({"type": "tool_call", "name": tool.name, "args": args, "id": "c0"})

        assert "todos" in theirs().update  # the peer really ran and wrote the list
        # the peer is the contender here: the ratio is how many times faster we are
        result = interleaved(
            {"theirs": batched(theirs), "ours": batched(ours)},
            reference="ours",
            seconds=seconds,
            reset=reset,
        )
        ns = result.per_call_ns
        headline = size == HEADLINE
        rows.append(
            _row(
                "2 vs LangChain",
                f"{size} items",
                f"call_tool {fmt_ns(ns['ours'])}",
                f"write_todos.invoke {fmt_ns(ns['theirs'])}",
                result.ratio("theirs", "ours"),
                target=f"≥{PEER_TARGET:g}x faster" if headline else "info",
                met=result.ratio("theirs", "ours").median >= PEER_TARGET if headline else None,
                note="ratio = LangChain time / ours",
                numbers=result.numbers("theirs", "ours"),
            )
        )
    return rows
