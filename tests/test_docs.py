"""The docs' examples run as written, and the contract page lists every model-visible text."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from dsh_tool_todo import contract

ROOT = Path(__file__).resolve().parents[1]
PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
PAGES = [
    page
    for page in sorted([ROOT / "README.md", ROOT / "README.zh.md", *(ROOT / "docs").rglob("*.md")])
    if PYTHON_BLOCK.search(page.read_text(encoding="utf-8"))
    # dev does not install crewai: tests/integrations/test_crewai.py runs that page
    and page.name != "crewai.md"
]

# google-adk 2.x needs 3.11; dev installs LlamaIndex, Strands and the Claude Agent SDK on 3.11+
NEEDS_3_11 = {"google-adk.md", "llama-index.md", "strands.md", "claude-agent-sdk.md"}


def test_the_main_pages_have_examples() -> None:
    assert {"README.md", "README.zh.md", "host-integration.md"} <= {page.name for page in PAGES}


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_python_examples_run(page: Path, tmp_path: Path) -> None:
    """A page's blocks run in order as one script, in an empty directory, as a reader would."""
    if page.name in NEEDS_3_11 and sys.version_info < (3, 11):
        pytest.skip(f"{page.name}'s framework needs Python 3.11+ (its extra is marked so)")
    blocks = PYTHON_BLOCK.findall(page.read_text(encoding="utf-8"))
    script = tmp_path / "example.py"
    script.write_text("\n".join(blocks), encoding="utf-8")
    run = subprocess.run(
        [sys.executable, "-W", "error", str(script)], cwd=tmp_path, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr


def test_the_contract_page_lists_every_model_visible_text() -> None:
    page = (ROOT / "docs" / "model-contract.md").read_text(encoding="utf-8")
    fixed = [
        contract.DESCRIPTION_SINGLE,
        contract.DESCRIPTION_PARALLEL,
        contract.TODOS_DESCRIPTION,
        contract.CONTENT_DESCRIPTION,
        contract.STATUS_DESCRIPTION,
        contract.NO_OWNER,
        contract.EMPTY_CONTENT,
    ]
    for text in fixed:
        assert text in page
    templates = [
        value
        for name, value in vars(contract).items()
        if name.isupper() and isinstance(value, str) and value.startswith(("Error", "Updated"))
    ]
    for template in templates:
        shape = re.sub(
            r"\\\{[A-Za-z_]+\\\}", ".+?", re.escape(template.replace("{{", "{").replace("}}", "}"))
        )
        assert re.search(shape, page), template
