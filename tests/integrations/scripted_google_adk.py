"""A scripted Google ADK model: answers from a script and records what each request carried."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, Sequence
from typing import Any

from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.genai import types
from pydantic import Field


def calls_of(calls: Sequence[tuple[str, Any]], name: str = "todo_write") -> list[types.Part]:
    """One model turn calling ``name`` once per ``(call id, arguments)``."""
    return [
        types.Part(function_call=types.FunctionCall(id=cid, name=name, args=dict(args)))
        for cid, args in calls
    ]


def run_through(runner: Runner, text: str, *, user: str = "u") -> Any:
    """One user message ``text`` through ``runner``, in a session of its own, to the end; that
    session."""

    async def go() -> Any:
        session = await runner.session_service.create_session(
            app_name=runner.app_name, user_id=user
        )
        message = types.Content(role="user", parts=[types.Part(text=text)])
        async for _ in runner.run_async(user_id=user, session_id=session.id, new_message=message):
            pass
        return session

    return asyncio.run(go())


class ScriptedLlm(BaseLlm):
    """Answers each request with the next list of parts.

    ``requests`` keeps each request; ``request_lines`` the same request as Gemini reads it,
    one line of bytes per content, the system instruction first. With ``prompt_tokens``,
    each answer reports the prompt size ADK's compaction looks at: that many tokens by
    request number (1-based), 10 otherwise.
    """

    script: list[list[types.Part]]
    requests: list[LlmRequest] = Field(default_factory=list)
    request_lines: list[list[bytes]] = Field(default_factory=list)
    prompt_tokens: dict[int, int] | None = None

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.requests.append(llm_request)
        system = llm_request.config.system_instruction if llm_request.config else None
        self.request_lines.append(
            [json.dumps(system).encode()]
            + [
                json.dumps(c.model_dump(mode="json", exclude_none=True), sort_keys=True).encode()
                for c in llm_request.contents
            ]
        )
        content = types.Content(role="model", parts=self.script.pop(0))
        if self.prompt_tokens is None:
            yield LlmResponse(content=content)
            return
        count = self.prompt_tokens.get(len(self.requests), 10)
        usage = types.GenerateContentResponseUsageMetadata(prompt_token_count=count)
        yield LlmResponse(content=content, usage_metadata=usage)
