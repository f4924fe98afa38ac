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

import pytest

from dsh_tool_todo.core.contract import EVENT_TYPE

if sys.version_info < (3, 11):  # pragma: no cover - dev installs llama-index on 3.11+ only
    pytest.skip("dev installs llama-index on Python 3.11+", allow_module_level=True)

from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.core.memory import ChatMemoryBuffer
from llama_index.core.tools import FunctionTool
from llama_index.core.workflow import Context

from dsh_tool_todo.integrations.llama_index import todo_write_llama_tool
from dsh_tool_todo.stores.owners import OwnerRegistry
from tests._builders import PLAN_B
from tests.integrations.compaction_scenario import CALLS
from tests.integrations.scripted_llama_index import Script, tool_call_steps

pytestmark = pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecationWarning")


def look(path: str) -> str:
    """Read a file."""
    return f"contents of {path}"


def test_a_run_shows_its_writes_in_every_request_and_a_new_turn_has_no_plan() -> None:
    owners = OwnerRegistry()
    script = Script(*tool_call_steps(CALLS), "Fixed.", "Hello.")
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
    run = script.request_lines[:6]
    # Within the run, each request starts with every byte of the previous one, and each
    # one after the second write still shows it: nothing dropped the plan.
    for before, later in itertools.pairwise(run):
        assert later[: len(before)] == before
    write = json.dumps({"todos": PLAN_B}, separators=(",", ":")).encode()
    assert all(write in b"".join(request) for request in run[2:])
    # The next run is the next user turn: no plan is current, so none is there to show.
    latest = owners.session("ada").latest([EVENT_TYPE, "turn/start"])
    assert latest is not None
    assert latest["type"] == "turn/start"
