"""remind_after_compaction in a real ADK ``InMemoryRunner`` whose app compacts events on a token
threshold (``EventsCompactionConfig``); a scripted ``BaseLlm`` records each request's contents."""

from __future__ import annotations

import asyncio
import json
import sys

import pytest

from dsh_tool_todo.core.contract import EVENT_TYPE

if sys.version_info < (3, 11):  # pragma: no cover - the extra's marker leaves ADK out here
    pytest.skip("google-adk 2.x needs Python 3.11+", allow_module_level=True)

from google.adk.agents import LlmAgent
from google.adk.apps.app import App, EventsCompactionConfig
from google.adk.apps.llm_event_summarizer import LlmEventSummarizer
from google.adk.models.llm_request import LlmRequest
from google.adk.runners import InMemoryRunner
from google.genai import types

from dsh_tool_todo.integrations.google_adk import TodoWriteAdkTool
from dsh_tool_todo.plans.reminder import plan_reminder
from dsh_tool_todo.stores.owners import OwnerRegistry
from tests.integrations.compaction_scenario import (
    CALLS,
    PLAN_B,
    SUMMARY,
    SYSTEM,
    assert_unchanged_until_the_summary,
    reminder_text,
)
from tests.integrations.scripted_google_adk import ScriptedLlm, calls_of, run_through

THRESHOLD = 1000
# ADK marks its event compaction experimental, with a warning each new use reports
pytestmark = pytest.mark.filterwarnings(r"ignore:\[EXPERIMENTAL\]:UserWarning")


def look(path: str) -> str:
    """Read a file."""
    return f"contents of {path}"


def run_agent(*, remind: bool, compact: bool = True) -> list[list[bytes]]:
    calls = [calls_of([(f"call-{n}", args)], name) for n, (name, args) in enumerate(CALLS, 1)]
    # the fourth answer reports a prompt past the app's token threshold: ADK compacts then
    model = ScriptedLlm(
        model="scripted", script=[*calls, [types.Part(text="Fixed.")]], prompt_tokens={4: THRESHOLD}
    )
    summariser = ScriptedLlm(model="summary", script=[[types.Part(text=SUMMARY)]], prompt_tokens={})
    tool = TodoWriteAdkTool(allow_parallel_in_progress=False, owners=OwnerRegistry())
    agent = LlmAgent(
        name="fixer",
        model=model,
        instruction=SYSTEM,
        tools=[tool, look],
        before_model_callback=tool.remind_after_compaction if remind else None,
    )
    config = EventsCompactionConfig(
        summarizer=LlmEventSummarizer(llm=summariser),
        # past the threshold, all but the last call and its result are summarised
        token_threshold=THRESHOLD if compact else 10**9,
        event_retention_size=2,
    )
    runner = InMemoryRunner(app=App(name="a", root_agent=agent, events_compaction_config=config))
    run_through(runner, "Fix the parser bug", user="ada")
    return model.request_lines


def test_the_plan_is_re_surfaced_after_a_summary_and_no_earlier_byte_changes() -> None:
    plain = run_agent(remind=False)
    reminded = run_agent(remind=True)
    text = reminder_text()
    # the compaction replaced the old events, the writes with them
    assert_unchanged_until_the_summary(plain, reminded, summary_at=-1)
    # The reminder is a text part at the end of the newest content: every byte before that
    # content is as without it, the system instruction first and unchanged.
    assert reminded[4][:-1] == plain[4][:-1]
    assert reminded[4][0] == reminded[0][0]
    assert json.loads(reminded[0][0]).startswith(SYSTEM)
    newest = json.loads(reminded[4][-1])
    assert newest["parts"][-1] == {"text": text}
    assert {**newest, "parts": newest["parts"][:-1]} == json.loads(plain[4][-1])
    # ADK rebuilds the contents from its events: the next request starts with every byte of
    # this one before the reminder's content, and the reminder comes again at the end, once.
    assert reminded[5][: len(reminded[4]) - 1] == reminded[4][:-1]
    assert reminded[5][:-1] == plain[5][:-1]
    assert json.loads(reminded[5][-1])["parts"][-1] == {"text": text}
    assert b"".join(reminded[5]).count(json.dumps(text).encode()) == 1
    assert all(json.dumps(text).encode() not in b"".join(request) for request in plain)


def test_a_plan_the_contents_still_show_is_not_repeated() -> None:
    assert run_agent(remind=True, compact=False) == run_agent(remind=False, compact=False)


def test_a_new_turn_clears_the_plan_and_nothing_is_carried_over() -> None:
    owners = OwnerRegistry()
    owners.session("ada").append(EVENT_TYPE, {"todos": PLAN_B})
    tool = TodoWriteAdkTool(allow_parallel_in_progress=False, owner="ada", owners=owners)
    hello = types.Content(role="user", parts=[types.Part(text="hi")])
    request = LlmRequest(contents=[hello])
    asyncio.run(tool.remind_after_compaction(None, request))  # type: ignore[arg-type]
    assert [p.text for p in request.contents[-1].parts or []] == ["hi", plan_reminder(PLAN_B)]
    assert [p.text for p in hello.parts or []] == ["hi"]  # a copy: the event is unchanged
    owners.start_turn("ada")
    request = LlmRequest(contents=[hello])
    asyncio.run(tool.remind_after_compaction(None, request))  # type: ignore[arg-type]
    assert request.contents == [hello]
