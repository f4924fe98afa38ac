"""Load plugins into a pluggy manager the way the dsh host's Loader does."""

from __future__ import annotations

from collections.abc import Iterable
from importlib.metadata import entry_points

import pluggy

from . import hookspecs
from .markers import PROJECT_NAME
from .protocols import PluginContext

ENTRY_POINT_GROUP = "dsh.plugins"


def unwrap_exports(module: object) -> object:
    """A module with a ``default`` attribute stands for that attribute alone.

    This is why a plugin must not export ``default``: its other exports
    (``inject`` among them) would never be seen.
    """
    default = getattr(module, "default", None)
    return module if default is None else default


def new_plugin_manager() -> pluggy.PluginManager:
    manager = pluggy.PluginManager(PROJECT_NAME)
    manager.add_hookspecs(hookspecs)
    return manager


def load_plugins(
    manager: pluggy.PluginManager, plugins: Iterable[object], ctx: PluginContext
) -> list[object]:
    """Register each plugin and what its ``inject`` returns, then ``apply`` them all.

    Returns the plugins in the order they were registered.
    """
    waiting = [unwrap_exports(plugin) for plugin in plugins]
    loaded: list[object] = []
    while waiting:
        plugin = waiting.pop(0)
        manager.register(plugin, name=getattr(plugin, "name", None))
        loaded.append(plugin)
        others = [other for other in manager.get_plugins() if other is not plugin]
        for injected in manager.subset_hook_caller("inject", remove_plugins=others)(ctx=ctx):
            waiting.extend(unwrap_exports(sub_plugin) for sub_plugin in injected or ())
    manager.check_pending()
    manager.hook.apply(ctx=ctx)
    return loaded


def discover_plugins(group: str = ENTRY_POINT_GROUP) -> list[object]:
    """The plugins installed under the ``dsh.plugins`` entry-point group."""
    return [entry_point.load() for entry_point in entry_points(group=group)]
