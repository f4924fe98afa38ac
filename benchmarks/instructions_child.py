"""One side of the instruction count, run under callgrind by ``bench_instructions``.

    python benchmarks/instructions_child.py SIDE SIZE CALLS

Every run builds and warms the same things (a host, an agent, the limit's
validator, every side called a few hundred times), whatever its side, then calls
SIDE at SIZE items CALLS times: the difference between a run of N calls and a
run of none is the cost of N calls alone. SIDE is ``call`` (``host.call_tool``,
whose session is emptied afterwards, as the timed rows empty it between
batches), ``limit`` (one strict ``validate_json``) or ``loop`` (a call of a
function that does nothing: the loop's own cost, taken out of both).
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable

from workloads import limit_validator, new_host, real_args

WARMUP = 300


def sides(size: int) -> tuple[dict[str, Callable[[], object]], Callable[[], None]]:
    raw = real_args(size)
    limit = limit_validator()
    host = new_host()
    agent = host.new_agent()

    def call() -> object:
        return host.call_tool("todo_write", raw, agent=agent)

    def strict() -> object:
        return limit.validate_json(raw)

    def nothing() -> object:
        return None

    return {"call": call, "limit": strict, "loop": nothing}, agent.session.events.clear


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
