"""Load plugins into a pluggy manager the way the dsh host's Loader does.

Only plugins get in: every registered object must provide an ``inject`` or
``apply`` hook, ``inject`` must return a list or tuple of plugins, a plugin
blocked in the manager is an error rather than a silent no-op, and injection is
bounded (:data:`MAX_INJECT_DEPTH` levels, :data:`MAX_PLUGINS` plugins). A load
that fails unregisters what it registered, so the manager is left as it was.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pluggy

from ..core.markers import PROJECT_NAME
from ..errors import PluginLoadWarning, UsageError
from ..protocols import PluginContext
from . import hookspecs

__all__ = [
    "discover_plugins",
    "load_plugins",
    "new_plugin_manager",
]

ENTRY_POINT_GROUP = "dsh.plugins"
MAX_INJECT_DEPTH = 16
MAX_PLUGINS = 256


def unwrap_exports(module: object) -> object:
    """A module with a ``default`` attribute stands for that attribute alone.

    This is why a plugin must not export ``default``: its other exports
    (``inject`` among them) would never be seen. A ``default`` that is not a
    plugin itself (``default = 0``) is refused rather than loaded as nothing.
    """
    default = getattr(module, "default", None)
    if default is None:
        return module
    if not _looks_like_plugin(default):
        raise UsageError(
            f"{_describe(module)} exports default = {default!r}, which is not a plugin "
            "(it has neither inject nor apply); a plugin module must not export default"
        )
    return default


def new_plugin_manager() -> pluggy.PluginManager:
    manager = pluggy.PluginManager(PROJECT_NAME)
    manager.add_hookspecs(hookspecs)
    return manager


def load_plugins(
    manager: pluggy.PluginManager, plugins: Iterable[object], ctx: PluginContext
) -> list[object]:
    """Register each plugin and what its ``inject`` returns, then ``apply`` them all.

    Returns the plugins in the order they were registered. Raises
    :class:`UsageError` naming the plugin for anything that is not a plugin;
    on any failure, the plugins this call registered are unregistered again.
    """
    registered: list[object] = []
    try:
        _register_all(manager, plugins, ctx, registered)
        manager.check_pending()
        manager.hook.apply(ctx=ctx)
    except BaseException:
        for plugin in reversed(registered):
            manager.unregister(plugin)
        raise
    return registered


def _register_all(
    manager: pluggy.PluginManager,
    plugins: Iterable[object],
    ctx: PluginContext,
    registered: list[object],
) -> None:
    # (plugin, depth, the top-level plugin it was injected under)
    waiting: list[tuple[object, int, str]] = []
    for plugin in plugins:
        unwrapped = unwrap_exports(plugin)
        waiting.append((unwrapped, 0, _describe(unwrapped)))
    while waiting:
        plugin, depth, root = waiting.pop(0)
        if depth > MAX_INJECT_DEPTH:
            raise UsageError(
                f"injection deeper than {MAX_INJECT_DEPTH} levels under plugin {root}: "
                "does an inject return a new plugin on every call?"
            )
        if len(registered) >= MAX_PLUGINS:
            raise UsageError(f"more than {MAX_PLUGINS} plugins injected under plugin {root}")
        name = getattr(plugin, "name", None)
        if not _looks_like_plugin(plugin):
            raise UsageError(
                f"{_describe(plugin)} is not a plugin (it has neither inject nor apply)"
            )
        if manager.register(plugin, name=name if isinstance(name, str) else None) is None:
            raise UsageError(
                f"plugin {_describe(plugin)} is blocked in the plugin manager, so it was not "
                "loaded; unblock it or leave it out"
            )
        registered.append(plugin)
        if not manager.get_hookcallers(plugin):
            raise UsageError(
                f"{_describe(plugin)} is not a plugin: neither its inject nor its apply is "
                f"marked with the {PROJECT_NAME!r} hookimpl marker"
            )
        others = [other for other in manager.get_plugins() if other is not plugin]
        caller = manager.subset_hook_caller("inject", remove_plugins=others)
        for injected in caller(ctx=ctx):
            for sub_plugin in _injected_plugins(plugin, injected):
                waiting.append((sub_plugin, depth + 1, root))


def _injected_plugins(parent: object, injected: object) -> list[object]:
    if injected is None:
        return []
    if not isinstance(injected, (list, tuple)):
        raise UsageError(
            f"inject of plugin {_describe(parent)} must return a list or tuple of plugins, "
            f"not {type(injected).__name__}"
        )
    plugins = []
    for index, item in enumerate(injected):
        if item is None or not _looks_like_plugin(item):
            raise UsageError(
                f"inject of plugin {_describe(parent)} returned {item!r} at index {index}, "
                "not a plugin"
            )
        plugins.append(unwrap_exports(item))
    return plugins


def _looks_like_plugin(candidate: object) -> bool:
    return any(callable(getattr(candidate, hook, None)) for hook in ("inject", "apply", "default"))


def _describe(plugin: object) -> str:
    name = getattr(plugin, "name", None)
    if isinstance(name, str):
        return repr(name)
    module_name = getattr(plugin, "__name__", None)
    if isinstance(module_name, str):
        return repr(module_name)
    return repr(plugin)


def discover_plugins(group: str = ENTRY_POINT_GROUP) -> list[object]:
    """The plugins installed under the ``dsh.plugins`` entry-point group.

    Each entry point loads on its own: one that fails to import is reported
    with a :class:`PluginLoadWarning` naming it and its distribution, and the
    others are still returned (discovery is automatic, so one broken install
    must not take every plugin down; run with ``-W error::dsh_tool_todo.host.loader.
    PluginLoadWarning`` to make it fatal). ``importlib.metadata`` is imported
    here, not at import time: its scan is the costliest part of loading.
    """
    import warnings
    from importlib.metadata import entry_points

    plugins: list[object] = []
    for entry_point in entry_points(group=group):
        try:
            plugins.append(entry_point.load())
        except Exception as error:
            warnings.warn(
                f"entry point {entry_point.name!r} ({entry_point.value}) of "
                f"{_distribution(entry_point)} failed to load: "
                f"{type(error).__name__}: {error}",
                PluginLoadWarning,
                stacklevel=2,
            )
    return plugins


def _distribution(entry_point: Any) -> str:
    dist = getattr(entry_point, "dist", None)
    if dist is None:
        return "an unknown distribution"
    return f"{dist.name} {dist.version}"
