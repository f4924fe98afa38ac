"""Row 7: what ``import dsh_tool_todo`` costs a fresh interpreter, over pydantic and pluggy.

Every case is a new process, run in rounds (each round runs every case once, in a
rotating order) so they share the machine's noise, and timed by the CPU time it
used. The figure is the median over rounds of each case's time less the reference's
in the same round.
"""

from __future__ import annotations

import json
import resource
import statistics
import subprocess
import sys

from report import Row

REFERENCE = "from pydantic import ConfigDict, Field, TypeAdapter; import pluggy"
CASES = {
    "import dsh_tool_todo": "import dsh_tool_todo",
    "import dsh_tool_todo.host": "import dsh_tool_todo.host",
    "import dsh_tool_todo.cli": "import dsh_tool_todo.cli",
}
PACKAGE_TARGET_MS = 15.0
# the listing is taken before json is imported to print it
_LISTING = "import sys; {code}; names = sorted(sys.modules); import json; print(json.dumps(names))"


def _start(code: str) -> float:
    """CPU seconds (user and system) a fresh interpreter takes to run ``code`` and exit.

    CPU time, not wall time: on two shared cores a start waits for a core as long
    as the other work there decides, but the work it does is its own.
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", code], check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def modules_after(code: str) -> set[str]:
    """The modules a fresh interpreter holds after running ``code``."""
    done = subprocess.run(
        [sys.executable, "-c", _LISTING.format(code=code)],
        capture_output=True,
        text=True,
        check=True,
    )
    return set(json.loads(done.stdout))


def _added(code: str, reference: set[str]) -> str:
    """The top-level modules outside this package that ``code`` imports beyond the reference."""
    added = modules_after(code) - reference
    # importlib itself is already loaded: name its metadata scanner, which is not
    shown = {
        "importlib.metadata" if name.startswith("importlib.metadata") else name.split(".")[0]
        for name in added
    }
    shown.discard("dsh_tool_todo")
    return ", ".join(sorted(shown)) or "nothing"


def rows(rounds: int) -> list[Row]:
    codes = {"reference": REFERENCE, **CASES}
    names = list(codes)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for _ in range(2):  # warm the page cache and the .pyc files
        for name in names:
            _start(codes[name])
    for index in range(rounds):
        order = names[index % len(names) :] + names[: index % len(names)]
        for name in order:
            samples[name].append(_start(codes[name]))
    reference_modules = modules_after(REFERENCE)
    base = statistics.median(samples["reference"])
    result = []
    for name in CASES:
        extra = [
            (mine - ref) * 1e3
            for mine, ref in zip(samples[name], samples["reference"], strict=True)
        ]
        low, _, high = statistics.quantiles(extra, n=4)
        added_ms = statistics.median(extra)
        is_package = name == "import dsh_tool_todo"
        result.append(
            Row(
                "7 import time",
                name,
                f"+{added_ms:.1f} ms",
                f"pydantic+pluggy {base * 1e3:.1f} ms",
                statistics.median(samples[name]) / base,
                f"≤{PACKAGE_TARGET_MS:g} ms added" if is_package else "info",
                added_ms <= PACKAGE_TARGET_MS if is_package else None,
                note=f"CPU time, {rounds} rounds, middle half +{low:.1f} to +{high:.1f} ms; "
                f"also imports: {_added(CASES[name], reference_modules)}",
                numbers={"added_ms": added_ms, "reference_ms": base * 1e3, "rounds": rounds},
            )
        )
    return result
