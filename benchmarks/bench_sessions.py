"""``dsh-todo sessions DIR --json`` on a fleet of 100,000 JSONL logs: its time and its memory.

The fleet is written through the real writer (``JsonlSession``, files named as an owner
registry names them): each log holds a ``turn/start`` and 4 ``todo/write`` events of 6 items
of 43 characters (an item more done at each write); one root in four delegated a sub-agent,
whose log starts with its ``session/link`` (the parent's tool-call id with it), is keyed
``<parent>/researcher@<call id>`` as the adapters key a delegated run, and ends with a
``session/end`` (one in ten ``failed``, with its error); one sub-agent in ten delegated one
more level down.

Each run is the command in a fresh interpreter, its standard output to ``/dev/null``; its
wall time and its peak RSS (the kernel's ``ru_maxrss`` of the child, what
``/usr/bin/time -v`` calls "Maximum resident set size"). Rows:

- the whole fleet against the goal (10 s, 150 MiB);
- memory growth: the peak RSS at the whole fleet less that at a quarter of it, per
  1,000 sessions, against what the output itself would take were it held (its bytes per
  1,000 sessions): a count, not a time, so it reads the same on a loaded machine.

    python benchmarks/bench_sessions.py [--quick] [--sessions N] [--keep DIR]
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
QUICK_SESSIONS = 20_000
GOAL_SECONDS = 10.0  # at 100,000 sessions; scaled with the count
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
    """``sessions`` logs in ``directory`` (made if missing); how many of each kind."""
    from dsh_tool_todo.stores.owners import owner_file_name

    directory.mkdir(parents=True, exist_ok=True)
    counts = {"roots": 0, "sub-agents": 0}
    number = 0
    while sum(counts.values()) < sessions:
        root = f"run-{number:06}"
        _write(directory / owner_file_name(root), number)
        counts["roots"] += 1
        parent, depth = root, 0
        # one root in four delegates; one sub-agent in ten delegates one level further
        while (number % 4 == 0 and depth == 0) or (number % 40 == 0 and depth == 1):
            if sum(counts.values()) >= sessions:
                break
            call = f"call_{number:06}_{depth}"
            key = f"{parent}/researcher@{call}"
            stem = owner_file_name(parent)[: -len(".jsonl")]
            _write(directory / owner_file_name(key), number + depth, stem, call)
            counts["sub-agents"] += 1
            parent, depth = key, depth + 1
        number += 1
    return counts


def run_sessions(directory: Path, *, src: str | None = None) -> dict[str, Any]:
    """One ``dsh-todo sessions DIR --json`` in a fresh interpreter, output to /dev/null: its
    wall time, peak RSS and output size (bytes)."""
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = src
    command = [sys.executable, "-m", "dsh_tool_todo", "sessions", str(directory), "--json"]
    with tempfile.TemporaryFile() as out, open(os.devnull, "wb") as null:
        began = time.perf_counter()
        child = subprocess.Popen(command, stdout=out, stderr=subprocess.PIPE, env=env)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - began
        child.returncode = os.waitstatus_to_exitcode(status)
        error = child.stderr.read().decode() if child.stderr else ""
        if child.stderr:
            child.stderr.close()
        if child.returncode != 0:
            raise RuntimeError(f"dsh-todo sessions failed ({child.returncode}): {error[-2000:]}")
        del null
        size = out.seek(0, os.SEEK_END)
    return {"seconds": wall, "rss": usage.ru_maxrss * 1024, "cpu": usage.ru_utime + usage.ru_stime,
            "bytes": size}


def measure(directory: Path, rounds: int) -> dict[str, Any]:
    runs = [run_sessions(directory) for _ in range(rounds)]
    return {
        "seconds": statistics.median(run["seconds"] for run in runs),
        "cpu": statistics.median(run["cpu"] for run in runs),
        "rss": statistics.median(run["rss"] for run in runs),
        "bytes": runs[0]["bytes"],
        "runs": runs,
    }


def rows(*, quick: bool, sessions: int | None = None) -> list[Row]:
    count = sessions or (QUICK_SESSIONS if quick else SESSIONS)
    rounds = 1 if quick else 3
    goal = GOAL_SECONDS * count / SESSIONS
    base = Path(tempfile.mkdtemp(prefix="dsh-bench-sessions-"))
    try:
        whole, quarter = base / "whole", base / "quarter"
        kinds = write_fleet(whole, count)
        write_fleet(quarter, count // 4)
        big = measure(whole, rounds)
        small = measure(quarter, rounds)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"sessions --json: {kinds}, whole {big}, quarter {small}", file=sys.stderr)
    grown = max(0.0, big["rss"] - small["rss"]) / (count - count // 4) * 1000
    output = (big["bytes"] - small["bytes"]) / (count - count // 4) * 1000
    load = os.getloadavg()[0]
    return [
        Row(
            "sessions --json",
            f"JSONL, {count:,} sessions ({kinds['sub-agents']:,} sub-agents), to /dev/null",
            fmt_ns(big["seconds"] * 1e9),
            f"goal {goal:g} s",
            big["seconds"] / goal,
            target=f"≤ {goal:g} s, peak RSS ≤ {GOAL_RSS >> 20} MiB",
            met=big["seconds"] <= goal and big["rss"] <= GOAL_RSS,
            note=f"peak RSS {big['rss'] / 2**20:.0f} MiB; CPU {big['cpu']:.1f} s; "
            f"median of {rounds}; load {load:.1f}",
            numbers=big,
        ),
        Row(
            "sessions --json",
            f"peak RSS growth per 1,000 sessions, {count // 4:,} to {count:,}",
            f"{grown / 2**10:.0f} KiB",
            f"the output: {output / 2**10:.0f} KiB",
            grown / output if output else None,
            target="≤ 1x the output's size",
            met=grown <= output,
            note=f"peak RSS {small['rss'] / 2**20:.0f} MiB at {count // 4:,} sessions",
            numbers={"whole": big, "quarter": small},
        ),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--sessions", type=int, help="the fleet's size (default 100,000)")
    parser.add_argument(
        "--keep", type=Path, metavar="DIR", help="only write the fleet into DIR, and keep it"
    )
    args = parser.parse_args()
    if args.keep:
        print(write_fleet(args.keep, args.sessions or SESSIONS))
        return 0
    for row in rows(quick=args.quick, sessions=args.sessions):
        print(f"{row.section}: {row.case}: {row.contender} vs {row.reference}; {row.note}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
