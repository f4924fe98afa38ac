"""A person's requests reach the model through ``plan_reminder_processor(toolset=...)``, in
real pydantic-ai runs against a mock OpenAI Chat Completions API: a user prompt part of its
own at the end of the newest request, once."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import ModelMessage, ModelRequest, UserPromptPart
from pydantic_ai.toolsets import FunctionToolset

from dsh_tool_todo import UsageError
from dsh_tool_todo.integrations.pydantic_ai import plan_reminder_processor, todo_write_toolset
from dsh_tool_todo.plans.reminder import plan_reminder
from dsh_tool_todo.stores import open_session
from dsh_tool_todo.stores.owners import OwnerRegistry
from tests.integrations import requests_scenario as scenario
from tests.integrations.compaction_scenario import as_user_message
from tests.integrations.scripted_pydantic_ai import run_on_openai_chat, user_prompts

pytestmark = pytest.mark.usefixtures("no_model_requests")


def run_agent(
    owners: Path, *, asked: bool, process: bool = True
) -> tuple[list[list[bytes]], list[ModelMessage]]:
    log = owners / "t1.jsonl" if asked else None

    async def look(path: str) -> str:
        """Read a file."""
        return await scenario.alook(log, path)

    def agent_on(model: Any) -> Agent[Any, Any]:
        todo = todo_write_toolset(allow_parallel_in_progress=False, owners=owners)
        processors = [ProcessHistory(plan_reminder_processor(toolset=todo))] if process else []
        return Agent(
            model,
            instructions=scenario.SYSTEM,
            tools=[look],
            toolsets=[todo],
            capabilities=processors,
        )

    return run_on_openai_chat(scenario.CALLS, agent_on, scenario.PROMPT, deps="t1")


def test_a_request_is_told_once_after_the_newest_message_and_honoured(tmp_path: Path) -> None:
    plain, _ = run_agent(tmp_path / "plain", asked=False)
    asked, history = run_agent(tmp_path / "asked", asked=True)
    # a part of its own at the end of the newest request; pydantic-ai keeps the processed
    # history: kept where it was added
    notice = as_user_message(scenario.notice())
    scenario.assert_told_after_the_newest(plain, asked, notice, kept=True)
    assert user_prompts(history).count(scenario.notice()) == 1
    scenario.assert_honoured(tmp_path / "asked" / "t1.jsonl")


def test_with_no_request_the_requests_are_what_they_were_without_the_processor(
    tmp_path: Path,
) -> None:
    processed, _ = run_agent(tmp_path / "processed", asked=False)
    unprocessed, _ = run_agent(tmp_path / "unprocessed", asked=False, process=False)
    assert processed == unprocessed


def test_the_notice_is_a_part_after_the_reminder_and_the_plan_is_the_owners(
    tmp_path: Path,
) -> None:
    owners, log = scenario.planned(tmp_path, "t1")
    try:
        scenario.ask(log)
        todo = todo_write_toolset(allow_parallel_in_progress=False, owners=owners)
        remind = plan_reminder_processor(toolset=todo)
        messages: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart("summary")])]
        added = asyncio.run(remind(_ctx("t1"), messages))
        again = asyncio.run(remind(_ctx("t1"), [*added, ModelRequest(parts=[])]))
    finally:
        owners.close()
    assert added[:-1] == messages[:-1]
    assert [part.content for part in added[-1].parts] == [
        "summary",
        plan_reminder(scenario.PLAN),
        scenario.notice(),
    ]
    assert again[-1].parts == []  # told once; the reminder is in the messages now


def test_a_toolset_it_cannot_find_owners_in_is_refused() -> None:
    with pytest.raises(UsageError, match=r"toolset= takes the toolset todo_write_toolset\(\)"):
        plan_reminder_processor(toolset=FunctionToolset([]))


def run_with_session(place: Path, *, asked: bool) -> tuple[list[list[bytes]], list[ModelMessage]]:
    """:func:`run_agent`'s conversation with the run's session as deps: no registry."""
    log = place / "t1.jsonl"

    async def look(path: str) -> str:
        """Read a file."""
        return await scenario.alook(log if asked else None, path)

    def agent_on(model: Any) -> Agent[Any, Any]:
        todo = todo_write_toolset(allow_parallel_in_progress=False)
        return Agent(
            model,
            instructions=scenario.SYSTEM,
            tools=[look],
            toolsets=[todo],
            capabilities=[ProcessHistory(plan_reminder_processor(toolset=todo))],
        )

    place.mkdir()
    with open_session(str(place), "t1") as session:
        return run_on_openai_chat(scenario.CALLS, agent_on, scenario.PROMPT, deps=session)


def test_with_the_runs_session_as_deps_a_request_is_told_once_and_honoured(
    tmp_path: Path,
) -> None:
    plain, _ = run_with_session(tmp_path / "plain", asked=False)
    asked, history = run_with_session(tmp_path / "asked", asked=True)
    notice = as_user_message(scenario.notice())
    scenario.assert_told_after_the_newest(plain, asked, notice, kept=True)
    assert user_prompts(history).count(scenario.notice()) == 1
    scenario.assert_honoured(tmp_path / "asked" / "t1.jsonl")


@pytest.mark.parametrize("finds", ["deps", "session=", "DSH_TODO_HOME"])
def test_a_session_the_toolset_finds_gives_the_plan_and_the_notice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, finds: str
) -> None:
    owners, log = scenario.planned(tmp_path, "t1")
    owners.close()  # the run's own session writes the log now
    with open_session(str(tmp_path), "t1") as session:
        deps: object = session
        if finds == "session=":
            todo = todo_write_toolset(allow_parallel_in_progress=False, session=lambda _: session)
            deps = "not a session"
        else:
            if finds == "DSH_TODO_HOME":
                monkeypatch.setenv("DSH_TODO_HOME", str(tmp_path / "home"))
            todo = todo_write_toolset(allow_parallel_in_progress=False)
        remind = plan_reminder_processor(toolset=todo)
        scenario.ask(log)
        messages: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart("summary")])]
        added = asyncio.run(remind(_ctx(deps), messages))
        again = asyncio.run(remind(_ctx(deps), [*added, ModelRequest(parts=[])]))
    assert [part.content for part in added[-1].parts] == [
        "summary",
        plan_reminder(scenario.PLAN),
        scenario.notice(),
    ]
    assert again[-1].parts == []  # told once; the reminder is in the messages now


def _ctx(deps: object) -> Any:
    class Ctx:
        agent = None

    ctx = Ctx()
    ctx.deps = deps  # type: ignore[attr-defined]
    return ctx


def test_a_run_the_toolset_finds_no_owner_for_is_left_as_it_is(tmp_path: Path) -> None:
    with OwnerRegistry(tmp_path) as owners:
        todo = todo_write_toolset(allow_parallel_in_progress=False, owners=owners)
        messages: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart("hi")])]
        assert asyncio.run(plan_reminder_processor(toolset=todo)(_ctx(None), messages)) is messages
