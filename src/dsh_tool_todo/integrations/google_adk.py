"""Google ADK: ``TodoWriteAdkTool``, a ``BaseTool`` for ``LlmAgent(tools=[...])``.

Use it as any other tool of an agent::

    from google.adk.agents import LlmAgent
    agent = LlmAgent(name="planner", model=model, tools=[TodoWriteAdkTool(
        allow_parallel_in_progress=False, owners=owners)])

What the model gets (extra ``google-adk``, Python 3.11 or later: ADK 2.x needs it):

- a function declaration with exactly our name, description and parameters
  (``parameters_json_schema``: the JSON Schema as it is, not ADK's
  re-generation from a Python signature);
- the arguments as the model sent them, to this library's validation;
- a function response object: ``{"result": "<text>"}`` for a recorded call,
  ``{"error": "<text>"}`` for a refusal and for a failure to record
  (:data:`~dsh_tool_todo.core.contract.NOT_RECORDED`, the cause logged on the
  ``dsh_tool_todo`` logger).

The owner is the ADK session of the call (``ToolContext.session.id``, or what
``owner=`` picks from the ``ToolContext``); its plan lives in an owner
registry, and calls for one owner are recorded one at a time, in call order.
Each call's ``ToolContext.function_call_id`` is recorded with it (``callId``).
``before_model_callback=tool.remind_after_compaction`` (opt-in) re-surfaces the plan
when a compaction left the model without it. What a person watching asked since the
last model request (docs/requests.md) is added to the next request, once, by the tool
itself (:meth:`TodoWriteAdkTool.process_llm_request`). See
``docs/integrations/google-adk.md``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..core.contract import TOOL_NAME
from ._binding import Binding, Outcome, OwnerRegistry
from ._extras import needs_extra
from ._notice import atold
from ._reminder import aplan_of, reminder_due, todos_of

with needs_extra("dsh_tool_todo.integrations.google_adk", "google-adk", module="google.adk"):
    from google.adk.agents.callback_context import CallbackContext
    from google.adk.models.llm_request import LlmRequest
    from google.adk.tools.base_tool import BaseTool
    from google.adk.tools.tool_context import ToolContext
    from google.genai import types

__all__ = ["OwnerOf", "TodoWriteAdkTool", "session_owner"]

OwnerOf = Callable[[ToolContext], "str | None"]
"""Finds a call's owner key from its ``ToolContext``; ``None``: the call has no owner."""


def session_owner(tool_context: ToolContext) -> str | None:
    """The default owner: the ADK session's id (one plan per conversation)."""
    return tool_context.session.id or None


class TodoWriteAdkTool(BaseTool):
    """``todo_write`` as an ADK tool; each call's plan belongs to its owner.

    ``owner``: a fixed owner key, or a function of the call's ``ToolContext``
    (default :func:`session_owner`: the ADK session's id). ``owners`` holds the
    sessions (default: an in-memory registry of this tool's own; pass your own
    to read plans back, or ``OwnerRegistry(directory)`` for durable plans).

    A call whose owner function returns ``None`` gets the tool's "requires an
    owning agent session" text as ``{"error": ...}``, and the first such call
    logs a WARNING on the ``dsh_tool_todo`` logger.
    """

    def __init__(
        self,
        *,
        allow_parallel_in_progress: bool,
        owner: str | OwnerOf = session_owner,
        owners: OwnerRegistry | None = None,
    ) -> None:
        self._binding = Binding(
            "TodoWriteAdkTool",
            allow_parallel_in_progress=allow_parallel_in_progress,
            owner=owner,
            owners=owners,
            function_of="ToolContext",
            remedy="owner= returned None: return the call's owner key",
        )
        self.todo_tool = self._binding.tool
        super().__init__(name=self.todo_tool.name, description=self.todo_tool.description)
        self.owners = self._binding.owners

    def _get_declaration(self) -> types.FunctionDeclaration:
        return types.FunctionDeclaration(
            name=self.name,
            description=self.description,
            parameters_json_schema=Binding.parameters(),
        )

    async def process_llm_request(
        self, *, tool_context: ToolContext, llm_request: LlmRequest
    ) -> None:
        """Offer the tool, and tell the model what a person asked since its last request.

        ADK asks each tool of the agent before each model request, once its contents are
        built: when the owner's inbox holds requests (docs/requests.md), the request
        notice is added as a text part at the end of the newest user content (or as a
        user content after it), as the compaction reminder is. Taken once: ADK builds the
        next request's contents again from its events, without it.
        """
        await super().process_llm_request(tool_context=tool_context, llm_request=llm_request)
        if not llm_request.contents:
            return
        key = self._binding.key(tool_context)
        if key is None:
            return
        text = await atold(self.owners, key)
        if text is not None:
            _add_last(llm_request.contents, text)

    async def run_async(self, *, args: dict[str, Any], tool_context: ToolContext) -> Any:
        key = self._binding.key(tool_context)
        if key is None:
            return _response(self._binding.refused())
        call_id = tool_context.function_call_id or None
        return _response(await self._binding.acall(args, key, call_id=call_id))

    async def remind_after_compaction(
        self, callback_context: CallbackContext, llm_request: LlmRequest
    ) -> None:
        """A ``before_model_callback`` re-surfacing the plan after a compaction (opt-in).

        ``LlmAgent(tools=[tool], before_model_callback=tool.remind_after_compaction)``:
        when the owner's current plan is not empty and no ``todo_write`` call (nor an
        earlier reminder) left in the request's contents shows it (ADK's event
        compaction summarised them away), :func:`~dsh_tool_todo.plans.reminder.plan_reminder`
        is added as a text part at the end of the newest user content (or as a user
        content after it). Nothing before it changes. ADK rebuilds the contents from its
        events for each request, so the reminder is added to each request until a write
        shows the plan again, always last.
        """
        contents = llm_request.contents
        if not contents:
            return
        key = self._binding.key(callback_context)
        if key is None:
            return
        text = reminder_due(await aplan_of(self.owners, key), _written(contents), _shown(contents))
        if text is not None:
            _add_last(contents, text)


def _add_last(contents: list[types.Content], text: str) -> None:
    """``text`` as its own part after the newest content's, changing no earlier byte."""
    newest, part = contents[-1], types.Part(text=text)
    if newest.role == "user":  # a copy: the contents may share their parts with the events
        contents[-1] = newest.model_copy(update={"parts": [*(newest.parts or []), part]})
    else:
        contents.append(types.Content(role="user", parts=[part]))


def _response(outcome: Outcome) -> dict[str, str]:
    # ADK's function responses are objects; "error" is the key its own tools use for failures
    return {"error" if outcome.is_error else "result": outcome.text}


def _written(contents: list[types.Content]) -> list[object]:
    return [
        todos_of(part.function_call.args)
        for content in contents
        for part in content.parts or []
        if part.function_call is not None and part.function_call.name == TOOL_NAME
    ]


def _shown(contents: list[types.Content]) -> list[str]:
    return [
        part.text
        for content in contents
        if content.role == "user"
        for part in content.parts or []
        if part.text is not None
    ]
