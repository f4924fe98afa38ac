"""The loader: only plugins get in, injection is bounded, a failed load leaves nothing behind.

Plugins load the way the dsh host's Loader loads them: each registered object provides an
``inject`` or ``apply`` hook marked with the ``dsh`` marker, ``inject`` returns a list or tuple
of plugins, and discovery through entry points names a broken one and hides no other.
"""

from __future__ import annotations

import subprocess
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pluggy
import pytest

import dsh_tool_todo
from dsh_tool_todo.core.markers import hookimpl
from dsh_tool_todo.errors import PluginLoadWarning, UsageError
from dsh_tool_todo.host import Host, HostContext
from dsh_tool_todo.host._tables import ProjectionTable, ToolTable
from dsh_tool_todo.host.loader import (
    MAX_PLUGINS,
    discover_plugins,
    load_plugins,
    new_plugin_manager,
    unwrap_exports,
)
from tests._builders import options


def _context() -> HostContext:
    return HostContext(ToolTable(), options(False), ProjectionTable())


def _plugin(name: str, inject: Callable[[Any], Any] | None = None) -> types.ModuleType:
    module = types.ModuleType(name)
    module.name = name  # type: ignore[attr-defined]
    if inject is not None:
        module.inject = hookimpl(inject)  # type: ignore[attr-defined]
    else:
        module.apply = hookimpl(lambda ctx: None)  # type: ignore[attr-defined]
    return module


@pytest.mark.parametrize(
    ("returned", "message"),
    [
        ("ab", r"inject of plugin 'parent' must return a list or tuple of plugins, not str"),
        ({"x": 1}, r"inject of plugin 'parent' must return a list or tuple of plugins, not dict"),
        ([None], r"inject of plugin 'parent' returned None at index 0, not a plugin"),
        ([0], r"inject of plugin 'parent' returned 0 at index 0, not a plugin"),
    ],
)
def test_inject_must_return_plugins(returned: Any, message: str) -> None:
    host_ctx = _context()
    with pytest.raises(UsageError, match=message):
        load_plugins(new_plugin_manager(), [_plugin("parent", lambda ctx: returned)], host_ctx)


def test_a_module_whose_default_is_not_a_plugin_is_refused() -> None:
    module = types.ModuleType("zero_default")
    module.default = 0  # type: ignore[attr-defined]
    with pytest.raises(UsageError, match=r"'zero_default' exports default = 0, which is not"):
        Host([module], options(False))
    with pytest.raises(UsageError, match=r"7 is not a plugin \(it has neither inject nor apply"):
        Host([7], options(False))


def test_a_blocked_plugin_is_not_reported_as_loaded() -> None:
    manager = new_plugin_manager()
    manager.set_blocked("dsh-tool-todo")
    with pytest.raises(UsageError, match=r"plugin 'dsh-tool-todo' is blocked in the plugin"):
        Host([dsh_tool_todo], options(False), plugin_manager=manager)


def test_injection_is_bounded() -> None:
    def fresh(ctx: Any) -> list[object]:
        again = type("Again", (), {"inject": staticmethod(hookimpl(fresh))})
        return [again()]  # a new plugin object (no name: pluggy names it by id) every call

    manager = new_plugin_manager()
    host_ctx = _context()
    with pytest.raises(UsageError, match=r"injection deeper than 16 levels under plugin 'root'"):
        load_plugins(manager, [_plugin("root", fresh)], host_ctx)
    assert manager.get_plugins() == set()


def test_a_broken_entry_point_is_named_and_hides_no_other(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dist = tmp_path / "broken_dist-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-dist\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[dsh.plugins]\nbroken = no_such_module_for_dsh_tests:plugin\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.warns(
        PluginLoadWarning,
        match=r"entry point 'broken' \(no_such_module_for_dsh_tests:plugin\) of broken-dist "
        r"1.0 failed to load: ModuleNotFoundError",
    ):
        plugins = discover_plugins()
    assert dsh_tool_todo in plugins


def test_importing_the_plugin_or_the_host_stays_light() -> None:
    code = (
        "import sys, dsh_tool_todo, dsh_tool_todo.host, dsh_tool_todo.host.loader\n"
        "heavy = {'importlib.metadata', 'asyncio', 'logging'} & set(sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_plugins_are_registered_in_order_parents_before_what_they_inject() -> None:
    child = _plugin("child")
    parent = _plugin("parent", lambda ctx: [child])
    other = _plugin("other")
    manager = new_plugin_manager()
    assert load_plugins(manager, [parent, other], _context()) == [parent, other, child]
    assert manager.get_plugin("child") is child


def test_hooks_marked_for_another_project_do_not_make_a_plugin() -> None:
    foreign = types.ModuleType("foreign")
    foreign.apply = pluggy.HookimplMarker("not-dsh")(lambda ctx: None)  # type: ignore[attr-defined]
    with pytest.raises(UsageError, match=r"'foreign' is not a plugin: neither its inject nor"):
        load_plugins(new_plugin_manager(), [foreign], _context())


def test_a_failing_apply_unregisters_every_plugin_the_load_registered() -> None:
    def refuse(ctx: Any) -> None:
        raise RuntimeError("apply failed")

    failing = types.ModuleType("failing")
    failing.apply = hookimpl(refuse)  # type: ignore[attr-defined]
    manager = new_plugin_manager()
    with pytest.raises(RuntimeError, match="apply failed"):
        load_plugins(manager, [_plugin("fine"), failing], _context())
    assert manager.get_plugins() == set()


def test_a_module_exporting_a_plugin_as_default_stands_for_it() -> None:
    plugin = _plugin("inner")
    module = types.ModuleType("outer")
    module.default = plugin  # type: ignore[attr-defined]
    assert unwrap_exports(module) is plugin
    assert unwrap_exports(plugin) is plugin


def test_the_number_of_plugins_is_bounded() -> None:
    many = [_plugin(f"p{number}") for number in range(MAX_PLUGINS + 1)]
    manager = new_plugin_manager()
    with pytest.raises(UsageError, match=rf"more than {MAX_PLUGINS} plugins injected"):
        load_plugins(manager, many, _context())
    assert manager.get_plugins() == set()
