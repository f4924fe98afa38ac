"""The docs site (mkdocs.yml) builds with ``--strict``, works offline, and stays findable.

The build needs the ``docs`` extra (``dev`` includes it): ``pip install -e '.[docs]'``. Without
it the build's tests skip, saying so, except under ``CI=true``, where they fail.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PACKAGE = ROOT / "src" / "dsh_tool_todo"
MAX_WORDS = 4_000
TASKS = ["Watch my agent", "Many agents", "My framework", "My UI", "Durable runs", "Contributing"]


def _needs_docs_extra() -> None:
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None:
        message = "the docs site needs the docs extra: pip install -e '.[docs]'"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built as contributors and CI build it: any warning fails the build."""
    _needs_docs_extra()
    out = tmp_path_factory.mktemp("site")
    build = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        # Material's banner about MkDocs 2 is not the build's to judge
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        check=False,
    )
    assert build.returncode == 0, build.stderr
    return out


def _pages() -> list[Path]:
    """The Markdown the site is built from: docs/ and the two READMEs (pages of their own)."""
    return [ROOT / "README.md", ROOT / "README.zh.md", *sorted(DOCS.rglob("*.md"))]


def test_the_site_builds_with_strict_and_has_every_page(site: Path) -> None:
    assert (site / "index.html").is_file()
    assert (site / "readme.html").is_file()
    assert (site / "benchmarks.html").is_file()
    assert (site / "postgres-reference.html").is_file()
    for page in (DOCS / "api").glob("*.md"):
        assert (site / "api" / page.with_suffix(".html").name).is_file(), page.name


def test_the_site_works_offline(site: Path) -> None:
    from mkdocs.config import load_config

    config = load_config(str(ROOT / "mkdocs.yml"))
    assert "material/offline" in config.plugins
    assert config.theme["font"] is False
    # the offline plugin's search index is a script, readable from file://
    assert (site / "search" / "search_index.js").is_file()
    loaded = re.compile(
        r"<(?:script|img|iframe)[^>]*\ssrc=\"(https?:)?//|<link[^>]*\shref=\"https?:"
    )
    for page in site.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        assert "fonts.googleapis.com" not in text, page
        assert "fonts.gstatic.com" not in text, page
        assert not loaded.search(text), f"{page} loads something from the network"


def test_the_api_reference_renders_the_docstrings(site: Path) -> None:
    page = (site / "api" / "stores.owners.html").read_text(encoding="utf-8")
    assert 'id="dsh_tool_todo.stores.owners.OwnerRegistry"' in page
    assert "Sessions for hosts that have none of their own" in page
    # a Sphinx role in a docstring is a link or code, never the role's own text
    assert ":class:" not in page
    assert ":func:" not in page


def test_no_page_is_over_4000_words() -> None:
    long = {
        str(page.relative_to(ROOT)): words
        for page in _pages()
        if (words := len(page.read_text(encoding="utf-8").split())) > MAX_WORDS
    }
    assert long == {}, "split these into how-to and reference pages (docs/contributing.md)"


def _sections(markdown: str) -> dict[str, str]:
    parts = re.split(r"^## (.+)$", markdown, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_the_index_links_each_task_to_pages_that_exist() -> None:
    sections = _sections((DOCS / "index.md").read_text(encoding="utf-8"))
    assert list(sections) == TASKS
    for task, text in sections.items():
        links = re.findall(r"\]\(([^)#\s]+\.md)(?:#[^)]*)?\)", text)
        assert links, f"{task}: no page linked"
        missing = [link for link in links if not (DOCS / link).is_file()]
        # readme.md is the README's page, which the site's hook adds
        assert [link for link in missing if link != "readme.md"] == [], task


def _public_modules() -> set[str]:
    """Every module a user may import, read from the file tree (no framework imported)."""
    found = set()
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if not any(part.startswith("_") for part in parts):
            found.add(".".join(parts))
    return found


def test_every_public_module_has_its_place_in_the_api_reference() -> None:
    rendered = {
        match
        for page in (DOCS / "api").glob("*.md")
        for match in re.findall(r"^::: (\S+)$", page.read_text(encoding="utf-8"), flags=re.M)
    }
    assert _public_modules() - rendered == set(), "add a `::: module` line to a page of docs/api/"
    assert rendered - _public_modules() == set(), "docs/api/ names a module that is not public"


def _hooks() -> ModuleType:
    _needs_docs_extra()
    spec = importlib.util.spec_from_file_location("docs_site_hooks", DOCS / "_site" / "hooks.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_links_outside_docs_become_pages_or_text() -> None:
    hooks = _hooks()
    written = (
        "See [the README](../README.md#installing),\n"
        "[owners](../src/dsh_tool_todo/stores/owners.py),\n"
        "[the contract](../src/dsh_tool_todo/core/contract.py), [a private one]"
        "(../src/dsh_tool_todo/stores/_home.py),\n[the changelog](../CHANGELOG.md), "
        "[`tests/stores/contract.py`](../tests/stores/contract.py), [a page](cli.md#reference)\n"
        "and [a site](https://example.org).\n"
        "```md\n[kept](../CHANGELOG.md)\n```\n"
    )
    site = hooks.rewrite(written, written_in=DOCS, built_in=DOCS)
    assert site == (
        "See [the README](readme.md#installing),\n[owners](api/stores.owners.md),\n"
        "[the contract](api/core.md#dsh_tool_todo.core.contract), a private one "
        "(`src/dsh_tool_todo/stores/_home.py` in the repository),\n"
        "the changelog (`CHANGELOG.md` in the repository), `tests/stores/contract.py`, "
        "[a page](cli.md#reference)\nand [a site](https://example.org).\n"
        "```md\n[kept](../CHANGELOG.md)\n```\n"
    )


def test_the_readme_links_to_docs_become_links_between_pages() -> None:
    hooks = _hooks()
    written = "[CLI](docs/cli.md), ![view](docs/web-view.png), [中文](README.zh.md)"
    site = hooks.rewrite(written, written_in=ROOT, built_in=DOCS)
    assert site == "[CLI](cli.md), ![view](web-view.png), [中文](readme.zh.md)"
