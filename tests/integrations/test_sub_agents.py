"""Sub-agent trees end to end: each framework's own sub-agent mechanism, through our adapters.

The OpenAI Agents SDK's agents-as-tools (its ScriptedModel) and pydantic-ai delegation (a
tool that runs another agent, FunctionModel): the sub-agent's plan lands in a session of its
own, linked to the parent's with the parent's tool-call id, and a reader shows the tree.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from agents import Agent as OpenAIAgent
from agents import RunConfig, Runner
from agents.exceptions import UserError as SdkUserError
from agents.testing import ScriptedModel, assistant_message, function_call
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.toolsets import FunctionToolset

from dsh_tool_todo.errors import UsageError
from dsh_tool_todo.integrations.openai_agents import linked_agent_tool, todo_write_function_tool
from dsh_tool_todo.integrations.pydantic_ai import linked_toolset, todo_write_toolset
from dsh_tool_todo.plans.fleet import FleetNode, read_fleet
from dsh_tool_todo.stores import open_reader
from dsh_tool_todo.stores.jsonl import read_events
from dsh_tool_todo.stores.memory import MemorySession
from dsh_tool_todo.stores.owners import OwnerRegistry, owner_file_name
from tests._builders import plan
from tests.integrations.scripted_pydantic_ai import replying


def started(content: str) -> dict[str, Any]:
    """A call's arguments: a plan of one todo, in progress."""
    return plan(content, status="in_progress")


def tree(directory: Path) -> list[tuple[int, str, str | None, tuple[str, ...]]]:
    async def read() -> list[FleetNode]:
        reader = open_reader(directory)
        try:
            return await read_fleet(reader)
        finally:
            await reader.aclose()

    rows: list[tuple[int, str, str | None, tuple[str, ...]]] = []

    def walk(nodes: list[FleetNode], depth: int) -> None:
        for node in sorted(nodes, key=lambda n: n.key):
            rows.append((depth, node.key, node.parent, node.in_progress))
            walk(node.children, depth + 1)

    walk(asyncio.run(read()), 0)
    return rows


def head(log: Path) -> dict[str, Any]:
    return read_events(log)[0]


def last(log: Path) -> tuple[str, Any]:
    """The type and data of the log's newest event."""
    event = read_events(log)[-1]
    return event["type"], event["data"]


FINISHED = ("session/end", {"outcome": "finished"})


# --- OpenAI Agents SDK: agent.as_tool() ------------------------------------------------


def ada_todo(owners: OwnerRegistry) -> Any:
    """``todo_write`` for the lead's owner ``ada``, recording through ``owners``."""
    return todo_write_function_tool(allow_parallel_in_progress=False, owner="ada", owners=owners)


def failing_researcher(todo: Any) -> OpenAIAgent[Any]:
    """A sub-agent whose model writes a plan of "Search", then fails: the search backend is
    down."""
    return OpenAIAgent(
        name="researcher",
        model=ScriptedModel(
            [
                [function_call("todo_write", started("Search"), call_id="r1")],
                RuntimeError("search backend down"),
            ]
        ),
        tools=[todo],
    )


def delegating_lead(todo: Any, research: Any) -> OpenAIAgent[Any]:
    """A lead agent that writes its plan, then calls ``research`` (a sub-agent as a tool,
    linked), then answers "done"."""
    return OpenAIAgent(
        name="lead",
        model=ScriptedModel(
            [
                [function_call("todo_write", started("Delegate"), call_id="l1")],
                [function_call("research", {"input": "q"}, call_id="l2")],
                [assistant_message("done")],
            ]
        ),
        tools=[todo, linked_agent_tool(research)],
    )


def test_openai_agents_as_tools_give_each_sub_agent_a_linked_plan(tmp_path: Path) -> None:
    with OwnerRegistry(tmp_path) as owners:
        todo = ada_todo(owners)
        checker = OpenAIAgent(
            name="checker",
            model=ScriptedModel(
                [
                    [function_call("todo_write", started("Check a source"), call_id="k1")],
                    [assistant_message("checked")],
                ]
            ),
            tools=[todo],
        )
        researcher = OpenAIAgent(
            name="researcher",
            model=ScriptedModel(
                [
                    [function_call("todo_write", started("Search"), call_id="r1")],
                    [function_call("check", {"input": "it"}, call_id="r2")],
                    [assistant_message("found")],
                ]
            ),
            tools=[
                todo,
                linked_agent_tool(checker.as_tool(tool_name="check", tool_description="Check")),
            ],
        )
        research = researcher.as_tool(tool_name="research", tool_description="Research")
        lead = delegating_lead(todo, research)
        config = RunConfig(tracing_disabled=True)
        result = asyncio.run(Runner.run(lead, "go", run_config=config))
    assert result.final_output == "done"
    assert tree(tmp_path) == [
        (0, "ada", None, ("Delegate",)),  # the parent's plan is its own, not clobbered
        (1, "ada%2fresearcher%40l2", "ada", ("Search",)),
        (2, "ada%2fresearcher%40l2%2fchecker%40r2", "ada%2fresearcher%40l2", ("Check a source",)),
    ]
    assert head(tmp_path / "ada%2fresearcher%40l2.jsonl")["data"] == {
        "parent": "ada",
        "parentCallId": "l2",
    }
    assert head(tmp_path / "ada%2fresearcher%40l2%2fchecker%40r2.jsonl")["data"] == {
        "parent": "ada%2fresearcher%40l2",
        "parentCallId": "r2",
    }
    # each delegated run's session is ended by its own delegating call; the root never is
    assert last(tmp_path / "ada%2fresearcher%40l2.jsonl") == FINISHED
    assert last(tmp_path / "ada%2fresearcher%40l2%2fchecker%40r2.jsonl") == FINISHED
    assert last(tmp_path / "ada.jsonl")[0] == "todo/write"
    # the wrapped tool is offered exactly as the SDK made it
    wrapped = linked_agent_tool(research)
    assert (wrapped.name, wrapped.description, wrapped.params_json_schema) == (
        research.name,
        research.description,
        research.params_json_schema,
    )


def failing_research_output(tmp_path: Path, *, linked: bool) -> str:
    """Run a lead whose researcher writes a plan and then fails (its model raises); the
    text the lead's model was given for the delegating call."""
    with OwnerRegistry(tmp_path) as owners:
        todo = ada_todo(owners)
        researcher = failing_researcher(todo)
        research = researcher.as_tool(tool_name="research", tool_description="Research")
        lead_model = ScriptedModel(
            [
                [function_call("research", {"input": "q"}, call_id="l2")],
                [assistant_message("done")],
            ]
        )
        tools = [todo, linked_agent_tool(research) if linked else research]
        lead = OpenAIAgent(name="lead", model=lead_model, tools=tools)
        config = RunConfig(tracing_disabled=True)
        assert asyncio.run(Runner.run(lead, "go", run_config=config)).final_output == "done"
    assert lead_model.last_call is not None
    (output,) = [
        item["output"]
        for item in lead_model.last_call.input
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    ]
    return str(output)


def test_openai_agents_a_failing_sub_agent_ends_failed_and_the_model_reads_the_sdks_text(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def sdk_logged() -> list[str]:
        found = [r.getMessage() for r in caplog.records if r.name == "openai.agents"]
        caplog.clear()
        return [line for line in found if "failed" in line]

    with caplog.at_level(logging.DEBUG, logger="openai.agents"):
        linked = failing_research_output(tmp_path / "linked", linked=True)
        linked_logged = sdk_logged()
        plain = failing_research_output(tmp_path / "plain", linked=False)
        plain_logged = sdk_logged()
    assert linked == plain  # the SDK's own failure text, unchanged by the wrapper
    assert linked.startswith("An error occurred while running the tool")
    assert linked_logged == plain_logged != []  # and the SDK's own log of it
    log = tmp_path / "linked" / "ada%2fresearcher%40l2.jsonl"
    assert last(log) == ("session/end", {"outcome": "failed", "error": "search backend down"})
    assert [event["type"] for event in read_events(log)] == [
        "session/link",
        "todo/write",
        "session/end",
    ]


def test_openai_agents_a_sub_agent_tool_that_raises_still_raises_after_its_end(
    tmp_path: Path,
) -> None:
    with OwnerRegistry(tmp_path) as owners:
        todo = ada_todo(owners)
        researcher = failing_researcher(todo)
        # failure_error_function=None: the SDK raises instead of answering the model
        research = researcher.as_tool(
            tool_name="research", tool_description="Research", failure_error_function=None
        )
        lead = delegating_lead(todo, research)
        with pytest.raises(SdkUserError, match="Error running tool research: search backend down"):
            asyncio.run(Runner.run(lead, "go", run_config=RunConfig(tracing_disabled=True)))
    log = tmp_path / "ada%2fresearcher%40l2.jsonl"
    assert last(log) == ("session/end", {"outcome": "failed", "error": "search backend down"})


def test_linked_agent_tool_refuses_what_is_not_a_function_tool() -> None:
    with pytest.raises(UsageError, match=r"takes the FunctionTool agent\.as_tool"):
        linked_agent_tool(object())  # type: ignore[arg-type]


# --- pydantic-ai: a tool that runs another agent ----------------------------------------


def call(name: str, args: Any, call_id: str) -> ModelResponse:
    """A model turn calling one tool."""
    return ModelResponse(parts=[ToolCallPart(name, args, tool_call_id=call_id)])


def said(text: str) -> ModelResponse:
    """A model turn answering ``text``."""
    return ModelResponse(parts=[TextPart(text)])


def planning_agent(name: str, toolset: Any, content: str, call_id: str, answer: str) -> Any:
    """A sub-agent whose model writes a plan of ``content`` (call ``call_id``), then answers."""
    return Agent(
        replying(call("todo_write", started(content), call_id), said(answer)),
        name=name,
        deps_type=str,
        toolsets=[toolset],
    )


def asking(researcher: Any) -> Callable[[RunContext[str], str], Awaitable[str]]:
    """A tool ``research`` that runs ``researcher`` on the question, with the caller's deps and
    usage."""

    async def research(ctx: RunContext[str], question: str) -> str:
        return (await researcher.run(question, deps=ctx.deps, usage=ctx.usage)).output

    return research


def linked_lead(todo: Any, research: Callable[..., Any], *turns: ModelResponse) -> Any:
    """A lead agent whose model takes ``turns``, with ``todo`` and ``research`` as a linked
    tool."""
    return Agent(
        replying(*turns),
        name="lead",
        deps_type=str,
        toolsets=[todo, linked_toolset(FunctionToolset([research]))],
    )


def linked_research_lead(owners: OwnerRegistry, *turns: ModelResponse) -> Any:
    """A lead agent whose model takes ``turns``, with a linked tool ``research`` running a
    researcher that plans "Search"; both record through ``owners``."""
    todo = todo_write_toolset(allow_parallel_in_progress=False, owners=owners)
    researcher = planning_agent("researcher", todo, "Search", "r1", "found")
    return linked_lead(todo, asking(researcher), *turns)


def test_pydantic_ai_delegation_gives_the_sub_agent_a_linked_plan(tmp_path: Path) -> None:
    owners = OwnerRegistry(tmp_path)
    lead = linked_research_lead(
        owners,
        call("todo_write", started("Delegate"), "l1"),
        call("research", {"question": "q"}, "l2"),
        said("done"),
    )
    result = asyncio.run(lead.run("go", deps="bob\n"))
    owners.close()
    assert result.output == "done"
    assert tree(tmp_path) == [
        (0, "bob%0a", None, ("Delegate",)),
        (1, "bob%0a%2fresearcher%40l2", "bob%0a", ("Search",)),
    ]
    assert head(tmp_path / "bob%0a%2fresearcher%40l2.jsonl")["data"] == {
        "parent": "bob%0a",
        "parentCallId": "l2",
    }


def test_pydantic_ai_sub_agent_sessions_end_finished_or_failed_with_the_error(
    tmp_path: Path,
) -> None:
    owners = OwnerRegistry(tmp_path)
    todo = todo_write_toolset(allow_parallel_in_progress=False, owners=owners)
    researcher = researcher_planning_its_question(todo)

    async def research(ctx: RunContext[str], question: str) -> str:
        result = await researcher.run(question, deps=ctx.deps, usage=ctx.usage)
        if question == "fail":
            raise RuntimeError(f"index unavailable\x00 {'x' * 300}")
        return result.output

    lead = linked_lead(todo, research, call("research", {"question": "q"}, "l2"), said("done"))
    asyncio.run(lead.run("go", deps="bob"))
    failing = linked_lead(
        todo, research, call("research", {"question": "fail"}, "l3"), said("done")
    )
    with pytest.raises(RuntimeError, match="index unavailable"):
        asyncio.run(failing.run("go", deps="bob"))
    owners.close()
    assert last(tmp_path / "bob%2fresearcher%40l2.jsonl") == FINISHED
    kind, data = last(tmp_path / "bob%2fresearcher%40l3.jsonl")
    assert kind == "session/end"
    # a short reason a store can hold: NUL replaced, at most 200 characters
    assert data == {"outcome": "failed", "error": ("index unavailable? " + "x" * 300)[:200]}
    assert not (tmp_path / "bob.jsonl").exists()  # the lead wrote no plan: nothing to end
    assert [event["type"] for event in read_events(tmp_path / "bob%2fresearcher%40l3.jsonl")] == [
        "session/link",
        "todo/write",
        "session/end",
    ]


class EndRefusingSession(MemorySession):
    """A store session whose ``session/end`` append fails (a full disk, a lost database)."""

    def append(self, type: str, data: Mapping[str, Any], /) -> dict[str, Any]:
        if type == "session/end":
            raise OSError("no space left on device")
        return super().append(type, data)


def test_an_end_that_cannot_be_written_is_logged_and_the_parents_call_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sessions: dict[str, MemorySession] = {}

    def open_session(key: str) -> MemorySession:
        return sessions.setdefault(key, EndRefusingSession(key=key))

    owners = OwnerRegistry(open_session=open_session)
    lead = linked_research_lead(
        owners,
        call("research", {"question": "q"}, "l2"),
        said("done"),
    )
    with caplog.at_level(logging.WARNING, logger="dsh_tool_todo"):
        result = asyncio.run(lead.run("go", deps="bob"))
    assert result.output == "done"
    child = sessions["bob/researcher@l2"]
    assert [event["type"] for event in child.events] == ["session/link", "todo/write"]
    (record,) = [r for r in caplog.records if r.name == "dsh_tool_todo"]
    assert record.levelno == logging.WARNING
    assert record.getMessage() == (
        "the end (finished) of sub-agent session 'bob/researcher@l2' was not recorded: "
        "no space left on device"
    )


@pytest.mark.parametrize("call_id", ["l" * 5000, "l\x00", "\udc80"])
def test_a_delegating_call_id_no_link_can_hold_links_the_sub_agent_without_it(
    tmp_path: Path, call_id: str, caplog: pytest.LogCaptureFixture
) -> None:
    owners = OwnerRegistry(tmp_path)
    lead = linked_research_lead(
        owners,
        call("research", {"question": "q"}, call_id),
        said("done"),
    )
    with caplog.at_level(logging.WARNING, logger="dsh_tool_todo"):
        result = asyncio.run(lead.run("go", deps="bob"))
    owners.close()
    assert result.output == "done"
    # the key holds a digest of the id instead of the id itself
    digest = hashlib.sha256(call_id.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    log = tmp_path / owner_file_name(f"bob/researcher@{digest}")
    assert head(log)["data"] == {"parent": "bob"}
    written = read_events(log)[1]["data"]
    assert written["todos"] == started("Search")["todos"]
    (record,) = [r for r in caplog.records if r.name == "dsh_tool_todo"]
    assert "linked without its parent's call id: parent_call_id must" in record.getMessage()


def researcher_planning_its_question(todo: Any) -> Any:
    """A sub-agent whose model plans the question it was asked, then answers, however many of
    its runs are interleaved."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        question = str(messages[0].parts[-1].content)  # type: ignore[union-attr]
        if len(messages) == 1:
            return call("todo_write", started(f"Research {question}"), f"r-{question}")
        return said(f"found {question}")

    return Agent(FunctionModel(respond), name="researcher", deps_type=str, toolsets=[todo])


def test_each_run_of_a_sub_agent_has_its_own_session_at_once_or_one_after_the_other(
    tmp_path: Path,
) -> None:
    owners = OwnerRegistry(tmp_path)
    todo = todo_write_toolset(allow_parallel_in_progress=False, owners=owners)
    research = asking(researcher_planning_its_question(todo))
    both_at_once = ModelResponse(
        parts=[
            ToolCallPart("research", {"question": "A"}, tool_call_id="l2"),
            ToolCallPart("research", {"question": "B"}, tool_call_id="l3"),
        ]
    )
    lead = linked_lead(
        todo, research, both_at_once, call("research", {"question": "C"}, "l4"), said("done")
    )
    asyncio.run(lead.run("go", deps="ada"))
    owners.close()
    assert tree(tmp_path) == [
        (0, "ada", None, ()),
        (1, "ada%2fresearcher%40l2", "ada", ("Research A",)),
        (1, "ada%2fresearcher%40l3", "ada", ("Research B",)),
        (1, "ada%2fresearcher%40l4", "ada", ("Research C",)),
    ]
    for call_id, question in (("l2", "A"), ("l3", "B"), ("l4", "C")):
        log = tmp_path / f"ada%2fresearcher%40{call_id}.jsonl"
        events = read_events(log)
        assert events[0]["data"] == {"parent": "ada", "parentCallId": call_id}
        assert [e["data"]["todos"][0]["content"] for e in events[1:-1]] == [f"Research {question}"]
        assert events[-1]["type"] == "session/end"


def test_without_the_wrapper_a_sub_agent_shares_its_parents_plan(tmp_path: Path) -> None:
    """What linked_toolset changes: the same deps and no wrapper write one session."""
    owners = OwnerRegistry(tmp_path)
    todo = todo_write_toolset(allow_parallel_in_progress=False, owners=owners)
    helper = planning_agent("helper", todo, "Sub", "h1", "ok")

    async def delegate(ctx: RunContext[str]) -> str:
        return (await helper.run("x", deps=ctx.deps, usage=ctx.usage)).output

    lead = Agent(
        replying(
            call("todo_write", started("Top"), "l1"),
            call("delegate", {}, "l2"),
            said("done"),
        ),
        name="lead",
        deps_type=str,
        toolsets=[todo, FunctionToolset([delegate])],
    )
    asyncio.run(lead.run("go", deps="eve"))
    owners.close()
    assert tree(tmp_path) == [(0, "eve", None, ("Sub",))]


def test_linked_toolset_refuses_what_is_not_a_toolset() -> None:
    with pytest.raises(UsageError, match="takes a pydantic-ai toolset"):
        linked_toolset([])  # type: ignore[arg-type]


def test_openai_agents_reminder_filter_reads_a_linked_sub_agents_own_plan() -> None:
    # the sub-agent's run takes the same RunConfig: its plan is its own (ada/researcher),
    # empty here, so nothing is re-surfaced, least of all its parent's plan
    from dsh_tool_todo.integrations.openai_agents import plan_reminder_filter

    owners = OwnerRegistry()
    todo = ada_todo(owners)
    config = RunConfig(
        tracing_disabled=True,
        call_model_input_filter=plan_reminder_filter(owner="ada", owners=owners),
    )
    sub_model = ScriptedModel([[assistant_message("found")]])
    researcher = OpenAIAgent(name="researcher", model=sub_model, tools=[todo])
    research = researcher.as_tool(
        tool_name="research", tool_description="Research", run_config=config
    )
    lead = delegating_lead(todo, research)
    assert asyncio.run(Runner.run(lead, "go", run_config=config)).final_output == "done"
    assert sub_model.first_call is not None
    assert sub_model.first_call.input == [{"content": "q", "role": "user"}]
