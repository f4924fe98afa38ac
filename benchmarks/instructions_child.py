"""One side of the instruction count, run under callgrind by ``bench_instructions``.

    python benchmarks/instructions_child.py SIDE SIZE CALLS

Every run builds and warms the same things (a host, an agent, the limit's
validator, every side called a few hundred times), whatever its side, then calls
SIDE at SIZE items CALLS times: the difference between a run of N calls and a
run of none is the cost of N calls alone. SIDE is ``limit`` (one strict
``validate_json``), ``loop`` (a call of a function that does nothing: the
loop's own cost, taken out of every other side) or one of the call's layers of
``bench_calls.call_layers``, the last of which is the whole call (its session
is emptied afterwards, as the timed rows empty it between batches). Two more
sides count a whole agent session (``bench_session``): ``session`` (a fresh
agent and its calls) and ``session-limit`` (one strict pass over each of its
texts); their CALLS counts sessions. And two count the owner registry in memory, the
host's projections attached on open: ``owner-open`` (a new owner's session opened,
called once with the first text, closed) and ``owner-steady`` (a call of one owner).
"""

from __future__ import annotations

import gc
import itertools
import sys
from typing import Any

from bench_calls import call_layers, references
from bench_session import limit_passes, session_texts, whole_session
from timing import Call
from workloads import new_host, real_args

from dsh_tool_todo.stores.owners import OwnerRegistry

WARMUP = 300


def sides(size: int) -> tuple[dict[str, Call], Call]:
    raw = real_args(size)
    host = new_host()
    layers, empty = call_layers(host, raw)
    strict, _ = references(raw)

    def nothing() -> object:
        return None

    every = {"limit": strict, "loop": nothing}
    every |= layers
    texts = session_texts()
    every |= {"session": whole_session(host, texts), "session-limit": limit_passes(texts)}
    every |= owner_sides(host, texts[0])
    return every, empty


def owner_sides(host: Any, first: str) -> dict[str, Call]:
    """A new owner's open + first call + close, and a steady call of one owner (in memory)."""
    owners = OwnerRegistry(None, on_open=lambda _key, session: host.new_agent(session))
    tool = host.tools["todo_write"]
    owners.call("steady", tool, first)
    fresh = (f"owner-{n}" for n in itertools.count())

    def open_first_close() -> object:
        key = next(fresh)
        text = owners.call(key, tool, first)
        owners.close(key)
        return text

    def steady() -> object:
        return owners.call("steady", tool, first)

    return {"owner-open": open_first_close, "owner-steady": steady}


def main(side: str, size: int, calls: int) -> None:
    every, empty = sides(size)
    for run in every.values():
        for _ in range(WARMUP):
            run()
    empty()
    gc.collect()
    gc.disable()  # as in the timed rows: no side pays for a collection another set off
    run = every[side]
    for _ in range(calls):
        run()
    empty()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
