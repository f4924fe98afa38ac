"""The exceptions of dsh-tool-todo.

Three kinds are kept apart: the model's mistakes (:class:`ToolCallRejected`,
whose text is what the model reads), failures of the host's session while
recording a valid call (:class:`ToolFailure`), and mistakes of the program
that hosts the tool (:class:`UsageError`). :class:`InvalidLog` is raised when a
recorded session log breaks its invariant.
"""

from __future__ import annotations


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


class InvalidLog(TodoError, ValueError):
    """A session log breaks the durable ``todo/write`` invariant."""
