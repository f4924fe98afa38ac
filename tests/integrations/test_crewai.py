"""The CrewAI adapter, through CrewAI's real Crew and Agent loop with a scripted LLM.

The model is a ``crewai.llms.base_llm.BaseLLM`` subclass with native function
calling: it reads the request CrewAI builds (the messages and the OpenAI-style
tool list) and answers tool calls or a text; everything in between (the agent
executor, the tool calls, the failure policy) is CrewAI's. The dev environment
does not install crewai (conftest.py leaves this file out there); .ci/run runs
it in an environment of its own, where a missing crewai fails the import.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from dsh_tool_todo.core.contract import EVENT_TYPE

# no telemetry or tracing calls from the tests (CrewAI's own opt-outs)
os.environ.setdefault("CREWAI_DISABLE_TELEMETRY", "true")
os.environ.setdefault("OTEL_SDK_DISABLED", "true")
os.environ.setdefault("CREWAI_TRACING_ENABLED", "false")

with warnings.catch_warnings():
    # crewai.rag refuses the attribute the import system sets for a submodule
    warnings.filterwarnings("ignore", "Cannot set an attribute on 'crewai.rag'", ImportWarning)
    from crewai import Agent, Crew, Task
    from crewai.hooks import register_before_llm_call_hook, unregister_before_llm_call_hook
    from crewai.llms.base_llm import BaseLLM
    from crewai.tools import BaseTool
    from crewai.utilities.pydantic_schema_utils import (
        sanitize_tool_params_for_anthropic_strict,
        sanitize_tool_params_for_openai_strict,
    )
from pydantic import Field

from dsh_tool_todo import todo_write_tool
from dsh_tool_todo.core import contract
from dsh_tool_todo.core.schema import parameters
from dsh_tool_todo.errors import UsageError
from dsh_tool_todo.integrations.crewai import TodoWriteCrewTool
from dsh_tool_todo.plans.reminder import plan_reminder
from dsh_tool_todo.stores.memory import MemorySession
from dsh_tool_todo.stores.owners import OwnerRegistry
from tests.integrations import requests_scenario as scenario
from tests.integrations.adapter_contract import CHECKS, Driver, RecordingSession, Reply, opener
from tests.integrations.readme_rows import PLAN as README_PLAN
from tests.integrations.readme_rows import READMES, assert_shown, recording_home, row

# CrewAI reads its own deprecated fields while building agents and crews
pytestmark = [
    pytest.mark.filterwarnings("ignore:function_calling_llm is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:deprecated:DeprecationWarning:crewai"),
]

ROOT = Path(__file__).resolve().parents[2]
PLAN = {"todos": [{"content": "Read the code", "status": "in_progress"}]}


def call(call_id: str, args: Any) -> dict[str, Any]:
    """One tool call as an OpenAI-style provider returns it to CrewAI."""
    raw = args if isinstance(args, str) else json.dumps(args)
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": "todo_write", "arguments": raw},
    }


class ScriptedLLM(BaseLLM):
    """Answers each request with the next step: a list of tool calls, or a text."""

    script: list[Any] = Field(default_factory=list)
    requests: list[dict[str, Any]] = Field(default_factory=list)

    def call(  # type: ignore[override]
        self, messages: Any, tools: Any = None, *args: Any, **kwargs: Any
    ) -> Any:
        self.requests.append(
            {"messages": json.loads(json.dumps(messages, default=str)), "tools": tools}
        )
        return self.script.pop(0)

    def supports_function_calling(self) -> bool:
        return True

    def get_context_window_size(self) -> int:
        return 100_000


def crew_of(tool: BaseTool, llm: ScriptedLLM, **crew: Any) -> Crew:
    agent = Agent(role="planner", goal="plan", backstory="plans", llm=llm, tools=[tool])
    task = Task(description="Plan it", expected_output="a plan", agent=agent)
    return Crew(agents=[agent], tasks=[task], **crew)


def run(tool: BaseTool, steps: Sequence[Any]) -> ScriptedLLM:
    llm = ScriptedLLM(model="scripted", script=[*steps, "done"])
    crew_of(tool, llm).kickoff()
    assert llm.script == []
    return llm


def tool_messages(llm: ScriptedLLM, request: int = -1) -> dict[str, str]:
    """The tool results the model read in a request (the last one), by call id."""
    return {
        message["tool_call_id"]: message["content"]
        for message in llm.requests[request]["messages"]
        if message["role"] == "tool"
    }


class CrewAIDriver:
    call_ids = False  # CrewAI hands a tool its arguments only

    def offered(self, *, parallel: bool) -> tuple[str, str, Mapping[str, Any]]:
        tool = TodoWriteCrewTool(allow_parallel_in_progress=parallel, owner="me")
        (offered,) = run(tool, []).requests[0]["tools"]
        function = offered["function"]
        return function["name"], function["description"], function["parameters"]

    def turn(self, calls: Sequence[tuple[str, Any]], session: Any) -> list[Reply]:
        owners = OwnerRegistry(open_session=opener(session))
        tool = TodoWriteCrewTool(allow_parallel_in_progress=False, owner="me", owners=owners)
        steps = [[call(cid, args) for cid, args in calls]] if calls else []
        read = tool_messages(run(tool, steps))
        return [Reply(read[cid], None) for cid, _ in calls]  # a tool message has no flag


DRIVER: Driver = CrewAIDriver()


@pytest.mark.parametrize(
    "check",
    [c for name, c in CHECKS.items() if name not in ("repeated_call_id", "serialised")],
)
def test_adapter_contract(check: Any) -> None:
    check(DRIVER)


def test_the_request_carries_our_schema_and_crewai_adds_only_strict() -> None:
    tool = TodoWriteCrewTool(allow_parallel_in_progress=False, owner="me")
    (offered,) = run(tool, []).requests[0]["tools"]
    assert offered == {
        "type": "function",
        "function": {
            "name": "todo_write",
            "description": contract.DESCRIPTION_SINGLE,
            "parameters": parameters(),
            "strict": True,
        },
    }
    # what CrewAI's OpenAI and Anthropic providers send in strict mode: the same schema
    assert sanitize_tool_params_for_openai_strict(parameters()) == parameters()
    assert sanitize_tool_params_for_anthropic_strict(parameters()) == parameters()


def test_a_refusal_is_a_tool_failure_with_our_text_and_the_model_recovers() -> None:
    session = MemorySession()
    owners = OwnerRegistry(open_session=lambda key: session)
    tool = TodoWriteCrewTool(allow_parallel_in_progress=False, owner="me", owners=owners)
    llm = ScriptedLLM(
        model="scripted",
        script=[[call("bad", '{"todos": "all of it"}')], [call("good", PLAN)], "done"],
    )
    crew = crew_of(tool, llm)
    output = crew.kickoff()
    refused = tool_messages(llm, 1)["bad"]
    expected = todo_write_tool(allow_parallel_in_progress=False).call(
        {"todos": "all of it"}, MemorySession()
    )
    assert refused == expected
    assert tool_messages(llm)["good"] == "Updated todo list: 0 pending, 1 in progress, 0 completed."
    assert [event["data"] for event in session.events] == [PLAN]
    # CrewAI records the refusal as the tool's failure (its default policy: warn, go on)
    (failure,) = output.tasks_output[0].tool_failures
    assert (failure.tool_name, failure.message) == ("todo_write", refused)


def test_calls_of_one_message_are_recorded_one_at_a_time_in_call_order() -> None:
    plans = [{"todos": [{"content": f"Step {n}", "status": "pending"}]} for n in range(5)]
    session = SlowSession()
    owners = OwnerRegistry(open_session=lambda key: session)
    tool = TodoWriteCrewTool(allow_parallel_in_progress=False, owner="me", owners=owners)
    llm = run(tool, [[call(f"c{n}", plan) for n, plan in enumerate(plans)]])
    assert set(tool_messages(llm).values()) == {
        "Updated todo list: 1 pending, 0 in progress, 0 completed."
    }
    assert not session.overlapped
    assert [data["todos"] for data in session.data] == [plan["todos"] for plan in plans]


class SlowSession(RecordingSession):
    """A sync ``append`` that sleeps mid-write and notes any overlapping append."""

    def __init__(self) -> None:
        super().__init__()
        self.active = 0
        self.overlapped = False
        self.guard = threading.Lock()

    def append(self, type: str, data: Mapping[str, Any], /) -> dict[str, Any]:
        with self.guard:
            self.active += 1
            self.overlapped |= self.active > 1
        time.sleep(0.01)
        with self.guard:
            self.active -= 1
        return super().append(type, data)


def test_the_same_list_again_is_recorded_again_not_answered_from_the_cache() -> None:
    session = MemorySession()
    owners = OwnerRegistry(open_session=lambda key: session)
    tool = TodoWriteCrewTool(allow_parallel_in_progress=False, owner="me", owners=owners)
    other = {"todos": [{"content": "Write the fix", "status": "in_progress"}]}
    llm = ScriptedLLM(
        model="scripted", script=[[call("a", PLAN)], [call("b", other)], [call("c", PLAN)], "done"]
    )
    agent = Agent(role="p", goal="g", backstory="b", llm=llm, tools=[tool], cache=True)
    task = Task(description="Plan it", expected_output="a plan", agent=agent)
    Crew(agents=[agent], tasks=[task], cache=True).kickoff()
    assert [event["data"] for event in session.events] == [PLAN, other, PLAN]


@pytest.mark.filterwarnings("ignore:method callbacks cannot be serialized:UserWarning")
def test_before_kickoff_starts_a_turn_at_each_kickoff() -> None:
    owners = OwnerRegistry()
    tool = TodoWriteCrewTool(allow_parallel_in_progress=False, owner="ada", owners=owners)
    llm = ScriptedLLM(model="scripted", script=[[call("c1", PLAN)], "planned", "hello"])
    crew = crew_of(tool, llm, before_kickoff_callbacks=[tool.before_kickoff])
    crew.kickoff(inputs={"topic": "x"})
    types = [event["type"] for event in owners.session("ada").events]
    assert types == ["turn/start", EVENT_TYPE]
    crew.kickoff()
    types = [event["type"] for event in owners.session("ada").events]
    assert types == ["turn/start", EVENT_TYPE, "turn/start"]
    assert owners.session("ada").latest([EVENT_TYPE, "turn/start"])["type"] == "turn/start"


def test_an_agent_kickoff_alone_runs_the_tool_too() -> None:
    owners = OwnerRegistry()
    tool = TodoWriteCrewTool(allow_parallel_in_progress=False, owner="ada", owners=owners)
    llm = ScriptedLLM(model="scripted", script=[[call("c1", PLAN)], "planned"])
    agent = Agent(role="planner", goal="plan", backstory="plans", llm=llm, tools=[tool])
    tool.start_turn()
    agent.kickoff("Plan it")
    assert [event["type"] for event in owners.session("ada").events] == [
        "turn/start",
        EVENT_TYPE,
    ]
    assert llm.script == []


def test_a_failing_store_reads_not_recorded_and_logs_the_cause(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Full(RecordingSession):
        def append(self, type: str, data: Mapping[str, Any], /) -> dict[str, Any]:
            raise OSError(28, "No space left on device")

    owners = OwnerRegistry(open_session=lambda key: Full())
    tool = TodoWriteCrewTool(allow_parallel_in_progress=False, owner="me", owners=owners)
    with caplog.at_level(logging.ERROR, logger="dsh_tool_todo"):
        llm = run(tool, [[call("c1", PLAN)]])
    assert tool_messages(llm)["c1"] == contract.NOT_RECORDED
    assert "No space left on device" in caplog.text


def test_the_owner_must_be_a_key() -> None:
    with pytest.raises(
        UsageError, match=r"^TodoWriteCrewTool: owner= takes an owner key \(a non-empty str\)"
    ):
        TodoWriteCrewTool(allow_parallel_in_progress=False, owner="")
    with pytest.raises(
        UsageError, match=r"^TodoWriteCrewTool: owner= takes an owner key \(a non-empty str\)"
    ):
        TodoWriteCrewTool(allow_parallel_in_progress=False, owner=lambda agent: "ada")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=r"^TodoWriteCrewTool: owners= takes .*, not dict"):
        TodoWriteCrewTool(allow_parallel_in_progress=False, owner="ada", owners={})  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="keyword arguments only"):
        TodoWriteCrewTool(allow_parallel_in_progress=False, owner="me").run(PLAN)


@pytest.mark.parametrize("readme", READMES)
def test_the_readme_row(readme: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's CrewAI row as printed, DSH_TODO_HOME naming the place: its plan is found
    with no source given (test_readme_rows.py follows the other rows)."""
    lines = row(readme, "crewai")
    llm = ScriptedLLM(model="scripted", script=[[call("c1", {"todos": README_PLAN})], "On it."])
    namespace: dict[str, Any] = {"user_id": "ada", "model": llm}
    with recording_home(monkeypatch, tmp_path):
        exec("from crewai import Agent\n" + lines.code, namespace)
        task = Task(description="Fix it", expected_output="a fix", agent=namespace["agent"])
        namespace["todo"].start_turn()  # as the line's comment says
        Crew(agents=[namespace["agent"]], tasks=[task]).kickoff()
    assert_shown(tmp_path, lines.watch, "ada")


PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def run_blocks(blocks: Sequence[str], where: Path) -> str:
    """``blocks`` as one script in an empty directory, under ``-W error`` and the one filter
    the page tells a reader to add for it (crewai.rag's ImportWarning); its stdout."""
    import subprocess
    import sys

    page = (ROOT / "docs" / "integrations" / "crewai.md").read_text(encoding="utf-8")
    printed = re.findall(r'-W "(ignore:[^"]+:ImportWarning)"', page)
    assert printed, "the page names the -W filter for crewai.rag's ImportWarning"
    script = where / "example.py"
    script.write_text("\n".join(blocks), encoding="utf-8")
    run = subprocess.run(
        [sys.executable, "-W", "error", "-W", printed[0], str(script)],
        cwd=where,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    return run.stdout


def test_the_docs_page_runs_as_printed(tmp_path: Path) -> None:
    """docs/integrations/crewai.md's blocks, as tests/test_docs.py runs every other page's."""
    page = (ROOT / "docs" / "integrations" / "crewai.md").read_text(encoding="utf-8")
    blocks = PYTHON_BLOCK.findall(page)
    assert blocks
    run_blocks(blocks, tmp_path)


def test_the_end_to_end_section_runs_alone_and_shows_the_reminder(tmp_path: Path) -> None:
    """Its blocks need nothing from the page above them, and the scripted LLM's ``acall``
    lets CrewAI summarise, so the compaction reminder is seen from the page."""
    page = (ROOT / "docs" / "integrations" / "crewai.md").read_text(encoding="utf-8")
    section = page.partition("\n## End to end\n")[2].partition("\n## ")[0]
    blocks = PYTHON_BLOCK.findall(section)
    assert len(blocks) == 2
    shown = run_blocks(blocks, tmp_path)
    reminder = plan_reminder([{"content": "Draft the notes", "status": "in_progress"}])
    assert reminder is not None
    assert reminder in shown
    assert shown.startswith("Error: ")  # the refusal the first block prints


def test_the_docs_page_imports_only_what_it_says_to_install() -> None:
    """tests/test_docs.py's check of every other page, here: dev does not install crewai."""
    from tests.test_docs import test_each_example_imports_only_what_its_page_says_to_install

    test_each_example_imports_only_what_its_page_says_to_install(
        ROOT / "docs" / "integrations" / "crewai.md"
    )


def test_the_module_declares_its_api() -> None:
    """tests/test_public_modules.py's check, here: dev does not install crewai."""
    import dsh_tool_todo.integrations.crewai as module

    assert module.__all__ == ["TodoWriteArguments", "TodoWriteCrewTool"]
    assert all(hasattr(module, name) for name in module.__all__)


def test_the_installed_crewai_is_within_the_extras_range() -> None:
    from importlib.metadata import version

    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    declared = re.search(r'^crewai = \["crewai>=([\d.]+),<(\d+)"\]$', pyproject, re.M)
    assert declared is not None
    floor, ceiling = declared.groups()
    installed = tuple(int(part) for part in version("crewai").split(".")[:3])
    assert tuple(int(part) for part in floor.split(".")) <= installed < (int(ceiling),)


class CompactingLLM(ScriptedLLM):
    """A step that is an exception is raised (a context overflow); ``acall`` summarises."""

    def call(self, messages: Any, tools: Any = None, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        answer = super().call(messages, tools, *args, **kwargs)
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def acall(self, messages: Any, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        return "<summary>The user asked for a plan; one was written.</summary>"


def test_remind_shows_the_plan_again_after_crewais_summary_and_only_then() -> None:
    owners = OwnerRegistry()
    tool = TodoWriteCrewTool(allow_parallel_in_progress=False, owner="ada", owners=owners)
    overflow = RuntimeError(
        "This model's maximum context length is 10 tokens (context_length_exceeded)"
    )
    llm = CompactingLLM(
        model="scripted", script=[[call("c1", PLAN)], overflow, [call("c2", PLAN)], "done"]
    )
    register_before_llm_call_hook(tool.remind)
    try:
        crew_of(tool, llm).kickoff()
    finally:
        assert unregister_before_llm_call_hook(tool.remind)
    reminder = plan_reminder(PLAN["todos"])
    assert reminder is not None
    first, before, after, last = (request["messages"] for request in llm.requests)
    assert reminder not in json.dumps([first, before])  # the call still shows the plan
    # the summary replaced the call: the reminder follows it, as the newest message
    assert after[-1] == {"role": "user", "content": reminder}
    assert "one was written" in after[-2]["content"]
    assert [m for m in last if m.get("content") == reminder] == [after[-1]]  # added once


def test_remind_leaves_the_calls_of_agents_without_the_tool_alone() -> None:
    owners = OwnerRegistry()
    tool = TodoWriteCrewTool(allow_parallel_in_progress=False, owner="ada", owners=owners)
    owners.session("ada").append(EVENT_TYPE, PLAN)
    llm = ScriptedLLM(model="scripted", script=["done"])
    agent = Agent(role="other", goal="g", backstory="b", llm=llm)
    task = Task(description="Do it", expected_output="x", agent=agent)
    register_before_llm_call_hook(tool.remind)
    try:
        Crew(agents=[agent], tasks=[task]).kickoff()
    finally:
        unregister_before_llm_call_hook(tool.remind)
    assert "todo_write" not in json.dumps(llm.requests[0]["messages"])


class TextLLM(ScriptedLLM):
    """An LLM without native function calling: CrewAI's ReAct text prompt and parser."""

    def supports_function_calling(self) -> bool:
        return False


def test_the_text_path_shows_our_words_and_reads_back_our_texts() -> None:
    session = MemorySession()
    owners = OwnerRegistry(open_session=lambda key: session)
    tool = TodoWriteCrewTool(allow_parallel_in_progress=False, owner="me", owners=owners)
    item = {"content": "a", "status": "pending"}

    def action(args: Any) -> str:
        return f"Thought: plan\nAction: todo_write\nAction Input: {json.dumps(args)}"

    nested = {"todos": [{**item, "priority": 1}]}  # refused by this library
    top = {"todos": [item], "merge": True}  # CrewAI drops the key it does not list
    llm = TextLLM(
        model="scripted",
        script=[action(nested), action(top), "Thought: done\nFinal Answer: ok"],
    )
    crew_of(tool, llm).kickoff()
    system = llm.requests[0]["messages"][0]["content"]
    assert tool.formatted_description in system
    assert json.dumps(parameters(), indent=2) in tool.formatted_description
    assert contract.DESCRIPTION_SINGLE in tool.formatted_description
    observed = [
        m["content"].rpartition("\nObservation: ")[2]
        for m in llm.requests[-1]["messages"]
        if m["role"] == "assistant"
    ]
    refusal = todo_write_tool(allow_parallel_in_progress=False).call(nested, MemorySession())
    assert observed == [refusal, "Updated todo list: 1 pending, 0 in progress, 0 completed."]
    assert [event["data"] for event in session.events] == [{"todos": [item]}]


def test_a_raise_policy_aborts_on_a_refusal_unless_the_tool_says_warn() -> None:
    from crewai.tools.tool_failure import ToolExecutionFailedError, ToolFailurePolicy

    def crew(policy: ToolFailurePolicy | None) -> Crew:
        tool = TodoWriteCrewTool(allow_parallel_in_progress=False, owner="me")
        tool.tool_failure_policy = policy
        llm = ScriptedLLM(model="scripted", script=[[call("bad", {"todos": "x"})], "done"])
        agent = Agent(
            role="p", goal="g", backstory="b", llm=llm, tools=[tool], tool_failure_policy="raise"
        )
        task = Task(description="Plan it", expected_output="a plan", agent=agent)
        return Crew(agents=[agent], tasks=[task])

    with pytest.raises(ToolExecutionFailedError, match="todo_write"):
        crew(None).kickoff()
    assert crew(ToolFailurePolicy.WARN).kickoff().raw == "done"


def test_remind_on_the_text_path_reads_the_action_input_and_stays_quiet() -> None:
    # no compaction: the ReAct "Action Input" still shows the plan, so no reminder is due
    owners = OwnerRegistry()
    tool = TodoWriteCrewTool(allow_parallel_in_progress=False, owner="me", owners=owners)
    item = {"content": "a", "status": "pending"}
    action = f"Thought: plan\nAction: todo_write\nAction Input: {json.dumps({'todos': [item]})}"
    llm = TextLLM(model="scripted", script=[action, "Thought: done\nFinal Answer: ok"])
    register_before_llm_call_hook(tool.remind)
    try:
        crew_of(tool, llm).kickoff()
    finally:
        unregister_before_llm_call_hook(tool.remind)
    assert owners.session("me").latest([EVENT_TYPE])["data"] == {"todos": [item]}
    reminder = plan_reminder([item])  # type: ignore[list-item]
    assert reminder is not None
    assert "- [pending] a" in reminder
    assert [m for m in llm.requests[-1]["messages"] if m["content"] == reminder] == []


def asked_run(directory: Path, hook: str, *, asked: bool) -> list[list[dict[str, Any]]]:
    """A crew whose owner has a plan; with ``asked``, a person's request waits for it."""
    llm = ScriptedLLM(model="scripted", script=[[call("w1", scenario.HONOURED)], "done"])
    with scenario.planned_owner(directory, asked=asked) as owners:
        tool = TodoWriteCrewTool(
            allow_parallel_in_progress=False, owner=scenario.OWNER, owners=owners
        )
        register_before_llm_call_hook(getattr(tool, hook))
        try:
            crew_of(tool, llm).kickoff()
        finally:
            assert unregister_before_llm_call_hook(getattr(tool, hook))
    return [request["messages"] for request in llm.requests]


def test_tell_requests_appends_the_notice_after_the_newest_message_once(tmp_path: Path) -> None:
    asked = asked_run(tmp_path / "asked", "tell_requests", asked=True)
    plain = asked_run(tmp_path / "plain", "tell_requests", asked=False)
    told = {"role": "user", "content": scenario.notice()}
    # after the newest message; before it, every message as without the request
    assert asked[0] == [*plain[0], told]
    # the agent's own messages: it stays where it was put, and is not told again
    at = len(plain[0])
    assert asked[1] == [*plain[1][:at], told, *plain[1][at:]]


def test_remind_tells_the_requests_too_in_a_message_of_their_own(tmp_path: Path) -> None:
    (first, _) = asked_run(tmp_path, "remind", asked=True)
    # no write in the messages shows the owner's plan: the reminder is due, then the notice
    assert first[-2:] == [
        {"role": "user", "content": plan_reminder(scenario.PLAN)},
        {"role": "user", "content": scenario.notice()},
    ]
