"""todo_write_toolset in real pydantic-ai runs: FunctionModel, and a mock OpenAI API."""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx2
import pytest
from pydantic_ai import Agent
from pydantic_ai.exceptions import UnexpectedModelBehavior
from pydantic_ai.messages import (
    ModelRequest,
    RetryPromptPart,
    ToolReturnPart,
)
from pydantic_ai.models import override_allow_model_requests
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from dsh_tool_todo import UsageError, todo_write_tool
from dsh_tool_todo.core.contract import (
    DESCRIPTION_PARALLEL,
    DESCRIPTION_SINGLE,
    NO_OWNER,
    NOT_RECORDED,
)
from dsh_tool_todo.core.schema import parameters, parameters_json
from dsh_tool_todo.integrations._extras import MissingExtra
from dsh_tool_todo.integrations.pydantic_ai import todo_write_toolset
from dsh_tool_todo.stores.memory import AsyncMemorySession, MemorySession
from dsh_tool_todo.stores.owners import OwnerRegistry
from tests._builders import PLAN_A, PLAN_B, todo, written_plans
from tests.integrations.scripted_pydantic_ai import (
    Script,
    anthropic_model,
    openai_chat_api,
    openai_chat_model,
)

BAD = {"todos": PLAN_A, "merge": True}
pytestmark = pytest.mark.usefixtures("no_model_requests")


def run(script: Script, deps: Any, **options: Any) -> Any:
    options.setdefault("allow_parallel_in_progress", False)
    agent = Agent(FunctionModel(script), toolsets=[todo_write_toolset(**options)])
    # asyncio.run, not run_sync: run_sync leaves the event loop it makes open.
    return asyncio.run(agent.run("plan it", deps=deps))


def core_text(args: Any) -> str:
    return todo_write_tool(allow_parallel_in_progress=False).call(args, MemorySession())


@pytest.mark.parametrize(
    ("parallel", "description"), [(False, DESCRIPTION_SINGLE), (True, DESCRIPTION_PARALLEL)]
)
def test_the_schema_reaches_the_model_unchanged(parallel: bool, description: str) -> None:
    script = Script()
    run(script, MemorySession(), allow_parallel_in_progress=parallel)
    (definition,) = script.infos[0].function_tools
    assert definition.name == "todo_write"
    assert definition.description == description
    schema = json.dumps(
        definition.parameters_json_schema, ensure_ascii=False, separators=(",", ":")
    )
    assert schema == parameters_json()
    assert definition.sequential is True


def test_a_call_is_recorded_in_the_deps_session_and_answered_with_the_success_text() -> None:
    session = MemorySession()
    script = Script({"todos": PLAN_A})
    assert run(script, session).output == "done"
    assert written_plans(session) == [PLAN_A]
    (answer,) = script.returns()
    assert (answer.content, answer.outcome) == (core_text({"todos": PLAN_A}), "success")
    assert answer.content == "Updated todo list: 1 pending, 1 in progress, 0 completed."


def test_raw_json_arguments_reach_our_validation() -> None:
    session = MemorySession()
    script = Script('{"todos": [{"content": "A", "status": "pending"}], "merge": true}')
    run(script, session)
    (answer,) = script.returns()
    assert answer.content == core_text(BAD | {"todos": [todo("A")]})
    assert answer.content.startswith("Error: invalid todos")
    assert written_plans(session) == []


def test_the_default_channel_is_tool_failed_with_exactly_the_model_text() -> None:
    session = MemorySession()
    script = Script(BAD)
    run(script, session)
    (answer,) = script.returns()
    assert (answer.content, answer.outcome) == (core_text(BAD), "failed")
    assert written_plans(session) == []


def test_the_failed_channel_spends_no_retries() -> None:
    script = Script(BAD, BAD, BAD)
    result = run(script, MemorySession(), max_retries=0)
    assert result.output == "done"
    assert [part.outcome for part in script.returns()] == ["failed"] * 3


def test_the_retry_channel_raises_model_retry_and_spends_the_budget() -> None:
    script = Script(BAD)
    run(script, MemorySession(), errors="retry", max_retries=1)
    last = script.requests[1][-1]
    assert isinstance(last, ModelRequest)
    (answer,) = last.parts
    # A retry prompt: a RetryPromptPart up to pydantic-ai 2.54, later a ToolReturnPart whose
    # outcome is "retried"; either way it carries exactly the tool's text.
    if isinstance(answer, ToolReturnPart):
        assert answer.outcome == "retried"
    else:
        assert isinstance(answer, RetryPromptPart)
    assert (answer.content, answer.tool_call_id) == (core_text(BAD), "c0")
    with pytest.raises(UnexpectedModelBehavior, match="exceeded max retries"):
        run(Script(BAD), MemorySession(), errors="retry", max_retries=0)


def test_the_text_channel_returns_the_text_as_an_ordinary_result() -> None:
    script = Script(BAD)
    run(script, MemorySession(), errors="text")
    (answer,) = script.returns()
    assert (answer.content, answer.outcome) == (core_text(BAD), "success")


class SlowFirstSession(AsyncMemorySession):
    """Earlier appends take longer: calls that overlapped would be recorded out of order."""

    def __init__(self) -> None:
        super().__init__()
        self.delays = [0.05, 0.02, 0.0]
        self.active = 0
        self.most_active = 0

    async def append(self, type: str, data: Mapping[str, Any], /) -> Any:
        self.active += 1
        self.most_active = max(self.most_active, self.active)
        await asyncio.sleep(self.delays.pop(0) if self.delays else 0)
        self.active -= 1
        return await super().append(type, data)


def test_calls_of_one_turn_run_one_at_a_time_in_call_order() -> None:
    session = SlowFirstSession()
    plans = [PLAN_A, PLAN_B, [todo("Ship", "in_progress")]]
    script = Script(*({"todos": plan} for plan in plans))
    run(script, session)
    assert written_plans(session) == plans
    assert session.most_active == 1
    assert [part.tool_call_id for part in script.returns()] == ["c0", "c1", "c2"]


def test_deps_may_carry_the_session_as_an_attribute() -> None:
    class Deps:
        def __init__(self) -> None:
            self.session = MemorySession()

    deps = Deps()
    run(Script({"todos": PLAN_A}), deps)
    assert written_plans(deps.session) == [PLAN_A]


@pytest.mark.parametrize("deps", [None, object(), "a key, but no registry"])
def test_a_run_without_an_owner_gets_the_no_owner_text(deps: Any) -> None:
    script = Script({"todos": PLAN_A})
    run(script, deps)
    (answer,) = script.returns()
    assert (answer.content, answer.outcome) == (NO_OWNER, "failed")


def test_a_session_function_finds_the_owner_and_may_be_async() -> None:
    sessions = {"u1": MemorySession()}

    async def find(ctx: Any) -> MemorySession:
        return sessions[ctx.deps["user"]]

    run(Script({"todos": PLAN_A}), {"user": "u1"}, session=find)
    assert written_plans(sessions["u1"]) == [PLAN_A]


def test_an_owner_registry_owns_the_plan_by_key(tmp_path: Path) -> None:
    with OwnerRegistry(tmp_path) as owners:
        run(Script({"todos": PLAN_A}), "alice@example.com", owners=owners)
        run(Script({"todos": PLAN_B}), "bob", owners=owners)
        assert sorted(owners.owners()) == ["alice@example.com", "bob"]
    lines = (tmp_path / "alice%40example.com.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["data"]["todos"] for line in lines] == [PLAN_A]


def test_concurrent_runs_of_one_owner_all_record_through_the_registry() -> None:
    owners = OwnerRegistry(max_owners=4)
    toolset = todo_write_toolset(
        allow_parallel_in_progress=False, owners=owners, owner=lambda ctx: ctx.deps["owner"]
    )
    plans = [[todo(f"Run {index}", "in_progress")] for index in range(8)]

    async def runs() -> None:
        agents = [Agent(FunctionModel(Script({"todos": plan}))) for plan in plans]
        await asyncio.gather(
            *(agent.run("go", deps={"owner": "shared"}, toolsets=[toolset]) for agent in agents)
        )

    asyncio.run(runs())
    session = owners.session("shared")
    assert isinstance(session, MemorySession)
    assert sorted(map(str, written_plans(session))) == sorted(map(str, plans))
    owners.close()


class BrokenSession:
    def append(self, type: str, data: Mapping[str, Any], /) -> None:
        raise OSError(28, "No space left on device")


@pytest.mark.parametrize(
    ("errors", "outcome", "text"),
    [
        ("failed", "failed", NOT_RECORDED),
        ("retry", "failed", NOT_RECORDED),
        ("text", "success", NOT_RECORDED),
    ],
)
def test_a_failure_to_record_is_the_not_recorded_text_and_the_cause_is_logged(
    errors: str, outcome: str, text: str, caplog: pytest.LogCaptureFixture
) -> None:
    script = Script({"todos": PLAN_A})
    with caplog.at_level(logging.ERROR, logger="dsh_tool_todo"):
        run(script, BrokenSession(), errors=errors, max_retries=0)
    (answer,) = script.returns()
    assert (answer.content, answer.outcome) == (text, outcome)
    assert "No space left on device" in caplog.text


def test_options_are_checked_when_the_toolset_is_built() -> None:
    with pytest.raises(UsageError, match="errors must be one of failed, retry, text, not 'loud'"):
        todo_write_toolset(allow_parallel_in_progress=False, errors="loud")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="max_retries must be an int of at least 0"):
        todo_write_toolset(allow_parallel_in_progress=False, max_retries=-1)
    with pytest.raises(UsageError, match="either session= or owners=, not both"):
        todo_write_toolset(
            allow_parallel_in_progress=False, session=lambda ctx: None, owners=OwnerRegistry()
        )
    with pytest.raises(UsageError, match="pass owners= too"):
        todo_write_toolset(allow_parallel_in_progress=False, owner=lambda ctx: "k")
    with pytest.raises(UsageError, match="allowParallelInProgress"):
        todo_write_toolset(allow_parallel_in_progress=1)  # type: ignore[arg-type]


def test_the_openai_request_carries_our_schema_under_strict_mode() -> None:
    bodies: list[dict[str, Any]] = []

    def answer(request: httpx2.Request) -> httpx2.Response:
        bodies.append(json.loads(request.content))
        call = {
            "id": "c0",
            "type": "function",
            "function": {"name": "todo_write", "arguments": json.dumps({"todos": PLAN_A})},
        }
        first = len(bodies) == 1
        message = (
            {"role": "assistant", "content": None, "tool_calls": [call]}
            if first
            else {"role": "assistant", "content": "done"}
        )
        choice = {
            "index": 0,
            "finish_reason": "tool_calls" if first else "stop",
            "message": message,
        }
        body = {
            "id": "r",
            "object": "chat.completion",
            "created": 0,
            "model": "m",
            "choices": [choice],
        }
        return httpx2.Response(200, json=body)

    session = MemorySession()

    async def run_once() -> str:
        async with httpx2.AsyncClient(transport=httpx2.MockTransport(answer)) as client:
            provider = OpenAIProvider(api_key="test", http_client=client)
            agent = Agent(
                OpenAIChatModel("gpt-test", provider=provider),
                toolsets=[todo_write_toolset(allow_parallel_in_progress=False)],
            )
            with override_allow_model_requests(True):
                return (await agent.run("plan it", deps=session)).output

    assert asyncio.run(run_once()) == "done"
    (offered,) = bodies[0]["tools"]
    assert offered["function"]["strict"] is True
    assert offered["function"]["description"] == DESCRIPTION_SINGLE
    assert offered["function"]["parameters"] == parameters()
    encoded = json.dumps(
        offered["function"]["parameters"], ensure_ascii=False, separators=(",", ":")
    )
    assert encoded == parameters_json()
    assert bodies[1]["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "c0",
        "content": "Updated todo list: 1 pending, 1 in progress, 0 completed.",
    }
    assert written_plans(session) == [PLAN_A]


def test_a_missing_framework_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "dsh_tool_todo.integrations.pydantic_ai")
    monkeypatch.setitem(sys.modules, "pydantic_ai.toolsets", None)
    with pytest.raises(MissingExtra, match=r"install dsh-tool-todo\[pydantic-ai\]"):
        importlib.import_module("dsh_tool_todo.integrations.pydantic_ai")


def no_owner_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        record.getMessage()
        for record in caplog.records
        if record.name == "dsh_tool_todo" and record.levelno == logging.WARNING
    ]


def test_a_toolset_that_finds_no_owner_warns_the_developer_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    toolset = todo_write_toolset(allow_parallel_in_progress=False)
    scripts = [Script({"todos": PLAN_A}, {"todos": PLAN_B}), Script({"todos": PLAN_A})]
    with caplog.at_level(logging.WARNING, logger="dsh_tool_todo"):
        for script in scripts:
            asyncio.run(Agent(FunctionModel(script), toolsets=[toolset]).run("plan it"))
    for script in scripts:  # the model still reads the specification's text
        assert {(part.content, part.outcome) for part in script.returns()} == {(NO_OWNER, "failed")}
    (warning,) = no_owner_warnings(caplog)
    assert "found no owner" in warning
    for remedy in ("deps=session", "session=", "owners="):
        assert remedy in warning


def test_a_registry_toolset_whose_owner_key_is_none_warns_too(
    caplog: pytest.LogCaptureFixture,
) -> None:
    script = Script({"todos": PLAN_A})
    with caplog.at_level(logging.WARNING, logger="dsh_tool_todo"):
        run(script, None, owners=OwnerRegistry(), owner=lambda ctx: None)
    assert [part.content for part in script.returns()] == [NO_OWNER]
    (warning,) = no_owner_warnings(caplog)
    assert "owner=" in warning


def test_a_toolset_with_an_owner_does_not_warn(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="dsh_tool_todo"):
        run(Script({"todos": PLAN_A}), MemorySession())
    assert no_owner_warnings(caplog) == []


REFUSED = {"todos": [{"content": "Ship", "status": "done"}]}


def anthropic_api(bodies: list[dict[str, Any]]) -> Any:
    def answer(request: httpx2.Request) -> httpx2.Response:
        bodies.append(json.loads(request.content))
        first = len(bodies) == 1
        content = (
            [{"type": "tool_use", "id": "c0", "name": "todo_write", "input": REFUSED}]
            if first
            else [{"type": "text", "text": "done"}]
        )
        body = {"id": "m", "type": "message", "role": "assistant", "model": "claude-test"}
        usage = {"input_tokens": 1, "output_tokens": 1}
        stop = "tool_use" if first else "end_turn"
        return httpx2.Response(
            200,
            json={**body, "content": content, "stop_reason": stop, "stop_sequence": None}
            | {"usage": usage},
        )

    return answer


def provider_reads(provider: str, errors: str) -> Any:
    """What the second request to the provider's API carries for the refused call."""
    bodies: list[dict[str, Any]] = []
    connected = (
        openai_chat_model(openai_chat_api(bodies, [("todo_write", REFUSED)]))
        if provider == "openai"
        else anthropic_model(anthropic_api(bodies))
    )

    async def run_once() -> None:
        async with connected as model:
            toolset = todo_write_toolset(allow_parallel_in_progress=False, errors=errors)  # type: ignore[arg-type]
            await Agent(model, toolsets=[toolset]).run("plan it", deps=MemorySession())

    asyncio.run(run_once())
    if provider == "openai":
        return bodies[1]["messages"][-1]
    (result,) = bodies[1]["messages"][-1]["content"]
    return result


@pytest.mark.parametrize("errors", ["failed", "retry", "text"])
def test_what_each_provider_reads_for_a_refusal_is_what_the_docs_say(errors: str) -> None:
    text = core_text(REFUSED)
    escaped = json.dumps(text, ensure_ascii=False)[1:-1]
    openai = provider_reads("openai", errors)
    if errors == "text":
        assert openai["content"] == text
    elif errors == "retry" and sys.version_info < (3, 11):  # pydantic-ai 2.54: the docs say so
        assert openai["content"] == text + "\n\nFix the errors and try again."
        openai = {"content": '{"error":"' + escaped + '"}'}
    else:  # no error flag in Chat Completions: pydantic-ai wraps the text, with no retry wording
        assert openai["content"] == '{"error":"' + escaped + '"}'
    # On Python 3.10 the dev extra resolves pydantic-ai 2.54, whose Anthropic model cannot build
    # a request with the anthropic client the extra installs (typing.Union instantiated): the
    # Anthropic half is checked where pydantic-ai can run it.
    anthropic = provider_reads("anthropic", errors) if sys.version_info >= (3, 11) else None
    if anthropic is not None:
        assert anthropic["is_error"] is (errors != "text")
        assert anthropic["content"] == [{"type": "text", "text": text}]
    # The docs' table row for this channel shows both forms, the text written <text>.
    page = (Path(__file__).resolve().parents[2] / "docs/integrations/pydantic-ai.md").read_text(
        encoding="utf-8"
    )
    (row,) = [line for line in page.splitlines() if line.startswith(f'| `"{errors}"`')]
    openai_form = openai["content"].replace(escaped, "<text>").replace(text, "<text>")
    assert f"`{openai_form}`" in row
    if anthropic is not None:
        assert f"`is_error: {str(anthropic['is_error']).lower()}`" in row
