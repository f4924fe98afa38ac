"""The LangChain middleware's pieces: the call's capture, the retry rule, the custom stream."""

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
from .._binding import TodoItem
from .._reminder import reminder_due


class _Capture:
    """The session of one call: it keeps the event the tool appends, for the state update."""

    __slots__ = ("data",)

    def __init__(self) -> None:
        self.data: Mapping[str, Any] | None = None

    def append(self, type: str, data: Mapping[str, Any], /) -> None:
        self.data = data


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


def _reminder_update(state: Mapping[str, Any]) -> dict[str, Any] | None:
    """The state update adding the plan reminder, when the messages no longer show the plan."""
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
    if text is None:
        return None
    # A state update, not a change to this one request: the reminder stays where it was
    # added, so every later request starts with the same bytes.
    return {"messages": [HumanMessage(content=text)]}
