"""Scripted models for pydantic-ai: ``FunctionModel`` bodies (scripted calls, a queue of
responses, a streamed one), and an OpenAI Chat Completions API answering from a script.

The function models answer ``todo_write`` calls on the first request(s) and text after;
the API stands behind pydantic-ai's real ``OpenAIChatModel``, so the tests see the bytes
a provider receives. The tests that use them take the ``no_model_requests`` fixture
(``tests/integrations/conftest.py``): nothing reaches a real model API.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any

import httpx2
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import Model, override_allow_model_requests
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel

# pydantic-ai's openai extra is not in every environment (.ci/run's AG-UI leg): import it late
if TYPE_CHECKING:
    from pydantic_ai.models.openai import OpenAIChatModel

Api = Callable[[httpx2.Request], httpx2.Response]


class Script:
    """A FunctionModel body: the first request gets the scripted calls, the next ones text.

    A call is its arguments (a mapping, or raw JSON text); its id is ``ids[i]``, by default
    ``c0``, ``c1``, ... in order.
    """

    def __init__(self, *calls: Mapping[str, Any] | str, ids: Sequence[str] = ()) -> None:
        self.calls = calls
        self.ids = list(ids) or [f"c{i}" for i in range(len(calls))]
        self.infos: list[AgentInfo] = []
        self.requests: list[list[ModelMessage]] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.infos.append(info)
        self.requests.append(list(messages))
        if len(self.requests) == 1 and self.calls:
            parts = [
                ToolCallPart("todo_write", dict(args) if isinstance(args, Mapping) else args, cid)
                for cid, args in zip(self.ids, self.calls, strict=True)
            ]
            return ModelResponse(parts=parts)
        return ModelResponse(parts=[TextPart("done")])

    def returns(self) -> list[ToolReturnPart]:
        """The tool results the model received in its second request."""
        last = self.requests[1][-1]
        assert isinstance(last, ModelRequest)
        return [part for part in last.parts if isinstance(part, ToolReturnPart)]


def replying(*responses: ModelResponse) -> FunctionModel:
    """A FunctionModel answering each request with the next of ``responses``."""
    queue = list(responses)

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return queue.pop(0)

    return FunctionModel(respond)


class StreamedScript:
    """A streamed FunctionModel body: one model turn of tool calls per step, then text.

    A call is its arguments, or a plan (a list) standing for ``{"todos": plan}``.
    """

    def __init__(self, *steps: list[Any]) -> None:
        self.steps = steps
        self.requests: list[list[ModelMessage]] = []

    async def __call__(
        self, messages: list[ModelMessage], info: AgentInfo
    ) -> AsyncIterator[str | DeltaToolCalls]:
        self.requests.append(list(messages))
        step = len(self.requests) - 1
        if step < len(self.steps):
            yield {
                i: DeltaToolCall(
                    name="todo_write",
                    json_args=json.dumps(args if isinstance(args, Mapping) else {"todos": args}),
                    tool_call_id=f"s{step}c{i}",
                )
                for i, args in enumerate(self.steps[step])
            }
        else:
            yield "done"

    def read_by_model(self) -> list[tuple[str, str, Any, str]]:
        """Every tool answer the model was sent: (call id, outcome, content, the text it reads)."""
        answers: list[tuple[str, str, Any, str]] = []
        for message in self.requests[-1]:
            if not isinstance(message, ModelRequest):
                continue
            for part in message.parts:
                assert not isinstance(part, RetryPromptPart), part
                if isinstance(part, ToolReturnPart):
                    answers.append(
                        (part.tool_call_id, part.outcome, part.content, part.model_response_str())
                    )
        return answers


def openai_chat_api(
    bodies: list[dict[str, Any]], calls: Sequence[tuple[str, Any]], *, text: str = "done"
) -> Api:
    """A Chat Completions API: request ``n`` gets the ``n``-th ``(tool name, arguments)``
    call (id ``c<n>``), the requests after them ``text``; each request's body goes to
    ``bodies``."""

    def answer(request: httpx2.Request) -> httpx2.Response:
        bodies.append(json.loads(request.content))
        number = len(bodies)
        if number <= len(calls):
            name, args = calls[number - 1]
            function = {"name": name, "arguments": json.dumps(args)}
            call = {"id": f"c{number}", "type": "function", "function": function}
            message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [call]}
            finish = "tool_calls"
        else:
            message, finish = {"role": "assistant", "content": text}, "stop"
        choice = {"index": 0, "finish_reason": finish, "message": message}
        body = {"id": "r", "object": "chat.completion", "created": 0, "model": "m"}
        return httpx2.Response(200, json={**body, "choices": [choice]})

    return answer


@asynccontextmanager
async def _model_on(api: Api, build: Callable[[httpx2.AsyncClient], Model]) -> AsyncIterator[Any]:
    async with httpx2.AsyncClient(transport=httpx2.MockTransport(api)) as client:
        with override_allow_model_requests(True):
            yield build(client)


def openai_chat_model(api: Api) -> AbstractAsyncContextManager[OpenAIChatModel]:
    """pydantic-ai's OpenAI chat model talking to ``api``, model requests allowed meanwhile."""
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    return _model_on(
        api,
        lambda client: OpenAIChatModel(
            "gpt-test", provider=OpenAIProvider(api_key="t", http_client=client)
        ),
    )


def run_on_openai_chat(
    calls: Sequence[tuple[str, Any]],
    agent_on: Callable[[Any], Agent[Any, Any]],
    prompt: str,
    deps: Any,
) -> tuple[list[list[bytes]], list[ModelMessage]]:
    """One run of the agent ``agent_on`` builds on :func:`openai_chat_model`, its API answering
    ``calls``, then "Fixed.". Each request as a provider receives it (one line of bytes a
    message, keys sorted), and the run's messages."""
    bodies: list[dict[str, Any]] = []

    async def run_once() -> list[ModelMessage]:
        async with openai_chat_model(openai_chat_api(bodies, calls, text="Fixed.")) as model:
            result = await agent_on(model).run(prompt, deps=deps)
            return result.all_messages()

    history = asyncio.run(run_once())
    requests = [
        [json.dumps(message, sort_keys=True).encode() for message in body["messages"]]
        for body in bodies
    ]
    return requests, history


def user_prompts(history: Sequence[ModelMessage]) -> list[Any]:
    """The content of every user prompt part of ``history``, in order."""
    return [
        part.content
        for message in history
        for part in message.parts
        if isinstance(part, UserPromptPart)
    ]


def anthropic_model(api: Api) -> AbstractAsyncContextManager[Model]:
    """pydantic-ai's Anthropic model talking to ``api``, model requests allowed meanwhile."""
    from pydantic_ai.models.anthropic import AnthropicModel
    from pydantic_ai.providers.anthropic import AnthropicProvider

    return _model_on(
        api,
        lambda client: AnthropicModel(
            "claude-test", provider=AnthropicProvider(api_key="t", http_client=client)
        ),
    )
