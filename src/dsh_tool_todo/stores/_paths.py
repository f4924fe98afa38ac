"""What the picker is given, read as one thing: a database URL whatever the case of its scheme,
and the system's refusal of a path (nothing there, a file where a directory should be, no
permission) said as this library's error, naming the path and what to do."""

from __future__ import annotations

import os
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

from ..errors import TodoError, path_error

if TYPE_CHECKING:
    Target = str | os.PathLike[str]

__all__: list[str] = []

URL_SCHEMES = ("postgresql://", "postgres://")
"""What starts a database URL, in lower case: a scheme is read in any case (RFC 3986)."""


def is_url(text: str) -> bool:
    """Whether ``text`` is a ``postgresql://`` or ``postgres://`` URL, its scheme in any case."""
    return text[: len(URL_SCHEMES[0])].lower().startswith(URL_SCHEMES)


def source_text(target: Target) -> str:
    """``target`` as text, a database URL's scheme in lower case (``POSTGRESQL://`` becomes
    ``postgresql://``): libpq reads a URL only so, and would take any other case for a broken
    ``key=value`` conninfo."""
    text = os.fspath(target)
    if not is_url(text):
        return text
    scheme, _, rest = text.partition("://")
    return f"{scheme.lower()}://{rest}"


def path_failure(error: OSError, target: str) -> TodoError:
    """The system's ``error`` about ``target`` (or the path it names) as this library's:
    a :class:`~dsh_tool_todo.errors.StoreUnavailable` that is still that kind of ``OSError``."""
    where = error.filename if isinstance(error.filename, str) else target
    if isinstance(error, FileNotFoundError):
        parent = os.path.dirname(os.path.abspath(where))
        if not os.path.isdir(parent):
            what = f"its directory {parent} does not exist: make it first, or name another place"
        else:
            what = "nothing is there: check the path (a session's log appears at its first write)"
    elif isinstance(error, NotADirectoryError):
        what = "a file stands where this path needs a directory: name a directory of logs"
    elif isinstance(error, IsADirectoryError):
        what = "is a directory, not a session log: name a log file in it"
    elif isinstance(error, PermissionError):
        what = (
            "permission denied: this user may not read or write it; give it access, or name "
            "another place"
        )
    else:
        what = f"{error.strerror or error}"
    return path_error(error, f"{where}: {what}")


class Guarded:
    """A backend module whose every call raises an ``OSError`` about its path as
    :func:`path_failure` says it (the library's own errors pass as they are)."""

    def __init__(self, module: ModuleType) -> None:
        self._module = module

    def __getattr__(self, name: str) -> Callable[..., Any]:
        function: Callable[..., Any] = getattr(self._module, name)

        def call(target: str, /, *args: Any, **options: Any) -> Any:
            try:
                return function(target, *args, **options)
            except TodoError:
                raise
            except OSError as error:
                raise path_failure(error, target) from error

        return call
