"""The exceptions of dsh-tool-todo.

Three kinds are kept apart: the model's mistakes (:class:`ToolCallRejected`,
whose text is what the model reads), failures of the host's session while
recording a valid call (:class:`ToolFailure`), and mistakes of the program
that hosts the tool (:class:`UsageError`). :class:`InvalidLog` is raised when a
recorded session log breaks its invariant. The readers of stored logs add
:class:`SessionNotFound`, :class:`LogReplaced` and :class:`StoreUnavailable`;
an optional dependency that is not installed raises :class:`MissingExtra`.
Every one of them is a :class:`TodoError`; :class:`TornTailWarning` and
:class:`PluginLoadWarning` are ``UserWarning`` subclasses.
A backend may add its own subclasses in its own ``errors`` module
(:mod:`dsh_tool_todo.stores.postgres.errors`); every exception class of the
package is defined in one of these modules.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

__all__ = [
    "AcpUnavailable",
    "AppendOutcomeUnknown",
    "InvalidLog",
    "LinkConflict",
    "LogBusy",
    "LogReplaced",
    "MissingExtra",
    "OwnerNameError",
    "PluginLoadWarning",
    "SessionNotFound",
    "StoreNotReady",
    "StoreUnavailable",
    "TodoError",
    "ToolCallRejected",
    "ToolFailure",
    "TornTailWarning",
    "UsageError",
]


class TodoError(Exception):
    """Base class of every error this library raises."""


class ToolCallRejected(TodoError):
    """The model's call was refused; ``str(error)`` is the model-visible text."""

    @property
    def model_text(self) -> str:
        return str(self)


class ToolFailure(TodoError):
    """A valid call could not be recorded: the session's ``append`` failed."""


class UsageError(TodoError, TypeError):
    """The host used the library wrongly (options, call path, registration)."""


class LogBusy(UsageError):
    """A second writer was refused: another session holds the log (one writer per log)."""


class LinkConflict(UsageError):
    """A session was opened under a parent its log does not record (a link is written once)."""


class InvalidLog(TodoError, ValueError):
    """A session log breaks the durable ``todo/write`` invariant."""


class MissingExtra(UsageError, ImportError):
    """An optional part's dependency is missing (or shadowed by a module of the same name).

    An ``ImportError`` too, so ``except ImportError`` keeps working. The
    message names the extra: the package installs from its repository, not
    from an index, so it says how to install from a checkout.
    """


class SessionNotFound(TodoError, LookupError):
    """No session of that name is in the store (also: a name that leads outside it)."""


class LogReplaced(TodoError):
    """The log a follower reads was replaced, cut short or deleted: start over from a snapshot.
    Also a JSONL writer's, when its file was deleted, moved or replaced under it: the append
    was not recorded and the session is closed; open the log again."""


class StoreUnavailable(TodoError, ConnectionError):
    """The store cannot be reached now (a PostgreSQL server that is down, say; a directory of
    logs that is not there, is a file, or may not be read or written: then the error is also
    the system's kind, ``FileNotFoundError``, ``NotADirectoryError``, ``PermissionError``)."""


class StoreNotReady(StoreUnavailable):
    """The store answers but is not set up for this library: the message says what to run."""


class _NoSuchLog(SessionNotFound, FileNotFoundError):
    """No log at the path a reader was given: also the ``FileNotFoundError`` it was."""


class _PathMissing(StoreUnavailable, FileNotFoundError):
    """A store's path leads nowhere (its directory, or a directory on the way, is not there)."""


class _PathNotADirectory(StoreUnavailable, NotADirectoryError):
    """A file stands where a store's path needs a directory."""


class _PathIsADirectory(StoreUnavailable, IsADirectoryError):
    """A directory stands where a store's path needs a file."""


class _PathRefused(StoreUnavailable, PermissionError):
    """The system refuses this user the store's path."""


_PATH_KINDS: dict[type[OSError], type[StoreUnavailable]] = {
    FileNotFoundError: _PathMissing,
    NotADirectoryError: _PathNotADirectory,
    IsADirectoryError: _PathIsADirectory,
    PermissionError: _PathRefused,
}


def path_error(error: OSError, message: str, *, log: bool = False) -> TodoError:
    """The system's ``error`` about a store's path as this library's error, with ``message``
    (which names the path and says what to do): a :class:`StoreUnavailable` that is still the
    same kind of ``OSError``, with its ``errno``; with ``log``, a missing file is the
    :class:`SessionNotFound` of a log that is not there (still a ``FileNotFoundError``)."""
    made: TodoError
    if log and isinstance(error, FileNotFoundError):
        made = _NoSuchLog(message)
    else:
        made = _PATH_KINDS.get(type(error), StoreUnavailable)(message)
    # errno only: with strerror or filename set too, str() would be the system's words again
    made.errno = error.errno
    return made


class OwnerNameError(UsageError, ValueError):
    """An owner key that has no file name, or a file name that no owner key encodes to."""


class TornTailWarning(UserWarning):
    """A log's last line was cut short by a crash: ignored, or cut off on reopening."""


class PluginLoadWarning(UserWarning):
    """An installed plugin's entry point failed to load; every other plugin was loaded."""


class AppendOutcomeUnknown(UsageError):
    """A sync call got back an awaitable that may already have run (a ``Task``, a ``Future``).

    Unlike the plain :class:`UsageError` for a coroutine ``append`` (never run,
    so nothing was recorded), the event may or may not be in the log: check
    the log before calling again, and call such a session through the async
    path (``aexecute``, ``acall``, ``Host.acall_tool``).
    """


class AcpUnavailable(MissingExtra):
    """The optional ACP SDK (``agent-client-protocol``) is not installed."""


def missing_extra(
    adapter: str, extra: str, cause: ImportError, *, module: str | None = None
) -> MissingExtra:
    """The error to raise ``from cause`` when ``adapter`` cannot import its framework.

    With ``module`` (the framework's top-level name): when that module was
    found but is not the framework (a user's own ``agents.py`` or ``mcp/`` on
    ``sys.path``), the message says so; when it is the installed framework and
    its import failed (a version the extra does not allow), the message gives
    the failure itself.
    """
    absent = isinstance(cause, ModuleNotFoundError) and (
        module in (None, cause.name) or _nowhere(cause.name)
    )
    # A module not found (shadowed, or a submodule missing) keeps the guess; any other import
    # error inside the installed framework is a version the extra does not allow.
    broken = module is not None and not isinstance(cause, ModuleNotFoundError)
    installed = _installed_version(module) if broken and module else None
    if installed is not None:
        return MissingExtra(
            f"{adapter} could not import the installed {module!r} {installed}: {cause}; "
            f"install dsh-tool-todo[{extra}] for a version it supports "
            f"(from this repository: pip install '.[{extra}]')"
        )
    hider = "a module of yours of the same name" if module is None else f"your own {module!r}"
    shadowed = "" if absent else f"; if it is installed, {hider} may be hiding it"
    return MissingExtra(
        f"{adapter} needs the {extra!r} extra: install dsh-tool-todo[{extra}] "
        f"(from this repository: pip install '.[{extra}]'){shadowed} ({cause})"
    )


@contextmanager
def needs_extra(adapter: str, extra: str, *, module: str | None = None) -> Iterator[None]:
    """The block that imports ``adapter``'s framework: an ``ImportError`` in it is raised
    again as :func:`missing_extra`'s error, ``from`` it::

        with needs_extra("dsh_tool_todo.integrations.mcp", "mcp", module="mcp"):
            from mcp.server.lowlevel import Server
    """
    try:
        yield
    except ImportError as error:
        raise missing_extra(adapter, extra, error, module=module) from error


def _nowhere(name: str | None) -> bool:
    """Whether no top-level module ``name`` is found at all: a dependency of the framework
    that is not installed (psycopg's pool, say), which nothing of the user's can be hiding."""
    from importlib import util

    if not name:
        return False
    try:
        return util.find_spec(name.partition(".")[0]) is None
    except ModuleNotFoundError:
        return True
    except (ImportError, ValueError):
        return False


def _installed_version(module: str) -> str | None:
    """The version of the distribution ``module`` was found in, if it was found in one."""
    from importlib import metadata, util
    from pathlib import Path

    try:
        spec = util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None:
        return None
    found = Path(spec.origin).resolve()
    # Python 3.10's map misses distributions without a top_level.txt: try the module's name too
    for name in [*metadata.packages_distributions().get(module, []), module]:
        try:
            distribution = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        files = distribution.files or []
        if any(Path(str(distribution.locate_file(file))).resolve() == found for file in files):
            return distribution.version
    return None
