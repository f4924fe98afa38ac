"""``todo_write`` for Strands Agents: an ``AgentTool`` with our raw schema and texts.

Give it to an ``Agent`` as a tool, and as a hook provider if each invocation is a
new user turn::

    from strands import Agent
    todo = todo_write_strands_tool(
        allow_parallel_in_progress=False, owner=lambda agent: agent.state.get("user")
    )
    agent = Agent(model=model, tools=[todo], hooks=[todo])

What the model gets (extra ``strands``):

- the tool spec is our name, description and JSON schema as they are (Strands'
  normalisation of tool specs leaves this schema unchanged; a test reads the
  spec the model is handed);
- the arguments go to this library's validation as the model wrote them (no
  Strands validation in between); a recorded call answers a ``toolResult``
  with ``status: "success"``, a refusal the refusal's text with
  ``status: "error"``, a failure to record
  :data:`~dsh_tool_todo.core.contract.NOT_RECORDED` with ``status: "error"`` and the
  cause logged on the ``dsh_tool_todo`` logger.

Strands runs the tool calls of one model message concurrently; calls for one
owner are serialised here, in call order. Each call's ``toolUseId`` is recorded
with it (``callId``). As a hook provider, the tool appends ``turn/start`` for the
agent's owner before each invocation (``BeforeInvocationEvent``), so each user
request starts on an empty plan. Before each model call (``BeforeModelCallEvent``) it
tells the model what a person asked of the plan (``docs/requests.md``), and with
``remind_after_compaction=True`` re-surfaces the plan after a conversation manager
summarised or trimmed it away. See ``docs/integrations/strands.md``.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from typing import Any

from ..core.contract import TOOL_NAME
from ._binding import Binding, OwnerRegistry
from ._extras import needs_extra
from ._notice import atold
from ._reminder import aplan_of, reminder_due, todos_of

with needs_extra("dsh_tool_todo.integrations.strands", "strands", module="strands"):
    from strands.agent import Agent
    from strands.hooks import BeforeInvocationEvent, BeforeModelCallEvent, HookRegistry
    from strands.types.content import Messages
    from strands.types.tools import AgentTool, ToolResult, ToolSpec, ToolUse

__all__ = ["OwnerOf", "TodoWriteAgentTool", "todo_write_strands_tool"]

OwnerOf = Callable[[Agent], str | None]
"""Picks the owner key from the agent running the call (its ``state``, its
``agent_id``, its session manager's session); ``None``: the call has no owner."""


class TodoWriteAgentTool(AgentTool):
    """The ``todo_write`` tool for a Strands ``Agent``, and the hook provider that
    starts a new turn for the agent's owner at each invocation."""

    def __init__(
        self,
        *,
        allow_parallel_in_progress: bool,
        owner: str | OwnerOf,
        owners: OwnerRegistry | None = None,
        remind_after_compaction: bool = False,
    ) -> None:
        self._binding = Binding(
            "todo_write_strands_tool",
            allow_parallel_in_progress=allow_parallel_in_progress,
            owner=owner,
            owners=owners,
            function_of="Agent",
            remedy="owner= returned None: return the agent's owner key",
            flags={"remind_after_compaction": remind_after_compaction},
        )
        super().__init__()
        self.remind_after_compaction = remind_after_compaction
        self._tool = self._binding.tool
        self.owners = self._binding.owners
        # the dict Strands hands the model: ours, unchanged (its normalisation adds nothing)
        self._spec: ToolSpec = {
            "name": self._tool.name,
            "description": self._tool.description,
            "inputSchema": {"json": dict(self._tool.parameters)},
        }

    @property
    def tool_name(self) -> str:
        return self._tool.name

    @property
    def tool_spec(self) -> ToolSpec:
        return self._spec

    @property
    def tool_type(self) -> str:
        return "python"

    def owner_of(self, agent: Agent) -> str | None:
        """The owner key of ``agent``'s calls (``None``: no owner)."""
        key: str | None = self._binding.key(agent)
        return key

    async def stream(
        self, tool_use: ToolUse, invocation_state: dict[str, Any], **kwargs: Any
    ) -> AsyncGenerator[ToolResult, None]:
        """One call: a single ``ToolResult``, which Strands hands the model as it is."""
        agent = invocation_state.get("agent")
        key = None if agent is None else self.owner_of(agent)
        if key is None:
            outcome = self._binding.refused()
        else:
            call_id = tool_use["toolUseId"] or None
            outcome = await self._binding.acall(tool_use["input"], key, call_id=call_id)
        # A plain ToolResult (not Strands' private result event): the executor takes the
        # last value a tool yields as its result.
        yield {
            "toolUseId": tool_use["toolUseId"],
            "status": "error" if outcome.is_error else "success",
            "content": [{"text": outcome.text}],
        }

    def register_hooks(self, registry: HookRegistry, **kwargs: Any) -> None:
        """``Agent(hooks=[tool])``: ``turn/start`` for the agent's owner before each
        invocation (a new user request clears the plan); before each model call, the
        notice of what a person asked since the last one and, with
        ``remind_after_compaction``, the plan reminder when the messages no longer show
        the plan."""
        registry.add_callback(BeforeInvocationEvent, self._start_turn)
        registry.add_callback(BeforeModelCallEvent, self._remind)

    async def _start_turn(self, event: BeforeInvocationEvent) -> None:
        key = self.owner_of(event.agent)
        if key is not None:
            await self.owners.astart_turn(key)

    async def _remind(self, event: BeforeModelCallEvent) -> None:
        # Registered after the conversation manager's own hook (Strands adds the agent's
        # hooks last), so a proactive summary has already replaced the old messages.
        messages = event.agent.messages
        if not messages or messages[-1]["role"] != "user":
            return
        key = self.owner_of(event.agent)
        if key is None:
            return
        text = None
        if self.remind_after_compaction:
            plan = await aplan_of(self.owners, key)
            text = reminder_due(plan, _written(messages), _shown(messages))
        notice = await atold(self.owners, key)
        # Text blocks at the end of the newest (user) message, kept in agent.messages: every
        # message before it, and every later request's prefix, stays as it was. Each its own
        # block: the reminder is found again by its exact text.
        for shown in (text, notice):
            if shown is not None:
                messages[-1]["content"].append({"text": shown})


def _written(messages: Messages) -> list[object]:
    return [
        todos_of(block["toolUse"].get("input"))
        for message in messages
        if message["role"] == "assistant"
        for block in message["content"]
        if "toolUse" in block and block["toolUse"].get("name") == TOOL_NAME
    ]


def _shown(messages: Messages) -> list[str]:
    return [
        block["text"]
        for message in messages
        if message["role"] == "user"
        for block in message["content"]
        if "text" in block
    ]


def todo_write_strands_tool(
    *,
    allow_parallel_in_progress: bool,
    owner: str | OwnerOf,
    owners: OwnerRegistry | None = None,
    remind_after_compaction: bool = False,
) -> TodoWriteAgentTool:
    """The ``todo_write`` tool for Strands; each call's plan belongs to ``owner``.

    ``owner`` is a fixed owner key, or a function of the ``Agent`` running the call
    (e.g. ``lambda agent: agent.state.get("user")``). ``owners`` holds the sessions
    (default: an in-memory registry of the tool's own; pass your own to read plans
    back, or ``OwnerRegistry(directory)`` for durable plans). A call whose owner is
    ``None`` reads the tool's "requires an owning agent session" text, and the first
    such call logs a WARNING on the ``dsh_tool_todo`` logger.

    ``remind_after_compaction=True`` (opt-in; the tool must also be in ``hooks=``): before
    each model call whose messages no longer show the current plan (no ``todo_write``
    call, nor an earlier reminder, left after a conversation manager summarised or
    trimmed them), :func:`~dsh_tool_todo.plans.reminder.plan_reminder` is added once as a text
    block at the end of the newest message. Nothing before it changes.

    With the tool in ``hooks=``, what a person asked of the plan since the last model call
    (``docs/requests.md``) is told to the model the same way, once: the request notice, a
    text block of its own at the end of the newest message.
    """
    return TodoWriteAgentTool(
        allow_parallel_in_progress=allow_parallel_in_progress,
        owner=owner,
        owners=owners,
        remind_after_compaction=remind_after_compaction,
    )
