"""``import dsh_tool_todo`` stays light: checked by the modules a fresh interpreter loads.

A module set, not a timing: the entry-point scan (``importlib.metadata``),
``asyncio`` and every framework, database driver and web stack cost tens of
milliseconds each, and an import that pulls one in is a regression whatever the
machine's speed.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

# Loaded only when a host, a store or an integration asks for them.
HEAVY = (
    "importlib.metadata",
    "asyncio",
    "email",
    "zipfile",
    "logging",
    "subprocess",
    "ssl",
    "socket",
    "sqlite3",
    "acp",
    "langchain",
    "langchain_core",
    "langgraph",
    "pydantic_ai",
    "agents",
    "openai",
    "anthropic",
    "mcp",
    "psycopg",
    "psycopg_pool",
    "starlette",
    "uvicorn",
    "fastapi",
    "httpx",
    "anyio",
    "watchfiles",
    "playwright",
    "orjson",
    "opentelemetry",
)


DEPENDENCIES = "from pydantic import ConfigDict, Field, TypeAdapter; import pluggy"


def modules_after(code: str) -> set[str]:
    """The modules a fresh interpreter holds after running ``code``."""
    listing = (
        f"import sys; {code}; names = sorted(sys.modules); import json; print(json.dumps(names))"
    )
    done = subprocess.run(
        [sys.executable, "-c", listing], capture_output=True, text=True, check=True
    )
    return set(json.loads(done.stdout))


def heavy_in(modules: set[str]) -> list[str]:
    return sorted(
        name for name in modules if any(name == top or name.startswith(top + ".") for top in HEAVY)
    )


def test_the_check_sees_a_heavy_import() -> None:
    found = heavy_in(modules_after("import asyncio, importlib.metadata"))
    assert {"asyncio", "importlib.metadata"} <= set(found)


@pytest.mark.parametrize(
    "code",
    [
        "import dsh_tool_todo",
        "import dsh_tool_todo.host",
        "import dsh_tool_todo.stores.memory",
        "import dsh_tool_todo.plans.acp",
        "import dsh_tool_todo.cli",
    ],
)
def test_importing_the_plugin_loads_nothing_heavy(code: str) -> None:
    # What the two dependencies load themselves is theirs (pydantic pulls in
    # uuid, hence subprocess, on Python 3.10): only what this package adds counts.
    added = modules_after(code) - modules_after(DEPENDENCIES)
    assert heavy_in(added) == []


def test_the_wording_of_refusals_loads_only_when_a_call_is_refused() -> None:
    wording = {"dsh_tool_todo.core._rejections", "dsh_tool_todo.core._echo"}
    assert not wording & modules_after("import dsh_tool_todo")
    refused = modules_after(
        "from dsh_tool_todo.core import _validation; text = _validation.not_json('no')"
    )
    assert wording <= refused
