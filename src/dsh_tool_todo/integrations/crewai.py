"""CrewAI: ``TodoWriteCrewTool``, a ``BaseTool`` for ``Agent(tools=[...])``.

Give it to an agent as any other tool, and start a new turn at each kickoff::

    from crewai import Agent, Crew
    todo = TodoWriteCrewTool(allow_parallel_in_progress=False, owner=user_id, owners=owners)
    agent = Agent(role=..., goal=..., backstory=..., llm=llm, tools=[todo])
    todo.start_turn()  # each user request starts on an empty plan
    Crew(agents=[agent], tasks=[task]).kickoff()

What the model gets (extra ``crewai``):

- with native function calling (an LLM whose ``supports_function_calling()``
  is true), exactly our name, description and parameters: the tool's
  ``args_schema`` answers ``model_json_schema()`` with our schema, which
  CrewAI's request builder passes through (its strict-mode rewrites leave this
  schema unchanged; a test reads the request). CrewAI adds ``"strict": true``
  beside them. Without native function calling, CrewAI's ReAct prompt shows
  them in a block of its own, and drops top-level argument keys the schema does
  not list before the tool runs (see the page);
- the arguments as the model sent them, to this library's validation (the
  schema declares no pydantic fields, so CrewAI validates nothing first);
- the tool's text: a recorded call's as its result, a refusal and a failure
  to record (:data:`~dsh_tool_todo.core.contract.NOT_RECORDED`, the cause logged on
  the ``dsh_tool_todo`` logger) as a ``ToolFailure``, CrewAI's channel for a
  tool that ran but did not succeed: the model reads the same text, and the
  task records the failure under the agent's ``tool_failure_policy``.

CrewAI gives a tool neither the agent nor the call id, so the owner is a fixed
key on the tool (one tool per agent, or per crew, is the scope) and no call id
is recorded. Calls for one owner are recorded one at a time, in call order:
CrewAI runs the calls of one model message on threads unless one of them has a
usage limit, so the tool declares one it never reaches. Its tool-result cache
never answers for this tool (``cache_function`` is false): a repeated list is a
new call. After CrewAI summarises a conversation that outgrew the context window,
``remind`` (a before-LLM-call hook, opt-in) shows the model the plan again. CrewAI's
hooks are global, registered by the caller: ``remind``, or ``tell_requests`` alone, also
tells the model once what a person watching asked (docs/requests.md).
See ``docs/integrations/crewai.md``.
"""

from __future__ import annotations

import sys
from typing import Any

from pydantic import BaseModel, ConfigDict, PrivateAttr

from ..core.contract import TOOL_NAME
from ..errors import UsageError
from ._binding import Binding, OwnerRegistry
from ._extras import needs_extra
from ._notice import told
from ._reminder import plan_in, reminder_due, todos_of

with needs_extra("dsh_tool_todo.integrations.crewai", "crewai", module="crewai"):
    from crewai.agents.parser import AgentAction, OutputParserError
    from crewai.agents.parser import parse as _parse_react
    from crewai.tools import BaseTool
    from crewai.tools.tool_failure import ToolFailure

__all__ = ["TodoWriteArguments", "TodoWriteCrewTool"]


class TodoWriteArguments(BaseModel):
    """The tool's ``args_schema``: its JSON schema is this library's, as it is.

    It declares no fields, so ``BaseTool.run`` hands the model's arguments to
    this library's validation untouched (CrewAI validates against the fields of
    an ``args_schema`` that has some, and would answer with its own text).
    """

    model_config = ConfigDict(extra="allow")

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return Binding.parameters()  # a fresh copy: CrewAI's request builder edits what it gets


def _never_cache(args: Any = None, result: Any = None) -> bool:
    # CrewAI's tool cache would answer a repeated list from memory, unrecorded
    return False


class TodoWriteCrewTool(BaseTool):
    """``todo_write`` as a CrewAI tool; every call's plan belongs to ``owner``.

    ``owner`` is the owner key of the agent (or crew) the tool is given to.
    ``owners`` holds the sessions (default: an in-memory registry of the tool's
    own; pass your own to read plans back, or ``OwnerRegistry(directory)`` for
    durable plans). ``before_kickoff`` (for ``Crew(before_kickoff_callbacks=[...])``)
    and ``start_turn`` append ``turn/start``: a new user request clears the plan.
    """

    _binding: Binding = PrivateAttr()

    def __init__(
        self,
        *,
        allow_parallel_in_progress: bool,
        owner: str,
        owners: OwnerRegistry | None = None,
    ) -> None:
        binding = Binding(
            "TodoWriteCrewTool",
            allow_parallel_in_progress=allow_parallel_in_progress,
            owner=owner,
            owners=owners,
        )
        tool = binding.tool
        super().__init__(
            name=tool.name,
            description=tool.description,
            args_schema=TodoWriteArguments,
            cache_function=_never_cache,
            # CrewAI runs a message's calls in order, one after another, when one of them
            # has a usage limit (on threads otherwise): the calls are recorded in call order
            max_usage_count=sys.maxsize,
        )
        self._binding = binding

    @property
    def owners(self) -> OwnerRegistry:
        """The registry holding the owner's session."""
        return self._binding.owners

    @property
    def owner(self) -> str:
        """The owner key every call of this tool records for."""
        owner: str = self._binding.owner
        return owner

    def _run(self, *args: Any, **kwargs: Any) -> str | ToolFailure:
        """One call: the tool's text, or a ``ToolFailure`` carrying it."""
        if args:
            raise UsageError("todo_write takes keyword arguments only: tool.run(todos=[...])")
        outcome = self._binding.call(kwargs, self.owner)
        if outcome.is_error:
            return ToolFailure(message=outcome.text)
        return outcome.text

    def start_turn(self) -> None:
        """Append ``turn/start`` for the owner: call it before ``agent.kickoff(...)``."""
        self.owners.start_turn(self.owner)

    def before_kickoff(self, inputs: dict[str, Any] | None) -> dict[str, Any] | None:
        """``Crew(before_kickoff_callbacks=[tool.before_kickoff])``: ``turn/start`` at each
        kickoff; the inputs pass through unchanged."""
        self.start_turn()
        return inputs

    def remind(self, context: Any) -> None:
        """A before-LLM-call hook re-surfacing the plan after a compaction (opt-in).

        Register it with ``crewai.hooks.register_before_llm_call_hook(todo.remind)``.
        Before each model call of an agent that holds this tool, when the owner's
        current plan is not empty and no ``todo_write`` call (nor an earlier reminder)
        left in the messages shows it (CrewAI's ``respect_context_window``
        summary replaced them), it appends
        :func:`~dsh_tool_todo.plans.reminder.plan_reminder` as a user message. The
        messages are the agent's own, so the reminder stays and is added once.
        Then it does what :meth:`tell_requests` does.
        """
        if not self._holds(context):
            return
        messages: list[Any] = context.messages
        todos = plan_in(self.owners.session(self.owner))
        text = reminder_due(todos, _written(messages), _shown(messages))
        if text is not None:
            messages.append({"role": "user", "content": text})
        self.tell_requests(context)

    def tell_requests(self, context: Any) -> None:
        """A before-LLM-call hook telling the model what a person asked (docs/requests.md).

        Register it (or :meth:`remind`, which does this too) with
        ``crewai.hooks.register_before_llm_call_hook(todo.tell_requests)``. Before each
        model call of an agent that holds this tool, when the owner's inbox holds requests,
        it appends the request notice as a user message after the newest one (after the
        reminder, never joined to it). The messages are the agent's own: it is told once.
        """
        if not self._holds(context):
            return
        text = told(self.owners, self.owner)
        if text is not None:
            context.messages.append({"role": "user", "content": text})

    def _holds(self, context: Any) -> bool:
        """Whether the hook's model call is one of an agent that holds this tool."""
        tools = getattr(getattr(context, "agent", None), "tools", None) or []
        return any(tool is self for tool in tools)


def _written(messages: list[Any]) -> list[object]:
    """The ``todos`` of each ``todo_write`` call in CrewAI's (OpenAI-style) messages."""
    written: list[object] = []
    for message in messages:
        if message.get("role") != "assistant":
            continue
        content = message.get("content")
        if isinstance(content, str):  # the ReAct text path: Action and Action Input
            action = _parse_action(content.partition("\nObservation:")[0])
            if isinstance(action, AgentAction) and action.tool == TOOL_NAME:
                written.append(todos_of(action.tool_input))
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            if function.get("name") == TOOL_NAME:
                written.append(todos_of(function.get("arguments")))
    return written


def _parse_action(text: str) -> object:
    try:
        return _parse_react(text)
    except OutputParserError:  # not an action: it shows no plan
        return None


def _shown(messages: list[Any]) -> list[str]:
    return [
        message["content"]
        for message in messages
        if message.get("role") == "user" and isinstance(message.get("content"), str)
    ]
