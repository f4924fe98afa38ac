"""dsh-tool-todo: the model-facing ``todo_write`` tool, as a dsh plugin.

This module is the plugin itself: it exports ``name``, ``inject`` and ``apply``,
and deliberately no ``default`` (a loader would collapse the module to it and
lose ``inject``).
"""

from __future__ import annotations

from collections.abc import Sequence

from .core import projection_plugin
from .core.markers import hookimpl
from .core.model import TodoCounts, TodoItem, TodoResult
from .core.options import PLUGIN_NAME, TodoOptions, check_context
from .core.projection import TodosProjection, replay
from .core.tool import TodoWriteTool, install_tool, render_result, todo_write_tool
from .errors import InvalidLog, TodoError, ToolCallRejected, ToolFailure, UsageError
from .protocols import PluginContext

__all__ = [
    "InvalidLog",
    "TodoCounts",
    "TodoError",
    "TodoItem",
    "TodoOptions",
    "TodoResult",
    "TodoWriteTool",
    "TodosProjection",
    "ToolCallRejected",
    "ToolFailure",
    "UsageError",
    "apply",
    "inject",
    "name",
    "render_result",
    "replay",
    "todo_write_tool",
]

name = PLUGIN_NAME

# Kept equal to pyproject.toml's version by a test: reading it from the installed
# metadata (importlib.metadata) would cost an import-time scan.
__version__ = "0.1.0"


@hookimpl
def inject(ctx: PluginContext) -> Sequence[object]:
    """Hand the host the sub-plugin that registers the ``todos`` projection.

    The context and the options are checked here, before any plugin is
    applied, so a bad composition fails with nothing registered.
    """
    check_context(ctx)
    return [projection_plugin]


@hookimpl(tryfirst=True)
def apply(ctx: PluginContext) -> None:
    """Register ``todo_write`` on ``ctx.tools``; fails if the options are not chosen.

    ``tryfirst``: it runs before the projection sub-plugin's ``apply``, so a
    tools registry that refuses the tool leaves no projection behind.
    """
    check_context(ctx)
    try:
        install_tool(ctx)
    except TodoError:
        raise
    except Exception as error:
        raise UsageError(f"ctx.tools.register raised {type(error).__name__}: {error}") from error
