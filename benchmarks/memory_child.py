"""One memory case, run alone in a fresh process so its peak RSS is its own.

    python benchmarks/memory_child.py CASE CALLS SIZE
    python benchmarks/memory_child.py collector CASE CALLS SIZE

Prints the process's peak resident set size in bytes as JSON; with ``collector``,
what the garbage collector cost the run instead (time in collections, the longest
pause), timed with ``gc.callbacks``.

On Linux ``getrusage``'s ``ru_maxrss`` survives ``exec``: a child started by a
large parent reports at least the parent's peak. ``VmHWM`` in /proc belongs to
this process's own address space, so it is the figure used where it exists.
"""

from __future__ import annotations

import gc
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

from workloads import new_host, raw_args, real_args

FREEZE_EVERY = 1000


def run(case: str, calls: int, size: int, directory: str) -> object:
    """Build what the case keeps alive; returning it keeps it alive until RSS is read."""
    if case == "baseline":  # the interpreter, pydantic, the plugin, a host: no calls
        host = new_host()
        return host.new_agent()
    if case == "floor":  # the decoded arguments alone, which any in-memory log must hold
        return [json.loads(raw_args(size, index))["todos"] for index in range(calls)]
    host = new_host()
    if case == "memory":
        agent = host.new_agent()
    elif case == "disk":
        from dsh_tool_todo.stores.jsonl import JsonlSession

        agent = host.new_agent(session=JsonlSession(Path(directory) / "session.jsonl"))
    else:
        raise SystemExit(f"unknown case {case!r}")
    for index in range(calls):
        text = host.call_tool("todo_write", raw_args(size, index), agent=agent)
        if not text.startswith("Updated"):
            raise SystemExit(text)
    return agent


def own_peak() -> int | None:
    try:
        status = Path("/proc/self/status").read_text(encoding="ascii")
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024  # "VmHWM:   123456 kB"
    return None


def collector(case: str, calls: int, size: int, directory: str) -> dict[str, float]:
    """Time a session of ``calls`` calls and the collections that run during it.

    ``memory``: the reference host's in-memory session, the collector as Python
    sets it. ``freeze``: the same, with the host calling ``gc.freeze()`` every
    1,000 calls (a process-wide choice only a host can make). ``disk``: a
    ``JsonlSession``, which keeps no event in memory.
    """
    host = new_host()
    if case == "disk":
        from dsh_tool_todo.stores.jsonl import JsonlSession

        agent = host.new_agent(session=JsonlSession(Path(directory) / "session.jsonl"))
    elif case in ("memory", "freeze"):
        agent = host.new_agent()
    else:
        raise SystemExit(f"unknown case {case!r}")
    texts = [real_args(size, variant) for variant in range(FREEZE_EVERY)]
    pauses: list[float] = []
    started = [0.0]

    def timer(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            pauses.append(time.perf_counter() - started[0])

    freeze = case == "freeze"
    gc.collect()
    gc.callbacks.append(timer)
    start = time.perf_counter()
    for index in range(calls):
        host.call_tool("todo_write", texts[index % FREEZE_EVERY], agent=agent)
        if freeze and index % FREEZE_EVERY == FREEZE_EVERY - 1:
            gc.freeze()
    run = time.perf_counter() - start
    gc.callbacks.remove(timer)
    return {
        "run_seconds": run,
        "gc_seconds": sum(pauses),
        "max_pause_seconds": max(pauses, default=0.0),
        "collections": len(pauses),
        "tracked_objects": len(gc.get_objects()),
    }


def main() -> None:
    if sys.argv[1] == "collector":
        case, calls, size = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
        with tempfile.TemporaryDirectory(prefix="dsh-todo-gc-") as directory:
            print(json.dumps({"case": case, **collector(case, calls, size, directory)}))
        return
    case, calls, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    with tempfile.TemporaryDirectory(prefix="dsh-todo-mem-") as directory:
        kept = run(case, calls, size, directory)
        rusage = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
        own = own_peak()
        peak = rusage if own is None else own
        print(json.dumps({"case": case, "peak_rss": peak, "ru_maxrss": rusage}))
        del kept


if __name__ == "__main__":
    main()
