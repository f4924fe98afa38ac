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

A consumer streaming with ``stream_mode="custom"`` also gets the plan as it
changes: each answered write, and the cleared plan at each new turn, is one
``custom`` chunk, an AG-UI ``ACTIVITY_SNAPSHOT`` dict (``wire``) whose
``messageId`` is ``plan:<thread_id>``. LangGraph drops custom chunks nobody
streams, so other consumers see nothing new.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from ...core.contract import EVENT_TYPE, TOOL_NAME, TURN_START
from ...errors import UsageError
from .._binding import Binding, TodoItem
from .._extras import needs_extra

with needs_extra("dsh_tool_todo.integrations.langchain", "langchain", module="langchain"):
    from langchain.agents.middleware.types import (
        AgentMiddleware,
        AgentState,
        ModelRequest,
        ModelResponse,
        OmitFromInput,
    )
    from langchain_core.messages import AIMessage, ToolMessage
    from langchain_core.tools import StructuredTool
    from langgraph.prebuilt.tool_node import ToolCallRequest
    from langgraph.runtime import Runtime
    from langgraph.types import Command
    from typing_extensions import NotRequired  # on 3.12+ it comes with langchain-core

from ._parts import (
    _Capture,
    _config_of,
    _current_config,
    _message,
    _outside_the_agent,
    _prompted,
    _reminder_update,
    _show,
    _thread_key,
    _written_this_turn,
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
    """

    state_schema = TodoWriteState

    def __new__(
        cls,
        *args: Any,
        system_prompt: str | None = None,
        remind_after_compaction: bool = False,
        **kwargs: Any,
    ) -> Any:
        # A hook exists only when asked for: LangChain wraps every model call (and adds a
        # graph node before it) for a middleware class defining one, so by default none is.
        if cls is TodoWriteMiddleware:
            prompted = system_prompt is not None
            if remind_after_compaction is True:
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
    ) -> None:
        super().__init__()
        if tool_description is not None:
            raise UsageError(
                "tool_description= is not accepted: the model reads the specification's "
                "description of todo_write; put guidance of your own in system_prompt="
            )
        if system_prompt is not None and not isinstance(system_prompt, str):
            raise UsageError(f"system_prompt must be a str, not {type(system_prompt).__qualname__}")
        # the graph state is the session log: the binding's calls go to a _Capture of each call
        self._binding = Binding(
            "TodoWriteMiddleware",
            allow_parallel_in_progress=allow_parallel_in_progress,
            flags={
                "remind_after_compaction": remind_after_compaction,
                "clear_on_new_turn": clear_on_new_turn,
            },
        )
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
        """A new run is a new user turn: record ``turn/start``, which clears the plan."""
        if not self.clear_on_new_turn:
            return None
        _show(runtime, _thread_key(_current_config()), None)
        return {"todo_events": [{"type": TURN_START, "data": {}}], "todos": None}

    async def abefore_agent(
        self, state: TodoWriteState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        return self.before_agent(state, runtime)

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        """Answer ``todo_write`` calls; every other tool call passes through untouched."""
        if request.tool_call["name"] != TOOL_NAME:
            return handler(request)
        return self._answer(request)

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        if request.tool_call["name"] != TOOL_NAME:
            return await handler(request)
        return self._answer(request)

    def _answer(self, request: ToolCallRequest) -> ToolMessage | Command[Any]:
        call = request.tool_call
        call_id = call["id"]
        capture = _Capture()  # its append cannot fail, so neither can the call
        outcome = self._binding.call_in(call["args"], capture, call_id=call_id or None)
        if capture.data is None:  # refused: nothing recorded, the text says why
            return _message(outcome.text, call_id, "error")
        todos: list[TodoItem] = capture.data["todos"]
        _show(request.runtime, _thread_key(_config_of(request)), todos)
        # A retried step sends the same id with the same list: answered, recorded once. The
        # same id with another list is a new call (a provider numbering ids afresh in each
        # response reuses them within a turn): skipping it would lose an acknowledged plan.
        if call_id and _written_this_turn(request.state, call_id) == todos:
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
    """``TodoWriteMiddleware`` with ``remind_after_compaction``: it runs before each model call."""

    @property
    def name(self) -> str:
        return TodoWriteMiddleware.__name__

    def before_model(self, state: TodoWriteState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Append the plan reminder when the messages no longer show the current plan."""
        return _reminder_update(state)

    async def abefore_model(
        self, state: TodoWriteState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        return self.before_model(state, runtime)


class _PromptedRemindingMiddleware(_RemindingMiddleware, _PromptedTodoWriteMiddleware):
    """Both a ``system_prompt`` and ``remind_after_compaction``."""
