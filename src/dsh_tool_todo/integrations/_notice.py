"""The request notice as a hook before a model request takes it: never a reason to fail it.

A person's requests (docs/requests.md) are told from hooks every model request passes
through, whether or not the model then calls ``todo_write``. When the owner's session cannot
be opened (a log another process writes, a store that is down) the model's request goes
on without the notice, as a ``todo_write`` call goes on to the model as not recorded: the
requests wait in the inbox for a request that can take them. A WARNING on the
``dsh_tool_todo`` logger says why.
"""

from __future__ import annotations

from ..errors import UsageError
from ..plans.reminder import request_notice
from ._binding import Binding, OwnerRegistry

__all__ = ["atold", "atold_in", "told"]

# A store down, a log another process writes, and anything else the inbox or the log can
# hold: the notice is a side channel, and the model's request goes on without it. A misuse
# (UsageError: a synchronous take of an asynchronous session) is the developer's to see.
_FAILURES = (Exception,)


async def atold(owners: OwnerRegistry, owner: str) -> str | None:
    """The notice to put after the newest message of this model request, or ``None``: what a
    person asked since the last one, told once. Taking the requests records them in
    ``owner``'s log, so call it only where the notice is then placed: a separate text after
    the newest message (never joined to the reminder's, which is found again by equality).
    ``None`` too when the owner's store fails."""
    try:
        return request_notice(await owners.atake_requests(owner))
    except UsageError:
        raise
    except _FAILURES as error:
        _warn(f"owner {owner!r}", error)
        return None


async def atold_in(session: object) -> str | None:
    """:func:`atold` for a session the adapter finds the run's (no registry): what waits in
    that session's own inbox. Its writer is the run that holds it, one model request after
    another, as its ``todo_write`` calls are; ``None`` too for a session of no store of this
    library (it has no inbox)."""
    try:
        return request_notice(await Binding.atake_requests(session))
    except UsageError:
        raise
    except _FAILURES as error:
        key = getattr(session, "key", None)
        _warn(f"session {key!r}" if isinstance(key, str) else "the run's session", error)
        return None


def told(owners: OwnerRegistry, owner: str) -> str | None:
    """:func:`atold` for a synchronous hook (a session whose calls are synchronous)."""
    try:
        return request_notice(owners.take_requests(owner))
    except UsageError:
        raise
    except _FAILURES as error:
        _warn(f"owner {owner!r}", error)
        return None


def _warn(whose: str, error: Exception) -> None:
    Binding.log.warning("%s: requests were not taken for this model request: %s", whose, error)
