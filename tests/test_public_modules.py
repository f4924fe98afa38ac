"""Private by default: a module without a leading underscore is API, and says what its API is."""

from __future__ import annotations

import importlib
import pkgutil
import sys

import pytest

import dsh_tool_todo


def _public_modules() -> list[str]:
    names = [dsh_tool_todo.__name__]
    for module in pkgutil.walk_packages(dsh_tool_todo.__path__, f"{dsh_tool_todo.__name__}."):
        parts = module.name.split(".")[1:]
        if not any(part.startswith("_") for part in parts):
            names.append(module.name)
    return names


# dev does not install crewai: tests/integrations/test_crewai.py checks that adapter's __all__
PUBLIC = [name for name in _public_modules() if name != "dsh_tool_todo.integrations.crewai"]
NEEDS_3_11 = {"claude_agent_sdk", "google_adk", "llama_index", "strands"}


def test_the_walk_finds_the_public_modules_and_skips_the_private_ones() -> None:
    assert {"dsh_tool_todo.host", "dsh_tool_todo.stores.postgres", "dsh_tool_todo.cli"} <= set(
        PUBLIC
    )
    assert not {
        "dsh_tool_todo.core._validation",
        "dsh_tool_todo.core._accept",
        "dsh_tool_todo.__main__",
    } & set(PUBLIC)


@pytest.mark.parametrize("name", PUBLIC)
def test_every_public_module_declares_all_and_every_name_resolves(name: str) -> None:
    if sys.version_info < (3, 11) and name.rpartition(".")[2] in NEEDS_3_11:
        pytest.skip("dev installs this adapter's framework on Python 3.11+ (see pyproject)")
    module = importlib.import_module(name)
    exported = module.__dict__.get("__all__")
    assert isinstance(exported, list), f"{name} has no __all__: list its API, or prefix it with _"
    assert len(exported) == len(set(exported)), f"{name}.__all__ names something twice"
    missing = [attribute for attribute in exported if not hasattr(module, attribute)]
    assert not missing, f"{name}.__all__ names what it does not define: {missing}"
    private = [attribute for attribute in exported if attribute.startswith("_")]
    assert not private, f"{name}.__all__ exports private names: {private}"
