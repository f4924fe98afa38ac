"""A scripted LangChain chat model: replays AI messages and records what each request carried.

LangChain's own fake tool-calling model lives in its test suite, not in the
package, so the integration tests bring this one: it accepts ``bind_tools`` (as
``create_agent`` requires), records the tool definitions exactly as LangChain
converts them for a provider, and answers from a script.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field


def tool_calls(*calls: tuple[str, dict[str, Any]]) -> AIMessage:
    """One model turn calling these tools, with ids ``call-0``, ``call-1``, ... in order."""
    return AIMessage(
        content="",
        tool_calls=[
            {"name": name, "args": args, "id": f"call-{index}", "type": "tool_call"}
            for index, (name, args) in enumerate(calls)
        ],
    )


def todo_write_call(args: Any) -> tuple[str, dict[str, Any]]:
    """A ``todo_write`` call for :func:`tool_calls`: its arguments, or a plan (a list) standing
    for ``{"todos": plan}``."""
    return ("todo_write", args if isinstance(args, dict) else {"todos": args})


class ScriptedChatModel(BaseChatModel):
    """Answers each request with the next scripted message (or ``script(messages)``)."""

    script: list[AIMessage] | Callable[[list[BaseMessage]], AIMessage]
    requests: list[list[BaseMessage]] = Field(default_factory=list)
    bound_tools: list[dict[str, Any]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(  # type: ignore[override]
        self, tools: Sequence[Any], *, tool_choice: str | None = None, **kwargs: Any
    ) -> Runnable[Any, AIMessage]:
        self.bound_tools = [convert_to_openai_tool(tool) for tool in tools]
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.requests.append(list(messages))
        if callable(self.script):
            message = self.script(messages)
        else:
            if not self.script:
                raise AssertionError("the model was called more often than scripted")
            message = self.script.pop(0)
        return ChatResult(generations=[ChatGeneration(message=message)])
