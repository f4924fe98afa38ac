"""Why the LlamaIndex adapter has no compaction reminder, measured through a real FunctionAgent.

Its agents read their memory once per run (``memory.aget()`` when the run starts) and keep
the run's tool calls in a scratchpad that nothing trims: every request of a run shows each
``todo_write`` of that run. A memory's token limit only drops messages of earlier runs, and
a new run is a new user turn, whose ``turn/start`` cleared their plan: there is no plan the
model lost, so nothing to re-surface.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import sys
from typing import Any

import pytest

if sys.version_info < (3, 11):  # pragma: no cover - dev installs llama-index on 3.11+ only
    pytest.skip("dev installs llama-index on Python 3.11+", allow_module_level=True)

from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ToolCallBlock
from llama_index.core.llms import ChatMessage, MessageRole
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.core.memory import ChatMemoryBuffer
from llama_index.core.tools import FunctionTool
from llama_index.core.workflow import Context

from dsh_tool_todo.integrations.llama_index import todo_write_llama_tool
from dsh_tool_todo.stores.owners import OwnerRegistry
from tests.conftest import todo

pytestmark = pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecationWarning")

PLAN_A = [todo("Read the code", "in_progress"), todo("Fix the bug")]
PLAN_B = [todo("Read the code", "completed"), todo("Fix the bug", "in_progress")]
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("todo_write", {"todos": PLAN_A}),
    ("todo_write", {"todos": PLAN_B}),
    ("look", {"path": "a.py"}),
    ("look", {"path": "b.py"}),
    ("look", {"path": "c.py"}),
]


def look(path: str) -> str:
    """Read a file."""
    return f"contents of {path}"


class Script:
    def __init__(self, steps: list[tuple[str, dict[str, Any]] | str]) -> None:
        self.steps = steps
        self.requests: list[list[bytes]] = []

    def __call__(self, messages: list[ChatMessage], **kwargs: Any) -> ChatMessage:
        self.requests.append([m.model_dump_json().encode() for m in messages])
        step = self.steps[len(self.requests) - 1]
        if isinstance(step, str):
            return ChatMessage(role=MessageRole.ASSISTANT, content=step)
        name, args = step
        call = ToolCallBlock(tool_call_id=f"call-{len(self.requests)}", tool_name=name)
        call.tool_kwargs = args
        return ChatMessage(role=MessageRole.ASSISTANT, blocks=[call])


def test_a_run_shows_its_writes_in_every_request_and_a_new_turn_has_no_plan() -> None:
    owners = OwnerRegistry()
    script = Script([*CALLS, "Fixed.", "Hello."])
    agent = FunctionAgent(
        llm=MockFunctionCallingLLM(response_generator=script),
        tools=[
            todo_write_llama_tool(allow_parallel_in_progress=False, owner="ada", owners=owners),
            FunctionTool.from_defaults(look),
        ],
        system_prompt="You fix bugs.",
    )
    memory = ChatMemoryBuffer.from_defaults()

    async def go() -> None:
        await owners.astart_turn("ada")
        await agent.run("Fix the parser bug", ctx=Context(agent), memory=memory)
        await owners.astart_turn("ada")  # the user speaks again: the plan clears
        await agent.run("Thanks!", ctx=Context(agent), memory=memory)

    asyncio.run(go())
    run = script.requests[:6]
    # Within the run, each request starts with every byte of the previous one, and each
    # one after the second write still shows it: nothing dropped the plan.
    for before, later in itertools.pairwise(run):
        assert later[: len(before)] == before
    write = json.dumps({"todos": PLAN_B}, separators=(",", ":")).encode()
    assert all(write in b"".join(request) for request in run[2:])
    # The next run is the next user turn: no plan is current, so none is there to show.
    latest = owners.session("ada").latest(["todo/write", "turn/start"])
    assert latest is not None
    assert latest["type"] == "turn/start"
