"""A person's request reaches the next model request, once, in a real ADK ``InMemoryRunner``
with a scripted ``BaseLlm``: the tool adds the notice while ADK builds the request."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

if sys.version_info < (3, 11):  # pragma: no cover - the extra's marker leaves ADK out here
    pytest.skip("google-adk 2.x needs Python 3.11+", allow_module_level=True)

from google.adk.agents import LlmAgent
from google.adk.runners import InMemoryRunner
from google.genai import types

from dsh_tool_todo.integrations.google_adk import TodoWriteAdkTool
from dsh_tool_todo.plans.reminder import plan_reminder
from tests.integrations import requests_scenario as scenario
from tests.integrations.scripted_google_adk import ScriptedLlm, calls_of, run_through


def run_agent(directory: Path, *, asked: bool) -> ScriptedLlm:
    """One user message; the model answers with a write that honours the request, then text."""
    model = ScriptedLlm(
        model="scripted",
        script=[calls_of([("w1", scenario.HONOURED)]), [types.Part(text="Done.")]],
    )
    with scenario.planned_owner(directory, asked=asked) as owners:
        tool = TodoWriteAdkTool(
            allow_parallel_in_progress=False, owner=scenario.OWNER, owners=owners
        )
        agent = LlmAgent(name="fixer", model=model, tools=[tool])
        run_through(InMemoryRunner(agent=agent, app_name="a"), scenario.PROMPT)
    return model


def test_the_notice_is_the_last_part_of_the_next_request_once(tmp_path: Path) -> None:
    asked = run_agent(tmp_path / "asked", asked=True).request_lines
    plain = run_agent(tmp_path / "plain", asked=False).request_lines
    told = scenario.notice()
    text = json.dumps(told).encode()
    # every content before the newest is as without the request; the newest gains one part
    assert asked[0][:-1] == plain[0][:-1]
    newest = json.loads(asked[0][-1])
    assert newest["parts"][-1] == {"text": told}
    assert {**newest, "parts": newest["parts"][:-1]} == json.loads(plain[0][-1])
    assert b"".join(asked[0]).count(text) == 1
    # told once: ADK builds the next request from its events, which never held it
    assert asked[1] == plain[1]
    assert text not in b"".join(asked[1])


def test_the_notice_and_the_reminder_are_parts_of_their_own(tmp_path: Path) -> None:
    owners, log = scenario.planned(tmp_path)
    scenario.ask(log)
    tool = TodoWriteAdkTool(allow_parallel_in_progress=False, owner=scenario.OWNER, owners=owners)
    model = ScriptedLlm(model="scripted", script=[[types.Part(text="Later.")]])
    agent = LlmAgent(
        name="fixer", model=model, tools=[tool], before_model_callback=tool.remind_after_compaction
    )
    run_through(InMemoryRunner(agent=agent, app_name="a"), "Go on")
    owners.close()
    # no write in the contents shows the plan, so the reminder is due too: never joined
    (content,) = model.requests[0].contents
    assert [part.text for part in content.parts or []] == [
        "Go on",
        scenario.notice(),
        plan_reminder(scenario.PLAN),
    ]
