"""What the core imports, what a missing or shadowed framework says, and the version."""

from __future__ import annotations

import re
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

import dsh_tool_todo
from dsh_tool_todo.integrations import MissingExtra
from tests.integrations.child_import import import_where_finding_fails, python

ROOT = Path(__file__).resolve().parents[2]
FRAMEWORKS = (
    "mcp",
    "agents",
    "langchain",
    "langchain_core",
    "pydantic_ai",
    "psycopg",
    "starlette",
    "opentelemetry",
    "llama_index",
    "google.adk",
    "strands",
    "claude_agent_sdk",
    "agent_framework",
    "crewai",
)
ADAPTERS = {  # adapter module -> (the framework's top-level name, its extra)
    "dsh_tool_todo.integrations.mcp": ("mcp", "mcp"),
    "dsh_tool_todo.integrations.openai_agents": ("agents", "openai-agents"),
    "dsh_tool_todo.integrations.langchain": ("langchain", "langchain"),
    "dsh_tool_todo.integrations.pydantic_ai": ("pydantic_ai", "pydantic-ai"),
    "dsh_tool_todo.integrations.llama_index": ("llama_index", "llama-index"),
    "dsh_tool_todo.stores.postgres": ("psycopg", "postgres"),
    "dsh_tool_todo.integrations.otel": ("opentelemetry", "otel"),
    "dsh_tool_todo.integrations.strands": ("strands", "strands"),
    "dsh_tool_todo.integrations.claude_agent_sdk": ("claude_agent_sdk", "claude-agent-sdk"),
    "dsh_tool_todo.integrations.agent_framework": ("agent_framework", "agent-framework"),
    "dsh_tool_todo.integrations.crewai": ("crewai", "crewai"),
}


def test_importing_the_package_loads_no_framework() -> None:
    code = (
        "import sys, dsh_tool_todo, dsh_tool_todo.integrations, dsh_tool_todo.stores.owners\n"
        f"print(sorted(n for n in {FRAMEWORKS!r} if n in sys.modules))"
    )
    run = python(code)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"


@pytest.mark.parametrize("adapter", sorted(ADAPTERS))
@pytest.mark.parametrize("shadow", ["module", "package"])
def test_a_users_module_shadowing_the_framework_gives_missing_extra(
    adapter: str, shadow: str, tmp_path: Path
) -> None:
    framework, extra = ADAPTERS[adapter]
    if shadow == "module":
        (tmp_path / f"{framework}.py").write_text("# the user's own script\n")
    else:
        (tmp_path / framework).mkdir()
        (tmp_path / framework / "__init__.py").write_text("")
    code = (
        "from dsh_tool_todo.integrations import MissingExtra\n"
        f"try:\n    import {adapter}\n"
        "except MissingExtra as error:\n    print(error)\n"
        "else:\n    print('imported')\n"
    )
    run = python(code, cwd=tmp_path)  # the script's directory comes first on sys.path
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith(
        f"{adapter} needs the {extra!r} extra: install dsh-tool-todo[{extra}] "
        f"(from this repository: pip install '.[{extra}]'); if it is installed, "
        f"your own {framework!r} may be hiding it ("
    )


@pytest.mark.parametrize("adapter", sorted(ADAPTERS))
def test_a_missing_framework_names_the_extra_to_install(adapter: str) -> None:
    framework, extra = ADAPTERS[adapter]
    run = import_where_finding_fails(  # as if the framework were not installed
        adapter,
        when=f"name.split('.')[0] == {framework!r}",
        raises="ModuleNotFoundError(f'No module named {name!r}', name=name)",
        show="type(error).__name__, isinstance(error, MissingExtra), error",
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == (
        f"MissingExtra True {adapter} needs the {extra!r} extra: install dsh-tool-todo[{extra}] "
        f"(from this repository: pip install '.[{extra}]') "
        f"(No module named {framework!r})"
    )


def test_a_missing_dependency_of_the_framework_is_not_blamed_on_a_module_of_yours() -> None:
    # pip install '.[dbos]' once brought psycopg but not psycopg-pool: the error said the
    # user's own 'psycopg' might be hiding psycopg, which was installed and fine
    run = import_where_finding_fails(
        "dsh_tool_todo.stores.postgres",
        when="name.split('.')[0] == 'psycopg_pool'",
        raises="ModuleNotFoundError(f'No module named {name!r}', name=name)",
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == (
        "dsh_tool_todo.stores.postgres needs the 'postgres' extra: install "
        "dsh-tool-todo[postgres] (from this repository: pip install '.[postgres]') "
        "(No module named 'psycopg_pool')"
    )


def test_missing_extra_is_an_import_error_and_a_usage_error() -> None:
    assert issubclass(MissingExtra, ImportError)
    assert issubclass(MissingExtra, dsh_tool_todo.UsageError)


def test_the_version_is_pyprojects_and_the_cli_prints_it() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    declared = re.search(r'^version = "([^"]+)"$', pyproject, re.M)
    assert declared is not None
    assert dsh_tool_todo.__version__ == declared.group(1)
    run = subprocess.run(
        [sys.executable, "-m", "dsh_tool_todo", "--version"], capture_output=True, text=True
    )
    assert (run.returncode, run.stdout) == (0, f"dsh-todo {declared.group(1)}\n")


@pytest.mark.parametrize(
    ("extra", "package"),
    [
        ("mcp", "mcp"),
        ("openai-agents", "openai-agents"),
        ("agent-framework", "agent-framework-core"),
        pytest.param(
            "strands",
            "strands-agents",
            marks=pytest.mark.skipif(
                sys.version_info < (3, 11), reason="dev installs strands-agents on Python 3.11+"
            ),
        ),
    ],
)
def test_the_installed_framework_is_within_the_extras_range(extra: str, package: str) -> None:
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    declared = re.search(rf'^{extra} = \["{package}>=([\d.]+),<(\d+)"\]$', pyproject, re.M)
    assert declared is not None, f"extra {extra} not found"
    floor, ceiling = declared.groups()
    installed = tuple(int(part) for part in version(package).split(".")[:3])
    assert tuple(int(part) for part in floor.split(".")) <= installed < (int(ceiling),)


def test_dsh_todo_mcp_without_the_extra_says_what_to_install_in_one_line() -> None:
    code = (
        "import sys\n"
        "class NotInstalled:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'mcp':\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, NotInstalled())\n"
        "from dsh_tool_todo.cli import main\n"
        "sys.exit(main(['mcp']))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )
    assert (run.returncode, run.stdout) == (2, "")
    assert run.stderr == (
        "dsh-todo: error: dsh_tool_todo.integrations.mcp needs the 'mcp' extra: install "
        "dsh-tool-todo[mcp] (from this repository: pip install '.[mcp]') "
        "(No module named 'mcp')\n"
    )
