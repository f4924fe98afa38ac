"""The tool definition as each model API wants it, serialized byte-stable.

Keys follow :data:`.schema.KEY_ORDER` (type, name, description, then the schema), which
keeps the plain and Anthropic formats within 300 DeepSeek V4 tokens, and the OpenAI one
(which also carries ``"strict": true``) within 305, without touching a seed text.
"""

from __future__ import annotations

from typing import Any, Literal

from ..protocols import Tool
from .schema import compact_json

__all__ = ["FLAVORS", "Flavor", "definition_json", "tool_definition"]

Flavor = Literal["json", "openai", "anthropic"]
FLAVORS: tuple[Flavor, ...] = ("json", "openai", "anthropic")


def tool_definition(tool: Tool, flavor: Flavor = "json") -> dict[str, Any]:
    """``json``: name, description, parameters; ``openai``: a function tool as a
    strict-mode request carries it; ``anthropic``: a tool with ``input_schema``."""
    if flavor == "openai":
        # The schema is already in strict form (all required, no extra keys), and the
        # OpenAI Agents and pydantic-ai adapters send it with strict on: print what they send.
        function = {"name": tool.name, "description": tool.description}
        return {
            "type": "function",
            "function": {**function, "parameters": tool.parameters, "strict": True},
        }
    if flavor == "anthropic":
        return {
            "name": tool.name,
            "description": tool.description,
            "input_schema": tool.parameters,
        }
    return {"name": tool.name, "description": tool.description, "parameters": tool.parameters}


def definition_json(tool: Tool, flavor: Flavor = "json") -> str:
    """The definition's bytes, exactly as ``dsh-todo schema --format <flavor>`` prints them."""
    return compact_json(tool_definition(tool, flavor))
