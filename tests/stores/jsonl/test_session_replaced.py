"""A JSONL session whose file was deleted, moved or replaced while it was open: the append
that finds out acknowledges nothing, takes its line back and closes the session."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dsh_tool_todo.core.contract import EVENT_TYPE
from dsh_tool_todo.errors import LogReplaced, UsageError
from dsh_tool_todo.stores.jsonl import JsonlSession, read_events
from tests._builders import plan


def written(path: Path) -> list[Any]:
    return [event["data"]["todos"] for event in read_events(path)]


def deleted(path: Path) -> None:
    path.unlink()


def directory_removed(path: Path) -> None:
    shutil.rmtree(path.parent)


def replaced(path: Path) -> None:
    (path.parent / "new.jsonl").write_bytes(b"")
    os.replace(path.parent / "new.jsonl", path)


def moved(path: Path) -> None:
    path.rename(path.parent / "moved.jsonl")


def directory_made_a_file(path: Path) -> None:
    shutil.rmtree(path.parent)
    path.parent.write_text("a file\n")


CHANGES: dict[str, tuple[Callable[[Path], None], str]] = {
    "deleted": (deleted, "deleted or moved"),
    "directory removed": (directory_removed, "deleted or moved"),
    "replaced": (replaced, "replaced by another file"),
    "moved": (moved, "deleted or moved"),
    "directory made a file": (directory_made_a_file, r"put out of reach \(Not a directory\)"),
}


@pytest.mark.parametrize("fsync", [False, True], ids=["no-fsync", "fsync"])
@pytest.mark.parametrize("change", list(CHANGES))
def test_an_append_to_a_log_no_longer_at_its_path_is_refused_and_closes_the_session(
    tmp_path: Path, change: str, fsync: bool
) -> None:
    path = tmp_path / "logs" / "agent.jsonl"
    path.parent.mkdir()
    heard: list[Any] = []
    make, said = CHANGES[change]
    session = JsonlSession(path, fsync=fsync)
    session.subscribe(heard.append)
    session.append(EVENT_TYPE, plan("kept"))
    make(path)
    with pytest.raises(
        LogReplaced, match=rf"agent\.jsonl: the log was {said} since this session opened it: "
    ):
        session.append(EVENT_TYPE, plan("lost"))
    assert session.closed
    assert [event["data"] for event in heard] == [plan("kept")]  # no listener told of it
    with pytest.raises(UsageError, match="the session log is closed"):
        session.append(EVENT_TYPE, plan("after"))
    if change == "moved":  # still readable elsewhere: the line it took back is not in it
        assert written(tmp_path / "logs" / "moved.jsonl") == [plan("kept")["todos"]]
    if change == "replaced":  # the file in its place is not touched
        assert path.read_bytes() == b""


def test_a_log_opened_by_a_relative_path_is_still_found_after_a_change_of_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "here").mkdir()
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "here")
    with JsonlSession("agent.jsonl") as session:
        monkeypatch.chdir(tmp_path / "elsewhere")
        session.append(EVENT_TYPE, plan("A"))
    assert written(tmp_path / "here" / "agent.jsonl") == [plan("A")["todos"]]


def test_a_log_reached_through_a_symlink_takes_appends(tmp_path: Path) -> None:
    (tmp_path / "real.jsonl").write_bytes(b"")
    (tmp_path / "link.jsonl").symlink_to(tmp_path / "real.jsonl")
    with JsonlSession(tmp_path / "link.jsonl") as session:
        session.append(EVENT_TYPE, plan("A"))
    assert written(tmp_path / "real.jsonl") == [plan("A")["todos"]]
