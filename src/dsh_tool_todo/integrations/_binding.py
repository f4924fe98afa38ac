"""The adapter binding: the one way a framework adapter binds ``todo_write`` and makes a call.

An adapter is its framework's registration and nothing else. When it is built, it
binds the tool once; for each call it finds the owner key and calls::

    binding = Binding(
        "my_tool", allow_parallel_in_progress=parallel, owner=owner, owners=owners,
        function_of="RunContext", remedy="owner= returned None: return the run's owner key",
    )
    key = binding.key(ctx)  # the owner key of this call; None: the call has no owner
    outcome = binding.refused() if key is None else await binding.acall(args, key, call_id=...)
    return outcome.text  # on the framework's error channel when outcome.is_error

Everything between the framework's call and the text the model reads is here, once:

- the checks of the adapter's arguments (``owner=``, ``owners=``, its on/off flags),
  each a clear :class:`~dsh_tool_todo.errors.UsageError` when the adapter is built;
- per-owner order: a call for an owner of an :class:`OwnerRegistry` holds that
  owner's lock, so the calls of one owner run one at a time, in arrival order;
- the outcome (:class:`Outcome`): recorded (the success text), refused (the
  refusal's text, nothing recorded) or not recorded
  (:data:`~dsh_tool_todo.core.contract.NOT_RECORDED`, the cause logged on the
  ``dsh_tool_todo`` logger): an append that failed, or an owner's session that
  could not be opened (its log held by another writer, the store out of reach,
  the directory gone), which the registry raises as a ``ToolFailure``;
- the no-owner refusal: the model reads the specification's text every time, the
  developer a WARNING once per binding saying why the plan stays empty;
- a sub-agent's own session, linked once to its parent's and ended when the
  delegating call does (:meth:`Binding.alinked`).

A framework module imports from outside ``integrations/`` only the contract, the
errors and the plan converters (``plans``), and everything else from here. See
``docs/integrations/README.md``.
"""

from __future__ import annotations

import inspect
import logging
import os
import weakref
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Final

from .. import __version__
from ..core import _refusal_class
from ..core.contract import NO_OWNER, NOT_RECORDED
from ..core.links import link_data
from ..core.listeners import LOGGER_NAME
from ..core.model import TodoItem
from ..core.requests import Request
from ..core.schema import parameters
from ..core.tool import OwnedCall, TodoWriteTool, todo_write_tool
from ..errors import ToolCallRejected, ToolFailure, UsageError
from ..protocols import LogReader as LogReader
from ..protocols import Session, StoreSession
from ..stores import open_owners, open_reader
from ..stores._home import home_from_environment
from ..stores._inbox import atake_requests
from ..stores.owners import OwnerRegistry
from ._links import nested_owner, opened

__all__ = [
    "Binding",
    "Outcome",
    "OwnerRegistry",
    "Session",
    "StoreSession",
    "TodoItem",
    "TodoWriteTool",
    "refusals",
]

_log = logging.getLogger(LOGGER_NAME)
_NO_OWNER_ARG: Any = object()  # the adapter takes no owner= (it holds sessions itself)


class Outcome:
    """One call's answer: the text the model reads and which kind of answer it is.

    ``todos`` is the list as recorded, for a recorded call only (``None``
    otherwise): an adapter that also shows the plan to a UI converts it with
    :mod:`dsh_tool_todo.plans.wire`. Never change it in place: a store may hold
    the same objects.
    """

    RECORDED: ClassVar[str] = "recorded"
    REFUSED: ClassVar[str] = "refused"  # nothing recorded; the text says why
    FAILED: ClassVar[str] = "failed"  # valid, but the append failed: NOT_RECORDED, cause logged

    __slots__ = ("kind", "text", "todos")

    def __init__(self, kind: str, text: str, todos: list[TodoItem] | None = None) -> None:
        self.kind = kind
        self.text = text
        self.todos = todos

    @property
    def is_error(self) -> bool:
        """Whether the framework's error channel carries it (refused or not recorded)."""
        return self.kind != Outcome.RECORDED

    def __repr__(self) -> str:
        return f"Outcome({self.kind!r}, {self.text!r})"


class Binding:
    """``todo_write`` bound for one adapter: its tool, its owners, how a call finds its owner.

    ``adapter`` names the adapter in the errors its arguments get.
    ``owner``: a fixed owner key (a non-empty ``str``, unless not ``key_ok``) or,
    when ``function_of`` names what the framework hands a call, a function of
    that returning the key (left out: the adapter takes no ``owner=``).
    ``owners``: where the plans live (see :meth:`registry`; default: the place the
    environment names, else an in-memory registry of the binding's own).
    ``remedy``: what the no-owner WARNING tells the developer.
    ``flags``: the adapter's on/off options, each checked to be a ``bool``.
    """

    log: ClassVar[logging.Logger] = _log
    """The ``dsh_tool_todo`` logger, where the adapters log what the model is not told."""
    version: ClassVar[str] = __version__
    """The library's version, for what an adapter reports (a server's, a tracer's)."""
    parameters: ClassVar[Callable[[], dict[str, Any]]] = staticmethod(parameters)
    """A fresh copy of the tool's parameters, for a framework that edits what it gets."""
    atake_requests: ClassVar[Callable[[Any], Awaitable[list[Request]]]] = staticmethod(
        atake_requests
    )
    """What waits in a session's own inbox, taken into its log (an adapter that holds the
    run's session, not an owner registry: :meth:`OwnerRegistry.atake_requests` otherwise)."""

    def __init__(
        self,
        adapter: str,
        *,
        allow_parallel_in_progress: bool,
        owner: object = _NO_OWNER_ARG,
        owners: object = None,
        function_of: str | None = None,
        key_ok: bool = True,
        remedy: str = "",
        flags: Mapping[str, object] | None = None,
    ) -> None:
        for name, value in (flags or {}).items():
            if not isinstance(value, bool):
                raise UsageError(f"{name} must be a bool, not {type(value).__qualname__}")
        if owner is not _NO_OWNER_ARG:
            Binding.check_owner(adapter, owner, function_of=function_of, key_ok=key_ok)
        self.tool = todo_write_tool(allow_parallel_in_progress=allow_parallel_in_progress)
        self.owners: OwnerRegistry = Binding.registry(adapter, owners)
        self.owner: Any = owner
        self.adapter = adapter
        self.remedy = remedy
        self._warned = False
        self._linked: set[str] = set()

    @staticmethod
    def registry(adapter: str, owners: object, **default: Any) -> OwnerRegistry:
        """``owners=`` checked: an :class:`OwnerRegistry`, or a directory or
        ``postgresql://`` URL to open one in; for ``None``, the place
        :data:`~dsh_tool_todo.stores._home.HOME_VARIABLE` names, else a new registry in
        memory (``default``'s arguments). Anything else is a clear ``UsageError`` here,
        not an ``AttributeError`` deep in the first call."""
        if isinstance(owners, OwnerRegistry):
            return owners
        if owners is None:
            owners = home_from_environment()
            if owners is None:
                return OwnerRegistry(**default)
        if isinstance(owners, (str, os.PathLike)):
            if not os.fspath(owners):
                raise UsageError(
                    f"{adapter}: owners= is empty: name a directory (`.` for the current "
                    "one) or a postgresql:// URL"
                )
            return _closing_when_collected(open_owners, owners, **default)
        raise UsageError(
            f"{adapter}: owners= takes where the plans are kept: a directory, a postgresql:// "
            "URL, or a dsh_tool_todo.stores.owners.OwnerRegistry (OwnerRegistry() keeps plans "
            f"in memory, OwnerRegistry(open_session=...) in a store of yours), not "
            f"{_described(owners)}"
        )

    @staticmethod
    def reader_of(owners: OwnerRegistry) -> LogReader | None:
        """The reader of the directory ``owners`` records in, where the sessions linked under
        an owner's are found (``None`` for a registry in memory or on ``open_session``)."""
        return None if owners.directory is None else open_reader(owners.directory)

    @staticmethod
    def home() -> str | None:
        """The place :data:`~dsh_tool_todo.stores._home.HOME_VARIABLE` names, read now, or
        ``None``: for an adapter that records in a registry only when the variable names one
        (pass it to :meth:`registry`)."""
        return home_from_environment()

    @staticmethod
    def check_owner(
        adapter: str, owner: object, *, function_of: str | None = None, key_ok: bool = True
    ) -> None:
        """``owner=`` checked alone, for an adapter that binds no tool of its own."""
        if (key_ok and isinstance(owner, str) and owner) or (
            function_of is not None and callable(owner)
        ):
            return
        wanted = [
            *(["an owner key (a non-empty str)"] if key_ok else []),
            *(
                [f"a function of the {function_of} that returns the owner key"]
                if function_of
                else []
            ),
        ]
        hint = "" if key_ok else " (one fixed owner: owner=lambda ctx: key)"
        raise UsageError(
            f"{adapter}: owner= takes {' or '.join(wanted)}{hint}, not {_described(owner)}"
        )

    def key(self, context: Any) -> Any:
        """The owner key of a call whose framework hands ``context``: the fixed key, or
        what the owner function returns for it (``None``: the call has no owner)."""
        owner = self.owner
        if isinstance(owner, str):
            return owner
        key = owner(context)
        if key is None or (isinstance(key, str) and key) or inspect.isawaitable(key):
            return key  # an awaitable is the adapter's to await (an async framework's store)
        raise UsageError(
            f"{self.adapter}: owner= returned {_described(key)}: return the call's owner key, "
            "a non-empty str, or None when the call has no owner"
        )

    def refused(self) -> Outcome:
        """A call that found no owner: the specification's text; the WARNING, once."""
        if not self._warned:
            self._warned = True
            _log.warning(
                "todo_write found no owner for this call, so it is refused with %r: %s",
                NO_OWNER,
                self.remedy,
            )
        return Outcome(Outcome.REFUSED, NO_OWNER)

    def call(self, args: Any, key: str, *, call_id: str | None = None) -> Outcome:
        """One call for ``key`` of the owners, holding the owner's lock (sync frameworks)."""
        try:
            with self.owners.locked(key) as session:
                return self.call_in(args, session, call_id=call_id, key=key)
        except ToolFailure as failure:  # the owner's session could not be opened
            return _not_recorded(failure, key)

    async def acall(self, args: Any, key: str, *, call_id: str | None = None) -> Outcome:
        """:meth:`call` for asyncio frameworks: calls of one owner run one at a time, in
        arrival order, across tasks, threads and concurrent runs."""
        try:
            async with self.owners.alocked(key) as session:
                return await self.acall_in(args, session, call_id=call_id, key=key)
        except ToolFailure as failure:
            return _not_recorded(failure, key)

    def not_recorded(self, failure: ToolFailure, key: object = None) -> Outcome:
        """The answer to a call whose owner's session an adapter could not open itself
        (``ToolFailure`` from the registry): ``NOT_RECORDED``, the cause logged at ERROR."""
        return _not_recorded(failure, key)

    async def atext(self, args: Any, key: str, *, call_id: str | None = None) -> str:
        """Only the text, for frameworks whose model reads refusals as plain results: the
        tool's fast path, with a failure to record answered as ``NOT_RECORDED``."""
        try:
            return await self.owners.acall(key, self.tool, args, call_id=call_id)
        except ToolFailure as failure:
            return _not_recorded(failure, key).text

    def call_in(
        self, args: Any, session: Session, *, call_id: str | None = None, key: object = None
    ) -> Outcome:
        """One call owned by ``session``, a session the adapter holds itself (sync)."""
        try:
            result = self.tool.record(args, OwnedCall(session, call_id))
        except ToolCallRejected as rejected:
            return Outcome(Outcome.REFUSED, rejected.model_text)
        except ToolFailure as failure:
            return _not_recorded(failure, key)
        return Outcome(Outcome.RECORDED, self.tool.render(result), result["todos"])

    async def acall_in(
        self, args: Any, session: Session, *, call_id: str | None = None, key: object = None
    ) -> Outcome:
        """:meth:`call_in` for asyncio adapters; ``append`` may be a coroutine."""
        try:
            # the recorded list is handed out uncopied: Outcome.todos is read-only by contract
            result = await self.tool.arecord(args, OwnedCall(session, call_id))
        except ToolCallRejected as rejected:
            return Outcome(Outcome.REFUSED, rejected.model_text)
        except ToolFailure as failure:
            return _not_recorded(failure, key)
        return Outcome(Outcome.RECORDED, self.tool.render(result), result["todos"])

    async def alinked(self, key: str, agent_name: str | None) -> str:
        """The owner key this call runs under: ``key``, or inside a delegating call
        (:mod:`._links`) the sub-agent's own, its session linked to its parent's once.
        Raises ``ToolFailure`` when a session it opens cannot be (:meth:`not_recorded`)."""
        nested, parent = nested_owner(key, agent_name)
        if parent is not None and nested not in self._linked:
            parent_owner, call_id = parent
            parent_key = self.owners.key(parent_owner)
            try:
                link_data("parent", call_id)  # the call id alone: a bad key still fails below
            except UsageError as error:  # a framework's call id: never a reason to fail the run
                _log.warning(
                    "sub-agent %r is linked without its parent's call id: %s", nested, error
                )
                call_id = None
            await self.owners.alink(nested, parent_key, parent_call_id=call_id)
            self._linked.add(nested)
        if parent is not None:
            opened(self.owners, nested)  # the delegating call's end appends its session/end
        return nested


@dataclass(frozen=True)
class _Refusals:
    """The classes of a refused call, read back from its text (for tracers and logs)."""

    classes: tuple[str, ...]
    other: str
    not_recorded: str
    of: Callable[[str], str]


refusals: Final = _Refusals(
    _refusal_class.REFUSAL_CLASSES,
    _refusal_class.OTHER,
    _refusal_class.NOT_RECORDED_CLASS,
    _refusal_class.refusal_class,
)
"""The refusal classes the specification defines: what ``integrations.otel`` re-exports."""


def _closing_when_collected(
    opener: Callable[..., OwnerRegistry], place: object, **options: Any
) -> OwnerRegistry:
    """A registry an adapter opened itself, whose sessions close when it is collected (or at
    exit): whoever drops it, a binding or a framework object, never leaves a log unclosed."""
    opened: list[weakref.ref[OwnerRegistry]] = []  # weak: the registry holds this function

    def close_with_the_registry(owner: str, session: StoreSession) -> None:
        registry = opened[0]() if opened else None
        if registry is not None:
            weakref.finalize(registry, session.close)

    registry = opener(place, on_open=close_with_the_registry, **options)
    opened.append(weakref.ref(registry))
    return registry


def _described(value: object) -> str:
    if isinstance(value, type):
        return f"the class {value.__qualname__} itself (pass an instance)"
    return f"{type(value).__qualname__} {value!r:.60}"


def _not_recorded(failure: ToolFailure, owner: object) -> Outcome:
    where = "" if owner is None else f" for owner {owner!r}"
    _log.error("todo_write%s was not recorded: %s", where, failure)
    return Outcome(Outcome.FAILED, NOT_RECORDED)
