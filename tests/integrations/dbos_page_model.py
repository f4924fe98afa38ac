"""The model docs/integrations/durable.md's recipe runs with in tests/integrations/test_dbos.py.

The page's code is run as printed but for its model: this one makes one ``todo_write`` per
model step (the plans of ``dbos_plans``), with ids of its own as a real provider's response
carries them, then answers "Done.". With ``DSH_TODO_TEST_HOLD_AT=N`` in the environment,
model step N never answers: the test kills the process there, from outside, with SIGKILL.
"""

from __future__ import annotations

import os
import threading

from dbos_plans import PLANS
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

HOLD_AT = os.environ.get("DSH_TODO_TEST_HOLD_AT")


def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    step = sum(isinstance(message, ModelResponse) for message in messages)
    if HOLD_AT is not None and step == int(HOLD_AT):
        threading.Event().wait()  # the step in flight when the process is killed
    if step < len(PLANS):
        call = ToolCallPart("todo_write", {"todos": PLANS[step]}, tool_call_id=f"call_{step}")
        return ModelResponse(parts=[call])
    return ModelResponse(parts=[TextPart("Done.")])


MODEL = FunctionModel(scripted)
