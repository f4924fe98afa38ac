"""LangChain v1: ``TodoWriteMiddleware``, ``todo_write`` for ``langchain.agents.create_agent``.

A drop-in replacement for LangChain's ``TodoListMiddleware``: the same place in
``create_agent(model, middleware=[...])``, the plan in the graph state's
``todos``, but the model is offered this library's ``todo_write`` (its
description and the bytes of its parameter schema) and every call goes through
this library's validation. The session log is the graph state itself: the
recorded events live under ``todo_events``, so whatever checkpointer the graph
runs with persists and resumes them with the messages, in the same checkpoint.

Why not LangChain's own tool machinery: a tool's function would see the
arguments after LangChain parsed them against a schema, and two calls in one
model turn would write the same state key twice in one step, which LangGraph
refuses. Here ``wrap_tool_call`` sees the arguments exactly as the model sent
them, and the state keys carry reducers, so several calls in one turn are
recorded in call order and the last one is the plan. Each event carries the
model's tool-call id (``callId``), as every adapter records it.

Recording cannot fail apart from answering: the event and the tool's answer
are one state update, so whatever the checkpointer saves holds both or neither,
and a checkpointer error fails the run, as for any other state.

``owners=`` (a directory, a ``postgresql://`` URL or an ``OwnerRegistry``; left
out: where ``DSH_TODO_HOME`` names, else nowhere) also copies each event the
state records into the session of the run's ``thread_id`` in that registry
(``default`` without one), holding that owner's lock, so ``dsh-todo watch`` and
``serve`` show the plan. The state stays the record the graph runs on; a copy
that fails is a call answered ``NOT_RECORDED`` with no state update, and a
``turn/start`` that fails fails the run before the model is called.

A consumer streaming with ``stream_mode="custom"`` also gets the plan as it
changes: each answered write, and the cleared plan at each new turn, is one
``custom`` chunk, an AG-UI ``ACTIVITY_SNAPSHOT`` dict (``wire``) whose
``messageId`` is ``plan:<thread_id>``. LangGraph drops custom chunks nobody
streams, so other consumers see nothing new.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from ...core.contract import EVENT_TYPE, TOOL_NAME, TURN_START
from ...errors import ToolFailure, UsageError
from .._binding import Binding, Outcome, OwnerRegistry, TodoItem
from .._extras import needs_extra
from .._notice import atold, told

with needs_extra("dsh_tool_todo.integrations.langchain", "langchain", module="langchain"):
    from langchain.agents.middleware.types import (
        AgentMiddleware,
        AgentState,
        ModelRequest,
        ModelResponse,
        OmitFromInput,
    )
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    from langchain_core.tools import StructuredTool
    from langgraph.prebuilt.tool_node import ToolCallRequest
    from langgraph.runtime import Runtime
    from langgraph.types import Command
    from typing_extensions import NotRequired  # on 3.12+ it comes with langchain-core

from ._parts import (
    _Capture,
    _config_of,
    _earlier_calls,
    _message,
    _model_update,
    _outside_the_agent,
    _prompted,
    _reminder_message,
    _run_key,
    _show,
    _thread_key,
)

__all__ = ["TodoWriteMiddleware", "TodoWriteState"]

Plan = list[TodoItem] | None


def _last_write(_previous: Plan, new: Plan) -> Plan:
    """The ``todos`` reducer: several writes in one step are applied in call order."""
    return new


def _record(recorded: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``todo_events`` reducer: append, numbering each event as it is recorded.

    LangGraph applies the writes of one step in the order of its tasks, which for
    the tool calls of one model turn is their order in the model's message.
    """
    start = len(recorded)
    numbered = [
        {"seq": start + offset, "type": event["type"], "data": event["data"]}
        for offset, event in enumerate(new)
    ]
    return [*recorded, *numbered]


class TodoWriteState(AgentState[Any]):
    """The graph state ``TodoWriteMiddleware`` adds to an agent.

    ``todos`` is the current plan, as the ``todos`` projection defines it
    (``None`` until the first write of a turn, and again after a new turn
    starts); ``todo_events`` is the session log of this library's events,
    ``{seq, type, data}``, so ``dsh_tool_todo.replay(state["todo_events"])``
    equals ``state["todos"]``. Neither is part of the agent's input.
    """

    todos: Annotated[NotRequired[Plan], OmitFromInput, _last_write]
    todo_events: Annotated[NotRequired[list[dict[str, Any]]], OmitFromInput, _record]


class TodoWriteMiddleware(AgentMiddleware[TodoWriteState, Any, Any]):
    """``todo_write`` for a LangChain agent; use it in place of ``TodoListMiddleware``.

    ``allow_parallel_in_progress`` is the composition's choice (no default).
    ``clear_on_new_turn`` (default ``True``) appends ``turn/start`` when each
    agent run starts, which clears the plan as the turn contract defines;
    ``False`` keeps the plan across runs, as ``TodoListMiddleware`` does, and
    appends no ``turn/start``.

    It adds no system prompt of its own: the tool's description carries the
    guidance, so the model pays for it once. ``system_prompt`` (a migration
    aid for ``TodoListMiddleware``'s option of that name) is the caller's own
    text, appended to the agent's system message as ``TodoListMiddleware``
    appends its prompt; ``tool_description`` is refused, since the description
    the model reads is the specification's. See
    ``docs/integrations/migrating-from-todolistmiddleware.md``.

    ``remind_after_compaction`` (default ``False``) re-surfaces the plan after
    a compaction: before a model call, when the plan is not empty and no
    ``todo_write`` call (nor an earlier reminder) left in the messages shows
    it, as after ``SummarizationMiddleware`` replaced them with a summary, it
    appends one user message holding :func:`~dsh_tool_todo.plans.reminder.plan_reminder`.
    It adds a message after the newest one and edits none, so the prefix a
    provider caches is unchanged. Put this middleware after the summarising one.

    ``owners`` (default ``None``) is where a copy of the plan goes for the viewers
    (``dsh-todo watch --session THREAD_ID``, ``dsh-todo serve``): a directory, a
    ``postgresql://`` URL or an ``OwnerRegistry``; ``None``: where ``DSH_TODO_HOME``
    names, else nowhere. The owner key is the run's ``thread_id`` (``default``
    without one). ``self.owners`` is that registry, or ``None``. With owners, what
    a person asks of the plan (``docs/requests.md``) reaches the model before its
    next call, once: one user message after the newest one, added as the reminder is.
    """

    state_schema = TodoWriteState

    def __new__(
        cls,
        *args: Any,
        system_prompt: str | None = None,
        remind_after_compaction: bool = False,
        **kwargs: Any,
    ) -> Any:
        # A hook exists only when it has work: LangChain wraps every model call (and adds a
        # graph node before it) for a middleware class defining one, so by default none is.
        # Requests come through the owners' inboxes: without owners no one can file one.
        if cls is TodoWriteMiddleware:
            prompted = system_prompt is not None
            owned = kwargs.get("owners") is not None or Binding.home() is not None
            if remind_after_compaction is True or owned:
                cls = _PromptedRemindingMiddleware if prompted else _RemindingMiddleware
            elif prompted:
                cls = _PromptedTodoWriteMiddleware
        return super().__new__(cls)

    def __init__(
        self,
        *,
        allow_parallel_in_progress: bool,
        clear_on_new_turn: bool = True,
        system_prompt: str | None = None,
        tool_description: None = None,
        remind_after_compaction: bool = False,
        owners: OwnerRegistry | str | os.PathLike[str] | None = None,
    ) -> None:
        super().__init__()
        if tool_description is not None:
            raise UsageError(
                "tool_description= is not accepted: the model reads the specification's "
                "description of todo_write; put guidance of your own in system_prompt="
            )
        if system_prompt is not None and not isinstance(system_prompt, str):
            raise UsageError(f"system_prompt must be a str, not {type(system_prompt).__qualname__}")
        # The graph state is the session log: the binding's calls go to a _Capture of each
        # call, which copies what the state records to the owners' session when a place is
        # named. With none, the binding's registry is an unused one in memory, as before.
        place = owners if owners is not None else Binding.home()
        self._binding = Binding(
            "TodoWriteMiddleware",
            allow_parallel_in_progress=allow_parallel_in_progress,
            owners=place if place is not None else OwnerRegistry(),
            flags={
                "remind_after_compaction": remind_after_compaction,
                "clear_on_new_turn": clear_on_new_turn,
            },
        )
        self.owners: OwnerRegistry | None = None if place is None else self._binding.owners
        # A registry opened here (from a directory, a URL or the variable) closes each
        # owner's session after use: a log's one-writer lock is then free for another
        # process serving the same thread. One passed in is the caller's to manage.
        self._closes = place is not None and not isinstance(owners, OwnerRegistry)
        self.remind_after_compaction = remind_after_compaction
        self.system_prompt = system_prompt
        self._tool = self._binding.tool
        self.clear_on_new_turn = clear_on_new_turn
        # The schema is our dict, handed over as is: LangChain gives the model
        # exactly these parameters, and never validates against them itself.
        self.tools = [
            StructuredTool(
                name=TOOL_NAME,
                description=self._tool.description,
                args_schema=dict(self._tool.parameters),
                func=_outside_the_agent,
            )
        ]

    @property
    def allow_parallel_in_progress(self) -> bool:
        return self._tool.options.allow_parallel_in_progress

    def before_agent(self, state: TodoWriteState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """A new run is a new user turn: record ``turn/start``, which clears the plan.

        With ``owners``, a thread's session that cannot be opened (its log held by another
        process, the database out of reach) fails the run here, before the model is
        called: ``ToolFailure``, the store's error as its cause."""
        if not self.clear_on_new_turn:
            return None
        key = _run_key(runtime)
        if self.owners is not None:
            try:
                self.owners.start_turn(key)
            finally:
                self._release(key)
        return _new_turn(runtime, key)

    async def abefore_agent(
        self, state: TodoWriteState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        if not self.clear_on_new_turn:
            return None
        key = _run_key(runtime)
        if self.owners is not None:
            try:
                await self.owners.astart_turn(key)
            finally:
                self._release(key)
        return _new_turn(runtime, key)

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        """Answer ``todo_write`` calls; every other tool call passes through untouched."""
        if request.tool_call["name"] != TOOL_NAME:
            return handler(request)
        if self.owners is None:
            return self._answer(request)
        key = _thread_key(_config_of(request))
        try:
            return self._copied(request, self.owners, key)
        finally:
            self._release(key)

    def _copied(
        self, request: ToolCallRequest, owners: OwnerRegistry, key: str
    ) -> ToolMessage | Command[Any]:
        """A call recorded in the state and copied to ``key``'s session, in the model's order."""
        call, state = request.tool_call, request.state
        capture = _Capture(state)
        try:
            with owners.locked(key) as session:
                for args, earlier in _earlier_calls(state, call["id"]):
                    copied = _Capture(state, session)
                    outcome = self._binding.call_in(args, copied, call_id=earlier, key=key)
                    if outcome.kind == Outcome.FAILED:
                        # copied after a call the model made before it, it would be out of order
                        return _answered(request, capture, outcome)
                capture = _Capture(state, session)
                outcome = self._binding.call_in(
                    call["args"], capture, call_id=call["id"] or None, key=key
                )
        except ToolFailure as failure:  # the thread's session could not be opened
            return _answered(request, capture, self._binding.not_recorded(failure, key))
        return _answered(request, capture, outcome, key)

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        if request.tool_call["name"] != TOOL_NAME:
            return await handler(request)
        if self.owners is None:
            return self._answer(request)
        key = _thread_key(_config_of(request))
        try:
            return await self._acopied(request, self.owners, key)
        finally:
            self._release(key)

    async def _acopied(
        self, request: ToolCallRequest, owners: OwnerRegistry, key: str
    ) -> ToolMessage | Command[Any]:
        call, state = request.tool_call, request.state
        capture = _Capture(state)
        try:
            async with owners.alocked(key) as session:
                for args, earlier in _earlier_calls(state, call["id"]):
                    copied = _Capture(state, session)
                    outcome = await self._binding.acall_in(args, copied, call_id=earlier, key=key)
                    if outcome.kind == Outcome.FAILED:
                        return _answered(request, capture, outcome)
                capture = _Capture(state, session)
                outcome = await self._binding.acall_in(
                    call["args"], capture, call_id=call["id"] or None, key=key
                )
        except ToolFailure as failure:
            return _answered(request, capture, self._binding.not_recorded(failure, key))
        return _answered(request, capture, outcome, key)

    def _release(self, key: str) -> None:
        if self._closes and self.owners is not None:
            self.owners.close(key)  # only when idle: a call in progress or waiting keeps it

    def _answer(self, request: ToolCallRequest) -> ToolMessage | Command[Any]:
        """A call with no owners: the state alone records it."""
        call = request.tool_call
        capture = _Capture(request.state)  # its append cannot fail, so neither can the call
        outcome = self._binding.call_in(call["args"], capture, call_id=call["id"] or None)
        return _answered(request, capture, outcome)


def _new_turn(runtime: Runtime[Any], key: str) -> dict[str, Any]:
    _show(runtime, key, None)
    return {"todo_events": [{"type": TURN_START, "data": {}}], "todos": None}


def _answered(
    request: ToolCallRequest, capture: _Capture, outcome: Outcome, key: str | None = None
) -> ToolMessage | Command[Any]:
    """The call's answer: an error message, or the message and the event as one state update."""
    call_id = request.tool_call["id"]
    if outcome.is_error or capture.data is None:
        # refused, or its copy could not be written: nothing recorded, and the text says so
        return _message(outcome.text, call_id, "error")
    todos: list[TodoItem] = capture.data["todos"]
    _show(request.runtime, key or _thread_key(_config_of(request)), todos)
    # A retried step sends the same id with the same list: answered, recorded once. The
    # same id with another list is a new call (a provider numbering ids afresh in each
    # response reuses them within a turn): skipping it would lose an acknowledged plan.
    if capture.retried:
        return _message(outcome.text, call_id, "success")
    return Command(
        update={
            "todo_events": [{"type": EVENT_TYPE, "data": dict(capture.data)}],
            # The state's plan is a copy: a reader cannot rewrite the recorded event.
            "todos": [{"content": i["content"], "status": i["status"]} for i in todos],
            "messages": [_message(outcome.text, call_id, "success")],
        }
    )


class _PromptedTodoWriteMiddleware(TodoWriteMiddleware):
    """``TodoWriteMiddleware`` with a ``system_prompt``: it also wraps each model call."""

    @property
    def name(self) -> str:
        return TodoWriteMiddleware.__name__  # the graph's node names stay the same

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any] | AIMessage:
        """Append the caller's ``system_prompt``, if any, to the agent's system message."""
        return handler(self._prompted(request))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any] | AIMessage:
        return await handler(self._prompted(request))

    def _prompted(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        return _prompted(request, self.system_prompt)


class _RemindingMiddleware(TodoWriteMiddleware):
    """``TodoWriteMiddleware`` that runs before each model call: with
    ``remind_after_compaction``, or with owners (whose inboxes hold a person's requests)."""

    @property
    def name(self) -> str:
        return TodoWriteMiddleware.__name__

    def before_model(self, state: TodoWriteState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Append the plan reminder when the messages no longer show the current plan, and
        the notice of what a person asked since the last model call."""
        notice = None
        if self.owners is not None:
            key = _run_key(runtime)
            try:
                notice = told(self.owners, key)
            finally:
                self._release(key)
        return _model_update(self._reminder(state), notice)

    async def abefore_model(
        self, state: TodoWriteState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        notice = None
        if self.owners is not None:
            key = _run_key(runtime)
            try:
                notice = await atold(self.owners, key)
            finally:
                self._release(key)
        return _model_update(self._reminder(state), notice)

    def _reminder(self, state: TodoWriteState) -> HumanMessage | None:
        return _reminder_message(state) if self.remind_after_compaction else None


class _PromptedRemindingMiddleware(_RemindingMiddleware, _PromptedTodoWriteMiddleware):
    """Both a ``system_prompt`` and ``remind_after_compaction``."""
