"""The sub-plugin that registers the ``todos`` projection: it registers once, late, and
turns a host registry's failure into a clear error."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from dsh_tool_todo import TodosProjection
from dsh_tool_todo.core import projection_plugin
from dsh_tool_todo.errors import TodoError, UsageError
from tests._builders import options


class _Registry(dict[str, Any]):
    def register(self, key: str, unit: Any, /) -> None:
        self[key] = unit


def _ctx(registry: Any) -> Any:
    return SimpleNamespace(tools=None, options=options(False), session_projections=registry)


def test_apply_registers_the_todos_projection() -> None:
    registry = _Registry()
    projection_plugin.apply(_ctx(registry))
    assert list(registry) == ["todos"]
    assert isinstance(registry["todos"], TodosProjection)


def test_its_apply_runs_last_under_its_own_name() -> None:
    assert projection_plugin.name == "dsh-tool-todo/projection"
    assert projection_plugin.apply.dsh_impl["trylast"] is True  # type: ignore[attr-defined]


def test_a_registry_that_raises_is_named_in_a_usage_error() -> None:
    class Offline(_Registry):
        def register(self, key: str, unit: Any, /) -> None:
            raise ConnectionError("registry offline")

    with pytest.raises(UsageError, match=r"register raised ConnectionError: registry offline"):
        projection_plugin.apply(_ctx(Offline()))


def test_a_todo_error_passes_through_as_it_is() -> None:
    class Refusing(_Registry):
        def register(self, key: str, unit: Any, /) -> None:
            raise UsageError(f"a session projection {key!r} is already registered")

    with pytest.raises(TodoError, match=r"^a session projection 'todos' is already registered$"):
        projection_plugin.apply(_ctx(Refusing()))
