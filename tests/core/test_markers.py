"""The pluggy markers: one project name, so this plugin's hooks are the host's hooks."""

from __future__ import annotations

import pluggy

import dsh_tool_todo
from dsh_tool_todo.core.markers import PROJECT_NAME, hookimpl, hookspec
from dsh_tool_todo.host.loader import new_plugin_manager


def test_both_markers_name_the_dsh_project() -> None:
    assert PROJECT_NAME == "dsh"
    assert hookimpl.project_name == hookspec.project_name == PROJECT_NAME


def test_a_function_marked_with_hookimpl_is_seen_by_a_dsh_manager() -> None:
    manager = new_plugin_manager()
    assert manager.project_name == PROJECT_NAME
    manager.register(dsh_tool_todo)
    callers = manager.get_hookcallers(dsh_tool_todo)
    assert callers is not None
    assert sorted(caller.name for caller in callers) == ["apply", "inject"]


def test_a_manager_of_another_project_sees_no_hook_of_this_plugin() -> None:
    other = pluggy.PluginManager("not-dsh")
    other.register(dsh_tool_todo)
    assert not other.get_hookcallers(dsh_tool_todo)
