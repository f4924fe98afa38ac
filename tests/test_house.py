"""The house rules: which package may import which, read from the source's import statements.

Every import counts, at module level or inside a function or ``if TYPE_CHECKING:``: a
lazy import still ties one room of the package to another. Docstring examples do not.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

import dsh_tool_todo

PACKAGE = dsh_tool_todo.__name__
SOURCE = Path(dsh_tool_todo.__file__).parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(SOURCE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    relative = Path(*name.split(".")[1:]) if "." in name else Path()
    return (SOURCE / relative).with_suffix(".py").is_file() or (
        SOURCE / relative / "__init__.py"
    ).is_file()


def _imports(path: Path) -> Iterator[tuple[int, str]]:
    """Each module of this package that ``path`` imports, with the line that imports it."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == PACKAGE:
                    yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            if target.split(".")[0] != PACKAGE:
                continue
            for alias in node.names:  # `from . import contract` imports the module contract
                child = f"{target}.{alias.name}"
                yield node.lineno, child if _is_module(child) else target


def _edges(room: str) -> list[tuple[str, int, str]]:
    """(file, line, imported module) for every import of the package made under ``room``."""
    return [
        (str(path.relative_to(SOURCE)), line, target)
        for path in sorted((SOURCE / room).rglob("*.py"))
        for line, target in _imports(path)
    ]


def _within(target: str, rooms: tuple[str, ...]) -> bool:
    return any(
        target == f"{PACKAGE}.{room}" or target.startswith(f"{PACKAGE}.{room}.") for room in rooms
    )


def test_house_the_import_reader_sees_imports_of_every_form() -> None:
    host = {target for _file, _line, target in _edges("host")}
    # from ..core.markers import ..., from . import hookspecs, and one inside a function
    assert {f"{PACKAGE}.core.markers", f"{PACKAGE}.host.hookspecs", f"{PACKAGE}.errors"} <= host
    core = {target for _file, _line, target in _edges("core")}
    assert f"{PACKAGE}.core.contract" in core  # from . import contract as text


def test_house_core_imports_only_core_errors_and_protocols() -> None:
    """``core/`` is what every other package builds on: it knows none of them."""
    allowed = ("core", "errors", "protocols")
    wrong = [edge for edge in _edges("core") if not _within(edge[2], allowed)]
    assert not wrong, f"core/ imports outside core, errors, protocols: {wrong}"


def test_house_plans_read_no_store_and_name_no_screen_or_framework() -> None:
    """``plans/`` renders and ships plans it is handed; it opens no store itself."""
    forbidden = ("stores", "cli", "web", "integrations")
    wrong = [edge for edge in _edges("plans") if _within(edge[2], forbidden)]
    assert not wrong, f"plans/ imports a store, the CLI, the web view or an adapter: {wrong}"


# The one store the reference host may import: its default session is the in-memory log
# (``Host.new_agent()`` with no session makes one), which is a store like the others (it
# speaks the store protocol and the store contract tests pin it down), so it lives in
# stores/ and host/ re-exports it as ``dsh_tool_todo.host.MemorySession``.
HOST_MAY_IMPORT_STORES = (f"{PACKAGE}.stores.memory",)


def test_house_host_imports_no_cli_web_or_adapter_and_only_the_memory_store() -> None:
    forbidden = ("cli", "web", "integrations")
    wrong = [edge for edge in _edges("host") if _within(edge[2], forbidden)]
    assert not wrong, f"host/ imports the CLI, the web view or an adapter: {wrong}"
    stores = {edge[2] for edge in _edges("host") if _within(edge[2], ("stores",))}
    assert stores <= {f"{PACKAGE}.stores", *HOST_MAY_IMPORT_STORES}, stores


def test_house_the_memory_session_is_one_class_under_both_documented_paths() -> None:
    from dsh_tool_todo import host
    from dsh_tool_todo.stores import memory

    assert host.MemorySession is memory.MemorySession
    assert host.AsyncMemorySession is memory.AsyncMemorySession


# The face of the package: the plugin, its entry point for ``python -m``, the error tree and
# the protocols. Anything else belongs in the package of its role.
ROOT_MODULES = {"__init__.py", "__main__.py", "errors.py", "protocols.py"}
MAX_ROOT_MODULES = 6


def test_house_the_package_root_holds_only_its_face() -> None:
    found = {path.name for path in SOURCE.glob("*.py")}
    assert len(ROOT_MODULES) <= MAX_ROOT_MODULES
    assert found <= ROOT_MODULES, (
        f"new module(s) at the package root: {sorted(found - ROOT_MODULES)}; put each in the "
        "package of its role (core, host, plans, stores, integrations, web, cli)"
    )
    assert len(found) <= MAX_ROOT_MODULES


# What a viewer may need of a store is a capability of the reader protocol (``protocols.py``),
# reached through the picker (``stores/__init__.py``): no viewer names a backend.
BACKENDS = ("stores.jsonl", "stores.postgres")


def test_house_cli_and_web_name_no_backend_module() -> None:
    wrong = [edge for room in ("cli", "web") for edge in _edges(room) if _within(edge[2], BACKENDS)]
    assert not wrong, f"the CLI or the web view imports a backend, not the picker: {wrong}"


def _help_or_docstring(tree: ast.AST) -> set[int]:
    """The ids of the string constants that are docstrings or user-facing help text (an
    argument's ``help=``, a parser's ``description=``, the commands' summaries and texts in
    ``cli/_parser.py``'s ``_ABOUT`` table)."""
    allowed: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            if node.body and isinstance(node.body[0], ast.Expr):
                allowed.add(id(node.body[0].value))
        elif isinstance(node, ast.Call):
            texts = [kw.value for kw in node.keywords if kw.arg in ("help", "description")]
            allowed |= {id(part) for text in texts for part in ast.walk(text)}
        elif isinstance(node, ast.AnnAssign | ast.Assign) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(
                isinstance(target, ast.Name) and target.id in ("_ABOUT", "_EXAMPLES")
                for target in targets
            ):
                allowed |= {id(part) for part in ast.walk(node.value)}
    return allowed


def test_house_the_cli_holds_no_database_url_outside_its_help() -> None:
    wrong = []
    for path in sorted((SOURCE / "cli").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        allowed = _help_or_docstring(tree)
        wrong += [
            (str(path.relative_to(SOURCE)), node.lineno)
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and "postgresql://" in node.value
            and id(node) not in allowed
        ]
    assert not wrong, f"the CLI tells a URL from a path itself (the picker does): {wrong}"


TESTS = Path(__file__).parent


# Where a public module's tests live when the file is not named after it, and why.
HOMES = {
    "stores": "stores/test_picker.py",  # the package's face is the picker
    "stores.postgres": "stores/postgres/test_session.py",  # the store's face: its sessions
    "integrations": "integrations/test_extras.py",  # its one name, MissingExtra, and lazy imports
    "stores.postgres.aio": "stores/postgres/test_session.py",  # the async session; session.py
    # is its generated sync twin, and one contract suite runs both
    "stores.postgres.errors": "test_errors.py",  # the error tree is tested as one
}


def _exports(path: Path) -> bool:
    """Whether a module's ``__all__`` names anything."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            target = node.targets[0] if isinstance(node, ast.Assign) else node.target
            if isinstance(target, ast.Name) and target.id == "__all__" and node.value is not None:
                return bool(ast.literal_eval(node.value))
    return False


def _public_modules() -> list[tuple[str, Path]]:
    found = []
    for path in sorted(SOURCE.rglob("*.py")):
        parts = path.relative_to(SOURCE).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
            if not parts or not _exports(path):
                continue  # the plugin itself (tests/test_plugin_shape.py), or an empty face
        if not any(part.startswith("_") for part in parts):
            found.append((".".join(parts), path))
    return found


def _homes(name: str) -> list[Path]:
    """``core.schema``: tests/core/test_schema.py; a package's face ``host``: tests/test_host.py
    or tests/host/test_host.py."""
    parts = name.split(".")
    if name in HOMES:
        return [TESTS / HOMES[name]]
    return [
        TESTS.joinpath(*parts[:-1], f"test_{parts[-1]}.py"),
        TESTS.joinpath(*parts, f"test_{parts[-1]}.py"),
    ]


def test_house_the_walk_finds_public_modules_at_every_depth() -> None:
    names = {name for name, _path in _public_modules()}
    assert {"errors", "core.schema", "stores.postgres.reader", "integrations.pydantic_ai"} <= names
    assert not {name for name in names if "._" in f".{name}"}


@pytest.mark.parametrize("name", [name for name, _path in _public_modules()])
def test_house_each_public_module_has_a_home_test_named_after_it(name: str) -> None:
    assert any(home.is_file() for home in _homes(name)), (
        f"{name} has no home test: write {_homes(name)[0].relative_to(TESTS.parent)}"
    )


MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80


def test_house_no_module_is_over_500_lines_and_no_function_over_80() -> None:
    """A module that outgrows 500 lines splits by concern; a function over 80 lines, too."""
    long_modules, long_functions = [], []
    for path in sorted(SOURCE.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        where = str(path.relative_to(SOURCE))
        if len(source.splitlines()) > MAX_MODULE_LINES:
            long_modules.append(where)
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    long_functions.append(f"{where}: {node.name} ({length} lines)")
    assert long_modules == []
    assert long_functions == []
