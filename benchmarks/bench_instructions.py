"""Row 1 counted in instructions: the call and the strict limit under callgrind.

The timed rows are medians over interleaved rounds, and on two shared cores a
round's ratio still moves with what else runs there. Instructions executed do
not: callgrind counts each one, so the figure is the same on an idle or a loaded
machine. It still moves by up to 1% between runs, with each process's address
space (objects hashed by address, pydantic-core's own hash tables). Instructions
are not time (a cache miss costs many), so this row only cross-checks the timed
one; the target stays on time.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench_calls import LAYERS
from bench_session import SECTION, SESSION_CALLS, SESSION_ITEMS
from report import Row, skipped
from workloads import CALL_SIZES

CHILD = Path(__file__).resolve().parent / "instructions_child.py"
_COLLECTED = re.compile(r"Collected : (\d+)")


def _count(side: str, size: int, calls: int) -> int:
    """Instructions a fresh interpreter executes to set up, warm up and make ``calls`` calls."""
    done = subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            sys.executable,
            str(CHILD),
            side,
            str(size),
            str(calls),
        ],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONHASHSEED": "0"},  # the same string hashes in every run
    )
    found = _COLLECTED.search(done.stderr)
    if found is None:
        raise RuntimeError(f"callgrind printed no count:\n{done.stderr[-2000:]}")
    return int(found.group(1))


def rows(quick: bool) -> list[Row]:
    """The whole call against the limit at 6 and 12 items, and at 6 the call's layers."""
    section = "1 call vs strict limit, instructions"
    headline = CALL_SIZES[0]
    if shutil.which("valgrind") is None:
        return [skipped(section, f"{headline} items", "valgrind is not installed")]
    calls = 1000 if quick else 4000
    sizes = CALL_SIZES[:1] if quick else CALL_SIZES[:2]
    whole = list(LAYERS)[-1]
    # every layer at the headline size; quick mode (CI's) counts the whole call only
    cases = [(name, headline) for name in ([whole] if quick else LAYERS)]
    cases += [(whole, size) for size in sizes[1:]]
    runs = [("loop", size, 0) for size in sizes]  # the baseline: set up, warm up, no call
    runs += [(side, size, calls) for size in sizes for side in ("limit", "loop")]
    runs += [(side, size, calls) for side, size in cases]
    sessions = calls // SESSION_CALLS
    runs += [(side, SESSION_ITEMS, sessions) for side in ("session", "session-limit")]
    with ThreadPoolExecutor(max_workers=2) as pool:  # each run is one process
        counted = dict(zip(runs, pool.map(lambda run: _count(*run), runs), strict=True))

    def per_call(side: str, size: int) -> float:
        return (counted[(side, size, calls)] - counted[("loop", size, 0)]) / calls

    result = []
    for side, size in cases:
        loop = per_call("loop", size)
        mine, limit = per_call(side, size) - loop, per_call("limit", size) - loop
        result.append(
            Row(
                section,
                f"{size} items" if side == whole else f"{size} items, {side}",
                f"{LAYERS[side]} {mine:,.0f}",
                f"validate_json {limit:,.0f}",
                mine / limit,
                target="info",
                note=(
                    f"instructions per call, callgrind, {calls:,} calls less none, the loop's "
                    f"own {loop:,.0f} taken out: the load on the machine does not move it"
                ),
                numbers={"instructions": mine, "limit": limit, "loop": loop},
            )
        )
    result.append(session_row(counted, sessions))
    return result


def session_row(counted: dict[tuple[str, int, int], int], sessions: int) -> Row:
    """A whole agent session (``bench_session``) against one strict pass over each of its texts."""

    def per_session(side: str) -> float:
        run = counted[(side, SESSION_ITEMS, sessions)] - counted[("loop", SESSION_ITEMS, 0)]
        return run / sessions

    loop = (
        counted[("loop", SESSION_ITEMS, sessions * SESSION_CALLS)]
        - counted[("loop", SESSION_ITEMS, 0)]
    ) / (sessions * SESSION_CALLS)
    mine, limit = per_session("session") - loop, per_session("session-limit") - loop
    return Row(
        f"{SECTION}, instructions",
        f"new_agent + {SESSION_CALLS} calls of {SESSION_ITEMS} items",
        f"session {mine:,.0f}",
        f"{SESSION_CALLS} validate_json {limit:,.0f}",
        mine / limit,
        target="info",
        note=f"instructions per session, callgrind, {sessions:,} sessions less none",
        numbers={"instructions": mine, "limit": limit, "loop": loop},
    )
