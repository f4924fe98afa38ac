"""Row 6: peak RSS of a whole session, each case in its own process."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

from report import Row, fmt_bytes, skipped

CHILD = Path(__file__).resolve().parent / "memory_child.py"
CALLS, SIZE = 10_000, 20
GC_CALLS, GC_SIZE = 100_000, 6


def peak_rss(case: str) -> int:
    done = subprocess.run(
        [sys.executable, str(CHILD), case, str(CALLS), str(SIZE)],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    result: int = json.loads(done.stdout)["peak_rss"]
    return result


def rows() -> list[Row]:
    baseline, floor = peak_rss("baseline"), peak_rss("floor")
    memory = peak_rss("memory")
    session = f"{CALLS:,} calls x {SIZE} items"
    result = [
        Row(
            "6 peak RSS",
            f"{session}, in memory",
            fmt_bytes(memory),
            f"decoded args alone {fmt_bytes(floor)}",
            memory / floor,
            "info",
            note=f"baseline (imports, host, no call) {fmt_bytes(baseline)}",
            numbers={"peak_rss": memory, "floor": floor, "baseline": baseline},
        )
    ]
    if importlib.util.find_spec("dsh_tool_todo.stores.jsonl") is None:
        result.append(skipped("6 peak RSS", f"{session}, on disk", "no dsh_tool_todo.stores.jsonl"))
        return result
    disk = peak_rss("disk")
    result.append(
        Row(
            "6 peak RSS",
            f"{session}, on disk",
            fmt_bytes(disk),
            f"baseline {fmt_bytes(baseline)}",
            disk / baseline,
            "info",
            note="JsonlSession keeps no events in memory" if disk < floor else "",
            numbers={"peak_rss": disk, "baseline": baseline},
        )
    )
    result.extend(collector_rows())
    return result


def collector(case: str, calls: int) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, str(CHILD), "collector", case, str(calls), str(GC_SIZE)],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    result: dict[str, float] = json.loads(done.stdout)
    return result


def _share(figures: dict[str, float]) -> str:
    share = figures["gc_seconds"] / figures["run_seconds"]
    pause = figures["max_pause_seconds"] * 1e3
    return f"collector {share:.0%} of the run, longest pause {pause:.0f} ms"


def collector_rows(calls: int = GC_CALLS) -> list[Row]:
    """What the garbage collector costs a long in-memory session, and what a host can do."""
    memory, freeze, disk = (collector(case, calls) for case in ("memory", "freeze", "disk"))
    session = f"{calls:,} calls x {GC_SIZE} items"
    return [
        Row(
            "6 collector",
            f"{session}, in memory",
            _share(memory),
            "host calls gc.freeze() every 1,000 calls: " + _share(freeze),
            None,
            "info",
            note=f"{memory['tracked_objects']:,.0f} objects tracked at the end, three an event",
            numbers={"memory": memory, "freeze": freeze},
        ),
        Row(
            "6 collector",
            f"{session}, on disk",
            _share(disk),
            "in memory: " + _share(memory),
            None,
            "info",
            note="JsonlSession keeps no event in memory, so nothing accumulates",
            numbers={"disk": disk},
        ),
    ]
