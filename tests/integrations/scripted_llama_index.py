"""A scripted LlamaIndex model: a ``MockFunctionCallingLLM`` response generator answering
from a script and recording what each request carried."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock

# One tool call: (tool_call_id, arguments) for ``todo_write``, or (id, arguments, tool name).
ToolCall = tuple[str, Any] | tuple[str, Any, str]
Step = Sequence[ToolCall] | str


def tool_call_steps(calls: Sequence[tuple[str, Any]]) -> list[Step]:
    """One step a call, from ``(tool name, arguments)`` pairs; ids ``call-1``, ``call-2``, ..."""
    return [[(f"call-{number}", args, name)] for number, (name, args) in enumerate(calls, 1)]


class Script:
    """Answers each request with the next step, tool calls or a text; past the steps, "done".

    ``requests`` holds each request's messages and the tools it offered; ``request_lines``
    its messages as bytes, one line each.
    """

    def __init__(self, *steps: Step) -> None:
        self.steps = list(steps)
        self.requests: list[tuple[list[ChatMessage], Any]] = []
        self.request_lines: list[list[bytes]] = []

    def __call__(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        self.requests.append((list(messages), kwargs.get("tools")))
        self.request_lines.append([m.model_dump_json().encode() for m in messages])
        step = self.steps.pop(0) if self.steps else "done"
        if isinstance(step, str):
            return ChatMessage(role=MessageRole.ASSISTANT, content=step)
        blocks = []
        for call_id, args, *name in step:
            block = ToolCallBlock(tool_call_id=call_id, tool_name=name[0] if name else "todo_write")
            block.tool_kwargs = args if isinstance(args, str) else dict(args)
            blocks.append(block)
        return ChatMessage(role=MessageRole.ASSISTANT, blocks=blocks)
