"""The docs' examples run as written, and the contract page lists every model-visible text."""

from __future__ import annotations

import ast
import importlib.util
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from dsh_tool_todo.core import contract

ROOT = Path(__file__).resolve().parents[1]
PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
PAGES = [
    page
    for page in sorted([ROOT / "README.md", ROOT / "README.zh.md", *(ROOT / "docs").rglob("*.md")])
    if PYTHON_BLOCK.search(page.read_text(encoding="utf-8"))
    # dev does not install crewai: tests/integrations/test_crewai.py runs that page
    and page.name != "crewai.md"
]

# any Python block, also those the docs test does not run (```py: they need a server)
SHOWN_BLOCK = re.compile(r"^```py(?:thon)?\n(.*?)^```", re.S | re.M)
SHOWN = [
    page
    for page in sorted([ROOT / "README.md", ROOT / "README.zh.md", *(ROOT / "docs").rglob("*.md")])
    if SHOWN_BLOCK.search(page.read_text(encoding="utf-8"))
    # dev does not install crewai: tests/integrations/test_crewai.py checks that page
    and page.name != "crewai.md"
]

# google-adk 2.x needs 3.11; dev installs LlamaIndex, Strands and the Claude Agent SDK on 3.11+;
# the dbos extra is for 3.11+
NEEDS_3_11 = {"google-adk.md", "llama-index.md", "strands.md", "claude-agent-sdk.md", "durable.md"}


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


# --- what a page's install lines bring in ------------------------------------------------------

PIP_INSTALL = re.compile(r"pip install ([^`\n#]+)")
SELF = "dsh-tool-todo"


def _dist(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def install_lines(text: str) -> list[list[str]]:
    """The arguments of each ``pip install`` the page prints (in a block or inline)."""
    found = []
    for line in PIP_INSTALL.findall(text):
        words = shlex.split(line.strip().rstrip(")").replace("$(echo ", ""), comments=True)
        for end, word in enumerate(words):  # the command ends at the shell's next one
            if word in ("&&", "||", ";", "|"):
                words = words[:end]
                break
        found.append([word for word in words if not word.startswith("-")])
    return found


def requirements(words: list[str]) -> list[Requirement]:
    """``.``, ``'.[mcp]'``, a wheel or ``dsh-tool-todo[x]``: this package; else a named one."""
    wanted = []
    for word in words:
        extras = re.search(r"\[([^\]]*)\]$", word)
        if word.startswith((".", "/", "dist/")) or _dist(word).startswith(SELF):
            wanted.append(Requirement(f"{SELF}[{extras.group(1)}]" if extras else SELF))
        else:
            wanted.append(Requirement(word))
    return wanted


def distributions(wanted: list[Requirement]) -> set[str]:
    """The distributions the requirements install, transitively (as installed here)."""
    seen: set[tuple[str, frozenset[str]]] = set()
    names: set[str] = set()
    todo = list(wanted)
    while todo:
        requirement = todo.pop()
        key = (_dist(requirement.name), frozenset(requirement.extras))
        if key in seen:
            continue
        seen.add(key)
        names.add(key[0])
        try:
            requires = metadata.requires(requirement.name) or []
        except metadata.PackageNotFoundError:
            continue  # not installed here (another Python's marker): nothing to follow
        for text in requires:
            needed = Requirement(text)
            environments = [{"extra": extra} for extra in requirement.extras or {""}]
            if needed.marker is None or any(needed.marker.evaluate(e) for e in environments):
                todo.append(needed)
    return names


def importable(wanted: list[Requirement]) -> set[str]:
    """The top-level modules a fresh environment with ``wanted`` installed can import."""
    names = distributions(wanted)
    modules = {
        module
        for dist in metadata.distributions()
        if _dist(dist.metadata["Name"]) in names
        for module in _top_level(dist)
    }
    return modules | set(sys.stdlib_module_names) | {"dsh_tool_todo"}


def _top_level(dist: metadata.Distribution) -> set[str]:
    """The modules a distribution installs, as ``packages_distributions()`` finds them on
    Python 3.11+ (3.10's reads ``top_level.txt`` only, which pydantic and others lack)."""
    listed = (dist.read_text("top_level.txt") or "").split()
    if listed:
        return set(listed)
    return {
        file.parts[0] if len(file.parts) > 1 else file.with_suffix("").name
        for file in dist.files or []
        if file.suffix == ".py"
    }


def imported(source: str, package: str = "") -> set[str]:
    """The absolute names ``source`` imports; ``package`` resolves relative imports."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([base] if base else [])])
            names.add(base)
            names |= {f"{base}.{alias.name}" for alias in node.names}
    return names


def module_level_imports(module: str, seen: set[str]) -> set[str]:
    """The top-level modules ``module`` of this package imports when it is imported
    (its module-level imports, its own modules' followed), without importing it."""
    if module in seen:
        return set()
    seen.add(module)
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        return set()
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    package = module if spec.submodule_search_locations else module.rpartition(".")[0]
    body = list(_run_at_import(tree.body))
    found = set()
    for name in imported("\n".join(ast.unparse(node) for node in body), package):
        if name.split(".")[0] == "dsh_tool_todo":
            found |= _own_imports(name, seen)
        else:
            found.add(name.split(".")[0])
    return found


def _run_at_import(statements: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The import statements that run when the module is imported: not those in functions,
    classes or ``if TYPE_CHECKING:``."""
    for statement in statements:
        if isinstance(statement, (ast.Import, ast.ImportFrom)):
            yield statement
        elif isinstance(statement, ast.If):
            if "TYPE_CHECKING" not in ast.unparse(statement.test):
                yield from _run_at_import(statement.body + statement.orelse)
        elif isinstance(statement, ast.Try):
            yield from _run_at_import(statement.body + statement.orelse + statement.finalbody)
        elif isinstance(statement, ast.With):
            yield from _run_at_import(statement.body)


def _own_imports(name: str, seen: set[str]) -> set[str]:
    found = set()
    parts = name.split(".")
    for end in range(1, len(parts) + 1):  # importing a.b.c imports a and a.b first
        try:
            is_module = importlib.util.find_spec(".".join(parts[:end])) is not None
        except ImportError:
            is_module = False
        if is_module:
            found |= module_level_imports(".".join(parts[:end]), seen)
    return found


def example_imports(page: Path) -> set[str]:
    """The top-level modules running the page's Python examples imports, this package's
    own modules followed to what they import."""
    blocks = "\n".join(SHOWN_BLOCK.findall(page.read_text(encoding="utf-8")))
    needed: set[str] = set()
    seen: set[str] = set()
    for name in imported(blocks):
        if name.split(".")[0] == "dsh_tool_todo":
            needed |= _own_imports(name, seen)
        else:
            needed.add(name.split(".")[0])
    return needed


@pytest.mark.parametrize("page", SHOWN, ids=lambda page: page.name)
def test_each_example_imports_only_what_its_page_says_to_install(page: Path) -> None:
    """A reader installs what the page says (``pip install '.[extra]'``, or nothing: the core)
    and runs its examples: every module they import, directly or through this package's
    modules, must come with that."""
    if page.name in NEEDS_3_11 and sys.version_info < (3, 11):
        pytest.skip(f"{page.name}'s framework needs Python 3.11+ (its extra is marked so)")
    text = page.read_text(encoding="utf-8")
    wanted = [Requirement(SELF)]
    for words in install_lines(text):
        wanted += requirements(words)

    missing = example_imports(page) - importable(wanted)

    assert not missing, (
        f"{page.name}'s examples import {sorted(missing)}, which its install lines "
        f"({[str(r) for r in wanted[1:]]}) do not bring in"
    )


# --- the README's list of where agents run -------------------------------------------------

# modules of dsh_tool_todo.integrations that are not a place an agent runs, and where they are
NOT_WHERE_AGENTS_RUN = {
    "a2a": "the plan as A2A artifacts: a wire format (docs/wire-formats.md)",
    "otel": "spans of every call, wherever the agent runs (docs/otel.md)",
}
WHERE_AGENTS_RUN = {
    "README.md": "- **Where agents run:**",
    "README.zh.md": "- **智能体运行之处：**",
}


@pytest.mark.parametrize("readme", sorted(WHERE_AGENTS_RUN))
def test_the_readme_lists_every_adapter_where_agents_run(readme: str) -> None:
    """Each adapter module (found in the package, so one added later is caught) is linked,
    by its page docs/integrations/<module>.md, from the README's "where agents run" item."""
    import pkgutil

    import dsh_tool_todo.integrations

    adapters = {
        info.name.replace("_", "-")
        for info in pkgutil.iter_modules(dsh_tool_todo.integrations.__path__)
        if not info.name.startswith("_") and info.name not in NOT_WHERE_AGENTS_RUN
    }
    text = (ROOT / readme).read_text(encoding="utf-8")
    start = text.index(WHERE_AGENTS_RUN[readme])
    item = text[start : text.index("\n- ", start)]
    linked = set(re.findall(r"\]\(docs/integrations/([\w-]+)\.md\)", item))

    assert {"mcp", "langchain", "pydantic-ai", "strands"} <= adapters
    assert adapters <= linked, f"{readme} does not name {sorted(adapters - linked)}"
    for page in linked:
        assert (ROOT / "docs" / "integrations" / f"{page}.md").is_file(), page


# --- the README's first screen ---------------------------------------------------------------

README_MAX_WORDS = 1_200
FIRST_SCREEN_LINES = 40
# what a newcomer must be able to reach from the README: the adapters, the way off
# TodoListMiddleware, and the docs by task
README_LINKS = {
    "docs/integrations/README.md",
    "docs/integrations/migrating-from-todolistmiddleware.md",
    "docs/index.md",
}


def _docs_links(text: str) -> set[str]:
    return set(re.findall(r"\]\((docs/[^)#\s]+)", text))


def test_the_readme_stays_short() -> None:
    words = len((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert words < README_MAX_WORDS, f"README.md has {words} words: move detail to docs/"


@pytest.mark.parametrize("readme", sorted(WHERE_AGENTS_RUN))
def test_the_readme_first_screen_shows_the_view_and_how_to_get_it(readme: str) -> None:
    text = (ROOT / readme).read_text(encoding="utf-8")
    first_screen = "\n".join(text.splitlines()[:FIRST_SCREEN_LINES])

    assert "](docs/web-view.png)" in first_screen
    assert "dsh-todo demo" in first_screen
    assert "dsh-todo serve" in first_screen
    missing = README_LINKS - _docs_links(text)
    assert not missing, f"{readme} does not link {sorted(missing)}"


def test_the_two_readmes_link_the_same_docs() -> None:
    english, chinese = (
        _docs_links((ROOT / readme).read_text(encoding="utf-8"))
        for readme in ("README.md", "README.zh.md")
    )
    assert english == chinese, (sorted(english - chinese), sorted(chinese - english))
