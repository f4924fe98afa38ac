"""The tables a host hands its plugins on ``ctx``: tools and session projections by name.

Each refuses a second registration under a name already taken; the projection table
is sealed once the plugins are applied and counts every change made past ``register``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import UsageError
from ..protocols import ProjectionUnit


class ToolTable(dict[str, Any]):
    """``ctx.tools``: tools by name; a name is registered once."""

    def register(self, tool: Any, /) -> None:
        if tool.name in self:
            raise UsageError(f"a tool named {tool.name!r} is already registered")
        self[tool.name] = tool


class ProjectionTable(dict[str, ProjectionUnit[Any, Any]]):
    """``ctx.session_projections``: projection units by key; a key is registered once.

    The host seals it once its plugins are applied: a unit registered later
    would have no state for the agents that already exist, so it is refused.
    """

    def __init__(self) -> None:
        super().__init__()
        self._sealed = False

    def register(self, key: str, unit: ProjectionUnit[Any, Any], /) -> None:
        if key in self:
            raise UsageError(f"a session projection {key!r} is already registered")
        if self._sealed:
            raise UsageError(
                f"session projection {key!r} registered after composition: register "
                "projections in a plugin's apply, while the host loads its plugins"
            )
        self[key] = unit

    def seal(self) -> None:
        """Refuse registrations from now on (the host calls this after ``apply``)."""
        self._sealed = True

    # Changed past register (``table[key] = unit``, ``del``, ``update``...)? Every dict method
    # that can change it counts, so a new agent asks one number rather than comparing the units.
    changes = 0


def _counted(name: str) -> Callable[..., Any]:
    change = getattr(dict, name)

    def counted(self: ProjectionTable, /, *args: Any, **kwargs: Any) -> Any:
        self.changes += 1
        return change(self, *args, **kwargs)

    counted.__name__ = name
    return counted


for _name in (
    "__setitem__",
    "__delitem__",
    "__ior__",
    "clear",
    "pop",
    "popitem",
    "setdefault",
    "update",
):
    setattr(ProjectionTable, _name, _counted(_name))


@dataclass(frozen=True)
class HostContext:
    tools: ToolTable
    options: Mapping[str, Mapping[str, Any]]
    session_projections: ProjectionTable | None
