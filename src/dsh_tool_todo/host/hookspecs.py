"""The host's plugin protocol, as pluggy hook specifications.

A host adds these specs to a ``pluggy.PluginManager``, registers each plugin,
registers whatever the plugin's ``inject`` returns, then calls ``apply``.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..core.markers import hookspec
from ..protocols import PluginContext

__all__ = ["apply", "inject"]


@hookspec
def inject(ctx: PluginContext) -> Sequence[object] | None:
    """Return the sub-plugins to register before any plugin is applied."""


@hookspec
def apply(ctx: PluginContext) -> None:
    """Install what the plugin provides (tools, projections) on ``ctx``."""
