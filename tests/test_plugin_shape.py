"""The module is the plugin: name / inject / apply, no default, loadable through pluggy."""

from __future__ import annotations

import types
from importlib.metadata import entry_points

import pluggy
import pytest

import dsh_tool_todo
from dsh_tool_todo.core import projection_plugin
from dsh_tool_todo.core.markers import PROJECT_NAME, hookimpl, hookspec
from dsh_tool_todo.host import Host, HostContext, hookspecs
from dsh_tool_todo.host._host import ProjectionTable, ToolTable
from dsh_tool_todo.host.loader import (
    ENTRY_POINT_GROUP,
    discover_plugins,
    load_plugins,
    new_plugin_manager,
    unwrap_exports,
)
from tests.conftest import options


def test_module_exports_the_plugin_shape_and_no_default() -> None:
    assert dsh_tool_todo.name == "dsh-tool-todo"
    assert callable(dsh_tool_todo.inject)
    assert callable(dsh_tool_todo.apply)
    assert not hasattr(dsh_tool_todo, "default")
    assert unwrap_exports(dsh_tool_todo) is dsh_tool_todo


def test_markers_share_one_project_name() -> None:
    assert hookspec.project_name == hookimpl.project_name == PROJECT_NAME == "dsh"


def test_registers_with_pluggy_and_passes_check_pending() -> None:
    manager = pluggy.PluginManager(PROJECT_NAME)
    manager.add_hookspecs(hookspecs)
    manager.register(dsh_tool_todo, name=dsh_tool_todo.name)
    ctx = HostContext(ToolTable(), options(False), ProjectionTable())
    for sub_plugins in manager.hook.inject(ctx=ctx):
        for sub_plugin in sub_plugins:
            manager.register(sub_plugin, name=sub_plugin.name)
    manager.check_pending()
    manager.hook.apply(ctx=ctx)
    assert list(ctx.tools) == ["todo_write"]
    assert list(ctx.session_projections or {}) == ["todos"]


def test_inject_returns_the_projection_sub_plugin() -> None:
    ctx = HostContext(ToolTable(), options(False), ProjectionTable())
    assert list(dsh_tool_todo.inject(ctx)) == [projection_plugin]
    assert not ctx.tools, "inject must not install anything itself"


def test_loader_registers_injected_plugins_under_their_names() -> None:
    manager = new_plugin_manager()
    ctx = HostContext(ToolTable(), options(False), ProjectionTable())
    loaded = load_plugins(manager, [dsh_tool_todo], ctx)
    assert loaded == [dsh_tool_todo, projection_plugin]
    assert manager.get_plugin("dsh-tool-todo") is dsh_tool_todo
    assert manager.get_plugin("dsh-tool-todo/projection") is projection_plugin


def test_loading_the_plugin_twice_in_one_manager_is_refused() -> None:
    with pytest.raises(ValueError, match="already registered"):
        Host([dsh_tool_todo, dsh_tool_todo], options(False))


def test_entry_point_resolves_to_the_module() -> None:
    (entry_point,) = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == "todo"]
    assert entry_point.value == "dsh_tool_todo"
    assert entry_point.load() is dsh_tool_todo
    assert dsh_tool_todo in discover_plugins()


def test_host_loads_the_plugin_from_its_entry_point() -> None:
    host = Host(discover_plugins(), options(False))
    agent = host.new_agent()
    host.call_tool("todo_write", {"todos": []}, agent=agent)
    assert host.projection(agent.session, "todos") == []


def _module_with_stray_default() -> types.ModuleType:
    """A copy of the plugin module that also exports ``default`` (the postmortem's bug)."""
    module = types.ModuleType("stray_default_plugin")
    module.name = dsh_tool_todo.name  # type: ignore[attr-defined]
    module.inject = dsh_tool_todo.inject  # type: ignore[attr-defined]
    module.apply = dsh_tool_todo.apply  # type: ignore[attr-defined]
    default = types.ModuleType("stray_default_plugin.default")
    default.name = dsh_tool_todo.name  # type: ignore[attr-defined]
    default.apply = dsh_tool_todo.apply  # type: ignore[attr-defined]
    module.default = default  # type: ignore[attr-defined]
    return module


def test_a_stray_default_collapses_the_module_and_drops_inject() -> None:
    module = _module_with_stray_default()
    assert unwrap_exports(module) is module.default
    host = Host([module], options(False))
    assert "todo_write" in host.tools
    assert "todos" not in (host.context.session_projections or {}), "inject was dropped"
    healthy = Host([dsh_tool_todo], options(False))
    assert "todos" in (healthy.context.session_projections or {})


def test_without_a_projection_registry_the_sub_plugin_does_nothing() -> None:
    host = Host([dsh_tool_todo], options(False), projections=False)
    assert host.context.session_projections is None
    assert "todo_write" in host.tools


def test_hook_specs_are_documented_and_typed() -> None:
    for spec in (hookspecs.inject, hookspecs.apply):
        assert spec.__doc__
        assert "ctx" in spec.__annotations__


def test_importing_the_plugin_does_no_work_up_front() -> None:
    import subprocess
    import sys

    code = (
        "import sys, dsh_tool_todo\n"
        "from dsh_tool_todo.core._validation import args_adapter\n"
        "assert args_adapter.cache_info().currsize == 0, 'validator built at import'\n"
        "assert 'acp' not in sys.modules, 'the optional ACP SDK imported'\n"
        "assert 'dsh_tool_todo.stores.jsonl' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
