"""Run every benchmark, print one table, and write it as JSON.

    python benchmarks/run.py [--quick] [--json PATH] [--only NAME] [--markdown]

Each figure is measured in this run beside its reference and reported as a
ratio, so the table means the same on a fast or a slow machine.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # the sibling modules, also when run from elsewhere

from report import Row, markdown_table, text_table, unless_missing, write_json  # noqa: E402

DEFAULT_JSON = HERE / "results" / "latest.json"


@dataclass(frozen=True)
class Budget:
    """How long each kind of measurement may run; ``--quick`` shrinks them all."""

    per_pair: float  # seconds of interleaved timing per contender/reference pair
    replay_max: int  # largest in-memory log replayed
    log_sizes_mb: tuple[int, ...]  # the on-disk logs the tail read is timed on
    durable_calls: int  # fsync'd calls per side


FULL = Budget(per_pair=10.0, replay_max=10**6, log_sizes_mb=(10, 100, 1024), durable_calls=400)
QUICK = Budget(per_pair=1.0, replay_max=10**5, log_sizes_mb=(10, 100), durable_calls=60)


def bench(name: str) -> ModuleType:
    """A section's module, imported when the section runs: one whose framework is not
    installed then gives a skipped row instead of stopping the run before it starts."""
    return importlib.import_module(f"bench_{name}")


def sections(budget: Budget) -> list[tuple[str, Callable[[], list[Row]]]]:
    return [
        ("per call vs limit and floor", lambda: bench("calls").floor_rows(budget.per_pair)),
        ("per call, instrumented", lambda: bench("otel").rows(budget.per_pair)),
        ("per call vs limit, in instructions", lambda: bench("instructions").rows(budget is QUICK)),
        ("per call, whole agent session", lambda: bench("session").rows(budget.per_pair)),
        ("per call vs LangChain", lambda: bench("calls").peer_rows(budget.per_pair)),
        ("durable call", lambda: bench("durable").rows(budget.durable_calls)),
        ("replay in memory", lambda: bench("replay").memory_rows(budget.replay_max)),
        ("tail read vs replay", lambda: bench("replay").log_rows(budget.log_sizes_mb)),
        ("tokens", lambda: bench("tokens").rows()),
        ("memory", lambda: bench("memory").rows()),
        (
            "model experience and refusal cost",
            lambda: bench("model").rows(7 if budget is FULL else 3),
        ),
        ("import time", lambda: bench("import").rows(21 if budget is FULL else 7)),
        ("adapters", lambda: bench("adapters").rows(budget.per_pair, quick=budget is QUICK)),
        ("adapters: Strands tokens per request", lambda: bench("strands").rows()),
        (
            "adapters: Strands per call",
            lambda: bench("strands").overhead_rows(budget.per_pair, 5 if budget is QUICK else 20),
        ),
        (
            "adapters: Agent Framework tokens per request",
            lambda: bench("agent_framework").token_rows(),
        ),
        (
            "adapters: Agent Framework per call",
            lambda: bench("agent_framework").overhead_rows(
                budget.per_pair, 5 if budget is QUICK else 20
            ),
        ),
        ("adapters: open + first call", lambda: bench("open").rows(budget.per_pair)),
        (
            "adapters: CrewAI per call",
            lambda: bench("adapters").crewai_rows(budget.per_pair, 5 if budget is QUICK else 20),
        ),
        ("langchain middleware", lambda: bench("langchain").rows(budget.per_pair)),
        ("web view", lambda: bench("web").rows(quick=budget is QUICK)),
        ("web tree stream", lambda: bench("tree").rows(quick=budget is QUICK)),
        ("postgres store", lambda: bench("postgres").rows(quick=budget is QUICK)),
        ("fleet list", lambda: bench("fleet").rows(quick=budget is QUICK)),
        ("sessions --json", lambda: bench("sessions").rows(quick=budget is QUICK)),
        ("requests", lambda: bench("requests").rows(quick=budget is QUICK)),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="shorter timings, smaller logs")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON, help="where to write results")
    parser.add_argument(
        "--only", help="run only the sections whose name contains this (or any of A,B,...)"
    )
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    parser.add_argument(
        "--check", action="store_true", help="exit with status 1 when a target is missed"
    )
    args = parser.parse_args(argv)
    budget = QUICK if args.quick else FULL
    started = time.perf_counter()
    rows: list[Row] = []
    for name, run in sections(budget):
        if args.only and not any(part in name for part in args.only.split(",")):
            continue
        section_start = time.perf_counter()
        print(f"… {name}", file=sys.stderr, flush=True)
        rows.extend(unless_missing(name, "all", run))
        print(f"  {time.perf_counter() - section_start:.1f} s", file=sys.stderr, flush=True)
    elapsed = time.perf_counter() - started
    print(markdown_table(rows) if args.markdown else text_table(rows))
    missed = [f"{row.section} ({row.case})" for row in rows if row.met is False]
    print(f"\n{elapsed:.0f} s in all; results in {args.json}")
    print(f"targets missed: {', '.join(missed)}" if missed else "every target met")
    write_json(args.json, rows, quick=args.quick, seconds=elapsed)
    return 1 if missed and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
