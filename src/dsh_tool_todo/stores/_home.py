"""The one default place for plans on a machine: where an adapter records when the environment
names a place, and what ``dsh-todo serve``, ``watch``, ``show`` and ``sessions`` read when given
no source (docs/stores.md, "The default place").

Only the environment and the platform's rule for a per-user state directory are read, here,
each time it is asked: nothing at import.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import quote

from ._log_file import is_conninfo
from ._paths import is_url, source_text

__all__ = [
    "HOME_VARIABLE",
    "default_home",
    "home_from_environment",
    "home_named",
    "home_not_made_yet",
    "is_database",
]

HOME_VARIABLE = "DSH_TODO_HOME"
"""The environment variable that names the default place: a directory, or a database by its
postgresql:// URL or libpq conninfo."""

_APP = "dsh-todo"


def home_from_environment(environ: Mapping[str, str] | None = None) -> str | None:
    """What :data:`HOME_VARIABLE` names (``~`` expanded in a path), or ``None`` when it is unset
    or empty: then an adapter keeps its plans in memory. A libpq ``key=value`` conninfo names a
    database as a URL does, and is given as one (``postgresql://?key=value&...``), so that
    every reader and writer takes it for the database it is, never for a directory."""
    value = (os.environ if environ is None else environ).get(HOME_VARIABLE, "").strip()
    if not value:
        return None
    if is_url(value):
        return source_text(value)
    if is_conninfo(value):
        return _as_url(value) or value
    return os.path.expanduser(value)


def is_database(place: str) -> bool:
    """Whether ``place`` names a database (a URL, or a conninfo no file is named after) rather
    than a directory: a message then names it by its server, never by its text."""
    return is_url(place) or is_conninfo(place)


def home_named(environ: Mapping[str, str] | None = None) -> str:
    """How a message names where the default place comes from."""
    return HOME_VARIABLE if home_from_environment(environ) else "the per-user state directory"


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
    was recorded there. A database is never one (its server answers for it)."""
    return not is_database(place) and not os.path.lexists(place)


# One ``key = value`` of a conninfo: a value quoted ('...', \' and \\ escaped) or bare.
_PAIR = re.compile(r"\s*([A-Za-z_]+)\s*=\s*(?:'((?:[^'\\]|\\.)*)'|((?:[^\s'\\]|\\.)*))")
_ESCAPE = re.compile(r"\\(.)")


def _as_url(conninfo: str) -> str | None:
    """The URL libpq reads as ``conninfo`` (every pair a query parameter, percent-encoded), or
    ``None`` when it does not parse as pairs (then libpq says so, without repeating it)."""
    pairs: list[tuple[str, str]] = []
    position = 0
    while conninfo[position:].strip():
        pair = _PAIR.match(conninfo, position)
        if pair is None:
            return None
        key, quoted, bare = pair.groups()
        pairs.append((key, _ESCAPE.sub(r"\1", bare if quoted is None else quoted)))
        position = pair.end()
    if not pairs:
        return None
    return "postgresql://?" + "&".join(f"{key}={quote(value, safe='')}" for key, value in pairs)
