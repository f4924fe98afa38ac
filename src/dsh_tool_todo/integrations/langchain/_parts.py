"""The LangChain middleware's pieces: a call's capture and mirror, the retry rule, the stream."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from langchain.agents.middleware.types import ModelRequest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.config import get_config
from langgraph.prebuilt.tool_node import ToolCallRequest

from ...core.contract import CALL_ID_KEY, EVENT_TYPE, TOOL_NAME, TURN_START
from ...errors import UsageError
from ...plans import wire
from .._binding import Session, TodoItem
from .._reminder import reminder_due


class _Capture:
    """The session of one call: it keeps the event the tool appends, for the state update.

    With a ``mirror`` (the owner's session in the registry ``owners=`` names) it also
    appends the event there, unless the state takes the call for a retried step
    (``retried``): then neither the state nor the mirror records it again. A failing
    mirror fails the append, so the call is answered as not recorded.
    """

    __slots__ = ("_mirror", "_state", "data", "retried")

    def __init__(self, state: Any = None, mirror: Session | None = None) -> None:
        self.data: Mapping[str, Any] | None = None
        self.retried = False
        self._state = state
        self._mirror = mirror

    def append(self, type: str, data: Mapping[str, Any], /) -> object:
        self.data = data
        call_id = data.get(CALL_ID_KEY)
        todos = data["todos"]
        self.retried = call_id is not None and _written_this_turn(self._state, call_id) == todos
        if self._mirror is None or self.retried:
            return None
        if call_id is not None and _recorded_earlier(self._state, call_id, todos):
            # The store would take this call for a retry of that earlier one and record
            # nothing, leaving its plan on a later list while the state's plan is this one:
            # the copy goes in without the id, so both end on the list the model was told.
            data = {"todos": todos}
        return self._mirror.append(type, data)


def _outside_the_agent(**_: Any) -> str:
    raise UsageError(
        "todo_write runs inside TodoWriteMiddleware's wrap_tool_call: "
        "pass the middleware to create_agent(..., middleware=[...]) instead of the tool"
    )


def _written_this_turn(state: Any, call_id: str) -> list[Any] | None:
    """The list of the turn's last recorded call, if that call's id is ``call_id``.

    The graph state is this adapter's log, so the retry rule is kept here: the
    last call run again (the same id, the same list) records nothing new. An
    earlier call's id and list seen again is a new call: skipping it would
    leave the plan on a later list while the model is told its list was recorded.
    """
    events = state.get("todo_events") if isinstance(state, Mapping) else None
    for event in reversed(events or ()):
        if event["type"] == TURN_START:
            return None
        if event["type"] == EVENT_TYPE:
            data = event["data"]
            if data.get(CALL_ID_KEY) != call_id:
                return None
            earlier: list[Any] = data["todos"]
            return earlier
    return None


def _recorded_earlier(state: Any, call_id: str, todos: list[Any]) -> bool:
    """Whether a ``todo/write`` of this turn in the state has this call id and this list."""
    events = state.get("todo_events") if isinstance(state, Mapping) else None
    for event in reversed(events or ()):
        if event["type"] == TURN_START:
            return False
        data = event["data"]
        same_call = event["type"] == EVENT_TYPE and data.get(CALL_ID_KEY) == call_id
        if same_call and data["todos"] == todos:
            return True
    return False


def _earlier_calls(state: Any, call_id: str | None) -> list[tuple[Any, str]]:
    """The arguments and ids of the ``todo_write`` calls made before ``call_id`` in its message.

    LangChain runs the calls of one message side by side, so they reach the owner's lock in
    any order; each call copies the calls before it first (the stores take a call id and list
    seen this turn for a retry, and record it once), so the copy keeps the model's order, as
    the state does.
    """
    messages = state.get("messages") if isinstance(state, Mapping) and call_id else None
    # the calls being run are the newest model message's
    message = next((m for m in reversed(messages or ()) if isinstance(m, AIMessage)), None)
    calls = [] if message is None else [c for c in message.tool_calls if c["name"] == TOOL_NAME]
    ids = [call.get("id") for call in calls]
    if call_id not in ids:
        return []
    earlier = calls[: ids.index(call_id)]
    return [(call["args"], found) for call in earlier if (found := call.get("id"))]


def _show(runtime: Any, thread: str, todos: list[TodoItem] | None) -> None:
    """One ``custom`` stream chunk: the plan as an AG-UI activity snapshot (``None``: cleared).

    The runtime's writer is LangGraph's no-op unless someone streams ``custom``.
    """
    writer = getattr(runtime, "stream_writer", None)
    if writer is None:
        return
    chunk = wire.ag_ui_activity_snapshot(thread, todos)
    try:
        writer(chunk)
    except RuntimeError:
        # Before Python 3.11 asyncio tasks do not carry LangGraph's config context variable,
        # which its custom writer reads ("Called get_config outside of a runnable context"):
        # there the chunk cannot be sent, and the run must go on without it.
        if sys.version_info >= (3, 11):
            raise


def _current_config() -> Any:
    try:
        return get_config()
    except RuntimeError:  # called outside a graph run: there is no thread
        return None


def _config_of(request: ToolCallRequest) -> Any:
    return getattr(request.runtime, "config", None)


def _thread_key(config: Any) -> str:
    """The session key of the plan ids: the run's ``thread_id``, or ``default`` without one."""
    configurable = config.get("configurable") if isinstance(config, Mapping) else None
    thread = configurable.get("thread_id") if isinstance(configurable, Mapping) else None
    return str(thread) if thread is not None and str(thread) else "default"


def _run_key(runtime: Any) -> str:
    """The thread key of a run's start, as :func:`_thread_key` reads it from the config; where
    an asyncio task does not carry the config (Python 3.10), from the runtime's run info."""
    config = _current_config()
    if config is None:
        thread = getattr(getattr(runtime, "execution_info", None), "thread_id", None)
        config = {"configurable": {"thread_id": thread}}
    return _thread_key(config)


def _message(text: str, call_id: str | None, status: str) -> ToolMessage:
    return ToolMessage(content=text, tool_call_id=call_id, name=TOOL_NAME, status=status)


def _prompted(request: ModelRequest[Any], prompt: str | None) -> ModelRequest[Any]:
    """``request`` with the caller's ``system_prompt`` appended to the system message."""
    if prompt is None:
        return request
    if request.system_message is None:
        blocks: list[Any] = [{"type": "text", "text": prompt}]
    else:  # as TodoListMiddleware appends its own prompt
        blocks = [
            *request.system_message.content_blocks,
            {"type": "text", "text": f"\n\n{prompt}"},
        ]
    return request.override(system_message=SystemMessage(content=blocks))


def _reminder_message(state: Mapping[str, Any]) -> HumanMessage | None:
    """The message holding the plan reminder, when the messages no longer show the plan."""
    messages = state.get("messages") or []
    written = [
        call["args"].get("todos")
        for message in messages
        if isinstance(message, AIMessage)
        for call in message.tool_calls
        if call["name"] == TOOL_NAME and isinstance(call["args"], Mapping)
    ]
    shown = [
        message.content
        for message in messages
        if isinstance(message, HumanMessage) and isinstance(message.content, str)
    ]
    text = reminder_due(state.get("todos"), written, shown)
    return None if text is None else HumanMessage(content=text)


def _model_update(reminder: HumanMessage | None, notice: str | None) -> dict[str, Any] | None:
    """The state update before a model call: the reminder, then the request notice, each a
    message of its own after the newest one (the reminder is found again by its exact text).

    A state update, not a change to this one request: what is added stays where it was
    added, so every later request starts with the same bytes, and the notice is told once."""
    added = [] if reminder is None else [reminder]
    if notice is not None:
        added.append(HumanMessage(content=notice))
    return {"messages": added} if added else None
