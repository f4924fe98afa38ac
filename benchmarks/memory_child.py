"""One memory case, run alone in a fresh process so its peak RSS is its own.

    python benchmarks/memory_child.py CASE CALLS SIZE [DIR]

Prints the process's peak resident set size in bytes as JSON.

On Linux ``getrusage``'s ``ru_maxrss`` survives ``exec``: a child started by a
large parent reports at least the parent's peak. ``VmHWM`` in /proc belongs to
this process's own address space, so it is the figure used where it exists.
"""

from __future__ import annotations

import json
import resource
import sys
import tempfile
from pathlib import Path

from workloads import new_host, raw_args


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
        from dsh_tool_todo.sessionlog import JsonlSession

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


def main() -> None:
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
