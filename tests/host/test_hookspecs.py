"""The plugin protocol as hook specifications: ``inject`` then ``apply``, each taking ``ctx``."""

from __future__ import annotations

import inspect

from dsh_tool_todo.core.markers import PROJECT_NAME, hookimpl
from dsh_tool_todo.host import hookspecs
from dsh_tool_todo.host.loader import new_plugin_manager


def test_the_two_hooks_take_the_context_alone() -> None:
    for hook in (hookspecs.inject, hookspecs.apply):
        assert list(inspect.signature(hook).parameters) == ["ctx"]
        assert getattr(hook, f"{PROJECT_NAME}_spec") == {
            "firstresult": False,
            "historic": False,
            "warn_on_impl": None,
            "warn_on_impl_args": None,
        }


def test_a_new_manager_carries_exactly_these_specs() -> None:
    manager = new_plugin_manager()
    assert {name for name in vars(manager.hook) if not name.startswith("_")} == set(
        hookspecs.__all__
    )
    assert manager.hook.inject.spec is not None
    assert manager.hook.apply.spec is not None


def test_inject_collects_every_plugins_answer() -> None:
    manager = new_plugin_manager()

    class First:
        @staticmethod
        @hookimpl
        def inject(ctx: object) -> list[object]:
            return ["a"]

    manager.register(First())
    assert manager.hook.inject(ctx=None) == [["a"]]
