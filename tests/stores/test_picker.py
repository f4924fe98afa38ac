"""The one picker: ``stores`` turns a path or a ``postgresql://`` URL into the plan readers.

The CLI reads plans only through these functions, so it imports no backend module.
"""

from __future__ import annotations

import ast
import threading
from pathlib import Path

import pytest

import dsh_tool_todo.cli
from dsh_tool_todo import stores
from dsh_tool_todo.errors import UsageError
from dsh_tool_todo.stores.jsonl import JsonlSession
from tests.conftest import todo

BACKEND_MODULES = ("stores.jsonl", "stores.postgres", "sessionlog", "watch", "logread", "eventline")


def _write_plan(path: Path, *contents: str) -> None:
    with JsonlSession(path) as session:
        session.append("todo/write", {"todos": [todo(content) for content in contents]})


def test_the_cli_imports_no_backend_module() -> None:
    tree = ast.parse(Path(dsh_tool_todo.cli.__file__).read_text(encoding="utf-8"))
    imported = [
        node.module or ""
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.level > 0
    ]
    assert imported, "the walk found the CLI's relative imports"
    backends = [name for name in imported if name.startswith(BACKEND_MODULES)]
    assert not backends, f"cli.py imports a backend, not the picker: {backends}"


def test_current_plan_of_a_jsonl_log(tmp_path: Path) -> None:
    log = tmp_path / "agent.jsonl"
    _write_plan(log, "a", "b")
    plan = stores.current_plan(log)
    assert [item["content"] for item in plan or []] == ["a", "b"]
    assert stores.current_plan(str(log)) == plan


def test_a_missing_log_is_named(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"nope\.jsonl: no such session log$"):
        stores.current_plan(tmp_path / "nope.jsonl")
    with pytest.raises(FileNotFoundError, match=r"nope\.jsonl: no such session log$"):
        stores.follow_plans(tmp_path / "nope.jsonl")


def test_a_session_id_goes_with_a_database_only(tmp_path: Path) -> None:
    log = tmp_path / "agent.jsonl"
    _write_plan(log, "a")
    with pytest.raises(UsageError, match=r"--session goes with a postgresql:// URL, not a file"):
        stores.current_plan(log, "s1")
    with pytest.raises(UsageError, match=r"--session goes with a postgresql:// URL, not a file"):
        stores.follow_plans(log, "s1")


def test_follow_plans_waits_for_a_log_to_appear_then_follows_it(tmp_path: Path) -> None:
    log = tmp_path / "later.jsonl"
    awaited: list[str] = []

    def create_when_awaited(what: str) -> None:
        awaited.append(what)
        threading.Timer(0.05, _write_plan, (log, "first")).start()

    title, plans = stores.follow_plans(log, wait=create_when_awaited, interval=0.01)
    assert title == awaited[0] == str(log)
    first = next(plans)
    assert [item["content"] for item in first or []] == ["first"]


def test_a_database_url_goes_to_the_database_backend() -> None:
    # a session id is asked for before anything connects
    with pytest.raises(UsageError, match=r"a database URL needs --session ID"):
        stores.current_plan("postgresql://127.0.0.1:1/none")
    with pytest.raises(UsageError, match=r"a database URL needs --session ID"):
        stores.follow_plans("postgres://127.0.0.1:1/none")


def test_a_path_is_named_as_the_cli_always_named_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _write_plan(tmp_path / "agent.jsonl", "a")
    title, _ = stores.follow_plans("./agent.jsonl")
    assert title == "agent.jsonl"
    with pytest.raises(FileNotFoundError, match=r"^nope\.jsonl: no such session log$"):
        stores.current_plan("./nope.jsonl")
