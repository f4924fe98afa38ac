"""Private by default: a module without a leading underscore is API, and says what its API is."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import sys
from pathlib import Path

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


# The public face: what a user may import is a short list, counted from the source so the
# modules whose frameworks this environment lacks are counted too.
MAX_PUBLIC_NAMES = 200
SOURCE = Path(dsh_tool_todo.__file__).parent


def _public_sources() -> list[Path]:
    """Every module a user may import: no part of its dotted name starts with ``_``."""
    found = []
    for path in sorted(SOURCE.rglob("*.py")):
        parts = path.relative_to(SOURCE).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if not any(part.startswith("_") for part in parts):
            found.append(path)
    return found


def _exported(path: Path) -> list[str]:
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        if isinstance(target, ast.Name) and target.id == "__all__":
            value = ast.literal_eval(node.value)  # type: ignore[attr-defined]
            return list(value)
    return []


def test_the_public_face_has_at_most_200_names() -> None:
    names = {name for path in _public_sources() for name in _exported(path)}
    assert len(names) <= MAX_PUBLIC_NAMES, (
        f"{len(names)} public names: make a helper private (a _module or a _name) before adding one"
    )


def _is_exception(node: ast.ClassDef, known: set[str]) -> bool:
    bases = [
        base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", "")
        for base in node.bases
    ]
    return any(base in known or base.endswith(("Error", "Exception", "Warning")) for base in bases)


def test_every_exception_class_lives_in_an_errors_module_and_no_two_share_a_name() -> None:
    known = {"Exception", "BaseException", "MissingExtra", "LogBusy", "TodoError", "UsageError"}
    homes: dict[str, list[str]] = {}
    outside = []
    for path in sorted(SOURCE.rglob("*.py")):
        where = str(path.relative_to(SOURCE))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and _is_exception(node, known):
                if path.name != "errors.py" and not node.name.startswith("_"):
                    outside.append(f"{where}: {node.name}")
                if not node.name.startswith("_"):
                    homes.setdefault(node.name, []).append(where)
    assert outside == [], "exception classes belong in errors.py or a backend's errors module"
    assert {name: where for name, where in homes.items() if len(where) > 1} == {}
