"""The fleet tree: links placed, unseen parents and cycles shown, and `dsh-todo sessions DIR`."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_tool_todo.core.contract import EVENT_TYPE
from dsh_tool_todo.plans.fleet import (
    MAX_DEPTH,
    MAX_TURN_WRITES,
    FleetNode,
    build_tree,
    fleet_json,
    read_fleet,
    render_tree,
)
from dsh_tool_todo.stores.jsonl import JsonlReader, JsonlSession
from tests._builders import todo, todo_write, todos
from tests.cli.test_cli import assert_usage_error, dsh_todo


def keys(roots: list[FleetNode], depth: int = 0) -> list[tuple[int, str, bool]]:
    found = []
    for node in roots:
        found.append((depth, node.key, node.visible))
        found += keys(node.children, depth + 1)
    return found


def linked(**parents: str) -> list[FleetNode]:
    """A node per session, keyed by name, under the parent its value names."""
    return [FleetNode(key, parent=parent) for key, parent in parents.items()]


def test_children_go_under_parents_and_unseen_parents_become_nodes() -> None:
    nodes = [
        FleetNode("grandchild", parent="child"),
        FleetNode("root"),
        FleetNode("child", parent="root"),
        FleetNode("orphan", parent="elsewhere"),
        FleetNode("orphan 2", parent="elsewhere"),
    ]
    assert keys(build_tree(nodes)) == [
        (0, "root", True),
        (1, "child", True),
        (2, "grandchild", True),
        (0, "elsewhere", False),
        (1, "orphan", True),
        (1, "orphan 2", True),
    ]


def test_a_link_cycle_shows_its_sessions_as_roots_and_keeps_what_hangs_off_it() -> None:
    roots = build_tree(linked(a="b", b="a", self="self", leaf="a"))
    assert keys(roots) == [(0, "a", True), (1, "leaf", True), (0, "b", True), (0, "self", True)]
    assert [node.cycle for node in roots] == [True, True, True]


def test_only_the_sessions_on_a_cycle_are_marked_not_those_leading_into_it() -> None:
    nodes = linked(tail="into", into="c1", c1="c2", c2="c3", c3="c1")
    roots = build_tree(nodes)
    assert sorted(node.key for node in roots) == ["c1", "c2", "c3"]
    assert {node.key for node in nodes if node.cycle} == {"c1", "c2", "c3"}
    assert keys([next(node for node in roots if node.key == "c1")]) == [
        (0, "c1", True),
        (1, "into", True),
        (2, "tail", True),
    ]


def test_a_chain_of_thousands_of_sub_agents_prints_as_text_and_json() -> None:
    # each sub-agent starting the next: deeper than the interpreter's recursion limit
    count = 3 * 1000 + 5
    nodes = [FleetNode(f"s{i}", parent=f"s{i - 1}" if i else None) for i in range(count)]
    roots = build_tree(nodes)
    text = render_tree(roots)
    assert len(text.splitlines()) == count
    document = json.loads(json.dumps(fleet_json(roots)))
    assert len(document) == len(roots) == -(-count // (MAX_DEPTH + 1))
    assert [root["key"] for root in document[:3]] == [
        "s0",
        f"s{MAX_DEPTH + 1}",
        f"s{2 * MAX_DEPTH + 2}",
    ]
    assert [root["deep"] for root in document[:2]] == [False, True]
    assert f"s{MAX_DEPTH + 1}\t" in text
    assert f"(under s{MAX_DEPTH}, more than {MAX_DEPTH} levels down)" in text
    assert sorted(key for _, key, _ in keys(roots)) == sorted(node.key for node in nodes)


def test_render_escapes_every_name_and_content() -> None:
    root = FleetNode("r\x1b]0;owned\x07", in_progress=("do \x1b[2J it",))
    root.children = [FleetNode("c", parent="r")]
    hidden = FleetNode("gone\u202e", visible=False)
    text = render_tree([root, hidden])
    assert "\x1b" not in text
    assert "\u202e" not in text
    assert text.splitlines() == [
        'r\\x1b]0;owned\\x07\tunreadable\tnow: "do \\x1b[2J it"',
        "  c\tunreadable",
        "gone\\u202e\t(parent not visible here)",
    ]


def record_plans(session: JsonlSession, *plans: list[tuple[str, str]]) -> None:
    """One todo/write per plan, each plan given as (content, status) pairs."""
    for plan in plans:
        session.append(EVENT_TYPE, todos(*(todo(*pair) for pair in plan)))


def test_sessions_prints_a_directory_as_a_tree(tmp_path: Path) -> None:
    with JsonlSession(tmp_path / "lead.jsonl") as lead:
        record_plans(lead, [("Split the work", "in_progress"), ("Merge", "pending")])
    with JsonlSession(tmp_path / "worker\n1.jsonl", parent="lead", parent_call_id="c1") as w:
        record_plans(
            w,
            [("A", "in_progress"), ("B", "pending"), ("C", "pending")],
            [("A", "completed"), ("B", "completed"), ("C", "completed")],
        )
    with JsonlSession(tmp_path / "stray.jsonl", parent="boss in another dir") as stray:
        record_plans(stray, [("X", "in_progress")])

    lines = dsh_todo("sessions", str(tmp_path)).stdout.splitlines()
    rows = [line.split("\t") for line in lines]
    assert [(row[0], row[1]) for row in rows] == [
        ("boss in another dir", "(parent not visible here)"),
        ("  stray", "0/1 done"),
        ("lead", "0/2 done"),
        ("  worker\\n1", "3/3 done"),
    ]
    assert rows[2][3] == 'now: "Split the work"'
    assert rows[3][3] == "! all_done_at_once@2"

    tree = json.loads(dsh_todo("sessions", str(tmp_path), "--json").stdout)
    assert tree["source"] == str(tmp_path)
    hidden, lead_node = tree["sessions"]
    assert (hidden["key"], hidden["visible"], hidden["children"][0]["key"]) == (
        "boss in another dir",
        False,
        "stray",
    )
    (worker,) = lead_node["children"]
    assert worker["key"] == "worker\n1"  # JSON carries the name as it is
    assert worker["parent"] == "lead"
    assert worker["signals"] == [
        {"kind": "all_done_at_once", "seq": 2, "items": ["A", "B", "C"], "count": 3}
    ]
    assert worker["progress"] == {"completed": 3, "total": 3, "inProgress": 0, "cleared": False}


def test_sessions_of_an_empty_or_missing_directory(tmp_path: Path) -> None:
    assert dsh_todo("sessions", str(tmp_path)).stdout == f"no sessions in {tmp_path}\n"
    assert json.loads(dsh_todo("sessions", str(tmp_path), "--json").stdout)["sessions"] == []
    run = dsh_todo("sessions", str(tmp_path / "nope"), check=False)
    assert_usage_error(run, "not a directory of session logs")
    run = dsh_todo("sessions", str(tmp_path), "--delete", "x", check=False)
    assert_usage_error(run, "--delete goes with a database URL")


def test_show_prints_the_turns_signals_under_the_plan(tmp_path: Path) -> None:
    log = tmp_path / "s.jsonl"
    with JsonlSession(log) as session:
        record_plans(
            session, [("A", "in_progress"), ("B\x1b[31m", "pending")], [("A", "in_progress")]
        )
    out = dsh_todo("show", str(log)).stdout
    assert out.splitlines()[-1] == '! dropped (1) at seq 1 - dropped unfinished: "B\\x1b[31m"'
    assert "dropped" not in dsh_todo("show", str(log), "--no-health").stdout
    assert json.loads(dsh_todo("show", str(log), "--format", "json").stdout) == [
        {"content": "A", "status": "in_progress"}
    ]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abcdefg"), st.none() | st.sampled_from("abcdefgxyz"))))
def test_every_session_appears_once_and_never_under_itself(
    links: list[tuple[str, str | None]],
) -> None:
    sessions = dict(links)  # one parent per key, as a store lists each session once
    roots = build_tree([FleetNode(key, parent=parent) for key, parent in sessions.items()])
    seen: list[str] = []

    def walk(node: FleetNode, above: tuple[str, ...]) -> None:
        assert node.key not in above
        if node.visible:
            seen.append(node.key)
        else:
            assert node.key not in sessions  # only a parent no session is
        for child in node.children:
            assert child.parent == node.key
            walk(child, (*above, node.key))

    for root in roots:
        assert root.parent is None or root.cycle or root.deep or not root.visible
        walk(root, ())
    assert sorted(seen) == sorted(sessions)


@contextmanager
def _watching(log: Path) -> Iterator[subprocess.Popen[str]]:
    """``dsh-todo watch --ascii`` on ``log``, redrawing every 50 ms; killed if still running."""
    from tests.cli.test_cli import ENV

    argv = [sys.executable, "-m", "dsh_tool_todo", "watch", str(log), "--ascii"]
    argv += ["--interval", "0.05"]
    pipe = subprocess.PIPE
    with subprocess.Popen(argv, stdout=pipe, stderr=pipe, encoding="utf-8", env=ENV) as watcher:
        try:
            yield watcher
        finally:
            watcher.kill()


def test_watch_draws_the_turns_signals_under_the_plan(tmp_path: Path) -> None:
    log = tmp_path / "live.jsonl"
    with JsonlSession(log) as session:
        record_plans(session, [("A", "in_progress"), ("B", "pending")], [("A", "in_progress")])
    with _watching(log) as watcher:
        assert watcher.stdout is not None
        seen: list[str] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not any(s.startswith("!") for s in seen):
            seen.append(watcher.stdout.readline().strip())
        assert '! dropped (1) at seq 1 - dropped unfinished: "B"' in seen
        watcher.send_signal(signal.SIGINT)
        assert watcher.wait(timeout=30) == 0


def test_a_source_named_with_control_bytes_is_escaped_in_the_error(tmp_path: Path) -> None:
    for command in ("sessions", "show"):
        run = dsh_todo(command, str(tmp_path / "x\x1b]0;owned\x07\x1b[2J\ry\u202e"), check=False)
        assert_usage_error(run, r"x\\x1b\]0;owned\\x07\\x1b\[2J\\ry\\u202e")
        assert "\x1b" not in run.stderr
        assert "\r" not in run.stderr


def test_one_log_that_cannot_be_read_is_a_row_marked_unreadable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # chmod 000 does not stop root: the refusal is made where every read opens a log, the
    # system call (the fleet's read of a short log opens it without a buffered file)
    with JsonlSession(tmp_path / "good.jsonl") as good:
        record_plans(good, [("A", "in_progress")])
    with JsonlSession(tmp_path / "locked.jsonl") as locked:
        record_plans(locked, [("B", "pending")])
    (tmp_path / "dir.jsonl").mkdir()
    (tmp_path / "binary.jsonl").write_bytes(b"\xff\xfe\x00\n")
    opened = os.open

    def refuse(path: Any, *args: Any, **kwargs: Any) -> int:
        if os.fspath(path).endswith("locked.jsonl"):
            raise PermissionError(13, "Permission denied", path)
        return opened(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", refuse)
    roots = asyncio.run(read_fleet(JsonlReader(tmp_path)))
    shown = sorted(render_tree(roots).splitlines())
    assert [line.split("\t")[:2] for line in shown] == [
        ["binary", "unreadable"],
        ["good", "0/1 done"],
        ["locked", "unreadable"],
    ]


def test_a_log_whose_name_no_url_can_carry_is_still_listed_after_the_tree(tmp_path: Path) -> None:
    with JsonlSession(tmp_path / "good.jsonl") as good:
        record_plans(good, [("A", "in_progress")])
    odd = os.fsencode(tmp_path) + b"/\xff\x1b.jsonl"
    with open(odd, "wb") as file:
        file.write(json.dumps(todo_write(seq=0)).encode() + b"\n")
    lines = dsh_todo("sessions", str(tmp_path)).stdout.splitlines()
    assert [line.split("\t")[:2] for line in lines] == [
        ["good", "0/1 done"],
        ["\\udcff\\x1b", "(a file name no URL can carry: not in the tree)"],
    ]
    tree = json.loads(dsh_todo("sessions", str(tmp_path), "--json").stdout)
    assert tree["unlisted"] == ["\udcff\x1b"]


def test_a_turn_longer_than_the_writes_read_says_at_least_in_show_and_sessions(
    tmp_path: Path,
) -> None:
    """``show`` and ``sessions`` read a turn's latest MAX_TURN_WRITES writes: a run under
    way before them was once reported stuck at a seq it was not, for 5 writes exactly."""
    with JsonlSession(tmp_path / "long.jsonl") as session:
        session.append("turn/start", {})
        for n in range(MAX_TURN_WRITES + 10):  # seqs 1 to 1010: the writes read are 11 on
            session.append(EVENT_TYPE, todos(todo("A", "in_progress"), todo(f"n{n}", "completed")))
    shown = dsh_todo("show", str(tmp_path / "long.jsonl")).stdout
    assert shown.splitlines()[-1] == '! stuck at seq 15 - in progress for at least 5 writes: "A"'
    (node,) = json.loads(dsh_todo("sessions", str(tmp_path), "--json").stdout)["sessions"]
    assert node["signals"] == [
        {"kind": "stuck", "seq": 15, "items": ["A"], "count": 5, "atLeast": True}
    ]
