from __future__ import annotations

from typing import Any

import pytest

import dsh_tool_todo
from dsh_tool_todo import TodoOptions, UsageError
from dsh_tool_todo.host import Host


def load(plugin_options: Any) -> Host:
    return Host([dsh_tool_todo], {"dsh-tool-todo": plugin_options})


@pytest.mark.parametrize("value", [True, False])
def test_the_option_is_read_in_either_spelling(value: bool) -> None:
    assert load({"allowParallelInProgress": value}).tools["todo_write"].options == TodoOptions(
        value
    )
    assert load({"allow_parallel_in_progress": value}).tools["todo_write"].options == (
        TodoOptions(value)
    )


def test_no_options_at_all_fail_at_composition_naming_both_choices() -> None:
    with pytest.raises(UsageError, match=r"options for dsh-tool-todo are missing.*true.*false"):
        Host([dsh_tool_todo], {})


def test_the_option_has_no_default() -> None:
    with pytest.raises(UsageError, match=r"allowParallelInProgress is required: .*true.*false"):
        load({})


@pytest.mark.parametrize("value", [1, 0, "false", "true", None, [True]])
def test_a_non_bool_value_is_refused(value: object) -> None:
    pattern = r"allowParallelInProgress (must be a bool|is required).*true.*false"
    with pytest.raises(UsageError, match=pattern):
        load({"allowParallelInProgress": value})


def test_an_unknown_option_is_refused() -> None:
    with pytest.raises(UsageError, match=r"unknown dsh-tool-todo option\(s\) scope.*only option"):
        load({"allowParallelInProgress": False, "scope": "swarm"})


def test_both_spellings_at_once_are_refused() -> None:
    with pytest.raises(UsageError, match="not both"):
        load({"allowParallelInProgress": False, "allow_parallel_in_progress": False})


def test_options_that_are_not_a_mapping_are_refused() -> None:
    with pytest.raises(UsageError, match="must be a mapping"):
        load(True)


def test_a_failed_composition_registers_no_tool() -> None:
    from dsh_tool_todo.host import HostContext
    from dsh_tool_todo.host._tables import ProjectionTable, ToolTable
    from dsh_tool_todo.host.loader import load_plugins, new_plugin_manager

    ctx = HostContext(ToolTable(), {"dsh-tool-todo": {}}, ProjectionTable())
    with pytest.raises(UsageError):
        load_plugins(new_plugin_manager(), [dsh_tool_todo], ctx)
    assert not ctx.tools


def test_a_bool_lookalike_is_named_by_its_full_type() -> None:
    fake_bool = type("bool_", (), {"__module__": "numpy", "__bool__": lambda self: False})
    with pytest.raises(
        UsageError, match=r"allowParallelInProgress must be a bool, not numpy.bool_"
    ):
        TodoOptions.parse({"allowParallelInProgress": fake_bool()})
