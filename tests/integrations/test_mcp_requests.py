"""A person's requests through the MCP server and the official client: told once in the next
recorded ``todo_write`` result, listed in ``todo://plan`` until the agent's answer."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from dsh_tool_todo.core import contract
from dsh_tool_todo.core.contract import REQUEST_TAKEN
from dsh_tool_todo.core.requests import Request
from dsh_tool_todo.integrations.mcp import build_server
from dsh_tool_todo.integrations.mcp._plan import PlanResource
from dsh_tool_todo.stores import open_reader
from dsh_tool_todo.stores.owners import OwnerRegistry
from tests.integrations import requests_scenario as scenario
from tests.integrations.test_mcp import (
    CLIENT_MODES,
    Updates,
    connected,
    read_plan,
    result_of,
    subscribed,
    text_result,
)

SUCCESS = contract.SUCCESS_TEXT.format(pending=1, inProgress=1, completed=0)
DONE = contract.SUCCESS_TEXT.format(pending=0, inProgress=1, completed=1)


@pytest.mark.parametrize("mode", CLIENT_MODES)
def test_the_next_result_names_the_request_once_after_the_success_text(
    tmp_path: Path, mode: str
) -> None:
    owners, log = scenario.planned(tmp_path)
    server = build_server(allow_parallel_in_progress=False, owners=owners, owner=scenario.OWNER)

    async def run() -> list[Any]:
        async with connected(server, mode=mode) as client:
            asked = scenario.ask(log)
            refused = await client.call_tool("todo_write", {"todos": scenario.PLAN, "merge": True})
            told = await client.call_tool("todo_write", {"todos": scenario.PLAN})
            pending = await read_plan(client)
            again = await client.call_tool("todo_write", {"todos": scenario.PLAN})
            honoured = await client.call_tool("todo_write", scenario.HONOURED)
            return [
                asked,
                result_of(refused),
                result_of(told),
                pending,
                result_of(again),
                result_of(honoured),
                await read_plan(client),
            ]

    asked, refused, told, pending, again, honoured, after = asyncio.run(run())
    owners.close()
    # a refusal stays its one text; the first recorded call's result: the success text as it
    # always is, then the notice, a text of its own
    assert len(refused["content"]) == 1
    assert refused["isError"] is True
    assert told == {
        "content": [{"type": "text", "text": SUCCESS}, {"type": "text", "text": scenario.notice()}],
        "isError": False,
    }
    assert again == text_result(SUCCESS, error=False)  # told once
    assert honoured == text_result(DONE, error=False)
    assert pending == {"todos": scenario.PLAN, "requests": [asked.as_json()]}
    assert after == scenario.HONOURED  # answered: the key is gone, the resource as it always was
    scenario.assert_honoured(log, asked)


@pytest.mark.parametrize("mode", CLIENT_MODES)
def test_a_subscriber_is_told_when_a_request_is_taken(tmp_path: Path, mode: str) -> None:
    owners, log = scenario.planned(tmp_path)
    server = build_server(allow_parallel_in_progress=False, owners=owners, owner=scenario.OWNER)
    updates = Updates()

    async def run() -> list[Any]:
        async with (
            connected(server, message_handler=updates.handler, mode=mode) as client,
            subscribed(client, updates),
        ):
            first = await read_plan(client)
            asked = scenario.ask(log)
            await client.call_tool("todo_write", {"todos": scenario.PLAN})
            # the write, then the request taken: the last update follows both
            while "requests" not in (seen := await read_plan(client)):
                await updates.wait_for(len(updates.uris) + 1)
            told = len(updates.uris)
            await client.call_tool("todo_write", scenario.HONOURED)
            await updates.wait_for(told + 1)
            return [first, asked, seen, await read_plan(client)]

    first, asked, seen, last = asyncio.run(run())
    owners.close()
    assert first == {"todos": scenario.PLAN}
    assert seen == {"todos": scenario.PLAN, "requests": [asked.as_json()]}
    assert last == scenario.HONOURED


@pytest.mark.parametrize("mode", CLIENT_MODES)
def test_a_server_restarted_over_a_pending_request_lists_it_from_the_log(
    tmp_path: Path, mode: str
) -> None:
    first, log = scenario.planned(tmp_path)
    before = build_server(allow_parallel_in_progress=False, owners=first, owner=scenario.OWNER)

    async def told() -> Any:
        async with connected(before, mode=mode) as client:
            asked = scenario.ask(log)
            await client.call_tool("todo_write", {"todos": scenario.PLAN})  # told, then gone
            return asked

    asked = asyncio.run(told())
    first.close()
    owners = OwnerRegistry(tmp_path)
    server = build_server(allow_parallel_in_progress=False, owners=owners, owner=scenario.OWNER)

    async def run() -> list[Any]:
        async with connected(server, mode=mode) as client:
            listed = await read_plan(client)
            await client.call_tool("todo_write", {"todos": scenario.PLAN})  # no answer yet
            still = await read_plan(client)
            await client.call_tool("todo_write", scenario.HONOURED)
            return [listed, still, await read_plan(client)]

    listed, still, after = asyncio.run(run())
    owners.close()
    pending = {"todos": scenario.PLAN, "requests": [asked.as_json()]}
    assert listed == still == pending
    assert after == scenario.HONOURED
    scenario.assert_honoured(log, asked)


def test_a_request_taken_while_the_log_is_read_is_listed_too(tmp_path: Path) -> None:
    owners, _ = scenario.planned(tmp_path)
    session = owners.session(scenario.OWNER)
    late = Request("late", "add", "Tell the team", "grace", 0, 0.0)
    taken: list[Any] = []

    class Reading:
        """The directory's reader; the owner's writer takes a request just after it read."""

        def __init__(self) -> None:
            self.reader = open_reader(tmp_path)

        async def tail(self, name: str, **options: Any) -> Any:
            page = await self.reader.tail(name, **options)
            if not taken:
                taken.append(session.append(REQUEST_TAKEN, {**late.as_json(), "told": True}))
            return page

    plan = PlanResource(owners, scenario.OWNER, Reading())  # type: ignore[arg-type]
    read = asyncio.run(plan.read())
    owners.close()
    assert taken
    assert json.loads(read) == {"todos": scenario.PLAN, "requests": [late.as_json()]}
