"""A scripted Strands model: answers from a script in converse-stream events and records
what each request carried.

It is a ``strands.models.Model`` subclass yielding converse-stream events (what every
Strands provider turns its API's stream into); everything between it and the tool (the
event loop, the concurrent tool executor, the hooks, the conversation manager) is Strands'.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

from strands.models import Model
from strands.types.exceptions import ContextWindowOverflowException

# One tool use: (toolUseId, arguments) for ``todo_write``, or (toolUseId, arguments, tool name).
# Arguments given as a string reach Strands as that raw JSON text.
ToolUse = tuple[str, Any] | tuple[str, Any, str]
Step = Sequence[ToolUse] | str


def tool_use_steps(calls: Sequence[tuple[str, Any]]) -> list[Step]:
    """One step a call, from ``(tool name, arguments)`` pairs; ids ``call-1``, ``call-2``, ..."""
    return [[(f"call-{number}", args, name)] for number, (name, args) in enumerate(calls, 1)]


class ScriptedModel(Model):
    """Answers each request with the next scripted step: tool uses or a text.

    ``requests`` holds each request's messages (as JSON data) and tool specs;
    ``request_lines`` the same request as a provider reads it, one line of bytes per
    message, the system prompt first. ``overflow_at`` raises a context overflow once on that
    request (1-based), as a provider does when the prompt is too long; it takes no step.
    """

    def __init__(self, script: Sequence[Step], *, overflow_at: int = 0) -> None:
        self.script = list(script)
        self.overflow_at = overflow_at
        self.requests: list[dict[str, Any]] = []
        self.request_lines: list[list[bytes]] = []

    def update_config(self, **model_config: Any) -> None:
        pass

    def get_config(self) -> Any:
        return {}

    def structured_output(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    async def stream(  # type: ignore[override]
        self,
        messages: Any,
        tool_specs: Any = None,
        system_prompt: str | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[dict[str, Any]]:
        if len(self.requests) + 1 == self.overflow_at:
            self.overflow_at = 0
            raise ContextWindowOverflowException("prompt is too long")
        self.requests.append({"messages": json.loads(json.dumps(messages)), "tools": tool_specs})
        self.request_lines.append(
            [json.dumps(system_prompt).encode()]
            + [json.dumps(m, sort_keys=True).encode() for m in messages]
        )
        step = self.script.pop(0)
        yield {"messageStart": {"role": "assistant"}}
        if isinstance(step, str):
            yield {"contentBlockDelta": {"delta": {"text": step}}}
            yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": "end_turn"}}
            return
        for call_id, args, *name in step:
            start = {"toolUse": {"toolUseId": call_id, "name": name[0] if name else "todo_write"}}
            yield {"contentBlockStart": {"start": start}}
            raw = args if isinstance(args, str) else json.dumps(args)
            yield {"contentBlockDelta": {"delta": {"toolUse": {"input": raw}}}}
            yield {"contentBlockStop": {}}
        yield {"messageStop": {"stopReason": "tool_use"}}
