"""Adapters for the agent frameworks, one module each, each behind its own extra.

This package imports nothing optional: importing it costs nothing and works
with no extra installed. Import the adapter you use, e.g.
``from dsh_tool_todo.integrations.mcp import build_server``; a missing
framework raises :class:`~dsh_tool_todo.integrations._extras.MissingExtra`
naming the extra to install.

- :mod:`.mcp` — an MCP server (extra ``mcp``; ``dsh-todo mcp``)
- :mod:`.openai_agents` — a ``FunctionTool`` for the OpenAI Agents SDK (extra ``openai-agents``)
- :mod:`.langchain` — middleware for LangChain agents (extra ``langchain``)
- :mod:`.pydantic_ai` — a toolset for pydantic-ai agents (extra ``pydantic-ai``)
- :mod:`.otel` — an OpenTelemetry ``execute_tool`` span per call, every path (extra ``otel``)
- :mod:`.llama_index` — a ``FunctionTool`` for LlamaIndex agents (extra ``llama-index``)
- :mod:`.google_adk` — a ``BaseTool`` for Google ADK agents (extra ``google-adk``, Python 3.11+)
- :mod:`.strands` — a tool for Strands agents (extra ``strands``)
- :mod:`.claude_agent_sdk` — our MCP server in process for the Claude Agent SDK
  (extra ``claude-agent-sdk``)
- :mod:`.agent_framework` — a context provider for Microsoft Agent Framework agents
  (extra ``agent-framework``)
- :mod:`.crewai` — a ``BaseTool`` for CrewAI agents (extra ``crewai``; not in ``dev``)
- :mod:`.a2a` — plan artifacts on an A2A ``EventQueue`` (extra ``a2a``)
"""

from __future__ import annotations

from ._extras import MissingExtra

__all__ = ["MissingExtra"]
