"""Google ADK: the adapter contract through ADK's own loop (``InMemoryRunner``), with a
scripted ``BaseLlm``; the session as owner, the function response objects.

ADK 2.x needs Python 3.11 or later, and the ``google-adk`` extra installs it only there:
on older Pythons this module is skipped; on 3.11+ a missing package fails it.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from dsh_tool_todo.core.contract import EVENT_TYPE

if sys.version_info < (3, 11):  # pragma: no cover - the extra's marker leaves ADK out here
    pytest.skip("google-adk 2.x needs Python 3.11+", allow_module_level=True)

from google.adk.agents import LlmAgent
from google.adk.runners import InMemoryRunner
from google.genai import types

from dsh_tool_todo.core import contract
from dsh_tool_todo.core.schema import parameters
from dsh_tool_todo.errors import UsageError
from dsh_tool_todo.integrations.google_adk import TodoWriteAdkTool
from dsh_tool_todo.stores.owners import OwnerRegistry
from tests.integrations.adapter_contract import CHECKS, Driver, Reply, opener
from tests.integrations.child_import import import_where_finding_fails
from tests.integrations.scripted_google_adk import ScriptedLlm, calls_of, run_through

PLAN = {"todos": [{"content": "Read the code", "status": "in_progress"}]}


def run(tool: TodoWriteAdkTool, calls: Sequence[tuple[str, Any]], *, user: str = "u") -> Any:
    """One user message through ``InMemoryRunner``; the model and the ADK session."""
    script = [calls_of(calls), [types.Part(text="done")]] if calls else [[types.Part(text="ok")]]
    model = ScriptedLlm(model="scripted", script=script)
    runner = InMemoryRunner(agent=LlmAgent(name="planner", model=model, tools=[tool]), app_name="a")
    return model, run_through(runner, "plan it", user=user)


def responses(model: ScriptedLlm) -> dict[str, dict[str, Any]]:
    """The function responses the model read in its second request, by call id."""
    return {
        part.function_response.id or "": dict(part.function_response.response or {})
        for content in model.requests[1].contents
        for part in content.parts or []
        if part.function_response is not None
    }


class GoogleADKDriver:
    call_ids = True

    def offered(self, *, parallel: bool) -> tuple[str, str, Mapping[str, Any]]:
        model, _ = run(TodoWriteAdkTool(allow_parallel_in_progress=parallel), [])
        (tool,) = model.requests[0].config.tools or []
        (declaration,) = tool.function_declarations or []
        assert declaration.parameters is None  # the JSON Schema as it is, not ADK's Schema
        return (
            declaration.name or "",
            declaration.description or "",
            declaration.parameters_json_schema,
        )

    def turn(self, calls: Sequence[tuple[str, Any]], session: Any) -> list[Reply]:
        owners = OwnerRegistry(open_session=opener(session))
        model, _ = run(TodoWriteAdkTool(allow_parallel_in_progress=False, owners=owners), calls)
        read = responses(model)
        replies = []
        for cid, _ in calls:
            ((key, text),) = read[cid].items()
            replies.append(Reply(text, key == "error"))
        return replies


DRIVER: Driver = GoogleADKDriver()


@pytest.mark.parametrize("check", list(CHECKS.values()), ids=list(CHECKS))
def test_adapter_contract(check: Any) -> None:
    check(DRIVER)


def test_responses_are_result_and_error_objects_and_the_session_owns_the_plan() -> None:
    owners = OwnerRegistry()
    tool = TodoWriteAdkTool(allow_parallel_in_progress=False, owners=owners)
    model, session = run(tool, [("c1", {**PLAN, "merge": True}), ("c2", PLAN)])
    assert responses(model) == {
        "c1": {
            "error": "Error: invalid todos: unknown argument `merge`; todo_write takes only `todos`"
        },
        "c2": {"result": "Updated todo list: 0 pending, 1 in progress, 0 completed."},
    }
    assert owners.owners() == [session.id]
    written = owners.session(session.id).latest([EVENT_TYPE])
    assert written is not None
    assert written["data"] == {**PLAN, contract.CALL_ID_KEY: "c2"}


def test_each_adk_session_has_its_own_plan() -> None:
    owners = OwnerRegistry()
    tool = TodoWriteAdkTool(allow_parallel_in_progress=False, owners=owners)
    _, first = run(tool, [("c1", PLAN)])
    _, second = run(tool, [("c1", {"todos": []})])
    assert first.id != second.id
    assert sorted(owners.owners()) == sorted([first.id, second.id])


def test_an_owner_function_picks_the_key_and_none_is_refused_once_warned(
    caplog: pytest.LogCaptureFixture,
) -> None:
    owners = OwnerRegistry()
    by_user = TodoWriteAdkTool(
        allow_parallel_in_progress=False, owners=owners, owner=lambda c: c.session.user_id
    )
    run(by_user, [("c1", PLAN)], user="ada")
    assert owners.owners() == ["ada"]
    nobody = TodoWriteAdkTool(allow_parallel_in_progress=False, owners=owners, owner=lambda c: None)
    with caplog.at_level(logging.WARNING, logger="dsh_tool_todo"):
        model, _ = run(nobody, [("c1", PLAN)])
        run(nobody, [("c1", PLAN)])
    assert responses(model) == {"c1": {"error": contract.NO_OWNER}}
    ours = [r for r in caplog.records if r.name == "dsh_tool_todo"]
    assert [r.levelno for r in ours] == [logging.WARNING]
    assert owners.owners() == ["ada"]
    with pytest.raises(UsageError, match="owner= takes an owner key"):
        TodoWriteAdkTool(allow_parallel_in_progress=False, owner=7)  # type: ignore[arg-type]


def test_the_declaration_is_a_fresh_copy_of_our_schema() -> None:
    tool = TodoWriteAdkTool(allow_parallel_in_progress=False)
    declaration = tool._get_declaration()
    declaration.parameters_json_schema["properties"].clear()  # a request builder editing it
    assert tool._get_declaration().parameters_json_schema == parameters()


def test_without_adk_the_import_names_the_extra() -> None:
    run = import_where_finding_fails(
        "dsh_tool_todo.integrations.google_adk",
        when="name == 'google.adk' or name.startswith('google.adk.')",
        raises="ModuleNotFoundError(f'No module named {name!r}', name=name)",
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith(
        "dsh_tool_todo.integrations.google_adk needs the 'google-adk' extra: "
        "install dsh-tool-todo[google-adk]"
    )


def test_the_extra_is_marked_for_python_3_11_and_the_installed_adk_is_2x() -> None:
    import re
    from importlib.metadata import version
    from pathlib import Path

    pyproject = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text("utf-8")
    assert re.search(
        r"""^google-adk = \["google-adk>=2,<3; python_version >= '3\.11'"\]$""", pyproject, re.M
    )
    assert '"dsh-tool-todo[google-adk]"' in pyproject  # in dev: it resolves with it
    assert version("google-adk").startswith("2.")
