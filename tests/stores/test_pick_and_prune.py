"""The picker's two calls for a place that holds many logs: ``pick_log`` (the log of an owner,
or the most recently written) and ``prune_logs`` (the logs last written long ago, deleted), on
a directory of JSONL logs; a database's side is ``postgres/test_prune.py``."""

from __future__ import annotations

import errno
import os
import time
from pathlib import Path
from typing import Any

import pytest

from dsh_tool_todo import stores
from dsh_tool_todo.core.contract import EVENT_TYPE
from dsh_tool_todo.errors import UsageError
from dsh_tool_todo.stores.jsonl import JsonlSession
from dsh_tool_todo.stores.jsonl._prune import CHANGED, DAY, GONE, _delete_unchanged, prune_directory
from dsh_tool_todo.stores.owners import owner_file_name
from tests.conftest import todo

NOW = time.time()


def _log(path: Path, *contents: str, age_days: float = 0.0) -> Path:
    """A log at ``path`` holding one plan, last written ``age_days`` days ago."""
    with JsonlSession(path) as session:
        session.append(EVENT_TYPE, {"todos": [todo(content) for content in contents]})
    os.utime(path, (NOW - age_days * DAY, NOW - age_days * DAY))
    return path


def _contents(target: str, session: str | None) -> list[str]:
    return [item["content"] for item in stores.current_plan(target, session) or []]


def test_a_session_in_a_directory_is_the_log_of_that_owner_key(tmp_path: Path) -> None:
    _log(tmp_path / owner_file_name("team/lead"), "Lead's")
    _log(tmp_path / owner_file_name("worker"), "Worker's")

    target, session = stores.pick_log(tmp_path, "team/lead")

    assert (target, session) == (str(tmp_path / owner_file_name("team/lead")), None)
    assert _contents(target, session) == ["Lead's"]
    assert _contents(str(tmp_path), "worker") == ["Worker's"]  # the readers take the pair too
    assert stores.follow_plans(tmp_path, "worker")[0] == str(tmp_path / "worker.jsonl")


def test_no_session_picks_the_most_recently_written_log(tmp_path: Path) -> None:
    _log(tmp_path / "older.jsonl", "Old", age_days=2)
    _log(tmp_path / "newest.jsonl", "New", age_days=1)
    _log(tmp_path / ".hidden.jsonl", "Hidden")
    (tmp_path / "notes.txt").write_text("written last", encoding="utf-8")
    outside = _log(tmp_path.parent / f"{tmp_path.name}-outside.jsonl", "Outside")
    (tmp_path / "link.jsonl").symlink_to(outside)  # newer, but a link is no log here

    assert stores.pick_log(tmp_path) == (str(tmp_path / "newest.jsonl"), None)
    os.utime(tmp_path / "older.jsonl")  # written now
    assert stores.pick_log(str(tmp_path)) == (str(tmp_path / "older.jsonl"), None)


def test_a_file_is_picked_as_itself_and_takes_no_session(tmp_path: Path) -> None:
    log = _log(tmp_path / "agent.jsonl", "A")
    assert stores.pick_log(log) == (str(log), None)
    with pytest.raises(UsageError, match=r"agent\.jsonl is one log: --session goes with a dir"):
        stores.pick_log(log, "agent")


def test_a_directory_with_no_log_yet_says_how_to_wait_for_one(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("", encoding="utf-8")
    with pytest.raises(UsageError, match=r": no session log in it yet \(to wait for one: "):
        stores.pick_log(tmp_path)


def test_an_owners_log_in_a_directory_not_made_yet_can_be_awaited(tmp_path: Path) -> None:
    place = tmp_path / "later"
    target, _ = stores.pick_log(place, "agent")
    awaited: list[str] = []

    def record(what: str) -> None:
        awaited.append(what)
        place.mkdir()
        staged = _log(tmp_path / "staged.jsonl", "First")
        staged.replace(place / "agent.jsonl")  # whole, as a reader first sees it

    title, plans = stores.follow_plans(place, "agent", wait=record, interval=0.01)
    assert target == title == awaited[0] == str(place / "agent.jsonl")
    assert [item["content"] for item in next(plans) or []] == ["First"]


CONNINFO = "host=127.0.0.1 password=SeCrEtPw port=1 dbname=none"


@pytest.mark.parametrize(
    "call",
    [
        lambda: stores.current_plan(CONNINFO),
        lambda: stores.follow_plans(CONNINFO),
        lambda: stores.open_log(CONNINFO),
    ],
)
def test_a_conninfo_names_a_database_to_read_as_sessions_takes_it(
    call: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError, match=r"^a database URL needs --session ID") as refused:
        call()  # type: ignore[operator]
    assert "SeCrEtPw" not in str(refused.value)
    assert list(tmp_path.iterdir()) == []


def test_prune_deletes_the_logs_last_written_before_the_cutoff(tmp_path: Path) -> None:
    _log(tmp_path / "stale.jsonl", "S", age_days=10)
    _log(tmp_path / "old.jsonl", "O", age_days=3.5)
    _log(tmp_path / "fresh.jsonl", "F", age_days=1)
    _log(tmp_path / ".hidden.jsonl", "H", age_days=10)
    (tmp_path / "notes.txt").write_text("", encoding="utf-8")
    os.utime(tmp_path / "notes.txt", (NOW - 10 * DAY, NOW - 10 * DAY))

    where, named, left = stores.prune_logs(tmp_path, 3, dry_run=True)
    assert where == str(tmp_path)
    assert [name for name, _ in named] == ["old", "stale"]
    assert left == []
    assert (tmp_path / "old.jsonl").exists()

    where, pruned, left = stores.prune_logs(str(tmp_path), 3)

    assert pruned == named
    assert left == []
    assert abs(pruned[1][1].timestamp() - (NOW - 10 * DAY)) < 1
    assert pruned[1][1].utcoffset() is not None
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        ".hidden.jsonl",
        "fresh.jsonl",
        "notes.txt",
    ]
    assert [name for name, _ in stores.prune_logs(tmp_path, 0.5)[1]] == ["fresh"]


def test_prune_never_follows_a_symlink_out_of_the_directory(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    elsewhere = _log(tmp_path / "elsewhere.jsonl", "Not mine", age_days=10)
    (logs / "link.jsonl").symlink_to(elsewhere)
    os.utime(logs / "link.jsonl", (NOW - 10 * DAY, NOW - 10 * DAY), follow_symlinks=False)
    (logs / "dir.jsonl").symlink_to(tmp_path, target_is_directory=True)

    where, pruned, left = stores.prune_logs(logs, 1)
    assert (where, pruned) == (str(logs), [])
    assert [(name, why) for name, _, why in left] == [
        ("link", "a symlink: never followed nor deleted")  # named, as every old one left is
    ]
    assert elsewhere.exists()
    assert (logs / "link.jsonl").is_symlink()


def test_prune_leaves_a_log_a_writer_holds_open(tmp_path: Path) -> None:
    log = tmp_path / "busy.jsonl"
    with JsonlSession(log) as session:
        session.append(EVENT_TYPE, {"todos": [todo("Held")]})
        os.utime(log, (NOW - 10 * DAY, NOW - 10 * DAY))
        pruned, left = prune_directory(str(tmp_path), 1)
        assert pruned == []
        assert [(name, why) for name, _, why in left] == [("busy", "a writer holds it open")]
    assert prune_directory(str(tmp_path), 1, now=NOW)[0][0][0] == "busy"
    assert not log.exists()


def test_prune_leaves_a_log_written_or_replaced_after_it_was_judged_old(tmp_path: Path) -> None:
    written = _log(tmp_path / "written.jsonl", "W", age_days=10)
    judged = written.stat()
    with JsonlSession(written) as session:
        session.append(EVENT_TYPE, {"todos": [todo("Again")]})
    assert _delete_unchanged(str(written), judged) == CHANGED
    assert written.exists()

    replaced = _log(tmp_path / "replaced.jsonl", "R", age_days=10)
    judged = replaced.stat()
    newer = _log(tmp_path / "newer.jsonl", "N", age_days=10)
    newer.replace(replaced)
    assert _delete_unchanged(str(replaced), judged) == CHANGED
    assert replaced.exists()

    gone = _log(tmp_path / "gone.jsonl", "G", age_days=10)
    judged = gone.stat()
    gone.unlink()
    assert _delete_unchanged(str(gone), judged) == GONE  # deleted by another: not reported


def test_prune_refuses_what_is_not_a_directory_of_logs(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"nope: not a directory of session logs"):
        stores.prune_logs(tmp_path / "nope", 1)
    with pytest.raises(UsageError, match=r"the source is empty"):
        stores.prune_logs("", 1)


def _refusing(monkeypatch: pytest.MonkeyPatch, name: str, refused: Path) -> None:
    """``os.<name>`` refuses ``refused`` with EACCES (a mode refuses no one under root, so the
    system's answer is faked); every other path is the system's."""
    real = getattr(os, name)

    def refusing(path: Any, *args: Any, **options: Any) -> Any:
        if str(path) == str(refused):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real(path, *args, **options)

    monkeypatch.setattr(os, name, refusing)


@pytest.mark.parametrize(("refuse", "why"), [("open", "opened"), ("unlink", "deleted")])
def test_prune_names_an_old_log_it_cannot_open_or_delete(
    refuse: str, why: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    unreadable = _log(tmp_path / "unreadable.jsonl", "U", age_days=10)
    _log(tmp_path / "stale.jsonl", "S", age_days=10)
    (tmp_path / "dir.jsonl").mkdir()
    os.utime(tmp_path / "dir.jsonl", (NOW - 10 * DAY, NOW - 10 * DAY))
    _refusing(monkeypatch, refuse, unreadable)
    if refuse == "open":  # a dry run opens each log too (and locks none)
        _, named, would_leave = stores.prune_logs(tmp_path, 1, dry_run=True)
        assert [name for name, _ in named] == ["stale"]
        assert [(name, reason) for name, _, reason in would_leave][1] == (
            "unreadable",
            "cannot be opened: Permission denied",
        )

    _, pruned, left = stores.prune_logs(tmp_path, 1)

    assert [name for name, _ in pruned] == ["stale"]  # the others are still pruned
    assert [(name, reason) for name, _, reason in left] == [
        ("dir", "not a regular file"),
        ("unreadable", f"cannot be {why}: Permission denied"),
    ]
    assert abs(left[1][1].timestamp() - (NOW - 10 * DAY)) < 1
    assert unreadable.exists()
