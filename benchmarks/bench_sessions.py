"""``dsh-todo sessions DIR --json`` on a fleet of 100,000 JSONL logs: its time and its memory.

The fleet is written through the real writer (``JsonlSession``, each log named as an owner
registry names it): each log holds a ``turn/start`` and 4 ``todo/write`` events of 6 items of
43 characters (one item more done at each write); one root in four delegated a sub-agent,
whose log starts with its ``session/link`` (with the parent's tool-call id), is keyed
``<parent>/researcher@<call id>`` as the adapters key a delegated run, and ends with a
``session/end`` (one in ten ``failed``, with its error); one root in forty's sub-agent
delegated one level further.

Each run is the command in a fresh interpreter, its standard output to ``/dev/null``, after
one untimed run (the logs in the page cache): its wall time, its CPU time and its peak RSS
(its own high-water mark, ``VmHWM``, what ``/usr/bin/time -v`` calls "Maximum resident set
size"). Rows:

- the whole fleet against the goal (10 s per 100,000 sessions, 150 MiB), the median of
  ``rounds`` runs;
- memory per session: the peak RSS at the whole fleet less that at a quarter of it, per
  1,000 sessions, beside the bytes of output per 1,000 sessions (what holding the output
  would take): a ratio of sizes, the same on a loaded machine. What grows is the tree's
  nodes, held until the last log is read (a sub-agent may be listed before its parent);
  the goal of 3x keeps the logs' rows from being held again (the code before: 5x).

    python benchmarks/bench_sessions.py [--quick] [--sessions N]
    python benchmarks/bench_sessions.py --keep DIR [--sessions N]       # write a fleet, keep it
    python benchmarks/bench_sessions.py --against OTHER/src [--rounds 3]  # this tree vs another
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from report import Row, fmt_ns  # noqa: E402
from workloads import real_todos  # noqa: E402

SESSIONS = 100_000
QUICK_SESSIONS = 10_000
GOAL_SECONDS = 10.0  # per 100,000 sessions
GOAL_RSS = 150 << 20
WRITES = 4
ITEMS = 6


def _plan(variant: int, write: int) -> dict[str, Any]:
    items = real_todos(ITEMS, variant)
    for index, item in enumerate(items):
        item["status"] = (
            "completed" if index < write else "in_progress" if index == write else "pending"
        )
    return {"todos": items}


def _write(path: Path, variant: int, parent: str | None = None, call: str | None = None) -> None:
    from dsh_tool_todo.core.links import end_data
    from dsh_tool_todo.stores.jsonl import JsonlSession

    with JsonlSession(path, parent=parent, parent_call_id=call) as session:
        session.append("turn/start", {})
        for write in range(WRITES):
            session.append("todo/write", _plan(variant, write))
        if parent is not None:
            failed = variant % 10 == 0
            end = end_data("failed", "the search timed out") if failed else end_data("finished")
            session.append("session/end", end)


def write_fleet(directory: Path, sessions: int) -> dict[str, int]:
    """``sessions`` logs in ``directory`` (made if missing); how many roots and sub-agents."""
    from dsh_tool_todo.stores.owners import owner_file_name

    directory.mkdir(parents=True, exist_ok=True)
    counts = {"roots": 0, "sub-agents": 0}
    number = 0
    while counts["roots"] + counts["sub-agents"] < sessions:
        root = f"run-{number:06}"
        _write(directory / owner_file_name(root), number)
        counts["roots"] += 1
        parent, depth = root, 0
        # one root in four delegates; one in forty's sub-agent delegates one level further
        while (number % 4 == 0 and depth == 0) or (number % 40 == 0 and depth == 1):
            if counts["roots"] + counts["sub-agents"] >= sessions:
                break
            call = f"call_{number:06}_{depth}"
            key = f"{parent}/researcher@{call}"
            stem = owner_file_name(parent)[: -len(".jsonl")]  # the parent's session name
            _write(directory / owner_file_name(key), number + depth, stem, call)
            counts["sub-agents"] += 1
            parent, depth = key, depth + 1
        number += 1
    return counts


# `python -m dsh_tool_todo ARGS...`, saying its peak RSS at exit: the kernel's ru_maxrss of a
# child counts what its parent held when it was spawned (the benchmark's own memory), so the
# figure is the child's own high-water mark (VmHWM), where /proc has it
_RUN = """
import atexit, runpy, sys
def peak():
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    print("peak-rss", int(line.split()[1]) * 1024, file=sys.stderr)
    except OSError:
        pass
atexit.register(peak)
sys.argv = ["dsh-todo", *sys.argv[1:]]
runpy.run_module("dsh_tool_todo", run_name="__main__", alter_sys=True)
"""


def run_sessions(directory: Path, *, src: str | None = None) -> dict[str, float]:
    """One ``dsh-todo sessions DIR --json`` in a fresh interpreter (``src``: another tree's
    ``src`` directory on ``PYTHONPATH``), standard output to /dev/null: its wall and CPU
    seconds and its peak RSS."""
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = src
    command = [sys.executable, "-c", _RUN, "sessions", str(directory), "--json"]
    with open(os.devnull, "wb") as null:
        began = time.perf_counter()
        child = subprocess.Popen(command, stdout=null, stderr=subprocess.PIPE, env=env)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - began
    error = child.stderr.read().decode() if child.stderr else ""
    if child.stderr:
        child.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"dsh-todo sessions failed: {error[-2000:]}")
    told = [line.split()[1] for line in error.splitlines() if line.startswith("peak-rss ")]
    return {
        "seconds": wall,
        "cpu": usage.ru_utime + usage.ru_stime,
        "rss": float(told[-1]) if told else usage.ru_maxrss * 1024.0,
    }


def _output_bytes(directory: Path) -> int:
    command = [sys.executable, "-m", "dsh_tool_todo", "sessions", str(directory), "--json"]
    return len(subprocess.run(command, capture_output=True, check=True).stdout)


def measure(directory: Path, rounds: int) -> dict[str, Any]:
    run_sessions(directory)  # untimed: the logs into the page cache, as a fleet read often is
    runs = [run_sessions(directory) for _ in range(rounds)]
    return {
        "seconds": statistics.median(run["seconds"] for run in runs),
        "cpu": statistics.median(run["cpu"] for run in runs),
        "rss": statistics.median(run["rss"] for run in runs),
        "bytes": _output_bytes(directory),
        "runs": runs,
    }


def rows(*, quick: bool, sessions: int | None = None) -> list[Row]:
    count = sessions or (QUICK_SESSIONS if quick else SESSIONS)
    rounds = 1 if quick else 3
    goal = GOAL_SECONDS * count / SESSIONS
    base = Path(tempfile.mkdtemp(prefix="dsh-bench-sessions-"))
    try:
        kinds = write_fleet(base / "whole", count)
        write_fleet(base / "quarter", count // 4)
        whole = measure(base / "whole", rounds)
        quarter = measure(base / "quarter", rounds)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"sessions --json: {kinds}, whole {whole}, quarter {quarter}", file=sys.stderr)
    added = count - count // 4
    grown = max(0.0, whole["rss"] - quarter["rss"]) / added * 1000
    output = (whole["bytes"] - quarter["bytes"]) / added * 1000
    load = os.getloadavg()[0]
    return [
        Row(
            "sessions --json",
            f"JSONL, {count:,} sessions ({kinds['sub-agents']:,} sub-agents), to /dev/null",
            fmt_ns(whole["seconds"] * 1e9),
            f"goal {goal:g} s",
            whole["seconds"] / goal,
            target=f"≤ {goal:g} s, peak RSS ≤ {GOAL_RSS >> 20} MiB",
            met=whole["seconds"] <= goal and whole["rss"] <= GOAL_RSS,
            note=f"peak RSS {whole['rss'] / 2**20:.0f} MiB; CPU {whole['cpu']:.1f} s; "
            f"median of {rounds}; load average {load:.1f}",
            numbers=whole,
        ),
        Row(
            "sessions --json",
            f"peak RSS per 1,000 sessions more ({count // 4:,} to {count:,})",
            f"{grown / 2**10:.0f} KiB",
            f"output {output / 2**10:.0f} KiB",
            grown / output if output else None,
            target="≤ 3x the output",
            met=grown <= 3 * output,
            note=f"peak RSS {quarter['rss'] / 2**20:.0f} MiB at {count // 4:,} sessions",
            numbers={"whole": whole, "quarter": quarter},
        ),
    ]


def against(rounds: int, sessions: int, other: str) -> dict[str, list[dict[str, float]]]:
    """This tree's ``sessions --json`` and another's (its ``src`` on ``PYTHONPATH``) on one
    fleet, ``rounds`` runs of each, alternating which goes first."""
    base = Path(tempfile.mkdtemp(prefix="dsh-bench-sessions-"))
    trees = {"this tree": str(HERE.parent / "src"), "against": other}
    found: dict[str, list[dict[str, float]]] = {label: [] for label in trees}
    try:
        write_fleet(base, sessions)
        run_sessions(base)  # untimed: the logs into the page cache
        for round_ in range(rounds):
            order = list(trees.items())
            for label, src in order if round_ % 2 == 0 else order[::-1]:
                found[label].append(run_sessions(base, src=src))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--sessions", type=int, help="the fleet's size (default 100,000)")
    parser.add_argument("--keep", type=Path, metavar="DIR", help="only write a fleet into DIR")
    parser.add_argument("--against", metavar="SRC", help="another tree's src directory")
    parser.add_argument("--rounds", type=int, default=3, help="with --against: runs of each")
    args = parser.parse_args()
    count = args.sessions or SESSIONS
    if args.keep:
        print(write_fleet(args.keep, count))
        return 0
    if args.against:
        for label, runs in against(args.rounds, count, args.against).items():
            shown = ", ".join(f"{run['seconds']:.1f} s ({run['cpu']:.1f} s CPU)" for run in runs)
            rss = max(run["rss"] for run in runs) / 2**20
            print(f"{label}: {shown}; peak RSS {rss:.0f} MiB")
        print(f"load average {os.getloadavg()[0]:.1f}")
        return 0
    for row in rows(quick=args.quick, sessions=args.sessions):
        print(f"{row.section}: {row.case}: {row.contender} vs {row.reference}; {row.note}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
