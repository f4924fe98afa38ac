"""``todo_write`` for the Claude Agent SDK (Python): our MCP server, in process or over stdio.

In process, beside the agent::

    todo = todo_write_for_claude(allow_parallel_in_progress=False, owner=user_id, owners=owners)
    options = ClaudeAgentOptions(
        mcp_servers={"todo": todo.server}, hooks=todo.hooks, allowed_tools=[todo.tool_name]
    )

What the model gets (extra ``claude-agent-sdk``):

- ``todo.server`` is ``{"type": "sdk", "name": "todo", "instance": server}`` with this
  library's own low-level MCP server (:func:`~dsh_tool_todo.integrations.mcp.build_server`),
  which the SDK serves to Claude Code over its in-memory MCP bridge. Not
  ``create_sdk_mcp_server`` with ``@tool``: that server validates the arguments
  against the schema before the handler, so a refused call would read the SDK's
  ``Input validation error: ...`` instead of this library's text;
- the model calls ``mcp__todo__todo_write`` with our description and schema as they
  are; a refusal is an MCP result with ``isError: true`` and the refusal's text, a
  failure to record ``isError: true`` with
  :data:`~dsh_tool_todo.core.contract.NOT_RECORDED` (cause logged on ``dsh_tool_todo``);
- ``todo.hooks`` appends ``turn/start`` for the owner on each ``UserPromptSubmit``:
  a user prompt starts on an empty plan;
- what a person watching asked (docs/requests.md) reaches the model once, as the
  ``additionalContext`` of the next ``UserPromptSubmit`` or ``PostToolUse`` (of any tool),
  or in the result of the next ``todo_write`` call, whichever comes first;
- with ``remind_after_compaction=True`` (opt-in), ``todo.hooks`` also re-surfaces the plan
  after Claude Code compacted the conversation: ``PreCompact`` marks it, and the next
  ``PostToolUse`` (of any tool) returns the plan reminder as ``additionalContext``, which
  Claude Code adds after that tool's result.

No call id is recorded: the tool call reaches the server as an MCP ``tools/call``,
whose JSON-RPC id is per connection. :func:`stdio_config` is the same server as a
``dsh-todo mcp`` process. See ``docs/integrations/claude-agent-sdk.md``.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..core.contract import TOOL_NAME
from ..errors import UsageError
from ._binding import Binding, OwnerRegistry
from ._extras import needs_extra
from ._notice import atold
from ._reminder import aplan_of, reminder_due, todos_of

with needs_extra(
    "dsh_tool_todo.integrations.claude_agent_sdk", "claude-agent-sdk", module="claude_agent_sdk"
):
    from claude_agent_sdk.types import (
        HookCallback,
        HookContext,
        HookEvent,
        HookInput,
        HookJSONOutput,
        HookMatcher,
        McpSdkServerConfig,
        McpStdioServerConfig,
    )

    from .mcp import build_server

__all__ = ["ClaudeTodo", "stdio_config", "todo_write_for_claude"]

SERVER_KEY = "todo"
"""The server's name in ``mcp_servers``: Claude Code names the tool ``mcp__todo__todo_write``."""


@dataclass(frozen=True)
class ClaudeTodo:
    """What ``ClaudeAgentOptions`` takes: the server, the turn hook, the tool's name."""

    server: McpSdkServerConfig
    hooks: dict[HookEvent, list[HookMatcher]]
    owners: OwnerRegistry
    owner: str
    tool_name: str = field(default=f"mcp__{SERVER_KEY}__{TOOL_NAME}")


def todo_write_for_claude(
    *,
    allow_parallel_in_progress: bool,
    owner: str,
    owners: OwnerRegistry | None = None,
    remind_after_compaction: bool = False,
) -> ClaudeTodo:
    """``todo_write`` as an in-process MCP server whose plan belongs to ``owner`` of ``owners``.

    One per ``ClaudeSDKClient`` (or ``query``): the server has one owner, the client's
    user or conversation. ``owners`` defaults to an in-memory registry of its own; pass
    yours to read the plan back, or ``OwnerRegistry(directory)`` to keep it on disk.

    ``remind_after_compaction=True`` (opt-in) adds two hooks. Claude Code compacts the
    conversation itself and shows a hook none of its messages, so the signal is its
    ``PreCompact`` event: from then on the plan counts as no longer shown, and the next
    ``PostToolUse`` answers with :func:`~dsh_tool_todo.plans.reminder.plan_reminder` as
    ``additionalContext`` (once; nothing when the plan is empty, or when that tool call is
    a ``todo_write`` of the current plan, which shows it).

    What a person watching asked (docs/requests.md) is told once, always: see the module.
    """
    registry = Binding(
        "todo_write_for_claude",
        allow_parallel_in_progress=allow_parallel_in_progress,
        owner=owner,
        owners=owners,
        flags={"remind_after_compaction": remind_after_compaction},
    ).owners
    server = build_server(
        allow_parallel_in_progress=allow_parallel_in_progress, owners=registry, owner=owner
    )
    compacted = False  # from a PreCompact until the next PostToolUse

    async def start_turn(
        input: HookInput, tool_use_id: str | None, context: HookContext
    ) -> HookJSONOutput:
        nonlocal compacted
        compacted = False  # a new turn: its plan is empty, nothing to re-surface
        await registry.astart_turn(owner)
        # no decision: the prompt goes on as the user wrote it, and what a person asked for
        # the new turn (an item to add, a note) after it
        return _context("UserPromptSubmit", await atold(registry, owner))

    async def before_compaction(
        input: HookInput, tool_use_id: str | None, context: HookContext
    ) -> HookJSONOutput:
        nonlocal compacted
        compacted = True
        return {}  # nothing about how Claude Code compacts changes

    async def remind(
        input: HookInput, tool_use_id: str | None, context: HookContext
    ) -> HookJSONOutput:
        nonlocal compacted
        if not compacted or input["hook_event_name"] != "PostToolUse":
            return {}
        compacted = False
        written = [todos_of(input["tool_input"])] if input["tool_name"] == tool_name else []
        text = reminder_due(await aplan_of(registry, owner), written, [])
        return _context("PostToolUse", text)

    tell = _telling(registry, owner)
    tool_name = f"mcp__{SERVER_KEY}__{TOOL_NAME}"
    hooks: dict[HookEvent, list[HookMatcher]] = {
        "UserPromptSubmit": [HookMatcher(hooks=[start_turn])]
    }
    hooks["PostToolUse"] = [HookMatcher(hooks=[tell])]
    if remind_after_compaction:
        hooks["PreCompact"] = [HookMatcher(hooks=[before_compaction])]
        hooks["PostToolUse"] = [HookMatcher(hooks=[remind, tell])]
    return ClaudeTodo(
        server={"type": "sdk", "name": SERVER_KEY, "instance": server},
        hooks=hooks,
        owners=registry,
        owner=owner,
    )


def _telling(registry: OwnerRegistry, owner: str) -> HookCallback:
    """The ``PostToolUse`` hook telling what a person asked: one of its own beside the
    reminder's, so Claude Code adds the two texts apart, never as one."""

    async def tell(
        input: HookInput, tool_use_id: str | None, context: HookContext
    ) -> HookJSONOutput:
        if input["hook_event_name"] != "PostToolUse":
            return {}
        return _context("PostToolUse", await atold(registry, owner))

    return tell


def _context(event: Literal["UserPromptSubmit", "PostToolUse"], text: str | None) -> HookJSONOutput:
    """A hook's answer adding ``text`` after what the event shows the model (``{}``: nothing)."""
    if text is None:
        return {}
    if event == "PostToolUse":  # one branch per event: the SDK types each answer by its event
        return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}


def stdio_config(
    *,
    allow_parallel_in_progress: bool,
    log_dir: str | Path | None = None,
    owner: str = "mcp",
) -> McpStdioServerConfig:
    """``dsh-todo mcp`` as a stdio server for ``mcp_servers`` (absolute paths, as
    ``dsh-todo mcp --print-config`` prints): a process per client; with ``log_dir``,
    the plan is kept in ``log_dir/<owner>.jsonl``, an absolute path (the client starts
    the server from a directory of its own)."""
    from ..cli._mcp import check_mcp_server, mcp_client_config

    Binding.check_owner("stdio_config", owner)
    if log_dir is not None:
        if not isinstance(log_dir, (str, os.PathLike)) or not str(log_dir).strip():
            raise UsageError(
                f"stdio_config: log_dir= takes the directory of the session logs, an absolute "
                f"path (or None: the plan in memory), not {log_dir!r}"
            )
        if not Path(log_dir).expanduser().is_absolute():
            raise UsageError(
                f"stdio_config: log_dir={str(log_dir)!r} is relative, and the client starts "
                f"the server from a directory of its own: pass an absolute path, e.g. "
                f"Path({str(log_dir)!r}).resolve()"
            )
        log_dir = Path(log_dir).expanduser()
    args = argparse.Namespace(
        parallel=allow_parallel_in_progress,
        log_dir=None if log_dir is None else str(log_dir),
        owner=owner,
        wait_owner=None,
    )
    check_mcp_server(args, "stdio_config: log_dir=")
    command: dict[str, Any] = mcp_client_config(args)["mcpServers"]["todo"]
    return {"type": "stdio", "command": command["command"], "args": command["args"]}
