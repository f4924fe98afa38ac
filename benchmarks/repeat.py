"""Run the benchmarks several times, each in a fresh process, and report each row's median.

    python benchmarks/repeat.py RUNS [run.py options...]

e.g. ``python benchmarks/repeat.py 5 --only "per call,durable"``. One run on two shared
cores can land in a burst of other work; the median of a row's ratio over several runs
cannot, unless most of them did. Prints a Markdown table: the median run's figures, the
median ratio, and the lowest and highest ratio over the runs.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def run_once(options: list[str], path: Path) -> list[dict[str, Any]]:
    subprocess.run(
        [sys.executable, str(HERE / "run.py"), *options, "--json", str(path)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    rows: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))["rows"]
    return rows


def median_rows(runs: list[list[dict[str, Any]]]) -> list[tuple[dict[str, Any], list[float]]]:
    """For each row of the first run: the run whose ratio is the median, and every ratio."""
    result = []
    for row in runs[0]:
        key = (row["section"], row["case"])
        same = [
            other for rows in runs for other in rows if (other["section"], other["case"]) == key
        ]
        ratios = [other["ratio"] for other in same if other["ratio"] is not None]
        if not ratios:
            result.append((row, []))
            continue
        middle = statistics.median_low(ratios)
        chosen = next(other for other in same if other["ratio"] == middle)
        result.append((chosen, ratios))
    return result


def table(rows: list[tuple[dict[str, Any], list[float]]], count: int) -> str:
    lines = [
        "| row | case | contender | reference | "
        f"median ratio (of {count}) | range | target | verdict |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row, ratios in rows:
        ratio = f"{row['ratio']:.2f}x" if ratios else "—"
        spread = f"{min(ratios):.2f}-{max(ratios):.2f}x" if len(ratios) > 1 else "—"
        met = row["met"]
        verdict = "info" if met is None else "met" if met else "MISSED"
        cells = (row["section"], row["case"], row["contender"], row["reference"], ratio, spread)
        lines.append(
            "| "
            + " | ".join(c.replace("|", "\\|") for c in (*cells, row["target"], verdict))
            + " |"
        )
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if not argv or not argv[0].isdigit():
        print(__doc__, file=sys.stderr)
        return 2
    count, options = int(argv[0]), argv[1:]
    with tempfile.TemporaryDirectory(prefix="dsh-todo-repeat-") as directory:
        runs = []
        for index in range(count):
            print(f"… run {index + 1} of {count}", file=sys.stderr, flush=True)
            runs.append(run_once(options, Path(directory) / f"run-{index}.json"))
    print(table(median_rows(runs), count))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
