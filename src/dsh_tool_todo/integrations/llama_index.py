"""LlamaIndex: ``todo_write_llama_tool``, a ``FunctionTool`` for ``FunctionAgent``,
``ReActAgent`` and ``AgentWorkflow``.

Use it as any other tool of an agent::

    from llama_index.core.agent.workflow import FunctionAgent
    tool = todo_write_llama_tool(
        allow_parallel_in_progress=False, owner=lambda ctx: ctx.store.get("user")
    )
    agent = FunctionAgent(llm=llm, tools=[tool])

What the model gets (extra ``llama-index``):

- exactly our name, description and parameters: the tool's metadata
  (:class:`TodoWriteMetadata`) answers ``get_parameters_dict()`` with our
  schema, which the request builders (``to_openai_tool()``, the ReAct prompt's
  ``fn_schema_str``) read; LlamaIndex's own ``ToolMetadata`` would keep only
  ``type``/``properties``/``required`` of a pydantic schema and drop our
  top-level ``additionalProperties: false``;
- the arguments the agent parsed go to this library's validation untouched;
- a ``ToolOutput`` whose content is the tool's text, with ``is_error=True``
  for a refusal and for a failure to record
  (:data:`~dsh_tool_todo.core.contract.NOT_RECORDED`, the cause logged on the
  ``dsh_tool_todo`` logger).

The owner is found from the workflow's ``Context`` (which the agent hands the
tool, and which lasts across runs when the host passes ``ctx=`` to
``agent.run``); its plan lives in an owner registry, and calls for one owner
are recorded one at a time. LlamaIndex does not tell a tool its call id, so
none is recorded. See ``docs/integrations/llama-index.md``.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from ..errors import UsageError
from ._binding import Binding, Outcome, OwnerRegistry
from ._extras import needs_extra

with needs_extra("dsh_tool_todo.integrations.llama_index", "llama-index", module="llama_index"):
    from llama_index.core.tools import FunctionTool, ToolMetadata, ToolOutput
    from llama_index.core.workflow import Context

__all__ = ["OwnerOf", "TodoWriteLlamaTool", "TodoWriteMetadata", "todo_write_llama_tool"]

OwnerOf = Callable[[Context], "str | Awaitable[str | None] | None"]
"""Finds a call's owner key from the workflow's ``Context`` (or an awaitable of it, e.g.
``lambda ctx: ctx.store.get("user")``); ``None``: the call has no owner."""

# The name the agent passes the Context under. Whatever the model sends under this name is
# replaced by the Context before the tool sees it, so it must not be a plausible argument
# (with "ctx", a model's {"todos": [...], "ctx": 1} would be recorded, not refused).
_CTX = "dsh_todo_ctx"


class TodoWriteMetadata(ToolMetadata):
    """``ToolMetadata`` whose parameters are this library's schema, as it is."""

    def get_parameters_dict(self) -> dict[str, Any]:
        return Binding.parameters()  # a fresh copy: a request builder may edit what it gets


class TodoWriteLlamaTool(FunctionTool):
    """The ``todo_write`` tool; build it with :func:`todo_write_llama_tool`.

    The agent passes the workflow's ``Context`` as ``dsh_todo_ctx`` (as to any
    ``FunctionTool`` whose function takes one); ``call`` is the sync path, for
    hosts calling the tool themselves (``tool.call(todos=[...], dsh_todo_ctx=ctx)``),
    ``acall`` the agents' path.
    """

    def __init__(self, binding: Binding) -> None:
        tool = binding.tool
        super().__init__(
            fn=self._unused,
            metadata=TodoWriteMetadata(description=tool.description, name=tool.name),
        )
        # The agent injects the Context into a FunctionTool that asks for one by annotation;
        # ours asks by name (the annotation is a string under postponed evaluation).
        self.requires_context = True
        self.ctx_param_name = _CTX
        self.todo_tool = tool
        self.owners = binding.owners
        self._binding = binding

    @staticmethod
    def _unused(**kwargs: Any) -> None:  # pragma: no cover - call/acall never reach it
        raise AssertionError("todo_write runs through call/acall")

    def call(self, *args: Any, **kwargs: Any) -> ToolOutput:
        ctx, arguments = self._split(args, kwargs)
        key = self._key(ctx)
        if inspect.isawaitable(key):
            if inspect.iscoroutine(key):
                key.close()  # never awaited: no "coroutine was never awaited" warning
            raise UsageError(
                "owner= returned an awaitable, which the sync call cannot wait for: "
                "use await tool.acall(...), or an owner function that returns the key"
            )
        if key is None:
            return self._output(self._binding.refused(), arguments)
        return self._output(self._binding.call(arguments, key), arguments)

    async def acall(self, *args: Any, **kwargs: Any) -> ToolOutput:
        ctx, arguments = self._split(args, kwargs)
        found = self._key(ctx)
        key = await found if inspect.isawaitable(found) else found
        if key is None:
            return self._output(self._binding.refused(), arguments)
        return self._output(await self._binding.acall(arguments, key), arguments)

    def _key(self, ctx: Any) -> str | Awaitable[str | None] | None:
        if isinstance(self._binding.owner, str):
            return self._binding.owner  # a fixed owner needs no Context
        return None if ctx is None else self._binding.key(ctx)

    def _split(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        if args:
            raise UsageError(
                "todo_write takes keyword arguments only: tool.call(todos=[...], dsh_todo_ctx=ctx)"
            )
        arguments = dict(kwargs)
        return arguments.pop(_CTX, None), arguments

    def _output(self, outcome: Outcome, arguments: dict[str, Any]) -> ToolOutput:
        return ToolOutput(
            content=outcome.text,
            tool_name=self.todo_tool.name,
            raw_input={"args": (), "kwargs": arguments},
            raw_output=outcome.text,
            is_error=outcome.is_error,
        )


def todo_write_llama_tool(
    *, allow_parallel_in_progress: bool, owner: str | OwnerOf, owners: OwnerRegistry | None = None
) -> TodoWriteLlamaTool:
    """The ``todo_write`` tool for a LlamaIndex agent; each call's plan belongs to ``owner``.

    ``owner`` is a fixed owner key, or a function of the workflow's
    ``Context`` returning one or an awaitable of one (e.g. ``lambda ctx:
    ctx.store.get("user")``, the key the host put in the context's store:
    one plan per conversation kept in that ``Context``). ``owners`` holds the
    sessions (default: an in-memory registry of this tool's own; pass your
    own to read plans back, or ``OwnerRegistry(directory)`` for durable plans).

    A call that finds no owner (the function returns ``None``, or no
    ``Context`` was passed) gets the tool's "requires an owning agent session"
    text, and the first such call logs a WARNING on the ``dsh_tool_todo`` logger.
    """
    binding = Binding(
        "todo_write_llama_tool",
        allow_parallel_in_progress=allow_parallel_in_progress,
        owner=owner,
        owners=owners,
        function_of="Context",
        remedy=(
            "owner= returned None, or the tool was called without ctx=: "
            "return the conversation's owner key from it"
        ),
    )
    return TodoWriteLlamaTool(binding)
