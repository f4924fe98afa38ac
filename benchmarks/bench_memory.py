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
    if importlib.util.find_spec("dsh_tool_todo.sessionlog") is None:
        result.append(skipped("6 peak RSS", f"{session}, on disk", "no dsh_tool_todo.sessionlog"))
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
    return result
