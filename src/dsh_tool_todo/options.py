"""The composition's options for this plugin, checked when the plugin is applied."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .errors import UsageError

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
            raise UsageError(f"{_PARALLEL} must be a bool, not {type(value).__name__}: {_CHOICES}")
        return cls(allow_parallel_in_progress=value)
