"""``todo://plan?tree=1`` through the official client: the owner's plan and its sub-agents'.

The sub-agents are keyed and linked as the adapters key and link them
(``<parent>/<agent>@<call>`` in the owner registry's directory); one is linked
before the client connects, one while it is subscribed. Runs on whichever line
of the ``mcp`` package is installed, as ``test_mcp.py`` does.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dsh_tool_todo.core.contract import SESSION_END_EVENT_TYPE, TURN_START
from dsh_tool_todo.core.links import end_data
from dsh_tool_todo.integrations.mcp import PLAN_URI, build_server
from dsh_tool_todo.integrations.mcp._plan import TREE_URI
from dsh_tool_todo.stores import open_reader
from dsh_tool_todo.stores.owners import OwnerRegistry
from tests._builders import one_item_plan, owner_stem, todo, write_owner_log

from .test_mcp import CLIENT_MODES, PLAN, Updates, connected, read_plan, subscribed, wire

LEAD, RESEARCHER, CRITIC = "lead", "lead/researcher@c1", "lead/critic@c2"


def agent(key: str, parent: str, call: str | None, items: list[Any], **rest: Any) -> Any:
    name = key.rpartition("/")[2].partition("@")[0]
    attribution = {"session": owner_stem(key), "name": name, "parent": owner_stem(parent)}
    return {**attribution, "parentCallId": call, "end": None, **rest, "todos": items}


async def read_tree(client: Any) -> Any:
    (content,) = (await client.read_resource(TREE_URI)).contents
    dumped = wire(content)
    assert (dumped["uri"], dumped["mimeType"]) == (TREE_URI, "application/json")
    return json.loads(dumped["text"])


async def until(client: Any, updates: Updates, wanted: Callable[[Any], bool]) -> Any:
    """Read the tree after each notification until it is ``wanted`` (30 s at most)."""
    deadline = time.monotonic() + 30
    while True:
        seen = len(updates.uris)
        tree = await read_tree(client)
        if wanted(tree):
            return tree
        assert time.monotonic() < deadline, f"the tree never became what was wanted: {tree}"
        await updates.wait_for(seen + 1)


@pytest.mark.parametrize("mode", CLIENT_MODES)
def test_the_tree_resource_attributes_each_plan_to_its_agent(tmp_path: Path, mode: str) -> None:
    logs, elsewhere = tmp_path / "logs", tmp_path / "elsewhere"
    logs.mkdir()
    elsewhere.mkdir()
    write_owner_log(
        logs, RESEARCHER, one_item_plan("Search"), parent=owner_stem(LEAD), parent_call_id="c1"
    )
    # neither is under the owner as `dsh-todo sessions` draws it
    write_owner_log(logs, "orphan", one_item_plan("Lost"), parent="ghost")
    write_owner_log(elsewhere, "lead/stray@c3", one_item_plan("Elsewhere"), parent=owner_stem(LEAD))
    owners = OwnerRegistry(logs)
    server = build_server(allow_parallel_in_progress=False, owners=owners, owner=LEAD)
    updates = Updates()

    async def run() -> list[Any]:
        seen = []
        async with connected(server, message_handler=updates.handler, mode=mode) as client:
            seen.append(await read_tree(client))
            async with subscribed(client, updates, TREE_URI):
                await client.call_tool("todo_write", PLAN)
                seen.append(await until(client, updates, lambda tree: tree["todos"]))
                # linked while the client is subscribed: it is told, and the tree has it
                write_owner_log(
                    logs,
                    CRITIC,
                    one_item_plan("Review"),
                    parent=owner_stem(LEAD),
                    parent_call_id="c2",
                )
                seen.append(await until(client, updates, lambda tree: len(tree["subagents"]) == 2))
                write_owner_log(logs, RESEARCHER, one_item_plan("Search", "completed"))
                write_owner_log(logs, RESEARCHER, (SESSION_END_EVENT_TYPE, end_data("finished")))
                write_owner_log(
                    logs, CRITIC, (SESSION_END_EVENT_TYPE, end_data("failed", "crashed"))
                )
                seen.append(
                    await until(
                        client,
                        updates,
                        lambda tree: all(sub["end"] for sub in tree["subagents"]),
                    )
                )
            seen.append(await read_plan(client))
            seen.append([wire(listed) for listed in (await client.list_resources()).resources])
        return seen

    try:
        first, written, linked, ended, plain, listed = asyncio.run(run())
    finally:
        owners.close()
    researcher = agent(RESEARCHER, LEAD, "c1", [todo("Search", "in_progress")])
    assert first == {"session": owner_stem(LEAD), "todos": [], "subagents": [researcher]}
    assert written == {
        "session": owner_stem(LEAD),
        "todos": PLAN["todos"],
        "subagents": [researcher],
    }
    critic = agent(CRITIC, LEAD, "c2", [todo("Review", "in_progress")])
    assert sorted(linked["subagents"], key=lambda sub: sub["name"]) == [critic, researcher]
    assert sorted(ended["subagents"], key=lambda sub: sub["name"]) == [
        {**critic, "end": {"outcome": "failed", "error": "crashed"}},
        agent(RESEARCHER, LEAD, "c1", [todo("Search", "completed")], end={"outcome": "finished"}),
    ]
    # todo://plan is as it was, and the list names it alone
    assert plain == PLAN
    assert [resource["uri"] for resource in listed] == [PLAN_URI]


def test_a_sub_agent_under_a_sub_agent_is_in_the_tree_after_its_parent(tmp_path: Path) -> None:
    checker = "lead/researcher@c1/checker@r2"
    write_owner_log(
        tmp_path, RESEARCHER, one_item_plan("Search"), parent=owner_stem(LEAD), parent_call_id="c1"
    )
    write_owner_log(
        tmp_path, checker, one_item_plan("Check"), (TURN_START, {}), parent=owner_stem(RESEARCHER)
    )
    owners = OwnerRegistry(tmp_path)
    server = build_server(allow_parallel_in_progress=False, owners=owners, owner=LEAD)

    async def run() -> Any:
        async with connected(server) as client:
            return await read_tree(client)

    try:
        tree = asyncio.run(run())
    finally:
        owners.close()
    assert tree["subagents"] == [
        agent(RESEARCHER, LEAD, "c1", [todo("Search", "in_progress")]),
        agent(checker, RESEARCHER, None, []),  # its turn/start emptied its plan
    ]


def test_an_owner_in_memory_has_no_sub_agents_unless_a_reader_is_given(tmp_path: Path) -> None:
    write_owner_log(tmp_path, RESEARCHER, one_item_plan("Search"), parent=LEAD, parent_call_id="c1")

    async def run() -> list[Any]:
        trees = []
        alone = build_server(allow_parallel_in_progress=False, owner=LEAD)
        async with connected(alone) as client:
            trees.append(await read_tree(client))
        # the owner's log in memory, its sub-agents' in a directory: found by the owner's key,
        # as `dsh-todo sessions` shows them under a parent not visible there
        reader = open_reader(tmp_path)
        beside = build_server(allow_parallel_in_progress=False, owner=LEAD, reader=reader)
        async with connected(beside) as client:
            trees.append(await read_tree(client))
        await reader.aclose()
        return trees

    alone, beside = asyncio.run(run())
    assert alone == {"session": LEAD, "todos": [], "subagents": []}
    assert beside["subagents"] == [
        {
            "session": owner_stem(RESEARCHER),
            "name": "researcher",
            "parent": LEAD,
            "parentCallId": "c1",
            "end": None,
            "todos": [todo("Search", "in_progress")],
        }
    ]
