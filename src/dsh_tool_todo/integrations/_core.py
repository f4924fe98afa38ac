"""The one adapter core: what every framework adapter does around a ``todo_write`` call.

An adapter is the framework's registration and nothing else; everything between
the framework's call and the text the model reads is here, once:

- the owner-bound exec context (:class:`Owned`, the core's own ``tool._Owner``),
  carrying the framework's tool-call id when it gives one;
- per-owner serialisation: a call for an owner of an
  :class:`~dsh_tool_todo.stores.owners.OwnerRegistry` holds that owner's lock;
- the outcome: recorded (the success text), refused (the refusal's text,
  nothing recorded) or not recorded (:data:`~dsh_tool_todo.core.contract.NOT_RECORDED`,
  the cause logged on the ``dsh_tool_todo`` logger);
- the no-owner warning, logged once per tool so a developer learns why the
  plan stays empty while the model reads the specification's text every time.

The adapter maps an :class:`Outcome` onto its framework's channels (an error
flag, an exception, a plain result). See ``docs/integrations/README.md``.
"""

from __future__ import annotations

import logging
from typing import Any, Final, Literal

from ..core.contract import NO_OWNER, NOT_RECORDED
from ..core.listeners import LOGGER_NAME
from ..core.model import TodoItem
from ..core.tool import TodoWriteTool, _Owner, render_result
from ..errors import ToolCallRejected, ToolFailure, UsageError
from ..protocols import Session
from ..stores.owners import OwnerRegistry

__all__ = [
    "FAILED",
    "RECORDED",
    "REFUSED",
    "NoOwnerWarning",
    "Outcome",
    "Owned",
    "arun_for_owner",
    "arun_owned",
    "atext_for_owner",
    "check_flag",
    "check_owner",
    "check_owners",
    "refused_no_owner",
    "run_for_owner",
    "run_owned",
]

Owned = _Owner
"""The exec context of a call owned by one session, with the call's id (or ``None``)."""

Kind = Literal["recorded", "refused", "failed"]
RECORDED: Final = "recorded"
REFUSED: Final = "refused"  # nothing recorded; the text says why
FAILED: Final = "failed"  # valid, but the append failed: NOT_RECORDED, cause logged


class Outcome:
    """One call's answer: the text the model reads and which kind of answer it is.

    ``todos`` is the list as recorded, for a recorded call only (``None``
    otherwise): an adapter that also shows the plan to a UI converts it with
    :mod:`dsh_tool_todo.plans.wire`, whose converters copy it. Never change it in
    place: a store may hold the same objects.
    """

    __slots__ = ("kind", "text", "todos")

    def __init__(self, kind: Kind, text: str, todos: list[TodoItem] | None = None) -> None:
        self.kind: Kind = kind
        self.text = text
        self.todos = todos

    @property
    def is_error(self) -> bool:
        """Whether the framework's error channel carries it (refused or not recorded)."""
        return self.kind != RECORDED

    def __repr__(self) -> str:
        return f"Outcome({self.kind!r}, {self.text!r})"


def check_flag(name: str, value: object) -> None:
    """An adapter's on/off option (``remind_after_compaction=`` and the like) is a ``bool``."""
    if not isinstance(value, bool):
        raise UsageError(f"{name} must be a bool, not {type(value).__qualname__}")


def check_owners(adapter: str, owners: object) -> None:
    """``owners=`` is ``None`` or an :class:`OwnerRegistry`.

    Checked when the adapter is built, so a wrong argument is a clear
    :class:`~dsh_tool_todo.errors.UsageError` there, not an ``AttributeError``
    deep in the first call.
    """
    if owners is None or isinstance(owners, OwnerRegistry):
        return
    raise UsageError(
        f"{adapter}: owners= takes a dsh_tool_todo.stores.owners.OwnerRegistry "
        "(OwnerRegistry() keeps plans in memory, OwnerRegistry(directory) on disk, "
        f"OwnerRegistry(open_session=...) in a store of yours), not {_described(owners)}"
    )


def check_owner(
    adapter: str, owner: object, *, function_of: str | None, key_ok: bool = True
) -> None:
    """``owner=``: an owner key (a non-empty ``str``, unless not ``key_ok``) or, when
    ``function_of`` names what the framework hands it, a function of that
    returning the key."""
    if (key_ok and isinstance(owner, str) and owner) or (
        function_of is not None and callable(owner)
    ):
        return
    wanted = [
        *(["an owner key (a non-empty str)"] if key_ok else []),
        *([f"a function of the {function_of} that returns the owner key"] if function_of else []),
    ]
    hint = "" if key_ok else " (one fixed owner: owner=lambda ctx: key)"
    raise UsageError(
        f"{adapter}: owner= takes {' or '.join(wanted)}{hint}, not {_described(owner)}"
    )


def _described(value: object) -> str:
    if isinstance(value, type):
        return f"the class {value.__qualname__} itself (pass an instance)"
    return f"{type(value).__qualname__} {value!r:.60}"


def _log() -> logging.Logger:
    return logging.getLogger(LOGGER_NAME)


def _not_recorded(failure: ToolFailure, owner: object) -> Outcome:
    where = "" if owner is None else f" for owner {owner!r}"
    _log().error("todo_write%s was not recorded: %s", where, failure)
    return Outcome(FAILED, NOT_RECORDED)


def run_owned(
    tool: TodoWriteTool,
    args: Any,
    session: Session,
    *,
    call_id: str | None = None,
    owner: object = None,
) -> Outcome:
    """One call owned by ``session`` (sync sessions): the outcome, never ``ToolFailure``."""
    try:
        result = tool._record(args, Owned(session, call_id))
    except ToolCallRejected as rejected:
        return Outcome(REFUSED, rejected.model_text)
    except ToolFailure as failure:
        return _not_recorded(failure, owner)
    return Outcome(RECORDED, render_result(result), result["todos"])


async def arun_owned(
    tool: TodoWriteTool,
    args: Any,
    session: Session,
    *,
    call_id: str | None = None,
    owner: object = None,
) -> Outcome:
    """:func:`run_owned` for asyncio adapters; ``append`` may be a coroutine."""
    try:
        # the recorded list is handed out uncopied: Outcome.todos is read-only by contract
        result = await tool._arecord(args, Owned(session, call_id))
    except ToolCallRejected as rejected:
        return Outcome(REFUSED, rejected.model_text)
    except ToolFailure as failure:
        return _not_recorded(failure, owner)
    return Outcome(RECORDED, render_result(result), result["todos"])


async def arun_for_owner(
    tool: TodoWriteTool,
    args: Any,
    owners: OwnerRegistry,
    owner: str,
    *,
    call_id: str | None = None,
) -> Outcome:
    """One call for ``owner`` of ``owners``, holding the owner's lock: calls of one owner
    run one at a time, in arrival order, across tasks, threads and concurrent runs."""
    async with owners.alocked(owner) as session:
        return await arun_owned(tool, args, session, call_id=call_id, owner=owner)


def run_for_owner(
    tool: TodoWriteTool,
    args: Any,
    owners: OwnerRegistry,
    owner: str,
    *,
    call_id: str | None = None,
) -> Outcome:
    """:func:`arun_for_owner` for sync frameworks (and sync calls of async ones)."""
    with owners.locked(owner) as session:
        return run_owned(tool, args, session, call_id=call_id, owner=owner)


async def atext_for_owner(
    tool: TodoWriteTool,
    args: Any,
    owners: OwnerRegistry,
    owner: str,
    *,
    call_id: str | None = None,
) -> str:
    """Only the text, for frameworks whose model reads refusals as plain results: the
    tool's fast path, with a failure to record answered as ``NOT_RECORDED``."""
    try:
        return await owners.acall(owner, tool, args, call_id=call_id)
    except ToolFailure as failure:
        return _not_recorded(failure, owner).text


class NoOwnerWarning:
    """Per tool: the developer is told once why calls are refused, the model every time."""

    __slots__ = ("remedy", "warned")

    def __init__(self, remedy: str) -> None:
        self.remedy = remedy
        self.warned = False

    def __call__(self) -> None:
        if not self.warned:
            self.warned = True
            _log().warning(
                "todo_write found no owner for this call, so it is refused with %r: %s",
                NO_OWNER,
                self.remedy,
            )


def refused_no_owner(warning: NoOwnerWarning) -> Outcome:
    """A call that found no owner: warn (once) and refuse with the specification's text."""
    warning()
    return Outcome(REFUSED, NO_OWNER)
