"""The one default place for plans on a machine: where an adapter records when the environment
names a place, and what ``dsh-todo serve``, ``watch``, ``show`` and ``sessions`` read when given
no source (docs/stores.md, "The default place").

Only the environment and the platform's rule for a per-user state directory are read, here,
each time it is asked: nothing at import.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

__all__ = ["HOME_VARIABLE", "default_home", "home_from_environment", "home_not_made_yet"]

HOME_VARIABLE = "DSH_TODO_HOME"
"""The environment variable that names the default place: a directory or a postgresql:// URL."""

_APP = "dsh-todo"


def home_from_environment(environ: Mapping[str, str] | None = None) -> str | None:
    """What :data:`HOME_VARIABLE` names (``~`` expanded in a path), or ``None`` when it is unset
    or empty: then an adapter keeps its plans in memory."""
    value = (os.environ if environ is None else environ).get(HOME_VARIABLE, "").strip()
    if not value:
        return None
    if value.startswith(("postgresql://", "postgres://")):
        return value
    return os.path.expanduser(value)


def default_home(environ: Mapping[str, str] | None = None, platform: str | None = None) -> str:
    """:data:`HOME_VARIABLE`, or the per-user state directory ``platformdirs`` would name
    (``user_state_dir("dsh-todo")``): ``$XDG_STATE_HOME/dsh-todo`` or
    ``~/.local/state/dsh-todo`` on Linux, ``~/Library/Application Support/dsh-todo`` on macOS,
    ``%LOCALAPPDATA%\\dsh-todo`` on Windows. Nothing is created here."""
    environ = os.environ if environ is None else environ
    named = home_from_environment(environ)
    if named is not None:
        return named
    platform = sys.platform if platform is None else platform
    if platform == "darwin":
        return str(Path.home() / "Library" / "Application Support" / _APP)
    if platform == "win32":
        local = environ.get("LOCALAPPDATA") or str(Path.home() / "AppData" / "Local")
        return str(Path(local) / _APP)
    state = environ.get("XDG_STATE_HOME", "")
    base = Path(state) if os.path.isabs(state) else Path.home() / ".local" / "state"
    return str(base / _APP)


def home_not_made_yet(place: str) -> bool:
    """Whether ``place`` (what :func:`default_home` named) is a directory not made yet: nothing
    was recorded there. A database URL is never one (its server answers for it)."""
    return not place.startswith(("postgresql://", "postgres://")) and not os.path.lexists(place)
