"""The adapter binding's rules, read from the source: what a framework module may import.

A framework module (every module under ``integrations/`` but the binding itself)
imports from outside ``integrations/`` only the contract, the errors and the plan
converters (``plans``); everything else of the core and the stores comes through
``integrations/_binding.py``, which exports at most 8 names. No integrations module
uses a private attribute of the tool.
"""

from __future__ import annotations

import ast
import asyncio
import gc
import inspect
import logging
import re
from pathlib import Path

import pytest

import dsh_tool_todo
from dsh_tool_todo.core.contract import NOT_RECORDED
from dsh_tool_todo.core.tool import TodoWriteTool, todo_write_tool
from dsh_tool_todo.errors import OwnerNameError, UsageError
from dsh_tool_todo.integrations._binding import Binding, OwnerRegistry
from tests._builders import plan

PACKAGE = Path(dsh_tool_todo.__file__).parent
INTEGRATIONS = PACKAGE / "integrations"
BINDING = INTEGRATIONS / "_binding.py"
ALLOWED = ("dsh_tool_todo.core.contract", "dsh_tool_todo.errors", "dsh_tool_todo.plans")
# `dsh-todo mcp`'s pieces are the CLI's: stdio_config builds the same command line from them
KNOWN = {("claude_agent_sdk.py", "dsh_tool_todo.cli._mcp")}
# the binding and its delegation part (_links.py, which _binding uses) are the shared core
MODULES = sorted(
    path for path in INTEGRATIONS.rglob("*.py") if path not in (BINDING, INTEGRATIONS / "_links.py")
)


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


@pytest.mark.parametrize("returned", [5, "", b"ada", ["ada"]])
def test_an_owner_function_returning_no_key_is_a_clear_error_naming_the_adapter(
    returned: object,
) -> None:
    binding = Binding(
        "my_adapter", allow_parallel_in_progress=False, owner=lambda ctx: returned, function_of="X"
    )
    with pytest.raises(UsageError, match=r"^my_adapter: owner= returned .*: return the call's"):
        binding.key(object())


def test_owners_takes_a_directory_and_records_there(tmp_path: Path) -> None:
    binding = Binding("a", allow_parallel_in_progress=False, owner="ada", owners=tmp_path / "p")
    outcome = binding.call({"todos": [{"content": "x", "status": "pending"}]}, "ada")
    assert outcome.kind == "recorded"
    assert [p.name for p in (tmp_path / "p").iterdir()] == ["ada.jsonl"]


def test_with_no_owners_the_variable_names_the_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    in_memory = Binding("a", allow_parallel_in_progress=False, owner="ada")
    assert in_memory.owners.directory is None
    monkeypatch.setenv("DSH_TODO_HOME", str(tmp_path))
    recording = Binding("a", allow_parallel_in_progress=False, owner="ada")
    recording.call({"todos": [{"content": "x", "status": "pending"}]}, "ada")
    assert (tmp_path / "ada.jsonl").is_file()


@pytest.mark.parametrize(
    ("owners", "said"),
    [
        ("", r"^a: owners= is empty: name a directory"),
        (5, r"^a: owners= takes where the plans are kept: .* not int 5"),
        (OwnerRegistry, r"the class OwnerRegistry itself"),
    ],
)
def test_a_bad_owners_is_refused_when_built(owners: object, said: str) -> None:
    with pytest.raises(UsageError, match=said):
        Binding("a", allow_parallel_in_progress=False, owner="ada", owners=owners)


def test_owners_naming_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("")
    with pytest.raises(UsageError, match=r"f: not a directory: plans are kept in a directory"):
        Binding("a", allow_parallel_in_progress=False, owner="ada", owners=tmp_path / "f")


def test_a_registry_the_binding_opened_outlives_the_binding_and_closes_its_logs_when_dropped(
    tmp_path: Path,
) -> None:
    owners = Binding("a", allow_parallel_in_progress=False, owner="ada", owners=tmp_path).owners
    gc.collect()  # the binding is gone: the registry an adapter kept still records
    owners.call("ada", todo_write_tool(allow_parallel_in_progress=False), plan("x"))
    log = owners.path("ada")
    del owners
    gc.collect()  # no ResourceWarning (filterwarnings = error): its log was closed
    assert log.is_file()


def test_an_owner_function_may_return_an_awaitable_for_the_adapter_to_await() -> None:
    async def key_of(context: object) -> str:
        return "ada"

    binding = Binding("a", allow_parallel_in_progress=False, owner=key_of, function_of="Context")
    pending = binding.key(object())
    assert inspect.isawaitable(pending)
    assert asyncio.run(pending) == "ada"


CALLS = {
    "call": lambda binding, args: binding.call(args, "ada").text,
    "acall": lambda binding, args: asyncio.run(binding.acall(args, "ada")).text,
    "atext": lambda binding, args: asyncio.run(binding.atext(args, "ada")),
}


@pytest.mark.parametrize("way", list(CALLS))
def test_an_owners_log_another_writer_holds_is_not_recorded_with_the_cause_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, way: str
) -> None:
    binding = Binding("a", allow_parallel_in_progress=False, owner="ada", owners=tmp_path)
    with OwnerRegistry(tmp_path) as holder:  # another process, or another registry
        holder.call("ada", todo_write_tool(allow_parallel_in_progress=False), plan("held"))
        with caplog.at_level(logging.ERROR, logger="dsh_tool_todo"):
            assert CALLS[way](binding, plan("refused")) == NOT_RECORDED
    (record,) = caplog.records
    assert record.levelno == logging.ERROR
    assert re.fullmatch(
        r"todo_write for owner 'ada' was not recorded: owner 'ada': its session could not be "
        r"opened: .*ada\.jsonl: another session is writing this log \(one writer per log\)",
        record.getMessage(),
    )
    assert (
        CALLS[way](binding, plan("later"))
        == "Updated todo list: 1 pending, 0 in progress, 0 completed."
    )
    binding.owners.close()


def test_a_key_no_file_can_be_named_by_is_still_the_developers_error(tmp_path: Path) -> None:
    binding = Binding("a", allow_parallel_in_progress=False, owner="ada", owners=tmp_path)
    with pytest.raises(OwnerNameError, match="encodes to"):
        binding.call(plan("A"), "x" * 300)
