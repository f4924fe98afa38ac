"""benchmarks/run.py as docs/benchmarks.md prints it, where a framework is not installed.

A reader installs the ``bench`` extra and runs every section; the adapters' frameworks come
from other extras. Each section or framework whose package is missing must print a row that
says skipped and why, and the run goes on to the next (the run used to stop with a
``ModuleNotFoundError`` at the first missing one).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]

# every framework the "adapters" sections drive but MCP, which still runs
BLOCKED = [
    "agents",
    "llama_index",
    "google.adk",
    "strands",
    "strands_harness",
    "agent_framework",
    "crewai",
    "langchain",
    "langgraph",
]
SKIPPED = {
    "adapters: OpenAI Agents SDK": "agents not installed (pip install '.[openai-agents]')",
    "adapters: LlamaIndex": "llama_index not installed (pip install '.[llama-index]')",
    "adapters: Google ADK": "google.adk not installed (pip install '.[google-adk]')",
    "adapters: Strands per call": "strands not installed (pip install '.[strands]')",
    "adapters: Agent Framework per call": (
        "agent_framework not installed (pip install '.[agent-framework]')"
    ),
    "adapters: CrewAI": "crewai not installed (pip install '.[crewai]')",
}

RUN = """
import runpy, sys
for name in sys.argv[1].split(","):
    sys.modules[name] = None  # importing it raises ModuleNotFoundError, as if not installed
sys.argv = ["benchmarks/run.py", *sys.argv[2:]]
runpy.run_path("benchmarks/run.py", run_name="__main__")
"""


def run_with_blocked(tmp_path: Path, *arguments: str) -> tuple[list[dict[str, Any]], str]:
    results = tmp_path / "bench.json"
    run = subprocess.run(
        [sys.executable, "-c", RUN, ",".join(BLOCKED), *arguments, "--json", str(results)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "Traceback" not in run.stderr, run.stderr[-3000:]
    rows: list[dict[str, Any]] = json.loads(results.read_text(encoding="utf-8"))["rows"]
    return rows, run.stdout


@pytest.mark.skipif(sys.version_info < (3, 11), reason="dev installs these frameworks on 3.11+")
def test_each_adapter_section_whose_framework_is_missing_prints_a_skipped_row(
    tmp_path: Path,
) -> None:
    rows, table = run_with_blocked(tmp_path, "--quick", "--only", "adapters")

    notes = {row["section"]: row["note"] for row in rows if row["note"].startswith("skipped")}
    for section, why in SKIPPED.items():
        assert notes.get(section) == f"skipped: {why}", (section, notes)
    assert "skipped: llama_index not installed (pip install '.[llama-index]')" in table
    # the framework that is installed is still measured, after the one that is not
    timed = [row for row in rows if row["section"] == "adapters: MCP over stdio"]
    assert timed, rows
    assert all(row["ratio"] is not None for row in timed), timed
    open_first = [row for row in rows if row["section"] == "adapters: open + first call"]
    assert open_first[0]["note"] == "skipped: langchain not installed", open_first
    assert open_first[1]["ratio"] is not None, open_first


# --- the figures a page cites -----------------------------------------------------------------

CITATION = re.compile(
    r"\]\(\.\./((?:benchmarks[-\w]*|postgres-reference)\.md)(?:#[\w-]+)?\)[^\"\n]{0,12}\"([^\"]+)\""
)


def test_the_durable_page_cites_a_row_of_figures_its_link_has() -> None:
    """The benchmark row the page quotes is a row of a table of measured figures on the page
    it links, not a row that is only described."""
    text = (ROOT / "docs" / "integrations" / "durable.md").read_text(encoding="utf-8")
    cited = CITATION.findall(text)
    assert cited, "the page cites the figure of its claim"
    for page, row in cited:
        lines = (ROOT / "docs" / page).read_text(encoding="utf-8").splitlines()
        table_rows = [line for line in lines if line.startswith("|") and row in line]
        assert table_rows, f"docs/{page} has no row of figures named {row!r}"
