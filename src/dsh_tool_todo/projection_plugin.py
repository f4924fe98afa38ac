"""The sub-plugin that ``inject`` hands to the host: it registers the ``todos`` projection."""

from __future__ import annotations

from .markers import hookimpl
from .projection import register_projection
from .protocols import PluginContext

name = "dsh-tool-todo/projection"


@hookimpl
def apply(ctx: PluginContext) -> None:
    register_projection(ctx)
