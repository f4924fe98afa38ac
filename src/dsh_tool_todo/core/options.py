"""The composition's options for this plugin, checked when the plugin is applied."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import UsageError

__all__ = ["PLUGIN_NAME", "TodoOptions"]

PLUGIN_NAME = "dsh-tool-todo"
_PARALLEL = "allowParallelInProgress"
_PARALLEL_ALIAS = "allow_parallel_in_progress"
_CHOICES = (
    f"set {PLUGIN_NAME} option {_PARALLEL} to true "
    "(several todos may be in_progress at once) or false (at most one)"
)


@dataclass(frozen=True)
class TodoOptions:
    """The deployment's choices. ``allow_parallel_in_progress`` has no default."""

    allow_parallel_in_progress: bool

    @classmethod
    def from_context(cls, options: Mapping[str, Mapping[str, Any]]) -> TodoOptions:
        """Read this plugin's entry of ``ctx.options``."""
        if not isinstance(options, Mapping):
            raise UsageError(
                "ctx.options must be a mapping of plugin name to options, "
                f"not {_type_name(options)}: {_CHOICES}"
            )
        return cls.parse(options.get(PLUGIN_NAME))

    @classmethod
    def parse(cls, raw: Mapping[str, Any] | None) -> TodoOptions:
        if raw is None:
            raise UsageError(f"options for {PLUGIN_NAME} are missing: {_CHOICES}")
        if not isinstance(raw, Mapping):
            raise UsageError(f"options for {PLUGIN_NAME} must be a mapping: {_CHOICES}")
        unknown = sorted(str(key) for key in raw if key not in (_PARALLEL, _PARALLEL_ALIAS))
        if unknown:
            raise UsageError(
                f"unknown {PLUGIN_NAME} option(s) {', '.join(unknown)}; "
                f"the only option is {_PARALLEL}: {_CHOICES}"
            )
        if _PARALLEL in raw and _PARALLEL_ALIAS in raw:
            raise UsageError(f"give {_PARALLEL} or {_PARALLEL_ALIAS}, not both")
        value = raw.get(_PARALLEL, raw.get(_PARALLEL_ALIAS))
        if value is None:
            raise UsageError(f"{_PARALLEL} is required: {_CHOICES}")
        if not isinstance(value, bool):
            raise UsageError(f"{_PARALLEL} must be a bool, not {_type_name(value)}: {_CHOICES}")
        return cls(allow_parallel_in_progress=value)


def check_context(ctx: object) -> TodoOptions:
    """Check the plugin context's shape and this plugin's options; return the options.

    Runs in ``inject`` and again in ``apply``, before anything is registered,
    so a mistake fails the composition with the context as it was.
    """
    try:
        tools = ctx.tools  # type: ignore[attr-defined]
    except AttributeError:
        raise UsageError(
            "the plugin context has no `tools` registry (ctx.tools, with a register(tool) method)"
        ) from None
    except Exception as error:
        raise UsageError(f"reading ctx.tools raised {type(error).__name__}: {error}") from error
    if not callable(getattr(tools, "register", None)):
        raise UsageError(f"ctx.tools has no register(tool) method (got {_type_name(tools)})")
    projections = getattr(ctx, "session_projections", None)
    if projections is not None and not callable(getattr(projections, "register", None)):
        raise UsageError(
            "ctx.session_projections must be None or have a register(key, unit) method "
            f"(got {_type_name(projections)})"
        )
    try:
        options = ctx.options  # type: ignore[attr-defined]
    except AttributeError:
        raise UsageError(f"the plugin context has no `options` mapping: {_CHOICES}") from None
    return TodoOptions.from_context(options)


def _type_name(value: object) -> str:
    """``bool``, ``list``; ``numpy.bool_`` for types outside the builtins, so a
    lookalike is never named as the type it imitates."""
    kind = type(value)
    if kind.__module__ == "builtins":
        return kind.__qualname__
    return f"{kind.__module__}.{kind.__qualname__}"
