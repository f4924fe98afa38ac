"""Every adapter checks ``owner=`` and ``owners=`` when it is built, in the adapter core.

A wrong argument (a registry of another kind, the class instead of an instance, an owner
key that is neither a str nor a function) is a ``UsageError`` at construction saying what
to pass, never an ``AttributeError`` or ``TypeError`` deep in the model's first call.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import pkgutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import dsh_tool_todo.integrations
from dsh_tool_todo.errors import UsageError
from dsh_tool_todo.stores.memory import MemorySession
from dsh_tool_todo.stores.owners import OwnerRegistry


def serve_stdio(**kwargs: Any) -> Any:
    from dsh_tool_todo.integrations.mcp import serve_stdio

    return asyncio.run(serve_stdio(**kwargs))  # refused before it reads stdin


# adapter module -> (its builder's name, how to call it, what its owner= function receives:
# None when owner= takes a key only; key_ok False when it takes a function only)
Builder = tuple[str, Callable[..., Any], str | None, bool]


def builder(module: str, name: str, receives: str | None, key_ok: bool = True) -> Builder:
    """``name`` of ``integrations.<module>``, called with the test's keyword arguments."""
    return (name, lambda **kw: _get(module, name)(**kw), receives, key_ok)


ADAPTERS: dict[str, list[Builder]] = {
    "mcp": [builder("mcp", "build_server", None), ("serve_stdio", serve_stdio, None, True)],
    "pydantic_ai": [builder("pydantic_ai", "todo_write_toolset", "RunContext", key_ok=False)],
    "openai_agents": [
        builder("openai_agents", "todo_write_function_tool", "ToolContext"),
        (
            "plan_reminder_filter",
            lambda allow_parallel_in_progress, **kw: _get("openai_agents", "plan_reminder_filter")(
                **kw
            ),
            "run context",
            True,
        ),
    ],
    "agent_framework": [builder("agent_framework", "TodoWriteProvider", "AgentSession")],
    "llama_index": [builder("llama_index", "todo_write_llama_tool", "Context")],
    "google_adk": [builder("google_adk", "TodoWriteAdkTool", "ToolContext")],
    "strands": [
        builder("strands", "todo_write_strands_tool", "Agent"),
        # what todo_write_strands_tool builds: its errors name that
        builder("strands", "TodoWriteAgentTool", "Agent"),
    ],
    "claude_agent_sdk": [builder("claude_agent_sdk", "todo_write_for_claude", None)],
}
# what the builders return, holding the registry they were given (built by the builder)
NOT_BUILDERS = {
    "ClaudeTodo",
    "TodoWriteLlamaTool",
    "TodoWriteFunctionTool",
    "RemindAfterCompaction",
}
# the name a builder's errors give, when it is not its own
NAMED = {"TodoWriteAgentTool": "todo_write_strands_tool"}
CASES = [
    pytest.param(module, name, build, function_of, key_ok, id=name)
    for module, builders in ADAPTERS.items()
    for name, build, function_of, key_ok in builders
]


def _get(module: str, name: str) -> Any:
    adapter = f"dsh_tool_todo.integrations.{module}"
    later = {"google_adk", "llama_index", "strands", "claude_agent_sdk"}
    if module in later and sys.version_info < (3, 11):
        pytest.skip("dev installs its framework on Python 3.11+")
    return getattr(importlib.import_module(adapter), name)


def good_owner(function_of: str | None, key_ok: bool) -> Any:
    return "ada" if key_ok else (lambda ctx: "ada")


WRONG_OWNERS = [
    pytest.param({"ada": MemorySession()}, r"not dict", id="a-dict"),
    pytest.param(MemorySession(), r"not MemorySession", id="a-session"),
    pytest.param(OwnerRegistry, r"the class OwnerRegistry itself \(pass an instance\)", id="class"),
    pytest.param(b"plans", r"not bytes b'plans'", id="bytes"),
]


@pytest.mark.parametrize(("owners", "named"), WRONG_OWNERS)
@pytest.mark.parametrize(("module", "name", "build", "function_of", "key_ok"), CASES)
def test_a_wrong_owners_is_refused_when_the_adapter_is_built(
    module: str,
    name: str,
    build: Callable[..., Any],
    function_of: str | None,
    key_ok: bool,
    owners: object,
    named: str,
) -> None:
    wanted = rf"^{NAMED.get(name, name)}: owners= takes .*OwnerRegistry\(\).* {named}"
    with pytest.raises(UsageError, match=wanted):
        build(
            allow_parallel_in_progress=False,
            owner=good_owner(function_of, key_ok),
            owners=owners,
        )


@pytest.mark.parametrize(("module", "name", "build", "function_of", "key_ok"), CASES)
def test_a_wrong_owner_is_refused_when_the_adapter_is_built(
    module: str, name: str, build: Callable[..., Any], function_of: str | None, key_ok: bool
) -> None:
    wrong: list[object] = [42, b"ada", ["ada"], OwnerRegistry()]
    if key_ok:
        wrong.append("")  # no registry takes it: every call would fail
    if function_of is None:
        wrong.append(lambda ctx: "ada")  # a server has one owner: a key
    if not key_ok:
        wrong.append("ada")
    for owner in wrong:
        wanted = "an owner key" if key_ok else "a function of the RunContext"
        with pytest.raises(UsageError, match=rf"^{NAMED.get(name, name)}: owner= takes {wanted}"):
            build(allow_parallel_in_progress=False, owner=owner, owners=OwnerRegistry())


# serve_stdio serves stdin once its arguments pass: they are those of build_server
@pytest.mark.parametrize(
    ("module", "name", "build", "function_of", "key_ok"),
    [case for case in CASES if case.id != "serve_stdio"],
)
def test_the_right_arguments_are_taken(
    module: str, name: str, build: Callable[..., Any], function_of: str | None, key_ok: bool
) -> None:
    owners = OwnerRegistry()
    build(allow_parallel_in_progress=False, owner=good_owner(function_of, key_ok), owners=owners)
    if function_of is not None:
        build(allow_parallel_in_progress=False, owner=lambda ctx: "ada", owners=owners)


@pytest.mark.parametrize(
    ("module", "name", "build", "function_of", "key_ok"),
    [case for case in CASES if case.id != "serve_stdio"],
)
def test_every_adapter_takes_a_directory_for_owners_and_refuses_an_empty_one(
    module: str,
    name: str,
    build: Callable[..., Any],
    function_of: str | None,
    key_ok: bool,
    tmp_path: Path,
) -> None:
    owner = good_owner(function_of, key_ok)
    build(allow_parallel_in_progress=False, owner=owner, owners=tmp_path)
    build(allow_parallel_in_progress=False, owner=owner, owners=str(tmp_path))
    with pytest.raises(UsageError, match=rf"^{NAMED.get(name, name)}: owners= is empty"):
        build(allow_parallel_in_progress=False, owner=owner, owners="")


def test_every_builder_that_takes_an_owner_is_checked_here() -> None:
    """An adapter added later (by its module in the package) is listed above, or this fails."""
    for info in pkgutil.iter_modules(dsh_tool_todo.integrations.__path__):
        if info.name.startswith("_"):
            continue
        try:
            module = importlib.import_module(f"dsh_tool_todo.integrations.{info.name}")
        except ImportError:
            continue  # its framework is not installed here (the CI leg that has it checks it)
        builders = {
            name
            for name, value in vars(module).items()
            if not name.startswith("_")
            and callable(value)
            and getattr(value, "__module__", None) == module.__name__
            and _takes_owners(value)
        } - NOT_BUILDERS
        listed = {name for name, *_ in ADAPTERS.get(info.name, [])}
        assert builders <= listed, (info.name, builders - listed)


def _takes_owners(value: Any) -> bool:
    try:
        parameters = inspect.signature(value).parameters
    except (TypeError, ValueError):
        return False
    return "owners" in parameters
