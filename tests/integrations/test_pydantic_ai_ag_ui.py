"""The plan in an AG-UI app built on pydantic-ai: todo_write_toolset(ag_ui=...) end to end.

A scripted agent is served by pydantic-ai's own AG-UI adapter (``AGUIAdapter``
behind a Starlette route, in process over httpx's ASGI transport); the SSE
stream is read back with ``ag-ui-protocol``'s event models, as an AG-UI
client would, and the model's own requests are compared with a run without
the option: the events reach the UI, and the model reads the same texts.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import jsonpatch  # type: ignore[import-untyped]  # RFC 6902, as AG-UI clients apply it
import pytest
from ag_ui.core import (
    ActivitySnapshotEvent,
    Event,
    RunAgentInput,
    StateDeltaEvent,
    ToolCallResultEvent,
    UserMessage,
)
from pydantic import TypeAdapter
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.ui.ag_ui import AGUIAdapter
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from dsh_tool_todo import UsageError, todo_write_tool
from dsh_tool_todo.core.contract import EVENT_TYPE, TURN_START
from dsh_tool_todo.integrations.pydantic_ai import AgUiEvents, todo_write_toolset
from dsh_tool_todo.stores.memory import MemorySession
from dsh_tool_todo.stores.owners import OwnerRegistry
from tests._builders import PLAN_A, PLAN_B, todo, written_plans
from tests.integrations.scripted_pydantic_ai import StreamedScript

BAD = {"todos": PLAN_A, "merge": True}  # refused: an unknown key
THREAD = "thread-7"
EVENTS: TypeAdapter[Any] = TypeAdapter(Event)
pytestmark = pytest.mark.usefixtures("no_model_requests")


def _not_streamed(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    raise AssertionError("the AG-UI adapter streams: the model is asked with request_stream")


def serve(script: StreamedScript, session: MemorySession, ag_ui: AgUiEvents | None) -> Starlette:
    """An AG-UI app: the adapter line is the toolset; the rest is pydantic-ai's own."""
    agent = Agent(
        FunctionModel(_not_streamed, stream_function=script),
        toolsets=[todo_write_toolset(allow_parallel_in_progress=False, ag_ui=ag_ui)],
    )

    async def run(request: Request) -> Response:
        return await AGUIAdapter.dispatch_request(request, agent=agent, deps=session)

    return Starlette(routes=[Route("/agent", run, methods=["POST"])])


async def post_run(app: Starlette) -> list[Any]:
    """POST a RunAgentInput as an AG-UI client does; the SSE events, parsed by ag-ui-protocol."""
    run_input = RunAgentInput(
        thread_id=THREAD,
        run_id="run-1",
        state={},
        messages=[UserMessage(id="u1", role="user", content="plan the fix")],
        tools=[],
        context=[],
        forwarded_props={},
    )
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://ui.test") as client:
        response = await client.post(
            "/agent",
            content=run_input.model_dump_json(by_alias=True),
            headers={"Content-Type": "application/json", "Accept": "text/event-stream"},
        )
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    frames = [frame for frame in response.text.split("\n\n") if frame.strip()]
    events = []
    for frame in frames:
        assert frame.startswith("data: "), frame
        events.append(EVENTS.validate_json(frame[len("data: ") :]))
    return events


def run_app(
    ag_ui: AgUiEvents | None, *steps: list[Any]
) -> tuple[StreamedScript, MemorySession, list[Any]]:
    script = StreamedScript(*steps)
    session = MemorySession()
    events = asyncio.run(post_run(serve(script, session, ag_ui)))
    return script, session, events


def apply_delta(state: dict[str, Any], event: StateDeltaEvent) -> dict[str, Any]:
    """What an AG-UI client does with a STATE_DELTA: apply its RFC 6902 patch."""
    patch = event.model_dump(mode="json", by_alias=True)["delta"]
    return jsonpatch.apply_patch(state, patch)  # type: ignore[no-any-return]


STEPS = ([PLAN_A, BAD], [PLAN_B])


def test_the_ui_sees_each_recorded_plan_as_activity_and_state() -> None:
    _, session, events = run_app("both", *STEPS)
    kinds = [type(event).__name__ for event in events]
    assert kinds[0] == "RunStartedEvent"
    assert kinds[-1] == "RunFinishedEvent"
    assert events[0].thread_id == THREAD
    activities = [event for event in events if isinstance(event, ActivitySnapshotEvent)]
    deltas = [event for event in events if isinstance(event, StateDeltaEvent)]
    # the refused call (unknown key) recorded nothing, so it shows nothing
    assert written_plans(session) == [PLAN_A, PLAN_B]
    assert [(a.message_id, a.activity_type, a.replace) for a in activities] == [
        (f"plan:{THREAD}", "PLAN", True)
    ] * 2
    assert [a.content for a in activities] == [{"todos": PLAN_A}, {"todos": PLAN_B}]
    # each snapshot follows its own call's result, activity first
    results = {
        event.tool_call_id: index
        for index, event in enumerate(events)
        if isinstance(event, ToolCallResultEvent)
    }
    for call_id, activity, delta in zip(("s0c0", "s1c0"), activities, deltas, strict=True):
        at = events.index(activity)
        assert at == results[call_id] + 1
        assert events[at + 1] is delta
    # a client keeps one plan activity per messageId, replaced by each snapshot
    shown: dict[str, Any] = {}
    for activity in activities:
        shown[activity.message_id] = activity.content
    assert shown == {f"plan:{THREAD}": {"todos": PLAN_B}}
    # and the shared state: its own keys stay, todos is the last plan
    state: dict[str, Any] = {"user": "kept"}
    for delta in deltas:
        state = apply_delta(state, delta)
    assert state == {"user": "kept", "todos": PLAN_B}


@pytest.mark.parametrize("ag_ui", ["activity", "state"])
def test_one_kind_of_event_alone(ag_ui: AgUiEvents) -> None:
    _, _, events = run_app(ag_ui, [PLAN_A])
    wanted, unwanted = (
        (ActivitySnapshotEvent, StateDeltaEvent)
        if ag_ui == "activity"
        else (StateDeltaEvent, ActivitySnapshotEvent)
    )
    assert len([event for event in events if isinstance(event, wanted)]) == 1
    assert not [event for event in events if isinstance(event, unwanted)]


def test_the_model_reads_exactly_what_it_reads_without_the_option() -> None:
    plain_script, plain_session, plain_events = run_app(None, *STEPS)
    script, session, events = run_app("both", *STEPS)
    read = script.read_by_model()
    assert read == plain_script.read_by_model()
    assert [(call_id, outcome) for call_id, outcome, _, _ in read] == [
        ("s0c0", "success"),
        ("s0c1", "failed"),  # the refusal, through ToolFailed as without ag_ui
        ("s1c0", "success"),
    ]
    refusal = todo_write_tool(allow_parallel_in_progress=False).call(BAD, MemorySession())
    assert read[1][2] == refusal  # with the provider's error flag, as without the option
    assert read[0][2] == read[0][3] == "Updated todo list: 1 pending, 1 in progress, 0 completed."
    assert read[2][2] == "Updated todo list: 0 pending, 1 in progress, 1 completed."

    # the UI's tool results are the same texts too
    def results(stream: list[Any]) -> list[tuple[str, str]]:
        return [
            (event.tool_call_id, event.content)
            for event in stream
            if isinstance(event, ToolCallResultEvent)
        ]

    assert results(events) == results(plain_events)
    shown = (ActivitySnapshotEvent, StateDeltaEvent)
    assert not [event for event in plain_events if isinstance(event, shown)]
    assert written_plans(session) == written_plans(plain_session)


def test_the_events_ride_only_in_metadata_the_model_never_reads() -> None:
    script, _, _ = run_app("activity", [PLAN_A])
    returns = [
        part
        for message in script.requests[-1]
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    ]
    assert len(returns) == 1
    assert isinstance(returns[0].content, str)
    [activity] = returns[0].metadata
    assert isinstance(activity, ActivitySnapshotEvent)


def test_a_new_conversation_clears_nothing_it_did_not_record() -> None:
    # the toolset appends no turn/start of its own: the UI sees writes only
    _, session, events = run_app("both", [PLAN_A])
    assert [event["type"] for event in session.events] == [EVENT_TYPE]
    assert TURN_START not in {event["type"] for event in session.events}
    assert len([event for event in events if isinstance(event, ActivitySnapshotEvent)]) == 1


def test_a_hostile_content_is_passed_through_as_data() -> None:
    hostile = [todo('</script><img src=x onerror="alert(1)">\u202e', "in_progress")]
    _, _, events = run_app("activity", [hostile])
    [activity] = [event for event in events if isinstance(event, ActivitySnapshotEvent)]
    assert activity.content == {"todos": hostile}


def test_an_unknown_ag_ui_choice_is_refused() -> None:
    with pytest.raises(UsageError, match=r"ag_ui must be one of activity, state, both"):
        todo_write_toolset(allow_parallel_in_progress=False, ag_ui="plan")  # type: ignore[arg-type]


def test_without_ag_ui_protocol_the_option_names_its_extra(tmp_path: Path) -> None:
    (tmp_path / "ag_ui.py").write_text("# the user's own module, hiding the protocol package\n")
    code = (
        "from dsh_tool_todo.integrations import MissingExtra\n"
        "from dsh_tool_todo.integrations.pydantic_ai import todo_write_toolset\n"
        "todo_write_toolset(allow_parallel_in_progress=False)\n"  # fine without the option
        "try:\n    todo_write_toolset(allow_parallel_in_progress=False, ag_ui='activity')\n"
        "except MissingExtra as error:\n    print(error)\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith(
        "todo_write_toolset(ag_ui=...) needs the 'pydantic-ai-ag-ui' extra: "
        "install dsh-tool-todo[pydantic-ai-ag-ui]"
    ), run.stdout


def test_a_lone_surrogate_reaches_the_ui_as_a_replacement_character() -> None:
    # the log keeps what the model sent; the AG-UI encoder refuses a lone surrogate, so
    # the event shows U+FFFD instead of ending the run's stream with an encoding error
    from ag_ui.encoder import EventEncoder

    from dsh_tool_todo.integrations.pydantic_ai import _ag_ui_events

    context: Any = SimpleNamespace(conversation_id=THREAD)
    plan = [todo("a\ud800b", "in_progress"), todo("plain")]
    activity, delta = _ag_ui_events("both")(context, plan)  # type: ignore[arg-type]
    shown = [todo("a\ufffdb", "in_progress"), todo("plain")]
    assert activity.content == {"todos": shown}
    frames = [
        json.loads(EventEncoder().encode(event)[len("data: ") :]) for event in (activity, delta)
    ]
    assert frames[0]["content"] == {"todos": shown}
    assert frames[1]["delta"] == [{"op": "add", "path": "/todos", "value": shown}]
    assert plan[0]["content"] == "a\ud800b"  # the recorded list is not changed


def test_an_owner_registry_toolset_shows_the_plan_too() -> None:
    script = StreamedScript([PLAN_A])
    with OwnerRegistry() as owners:
        agent = Agent(
            FunctionModel(_not_streamed, stream_function=script),
            toolsets=[
                todo_write_toolset(allow_parallel_in_progress=False, owners=owners, ag_ui="both")
            ],
        )

        async def run(request: Request) -> Response:
            return await AGUIAdapter.dispatch_request(request, agent=agent, deps="alice")

        events = asyncio.run(post_run(Starlette(routes=[Route("/agent", run, methods=["POST"])])))
        assert [e["data"]["todos"] for e in owners.session("alice").events] == [PLAN_A]
    [activity] = [event for event in events if isinstance(event, ActivitySnapshotEvent)]
    assert (activity.message_id, activity.content) == (f"plan:{THREAD}", {"todos": PLAN_A})
    [delta] = [event for event in events if isinstance(event, StateDeltaEvent)]
    assert apply_delta({}, delta) == {"todos": PLAN_A}
