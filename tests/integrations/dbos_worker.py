"""A DBOS worker for tests/integrations/test_dbos.py: one durable agent run, or its recovery.

    python dbos_worker.py run|recover SYSTEM_DB_URL WORKFLOW_ID STORE KILL

STORE is ``jsonl:<path>`` or ``postgres:<session id>@<dsn>``. KILL names the point where
the process sends itself SIGKILL on a ``run`` (``none`` for an uninterrupted run):
``model:N`` during the N-th model step (0-based), ``append:N`` right after the N-th
``todo_write`` was recorded (before its result reaches the next model step's checkpoint),
``workflow`` between the workflow's start and its first step, ``turn`` inside the step that
appends ``turn/start``, after the append. ``recover`` launches DBOS,
which resumes the pending workflow, and waits for its result. The workflow's output is
printed as one JSON line.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from typing import Any

from dbos import DBOS, DBOSConfig, SetWorkflowID
from pydantic_ai import Agent
from pydantic_ai.durable_exec.dbos import DBOSDurability
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from dsh_tool_todo.core.contract import EVENT_TYPE
from dsh_tool_todo.integrations.pydantic_ai import todo_write_toolset

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dbos_plans import PLANS  # beside this script, shared with the test

MODE, SYSTEM_DB, WORKFLOW_ID, STORE, KILL = sys.argv[1:6]


def kill_at(point: str) -> None:
    if MODE == "run" and point == KILL:
        os.kill(os.getpid(), signal.SIGKILL)


def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """One todo_write per model step; a real provider's checkpointed response keeps its ids."""
    step = sum(isinstance(message, ModelResponse) for message in messages)
    kill_at(f"model:{step}")
    if step < len(PLANS):
        call = ToolCallPart("todo_write", {"todos": PLANS[step]}, tool_call_id=f"call_{step}")
        return ModelResponse(parts=[call])
    return ModelResponse(parts=[TextPart("Done.")])


class KillingSession:
    """The store's session, with the kill point right after a recorded append."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def append(self, type: str, data: Any) -> Any:
        event = self.inner.append(type, data)
        if type == "turn/start":
            kill_at("turn")
        elif type == EVENT_TYPE:
            kill_at(f"append:{int(data['callId'].removeprefix('call_'))}")
        return event


def open_store() -> Any:
    kind, _, where = STORE.partition(":")
    if kind == "jsonl":
        from dsh_tool_todo.stores.jsonl import JsonlSession

        return JsonlSession(where)
    from dsh_tool_todo.stores.postgres import PostgresSession

    session_id, _, dsn = where.partition("@")
    return PostgresSession(dsn, session_id)


SESSION = KillingSession(open_store())

agent = Agent(
    FunctionModel(scripted),
    name="planner",
    toolsets=[todo_write_toolset(allow_parallel_in_progress=False, session=lambda ctx: SESSION)],
    capabilities=[DBOSDurability()],
)


@DBOS.step()
def start_turn() -> None:
    # a step: recovery returns its checkpoint instead of opening a second turn, so the
    # call ids re-sent by the replay still fall in the turn their first appends opened
    SESSION.append("turn/start", {})


@DBOS.workflow()
async def plan_run(prompt: str) -> str:
    kill_at("workflow")
    start_turn()
    result = await agent.run(prompt)
    return result.output


async def main() -> str:
    if MODE == "run":
        with SetWorkflowID(WORKFLOW_ID):
            handle = await DBOS.start_workflow_async(plan_run, "Fix the parser bug")
        return await handle.get_result()
    handle = await DBOS.retrieve_workflow_async(WORKFLOW_ID)
    return await handle.get_result()


if __name__ == "__main__":
    config: DBOSConfig = {"name": "dsh-todo-dbos-test", "system_database_url": SYSTEM_DB}
    DBOS(config=config)
    DBOS.launch()
    try:
        output = asyncio.run(main())
    finally:
        DBOS.destroy(destroy_registry=True)
        SESSION.inner.close()
    print(json.dumps(output))
