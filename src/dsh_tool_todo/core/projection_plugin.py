"""The sub-plugin that ``inject`` hands to the host: it registers the ``todos`` projection.

Its ``apply`` runs after the parent's (the parent's is ``tryfirst``), and the
parent's ``inject`` has already checked the context and the options, so a
composition that fails does so before this registers anything.
"""

from __future__ import annotations

from ..errors import TodoError, UsageError
from ..protocols import PluginContext
from .markers import hookimpl
from .projection import register_projection

__all__ = ["apply", "name"]

name = "dsh-tool-todo/projection"


@hookimpl(trylast=True)
def apply(ctx: PluginContext) -> None:
    try:
        register_projection(ctx)
    except TodoError:
        raise
    except Exception as error:
        raise UsageError(
            f"ctx.session_projections.register raised {type(error).__name__}: {error}"
        ) from error
