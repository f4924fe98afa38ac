"""Microsoft Agent Framework: ``TodoWriteProvider``, a context provider for ``Agent``.

Give it to an agent as a context provider; it adds the tool to each run::

    from agent_framework import Agent
    agent = Agent(client=client, context_providers=[TodoWriteProvider(
        allow_parallel_in_progress=False, owners=owners)])

What the model gets (extra ``agent-framework``):

- a function tool with exactly our name, description and parameters (the JSON
  Schema as it is, ``additionalProperties: false`` included);
- the arguments as the model sent them, to this library's validation: the
  framework's own checks of a dict schema (required keys, unknown keys, top-level
  types) would answer ``Error: Argument parsing failed.`` instead of our text, so
  the tool declares a permissive input model and offers our schema;
- a function result holding the tool's text; a refusal and a failure to record
  (:data:`~dsh_tool_todo.core.contract.NOT_RECORDED`, the cause logged on the
  ``dsh_tool_todo`` logger) also carry the text as the result's ``exception``,
  the framework's error channel (Anthropic's ``is_error``; the consecutive-error
  count of its tool loop). A chat middleware the provider adds to each run sets
  it before the result reaches the model: a tool's return value cannot.

The owner is the agent's session (``AgentSession.session_id``, or what ``owner=``
picks from the session); its plan lives in an owner registry, and calls for one
owner are recorded one at a time, in call order. Each call's ``call_id`` is
recorded with it (``callId``). The provider appends ``turn/start`` for the owner
at the start of each run (one ``agent.run`` is one user turn). With
``remind_after_compaction=True`` it re-surfaces the plan when a compaction left the
model without it (:class:`RemindAfterCompaction`). What a person watching asked
(docs/requests.md) is appended to the next model request, once, as a user message. See
``docs/integrations/agent-framework.md``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Final

from pydantic import BaseModel, ConfigDict

from .._binding import Binding, Outcome, OwnerRegistry
from .._extras import needs_extra

with needs_extra(
    "dsh_tool_todo.integrations.agent_framework", "agent-framework", module="agent_framework"
):
    from agent_framework import (
        AgentSession,
        ChatMiddleware,
        Content,
        ContextProvider,
        FunctionInvocationContext,
        FunctionTool,
        SessionContext,
    )

from ._middleware import _ERROR, MarkRefusals, RemindAfterCompaction, TellRequests

__all__ = [
    "MarkRefusals",
    "OwnerOf",
    "RemindAfterCompaction",
    "TodoWriteFunctionTool",
    "TodoWriteProvider",
    "session_owner",
]

OwnerOf = Callable[[AgentSession], "str | None"]
"""Finds a call's owner key from the agent's session; ``None``: the call has no owner."""

_CALL_ID: Final = "dsh_todo_call_id"


def session_owner(session: AgentSession) -> str | None:
    """The default owner: the agent session's id (one plan per conversation)."""
    return session.session_id or None


class _Arguments(BaseModel):
    """Accepts any object as it is: the tool validates, not the framework."""

    model_config = ConfigDict(extra="allow")


class TodoWriteFunctionTool(FunctionTool):
    """The ``todo_write`` function tool; :class:`TodoWriteProvider` builds and adds it.

    It reads the call's session from the framework's ``FunctionInvocationContext``,
    so it needs the agent loop (or a context passed to ``invoke``).
    """

    def __init__(self, binding: Binding) -> None:
        tool = binding.tool
        super().__init__(
            name=tool.name,
            description=tool.description,
            func=self._call,
            input_model=_Arguments,
        )
        self.todo_tool = tool
        self.owners = binding.owners
        self._binding = binding
        self._parameters = Binding.parameters()

    def parameters(self) -> dict[str, Any]:
        """Our JSON Schema, as the request builders read it."""
        return self._parameters

    async def invoke(
        self,
        *,
        arguments: Any = None,
        context: FunctionInvocationContext | None = None,
        tool_call_id: str | None = None,
        **kwargs: Any,
    ) -> Any:
        # the framework tells the tool its call id here, not in the context it hands it
        if context is not None and tool_call_id:
            context.metadata[_CALL_ID] = tool_call_id
        return await super().invoke(
            arguments=arguments, context=context, tool_call_id=tool_call_id, **kwargs
        )

    async def _call(self, invocation: FunctionInvocationContext, **_: Any) -> Content:
        # the arguments as the framework parsed them (the keyword arguments hold the same,
        # but a model's key named like this parameter would be replaced by the context)
        arguments = invocation.arguments
        session = invocation.session
        fixed = isinstance(self._binding.owner, str)
        key = None if session is None and not fixed else self._binding.key(session)
        if key is None:
            return _content(self._binding.refused())
        call_id = invocation.metadata.get(_CALL_ID) or invocation.metadata.get("call_id")
        return _content(await self._binding.acall(_as_sent(dict(arguments)), key, call_id=call_id))


def _as_sent(arguments: dict[str, Any]) -> object:
    """The arguments as the model sent them, for the tool's texts.

    The framework hands a tool arguments that are not a JSON object as
    ``{"raw": value}``: the text itself when it is not JSON, else the value it
    parsed. The tool answers them as what they were (not JSON; not an object),
    not as an unknown argument ``raw`` the model never sent. A ``raw`` holding
    an object can only be the model's own key, and stays one.
    """
    if arguments.keys() != {"raw"} or isinstance(arguments["raw"], dict):
        return arguments
    raw = arguments["raw"]
    if isinstance(raw, str):
        try:
            json.loads(raw)
        except ValueError:
            return raw  # the text the model sent, which is not JSON
    return json.dumps(raw)  # a JSON value that is not an object


def _content(outcome: Outcome) -> Content:
    if outcome.is_error:
        return Content.from_text(outcome.text, additional_properties={_ERROR: True})
    return Content.from_text(outcome.text)


class TodoWriteProvider(ContextProvider):
    """``todo_write`` for an Agent Framework agent: ``Agent(context_providers=[provider])``.

    Before each run it adds the tool and :class:`MarkRefusals` to the run, and
    appends ``turn/start`` for the session's owner (``start_turn=False``: never).

    ``owner``: a fixed owner key, or a function of the ``AgentSession`` (default
    :func:`session_owner`: the session's id; a run without ``session=`` gets a
    new session from the agent, so a new plan). ``owners`` holds the sessions
    (default: an in-memory registry of the provider's own; pass your own to read
    plans back, or ``OwnerRegistry(directory)`` for durable plans).

    A call whose owner function returns ``None`` gets the tool's "requires an
    owning agent session" text as an error result, and the first such call logs
    a WARNING on the ``dsh_tool_todo`` logger.

    ``remind_after_compaction=True`` adds :class:`RemindAfterCompaction` (off by default).
    What a person watching asked since the last model request (docs/requests.md) reaches
    the next request once, as a user message after the newest one (always on).
    """

    def __init__(
        self,
        *,
        allow_parallel_in_progress: bool,
        owner: str | OwnerOf = session_owner,
        owners: OwnerRegistry | None = None,
        start_turn: bool = True,
        remind_after_compaction: bool = False,
        source_id: str = "dsh_todo",
    ) -> None:
        binding = Binding(
            "TodoWriteProvider",
            allow_parallel_in_progress=allow_parallel_in_progress,
            owner=owner,
            owners=owners,
            function_of="AgentSession",
            remedy="owner= returned None: return the session's owner key",
        )
        super().__init__(source_id)
        self.owners = binding.owners
        self.start_turn = start_turn
        self._binding = binding
        self.tool = TodoWriteFunctionTool(binding)
        self.middleware: list[ChatMiddleware] = [MarkRefusals()]
        if remind_after_compaction:
            self.middleware.append(RemindAfterCompaction(self.owners, self.owner_of))
        # after the reminder's: its strategy runs inside this one's, so the notice comes last
        fixed = owner if isinstance(owner, str) else None
        self.middleware.append(TellRequests(self.owners, self.owner_of, fixed))

    def owner_of(self, session: AgentSession) -> str | None:
        """The owner key of ``session``'s calls (``None``: no owner)."""
        key: str | None = self._binding.key(session)
        return key

    async def before_run(
        self,
        *,
        agent: Any,
        session: AgentSession,
        context: SessionContext,
        state: dict[str, Any],
    ) -> None:
        """Start the owner's turn, and add the tool and the middleware to this run."""
        if self.start_turn:
            key = self.owner_of(session)
            if key is not None:
                await self.owners.astart_turn(key)
        context.extend_tools(self.source_id, [self.tool])
        context.extend_middleware(self.source_id, self.middleware)
