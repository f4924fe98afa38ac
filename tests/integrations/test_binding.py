"""The adapter binding's rules, read from the source: what a framework module may import.

A framework module (every module under ``integrations/`` but the binding itself)
imports from outside ``integrations/`` only the contract, the errors and the plan
converters (``plans``); everything else of the core and the stores comes through
``integrations/_binding.py``, which exports at most 8 names. No integrations module
uses a private attribute of the tool.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import dsh_tool_todo
from dsh_tool_todo.core.tool import TodoWriteTool

PACKAGE = Path(dsh_tool_todo.__file__).parent
INTEGRATIONS = PACKAGE / "integrations"
BINDING = INTEGRATIONS / "_binding.py"
ALLOWED = ("dsh_tool_todo.core.contract", "dsh_tool_todo.errors", "dsh_tool_todo.plans")
# `dsh-todo mcp`'s pieces are the CLI's: stdio_config builds the same command line from them
KNOWN = {("claude_agent_sdk.py", "dsh_tool_todo.cli._mcp")}
MODULES = sorted(path for path in INTEGRATIONS.rglob("*.py") if path != BINDING)


def _dotted(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    where = PACKAGE.parent.joinpath(*name.split("."))
    return where.with_suffix(".py").exists() or (where / "__init__.py").exists()


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    """Each module of the package ``path`` imports from, with the names it takes."""
    package = _dotted(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    found: list[tuple[str, list[str]]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            for alias in node.names:  # `from ..core import contract` takes a module
                sub = f"{module}.{alias.name}"
                found.append((sub, []) if _is_module(sub) else (module, [alias.name]))
    return [(name, names) for name, names in found if name.split(".")[0] == "dsh_tool_todo"]


@pytest.mark.parametrize("path", MODULES, ids=lambda path: str(path.relative_to(INTEGRATIONS)))
def test_a_framework_module_reaches_the_core_only_through_the_binding(path: Path) -> None:
    where = str(path.relative_to(INTEGRATIONS))
    offending = sorted(
        {
            module
            for module, _ in _imports(path)
            if not module.startswith("dsh_tool_todo.integrations")
            and not any(module == ok or module.startswith(f"{ok}.") for ok in ALLOWED)
            and (where, module) not in KNOWN
        }
    )
    assert not offending, f"{where} imports {offending}: reach them through _binding"
    private = [
        (module, names)
        for module, names in _imports(path)
        if module.startswith("dsh_tool_todo.core")
        and (any(name.startswith("_") for name in names) or "._" in module)
    ]
    assert not private, f"{where} imports private names of core: {private}"


def test_the_binding_exports_at_most_8_names() -> None:
    from dsh_tool_todo.integrations import _binding

    assert len(_binding.__all__) <= 8
    assert all(hasattr(_binding, name) for name in _binding.__all__)


def test_no_integrations_module_uses_a_private_attribute_of_the_tool() -> None:
    private = {
        name for name in vars(TodoWriteTool) if name.startswith("_") and not name.endswith("__")
    } | {"_texts"}  # set in __init__
    assert {"_prepare", "_texts"} <= private
    for path in [*MODULES, BINDING]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            used = node.attr if isinstance(node, ast.Attribute) else None
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                used = node.value  # a method named in a string: patched by name (otel)
            assert used not in private, f"{path.name}:{node.lineno} uses the tool's {used}"
