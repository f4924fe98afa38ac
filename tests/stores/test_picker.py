"""The one picker: ``stores`` turns a path or a ``postgresql://`` URL into a backend.

The CLI and the web view reach a store only through these functions, so they name no backend
module (``tests/test_house.py``); nothing under ``stores/`` prints or imports a screen.
"""

from __future__ import annotations

import ast
import errno
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dsh_tool_todo import stores
from dsh_tool_todo.core.contract import EVENT_TYPE
from dsh_tool_todo.errors import SessionNotFound, StoreUnavailable, TodoError, UsageError
from dsh_tool_todo.stores import postgres
from dsh_tool_todo.stores.jsonl import JsonlSession
from tests.conftest import todo


def _write_plan(path: Path, *contents: str) -> None:
    with JsonlSession(path) as session:
        session.append(EVENT_TYPE, {"todos": [todo(content) for content in contents]})


STORES = Path(stores.__file__).parent
SCREENS = ("plans", "cli", "web")


def test_the_picker_is_the_picker_only() -> None:
    lines = Path(stores.__file__).read_text(encoding="utf-8").splitlines()
    # 95: `open_reader(check=True)`, the one check a viewer makes before it serves, joined it
    assert len(lines) <= 95, f"stores/__init__.py has {len(lines)} lines: the picker only"


def _imported(path: Path) -> list[tuple[int, str]]:
    """Every module ``path`` imports, as (relative level, dotted name); level 0 is absolute."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(0, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module] if node.module else [alias.name for alias in node.names]
            found += [(node.level, name) for name in names]
    return found


def _outside_stores(path: Path, level: int, name: str) -> str | None:
    """The module of the package, named from its root, that an import in ``path`` names when
    it lies outside stores/; ``None`` for stores/ itself and for other packages."""
    if not level:
        return name.removeprefix("dsh_tool_todo.") if name.startswith("dsh_tool_todo.") else None
    depth = len(path.relative_to(STORES).parts)  # 1: stores/x.py, 2: stores/jsonl/x.py
    return name if level > depth else None


def test_nothing_under_stores_prints_or_imports_a_screen() -> None:
    wrong = []
    for path in sorted(STORES.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
        printing = [
            node.lineno
            for node in ast.walk(tree)
            if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "print"
        ]
        streams = [
            node.lineno
            for node in ast.walk(tree)
            if (isinstance(node, ast.Name) and node.id == "TextIO")
            or (isinstance(node, ast.Attribute) and node.attr == "TextIO")
            or (isinstance(node, ast.alias) and node.name == "TextIO")
        ]
        screens = [
            outside
            for level, module in _imported(path)
            if (outside := _outside_stores(path, level, module)) is not None
            and outside.split(".")[0] in SCREENS
        ]
        name = str(path.relative_to(STORES))
        wrong += [(name, "print", line) for line in printing]
        wrong += [(name, "TextIO", line) for line in streams]
        wrong += [(name, "imports", module) for module in screens]
        if "TextIO" in text and not streams:
            wrong.append((name, "TextIO", "in a string annotation"))
    assert not wrong, f"stores/ prints, takes a text stream or imports plans/cli/web: {wrong}"


def test_the_screen_check_sees_an_import_of_a_screen() -> None:
    path = STORES / "jsonl" / "reader.py"
    assert _outside_stores(path, 3, "plans.fleet") == "plans.fleet"
    assert _outside_stores(path, 2, "_summary") is None  # stores/ itself: not outside
    assert _outside_stores(STORES / "owners.py", 2, "cli") == "cli"
    assert _outside_stores(STORES / "owners.py", 0, "dsh_tool_todo.web.app") == "web.app"
    assert _outside_stores(STORES / "owners.py", 0, "asyncio") is None
    assert (2, "core.contract") in _imported(STORES / "owners.py")


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
    with pytest.raises(SessionNotFound, match=r"nope\.jsonl: no such session log$") as missing:
        stores.open_log(tmp_path / "nope.jsonl")  # was a reader failing at its first read
    assert isinstance(missing.value, FileNotFoundError)
    assert missing.value.errno == errno.ENOENT


def test_a_path_the_system_refuses_is_the_librarys_error_naming_it_and_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "agent.jsonl"
    _write_plan(log, "a")
    nowhere = tmp_path / "nowhere"
    with pytest.raises(
        StoreUnavailable, match=rf"^{nowhere}/a\.jsonl: its directory {nowhere} does not exist: "
    ) as missing:
        stores.open_session(nowhere / "a.jsonl")
    assert isinstance(missing.value, FileNotFoundError)  # and still the system's kind
    assert missing.value.errno == errno.ENOENT
    inside_a_file = rf"^{log}/x\.jsonl: a file stands where this path needs a directory"
    for call in (stores.open_session, stores.current_plan, stores.follow_plans):
        with pytest.raises(StoreUnavailable, match=inside_a_file) as not_a_directory:
            call(log / "x.jsonl")
        assert isinstance(not_a_directory.value, NotADirectoryError)

    locked = tmp_path / "locked"  # a mode refuses no one under root: the system's answer, faked
    locked.mkdir()
    real_open = os.open

    def refusing(path: Any, *args: Any, **options: Any) -> int:
        if str(path).startswith(str(locked)):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_open(path, *args, **options)

    monkeypatch.setattr(os, "open", refusing)
    with pytest.raises(
        StoreUnavailable, match=rf"^{locked}/a\.jsonl: permission denied: .* give it access"
    ) as refused:
        stores.open_session(locked, "a")
    assert isinstance(refused.value, PermissionError)


@pytest.mark.parametrize("scheme", ["POSTGRESQL", "Postgres", "PostgreSQL"])
def test_a_database_url_is_one_whatever_the_case_of_its_scheme(
    scheme: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    url = f"{scheme}://u:s3cr3t@127.0.0.1:1/none"
    assert stores.pick_log(url, "s1") == (f"{scheme.lower()}://u:s3cr3t@127.0.0.1:1/none", "s1")
    try:
        for call in (
            lambda: stores.open_reader(url, check=True),
            lambda: stores.open_session(url, "s1"),
            lambda: stores.open_fleet(url),
        ):
            with pytest.raises(StoreUnavailable, match=r"PostgreSQL at 127\.0\.0\.1:1/none: "):
                call()
    finally:
        postgres.close_shared_pools()
    assert list(tmp_path.iterdir()) == []  # no directory named after it


def test_a_session_id_goes_with_a_directory_or_a_database_not_a_file(tmp_path: Path) -> None:
    log = tmp_path / "agent.jsonl"
    _write_plan(log, "a")
    refused = r"agent\.jsonl is one log: --session goes with a directory of logs or a postgresql://"
    with pytest.raises(UsageError, match=refused):
        stores.current_plan(log, "s1")
    with pytest.raises(UsageError, match=refused):
        stores.follow_plans(log, "s1")
    with pytest.raises(UsageError, match=refused):
        stores.pick_log(log, "s1")


def test_follow_plans_waits_for_a_log_to_appear_then_follows_it(tmp_path: Path) -> None:
    log = tmp_path / "later.jsonl"
    awaited: list[str] = []

    def write_elsewhere_then_move(path: Path) -> None:
        # A session opens its file before the first append: written in place, the follower
        # could read the empty file first.
        staged = path.with_suffix(".staged")
        _write_plan(staged, "first")
        staged.replace(path)

    def create_when_awaited(what: str) -> None:
        awaited.append(what)
        threading.Timer(0.05, write_elsewhere_then_move, (log,)).start()

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


def test_open_reader_checked_refuses_an_unreadable_source_at_once(tmp_path: Path) -> None:
    """What `dsh-todo serve` opens: a database that does not answer fails here, in one line
    without its password, before a reader's pool would retry (and log) for its whole timeout."""
    with pytest.raises(TodoError, match=r"^PostgreSQL at 127\.0\.0\.1:1/none: ") as info:
        stores.open_reader("postgresql://u:s3cr3t@127.0.0.1:1/none", check=True)
    assert "s3cr3t" not in str(info.value)
    assert "\n" not in str(info.value)
    with pytest.raises(UsageError, match=r"not a directory of session logs"):
        stores.open_reader(tmp_path / "none", check=True)
    stores.open_reader("postgresql://u:s3cr3t@127.0.0.1:1/none")  # unchecked: nothing connects


def test_a_path_is_named_as_the_cli_always_named_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _write_plan(tmp_path / "agent.jsonl", "a")
    title, _ = stores.follow_plans("./agent.jsonl")
    assert title == "agent.jsonl"
    with pytest.raises(FileNotFoundError, match=r"^nope\.jsonl: no such session log$"):
        stores.current_plan("./nope.jsonl")


def test_open_session_writes_a_jsonl_log_the_readers_read(tmp_path: Path) -> None:
    log = tmp_path / "agent.jsonl"
    session = stores.open_session(log)
    try:
        session.append(EVENT_TYPE, {"todos": [todo("a")]})
    finally:
        session.close()
    assert [item["content"] for item in stores.current_plan(log) or []] == ["a"]
    with pytest.raises(UsageError, match=r"--session goes with a directory of logs or a post"):
        stores.open_session(log, "s1")


def test_open_log_reads_one_jsonl_log_back_from_its_end(tmp_path: Path) -> None:
    import asyncio

    log = tmp_path / "agent.jsonl"
    _write_plan(log, "a")
    _write_plan(log, "b")
    reader, name = stores.open_log(log)
    assert name == str(log)

    async def read() -> list[int]:
        try:
            page = await reader.tail(name, before=None, limit=1)
            return [event["seq"] for event in page.events]
        finally:
            await reader.aclose()

    assert asyncio.run(read()) == [1]
    with pytest.raises(UsageError, match=r"a database URL needs --session ID"):
        stores.open_log("postgresql://127.0.0.1:1/none")


def test_open_fleet_of_a_directory_names_every_log_and_no_database(tmp_path: Path) -> None:
    _write_plan(tmp_path / "b.jsonl", "x")
    _write_plan(tmp_path / "a.jsonl", "x")
    (tmp_path / ".hidden.jsonl").write_text("", encoding="utf-8")
    (tmp_path / "notes.txt").write_text("", encoding="utf-8")
    reader, names, database = stores.open_fleet(tmp_path)
    assert (names, database) == (["a", "b"], None)
    assert hasattr(reader, "sessions")


@pytest.mark.parametrize(
    "target", ["postgresql://postgres@127.0.0.1:1/none", "host=127.0.0.1 port=1 dbname=none"]
)
def test_open_fleet_of_a_database_fails_at_once_in_one_line(target: str) -> None:
    from dsh_tool_todo.errors import StoreUnavailable

    with pytest.raises(StoreUnavailable, match=r"^PostgreSQL at 127\.0\.0\.1:1/none: [^\n]*$"):
        stores.open_fleet(target)


def test_open_database_for_deleting_refuses_a_directory_and_an_empty_source(
    tmp_path: Path,
) -> None:
    with pytest.raises(UsageError, match=r"--delete goes with a database URL; in a directory"):
        stores.open_database(tmp_path, deleting=True)
    with pytest.raises(UsageError, match=r"the source is empty"):
        stores.open_database("", deleting=True)
    database = stores.open_database("postgresql://someone:s3cr3t@127.0.0.1:1/none")
    assert database.name == "PostgreSQL at 127.0.0.1:1/none"


@pytest.mark.parametrize("empty", ["", "  "])
def test_open_database_refuses_an_empty_one_libpq_would_read_as_its_default(empty: str) -> None:
    with pytest.raises(UsageError, match=r"^the database is empty: give a postgresql:// URL"):
        stores.open_database(empty)


PASSWORD = "SeCrEtPw"
CONNINFO = f"host=127.0.0.1 password={PASSWORD} dbname=test"


@pytest.mark.parametrize(
    "call",
    [
        lambda: stores.open_session(CONNINFO),
        lambda: stores.open_session(CONNINFO, "s1"),
    ],
)
def test_a_conninfo_is_never_taken_for_a_log_file_nor_repeated(
    call: Callable[[], object], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError, match=r"^SOURCE looks like a key=value conninfo") as refused:
        call()
    assert PASSWORD not in str(refused.value)
    assert list(tmp_path.iterdir()) == []  # no file named after it (with its password)


@pytest.mark.parametrize(
    "url",
    [
        f"postgresql://u:{PASSWORD}@[::1/test",  # libpq quotes the whole URL
        f"postgresql://u:%ZZ{PASSWORD}@127.0.0.1/test",  # ... or the token it stopped at
    ],
)
@pytest.mark.parametrize(
    "call",
    [
        stores.open_reader,
        lambda url: stores.open_database(url).setup(),  # it connects when used
        lambda url: stores.current_plan(url, "s1"),
    ],
)
def test_a_url_libpq_cannot_read_is_refused_without_its_password(
    url: str, call: Callable[[str], object]
) -> None:
    with pytest.raises(TodoError, match="does not parse") as refused:
        call(url)
    assert PASSWORD not in str(refused.value)
