"""The session log, its readers, the follower and the CLI under faults and hostile input.

One test (or one small group) per finding of the hardening issue that concerns
storage and the command line: each names its finding and fails on the code
before the fix.
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import warnings
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsh_tool_todo.core.contract import EVENT_TYPE
from dsh_tool_todo.core.projection import replay
from dsh_tool_todo.errors import InvalidLog, LogBusy, LogReplaced, TornTailWarning, UsageError
from dsh_tool_todo.stores.jsonl import (
    JsonlReader,
    JsonlSession,
    current_plan,
    follow_plan,
    read_events,
)
from dsh_tool_todo.stores.jsonl import session as jsonl
from tests._processes import stop_process
from tests.conftest import todo

ROOT = Path(__file__).resolve().parents[2]


def line(seq: int, kind: str, data: dict[str, Any]) -> bytes:
    event = {"seq": seq, "type": kind, "data": data}
    return json.dumps(event, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def plan_line(seq: int, *contents: str) -> bytes:
    return line(seq, EVENT_TYPE, {"todos": [todo(content) for content in contents]})


class Done(Exception):
    """Raised by a scripted ``sleep`` once its script has run out."""


def scripted_sleep(actions: list[Callable[[], object]]) -> Callable[[float], None]:
    """A follower's ``sleep`` that runs one action per poll, then stops the follower."""
    script = iter(actions)

    def sleep(_: float) -> None:
        action = next(script, None)
        if action is None:
            raise Done
        action()

    return sleep


def follow(path: Path, actions: list[Callable[[], object]]) -> list[Any]:
    """Every plan the follower yields while ``actions`` run between its polls."""
    seen: list[Any] = []
    plans = follow_plan(path, interval=0.05, sleep=scripted_sleep(actions))
    with pytest.raises(Done):
        seen.extend(plans)
    return seen


def append_bytes(path: Path, data: bytes) -> Callable[[], None]:
    def run() -> None:
        with path.open("ab") as file:
            file.write(data)

    return run


# 1. The follower keeps no torn bytes between polls.


def test_1_follower_never_glues_torn_bytes_onto_a_new_line(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(plan_line(0, "Delete the staging server"))
    torn = plan_line(1, "Delete the production server, then verify it")[:62]

    def reopen_and_append() -> None:
        with pytest.warns(TornTailWarning, match="cut off"), JsonlSession(path) as session:
            session.append(EVENT_TYPE, {"todos": [todo("Verify the staging server is gone")]})

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TornTailWarning)  # the follower's own reads
        seen = follow(path, [append_bytes(path, torn), reopen_and_append])
    assert seen == [
        [todo("Delete the staging server")],
        [todo("Verify the staging server is gone")],
    ]
    assert seen[-1] == current_plan(path)


def test_1_follower_starts_over_from_the_tail_when_the_file_is_replaced(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(plan_line(0, "First"))
    other = tmp_path / "other.jsonl"
    # Its first line is not an event: a start over from byte 0 would refuse it.
    other.write_bytes(b"not a session event\n" + plan_line(1, "Replaced") + line(2, "x", {}))
    shorter = plan_line(0, "Cut")

    seen = follow(
        path,
        [
            lambda: os.replace(other, path),
            lambda: path.write_bytes(plan_line(0, "Cut")),  # same inode, shrunk
            lambda: path.write_bytes(shorter),  # the same bytes again: no redraw
            lambda: path.write_bytes(plan_line(0, "Cuz")),  # same size, other bytes
        ],
    )
    assert seen == [[todo("First")], [todo("Replaced")], [todo("Cut")], [todo("Cuz")]]


@pytest.mark.parametrize("data", [{}, {"todos": "x"}, {"todos": [todo(" ")]}])
def test_1_follower_refuses_an_invalid_write_as_show_does(
    tmp_path: Path, data: dict[str, Any]
) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(plan_line(0, "Plan"))
    with pytest.raises(InvalidLog, match=r"log\.jsonl, line 2: event 1: "):
        follow(path, [append_bytes(path, line(1, EVENT_TYPE, data))])
    with pytest.raises(InvalidLog, match=r"log\.jsonl, line 2: event 1: "):
        current_plan(path)


def test_1_follower_refuses_a_foreign_tail_as_show_does(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(plan_line(0, "Plan"))
    with pytest.raises(InvalidLog, match=r"log\.jsonl, line 2: not a session event"):
        follow(path, [append_bytes(path, b"some other program's text")])


# 2. One writer per log.


def test_2_a_second_writer_in_the_same_process_is_refused_before_any_recovery(
    tmp_path: Path,
) -> None:
    path = tmp_path / "log.jsonl"
    with JsonlSession(path) as first:
        first.append("turn/start", {})
        half = plan_line(1, "Being written")[:30]
        append_bytes(path, half)()  # as if the first writer were halfway through a line
        before = path.read_bytes()
        with pytest.raises(LogBusy, match=rf"{path.name}: another session is writing this log"):
            JsonlSession(path)
        assert path.read_bytes() == before  # its torn tail was not cut off
        path.write_bytes(before[: -len(half)])
    with JsonlSession(path) as second:  # closed: the log is free again
        assert second.append("turn/end", {})["seq"] == 1


HOLDER = r"""
import sys
from dsh_tool_todo.stores.jsonl import JsonlSession
session = JsonlSession(sys.argv[1])
session.append("turn/start", {})
print("ready", flush=True)
sys.stdin.readline()
"""

SECOND = r"""
import sys
from dsh_tool_todo.errors import LogBusy
from dsh_tool_todo.stores.jsonl import JsonlSession
try:
    JsonlSession(sys.argv[1])
except LogBusy as error:
    print(error)
"""


def test_2_a_second_writer_in_another_process_is_refused_until_the_first_dies(
    tmp_path: Path,
) -> None:
    path = tmp_path / "log.jsonl"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == b"ready\n"
        refused = subprocess.run(
            [sys.executable, "-c", SECOND, str(path)], capture_output=True, text=True, timeout=60
        )
        assert f"{path}: another session is writing this log" in refused.stdout, refused.stderr
        with pytest.raises(LogBusy, match="another session is writing this log"):
            JsonlSession(path)
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=30)
    finally:
        stop_process(holder, timeout=30)
    with JsonlSession(path) as session:  # kill -9 released the lock
        assert session.append("turn/end", {})["seq"] == 1
    assert [event["seq"] for event in read_events(path)] == [0, 1]


_STEP = st.tuples(st.sampled_from(["open", "append", "close"]), st.sampled_from([0, 1]))


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=st.lists(_STEP, max_size=30))
def test_2_any_interleaving_of_two_writers(
    tmp_path_factory: pytest.TempPathFactory, steps: Any
) -> None:
    path = tmp_path_factory.mktemp("two") / "log.jsonl"
    sessions: dict[int, JsonlSession] = {}
    acknowledged: list[dict[str, Any]] = []
    try:
        for action, writer in steps:
            if action == "open" and writer not in sessions:
                if sessions:  # the other writer holds the log
                    before = path.read_bytes()
                    with pytest.raises(LogBusy, match="another session is writing this log"):
                        JsonlSession(path)
                    assert path.read_bytes() == before
                else:
                    sessions[writer] = JsonlSession(path)
            elif action == "append" and writer in sessions:
                event = sessions[writer].append("message", {"writer": writer})
                acknowledged.append(json.loads(json.dumps(event)))
            elif action == "close" and writer in sessions:
                sessions.pop(writer).close()
            assert len(sessions) <= 1
    finally:
        for session in sessions.values():
            session.close()
    events = read_events(path) if path.exists() else []
    assert events == acknowledged
    assert [event["seq"] for event in events] == list(range(len(events)))


def test_2_a_rollback_never_cuts_bytes_another_program_wrote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "log.jsonl"
    foreign = line(1, "turn/end", {})
    with JsonlSession(path, fsync=True) as session:
        session.append("turn/start", {})
        append_bytes(path, foreign)()  # a program that ignores the one-writer rule

        def failing_fsync(fd: int) -> None:
            raise OSError(errno.EIO, "Input/output error")

        monkeypatch.setattr(jsonl, "os", _Proxy(fsync=failing_fsync))
        with pytest.raises(OSError, match="Input/output error"):
            session.append("turn/start", {})
    assert path.read_bytes().startswith(line(0, "turn/start", {}) + foreign)


def test_2_without_flock_the_log_is_not_opened_for_writing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(line(0, "turn/start", {}) + b'{"seq":1')
    monkeypatch.setattr(jsonl, "fcntl", None)
    with pytest.raises(UsageError, match=r"log\.jsonl: cannot lock the log on this platform"):
        JsonlSession(path)
    assert path.read_bytes() == line(0, "turn/start", {}) + b'{"seq":1'


def test_2_a_file_system_that_refuses_flock_refuses_the_writer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import fcntl

    def no_locks(fd: int, operation: int) -> None:
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    path = tmp_path / "log.jsonl"
    with pytest.raises(UsageError, match=r"cannot lock the log \(No locks available\)"):
        JsonlSession(path)
    fds = len(os.listdir("/proc/self/fd"))
    with pytest.raises(UsageError, match="cannot lock"):
        JsonlSession(path)
    assert len(os.listdir("/proc/self/fd")) == fds  # the descriptor was closed


class _Proxy:
    """The ``os`` module with some functions replaced, for a module's ``os`` global."""

    def __init__(self, **replaced: Callable[..., Any]) -> None:
        self._replaced = replaced

    def __getattr__(self, name: str) -> Any:
        return self._replaced.get(name) or getattr(os, name)


# 6. The CLI: one line on stderr and exit 2, quiet on a closed pipe, bytes not locale.

SURROGATE = "Half a pair \ud800 here"


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    environment = {**os.environ, "PYTHONIOENCODING": "utf-8", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "dsh_tool_todo", *args],
        capture_output=True,
        env=environment,
        timeout=60,
    )


def one_error_line(run: subprocess.CompletedProcess[bytes], pattern: str) -> None:
    assert run.returncode == 2, run.stderr
    text = run.stderr.decode("utf-8", "replace")
    assert len(text.splitlines()) == 1, text
    assert text.startswith("dsh-todo: error: "), text
    assert pattern in text, text


@pytest.fixture
def surrogate_log(tmp_path: Path) -> Path:
    path = tmp_path / "log.jsonl"
    with JsonlSession(path) as session:
        session.append(EVENT_TYPE, {"todos": [todo(SURROGATE, "in_progress")]})
    return path


@pytest.mark.parametrize("encoding", ["utf-8", "latin-1", "ascii"])
@pytest.mark.parametrize("form", ["json", "acp"])
def test_6_machine_formats_write_utf8_whatever_the_locale(
    surrogate_log: Path, encoding: str, form: str
) -> None:
    run = cli("show", str(surrogate_log), "--format", form, env={"PYTHONIOENCODING": encoding})
    assert run.returncode == 0, run.stderr
    assert b"\\ud800" in run.stdout
    decoded = json.loads(run.stdout.decode("utf-8"))
    plan = decoded if form == "json" else decoded["entries"]
    assert plan[0]["content"] == SURROGATE
    reference = cli("show", str(surrogate_log), "--format", form)
    assert run.stdout == reference.stdout


@pytest.mark.parametrize("encoding", ["latin-1", "ascii"])
def test_6_schema_and_demo_under_a_narrow_encoding(tmp_path: Path, encoding: str) -> None:
    env = {"PYTHONIOENCODING": encoding}
    schema = cli("schema", env=env)
    assert schema.returncode == 0, schema.stderr
    assert schema.stdout == cli("schema").stdout  # UTF-8 bytes, whatever the locale
    demo = cli("demo", "--log", str(tmp_path / "d.jsonl"), env=env)
    assert demo.returncode == 0, demo.stderr
    assert demo.stdout.decode(encoding)


def test_6_text_escapes_what_the_encoding_cannot_show(surrogate_log: Path) -> None:
    for encoding in ("utf-8", "ascii"):
        run = cli("show", str(surrogate_log), env={"PYTHONIOENCODING": encoding})
        assert run.returncode == 0, run.stderr
        assert "\\ud800" in run.stdout.decode(encoding)


def test_6_demo_ascii_prints_only_ascii(tmp_path: Path) -> None:
    run = cli("demo", "--ascii", "--log", str(tmp_path / "d.jsonl"))
    assert run.returncode == 0, run.stderr
    assert run.stdout.isascii(), [ch for ch in run.stdout.decode() if not ch.isascii()][:5]
    assert b"model -> todo_write" in run.stdout


@pytest.mark.parametrize("interval", ["-1", "nan", "inf", "0", "0.01", "soon"])
def test_6_watch_interval_must_be_finite_and_at_least_50ms(tmp_path: Path, interval: str) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(plan_line(0, "Plan"))
    run = cli("watch", str(path), f"--interval={interval}")
    assert run.returncode == 2
    assert len(run.stderr.splitlines()) == 1, run.stderr
    assert b"--interval: must be a finite number of seconds, at least 0.05" in run.stderr


def test_6_watch_on_an_empty_write_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(line(0, EVENT_TYPE, {}))
    one_error_line(cli("watch", str(path)), "line 1: event 0: todo/write data must be")


def test_6_a_directory_is_reported_as_a_directory(tmp_path: Path) -> None:
    # a directory is a source of logs: the owner's "log" in it is the directory here
    (tmp_path / "agent.jsonl").mkdir()
    for command in ("show", "watch"):
        run = cli(command, str(tmp_path), "--session", "agent")
        one_error_line(run, f"{tmp_path / 'agent.jsonl'}: is a directory")
        one_error_line(cli(command, str(tmp_path)), f"{tmp_path}: no session log in it yet")


def test_6_a_fifo_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    one_error_line(cli("show", str(fifo)), f"{fifo}: is a FIFO, not a session log")


def test_6_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(plan_line(0, *(f"Step {n}" for n in range(20_000))))
    for args in (["show", str(path)], ["schema"], ["show", str(path), "--format", "json"]):
        reader, writer = os.pipe()
        os.close(reader)  # nobody will read: the first write meets a closed pipe
        try:
            run = subprocess.run(
                [sys.executable, "-m", "dsh_tool_todo", *args],
                stdout=writer,
                stderr=subprocess.PIPE,
                timeout=60,
            )
        finally:
            os.close(writer)
        assert run.returncode == 141, run.stderr
        assert run.stderr == b""


def test_6_a_closed_stdout_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(plan_line(0, "Plan"))
    run = subprocess.run(
        ["sh", "-c", '"$0" -m dsh_tool_todo show "$1" >&-', sys.executable, str(path)],
        stderr=subprocess.PIPE,
        timeout=60,
    )
    assert run.returncode == 2, run.stderr
    assert run.stderr.decode().splitlines() == ["dsh-todo: error: standard output is closed"]


WATCHER = r"""
import sys, time
from dsh_tool_todo.stores.jsonl import JsonlSession
with JsonlSession(sys.argv[1]) as session:
    for n in range(3):
        time.sleep(0.3)
        session.append("todo/write", {"todos": [{"content": f"Step {n}", "status": "pending"}]})
"""


def test_6_watch_piped_separates_redraws_and_never_clears(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(plan_line(0, "Start"))
    env = {**os.environ, "PYTHONIOENCODING": "utf-8", "TERM": "dumb"}
    with subprocess.Popen(
        [sys.executable, "-m", "dsh_tool_todo", "watch", str(path), "--interval", "0.05"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    ) as watcher:
        try:
            assert watcher.stdout is not None
            lines = [watcher.stdout.readline(), watcher.stdout.readline()]
            assert lines[1] == "\u2610 Start\n".encode()
            subprocess.run([sys.executable, "-c", WATCHER, str(path)], check=True, timeout=60)
            while "\u2610 Step 2\n".encode() not in lines:
                lines.append(watcher.stdout.readline())
            watcher.send_signal(signal.SIGINT)
            assert watcher.wait(timeout=30) == 0
        finally:
            watcher.kill()
    text = b"".join(lines).decode()
    assert "\x1b" not in text
    draws = text.count(f"{path}\n")
    assert draws >= 3
    assert text.count("\n----\n") == draws - 1  # one separator between two draws


# 7. Only what can be a torn append is cut off; opening checks the end only.


@pytest.mark.parametrize(
    "tail",
    [b"{'user': 'alice', 'token': 'secret'}", b'{"user":"alice"}', b'{"se ', b"\0\0{", b"x"],
)
def test_7_a_tail_that_is_no_torn_append_is_refused_untouched(tmp_path: Path, tail: bytes) -> None:
    for head in (b"", line(0, "turn/start", {})):
        path = tmp_path / "other"
        path.write_bytes(head + tail)
        number = 2 if head else 1
        with pytest.raises(InvalidLog, match=rf"other, line {number}: not a session event"):
            JsonlSession(path)
        with pytest.raises(InvalidLog, match=rf"other, line {number}: not a session event"):
            read_events(path)
        assert path.read_bytes() == head + tail


@pytest.mark.parametrize("tail", [b"{", b'{"se', b'{"seq":', b'{"seq":4,"type":"x","da', b"\0\0\0"])
def test_7_a_prefix_of_a_line_we_write_is_torn(tmp_path: Path, tail: bytes) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(line(0, "turn/start", {}) + tail)
    with pytest.warns(TornTailWarning, match="cut off"), JsonlSession(path) as session:
        assert session.append("turn/end", {})["seq"] == 1
    assert path.read_bytes() == line(0, "turn/start", {}) + line(1, "turn/end", {})


def test_7_opening_checks_only_the_end(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"garbage\n" + line(1, "turn/start", {}))
    with JsonlSession(path) as session:
        assert session.append("turn/end", {})["seq"] == 2
    with pytest.raises(InvalidLog, match=r"log\.jsonl, line 1: not a session event"):
        read_events(path)


# 8. Constant memory whatever the torn tail.

MEMORY = r"""
import os, resource, sys, warnings
from pathlib import Path
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
from dsh_tool_todo.stores.jsonl import JsonlSession, current_plan, read_events
from dsh_tool_todo.stores.jsonl import follow_plan
warnings.simplefilter("ignore")
path, size, head, dense = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3].encode(), sys.argv[4]

def make():
    todos = b'[{"content":"Plan","status":"pending"}]'
    path.write_bytes(b'{"seq":0,"type":"todo/write","data":{"todos":' + todos + b'}}\n' + head)
    if dense == "dense":  # real bytes on disk: no hole to skip
        with path.open("ab") as file:
            while file.tell() < size:
                file.write(b"\0" * (1 << 20) if not head else b"x" * (1 << 20))
    else:
        os.truncate(path, size)

make()
baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
assert len(read_events(path)) == 1
assert current_plan(path) == [{"content": "Plan", "status": "pending"}]
polls = iter(range(3))
def sleep(_):
    if next(polls, None) is None:
        raise KeyboardInterrupt
try:
    for plan in follow_plan(path, interval=0.05, sleep=sleep):
        assert plan == [{"content": "Plan", "status": "pending"}]
except KeyboardInterrupt:
    pass
with JsonlSession(path) as session:
    assert session.append("turn/end", {})["seq"] == 1
grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - baseline
print(grown)
"""


@pytest.mark.parametrize("head", ["", '{"seq":1,"type":"todo/write","data":'])
@pytest.mark.parametrize(("layout", "size"), [("sparse", 2 << 30), ("dense", 96 << 20)])
def test_8_a_huge_torn_tail_takes_constant_memory(
    tmp_path: Path, head: str, layout: str, size: int
) -> None:
    path = tmp_path / "tail.jsonl"
    run = subprocess.run(
        [sys.executable, "-c", MEMORY, str(path), str(size), head, layout],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert int(run.stdout) < 32 * 1024, f"peak memory grew by {run.stdout.strip()} KiB"
    assert path.stat().st_size < 4096  # the torn tail was cut off, and one line appended


# 12. An unclosed session releases its descriptor (and its lock) when collected.


def test_12_an_unclosed_session_is_released_with_a_resource_warning(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    fds = len(os.listdir("/proc/self/fd"))
    for _ in range(50):
        session = JsonlSession(path)
        with pytest.warns(ResourceWarning, match=re.escape(f"unclosed session log '{path}'")):
            del session  # the last reference: collected at once
    assert len(os.listdir("/proc/self/fd")) <= fds
    with JsonlSession(path) as session:  # the lock went with the descriptor
        session.append("turn/start", {})


# 13. Readers and writers refuse what is not a regular file, at once.


NON_REGULAR = r"""
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))  # /dev/zero must not eat the machine
from dsh_tool_todo.errors import InvalidLog
from dsh_tool_todo.stores.jsonl import JsonlSession, current_plan, read_events
from dsh_tool_todo.stores.jsonl import follow_plan
path = sys.argv[1]
readers = {
    "read_events": lambda: read_events(path),
    "current_plan": lambda: current_plan(path),
    "follow_plan": lambda: next(follow_plan(path, interval=1, sleep=lambda _: None)),
    "JsonlSession": lambda: JsonlSession(path),
}
for name, reader in readers.items():
    try:
        reader()
    except InvalidLog as error:
        print(f"{name}: {error}")
"""


@pytest.mark.parametrize("kind", ["fifo", "/dev/zero", "/dev/null", "directory"])
def test_13_non_regular_files_are_refused_at_once(tmp_path: Path, kind: str) -> None:
    if kind == "fifo":
        path = tmp_path / "pipe"
        os.mkfifo(path)
        what = "is a FIFO"
    elif kind == "directory":
        path = tmp_path
        what = "is a directory"
    else:
        path = Path(kind)
        what = "is a character device"
    run = subprocess.run(
        [sys.executable, "-c", NON_REGULAR, str(path)], capture_output=True, text=True, timeout=20
    )
    readers = ["read_events", "current_plan", "follow_plan", "JsonlSession"]
    expected = [f"{reader}: {path}: {what}, not a session log" for reader in readers]
    assert run.stdout.splitlines() == expected, run.stderr[-1000:]


# 14. An interrupt or error at any point of an append leaves the session consistent.


class Fault:
    """Replaces one ``os`` call: it raises, before or after doing its work."""

    def __init__(self, name: str, after: bool, error: type[BaseException]) -> None:
        self.name, self.after, self.error, self.armed = name, after, error, False

    def proxy(self) -> _Proxy:
        real = getattr(os, self.name)

        def call(*args: Any) -> Any:
            if not self.armed:
                return real(*args)
            self.armed = False
            if self.after:
                real(*args)
            raise self.error("injected")

        return _Proxy(**{self.name: call})


_FAULT = st.builds(
    Fault,
    st.sampled_from(["write", "fsync", "ftruncate"]),
    st.booleans(),
    st.sampled_from([KeyboardInterrupt, OSError]),
)


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    plan=st.lists(
        st.tuples(st.one_of(st.none(), _FAULT), st.one_of(st.none(), _FAULT)), max_size=12
    )
)
def test_14_any_fault_during_an_append_leaves_the_log_consistent(
    tmp_path_factory: pytest.TempPathFactory, plan: list[tuple[Fault | None, Fault | None]]
) -> None:
    path = tmp_path_factory.mktemp("faults") / "log.jsonl"
    acknowledged: list[int] = []
    session = JsonlSession(path, fsync=True)
    try:
        for index, faults in enumerate(plan):
            if session.closed:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", TornTailWarning)
                    session = JsonlSession(path, fsync=True)
            proxies = {f.name: f for f in faults if f is not None}
            for fault in proxies.values():
                fault.armed = True
            replaced = {name: getattr(f.proxy(), name) for name, f in proxies.items()}
            real_os = jsonl.os
            jsonl.os = _Proxy(**replaced)  # type: ignore[assignment]
            try:
                event = session.append("message", {"index": index})
                acknowledged.append(index)
                assert event["seq"] == len(read_events(path)) - 1
            except (KeyboardInterrupt, OSError):
                pass
            finally:
                jsonl.os = real_os  # type: ignore[assignment]
    finally:
        session.close()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TornTailWarning)
        with JsonlSession(path) as session:
            session.append("message", {"index": "last"})
    events = read_events(path)
    assert [event["seq"] for event in events] == list(range(len(events)))
    recorded = [event["data"]["index"] for event in events]
    assert recorded[-1] == "last"
    assert set(acknowledged) <= set(recorded[:-1])  # nothing acknowledged was lost


# 16. UTF-8, lines split on b"\n" only: every reader agrees.

ODD = "line\u2028separator, next\u0085line, \u202eevil, csi\u009b[2J, cr\r, vt\x0b, ff\x0c"


def test_16_unicode_line_breaks_round_trip_through_every_reader(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    data = {"todos": [todo(ODD)]}
    path.write_bytes(b"")
    seen = follow(path, [lambda: _write_one(path, data)])
    assert read_events(path) == [{"seq": 0, "type": EVENT_TYPE, "data": data}]
    assert current_plan(path) == data["todos"] == replay(read_events(path))
    assert seen == [None, data["todos"]]
    reader = JsonlReader(tmp_path)  # the fifth reader: what the web view reads through
    page_of_log = asyncio.run(reader.tail("log", before=None, limit=5))
    assert page_of_log.events == read_events(path)
    assert asyncio.run(reader.snapshot("log")).deciding == read_events(path)[0]
    raw = path.read_bytes()
    assert "\u2028".encode() in raw  # raw UTF-8, as documented
    assert raw.count(b"\n") == 1
    page = (ROOT / "docs" / "session-log.md").read_text(encoding="utf-8")
    assert "Lines are split on `\\n` (byte 0x0A) only" in page


def _write_one(path: Path, data: dict[str, Any]) -> None:
    with JsonlSession(path) as session:
        session.append(EVENT_TYPE, data)


@pytest.mark.parametrize(("term", "clears"), [("dumb", False), ("xterm", True)])
def test_6_watch_on_a_terminal_clears_unless_term_is_dumb(
    tmp_path: Path, term: str, clears: bool
) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(plan_line(0, "Start"))
    controller, terminal = pty.openpty()
    env = {**os.environ, "PYTHONIOENCODING": "utf-8", "TERM": term}
    command = [sys.executable, "-m", "dsh_tool_todo", "watch", str(path), "--interval", "0.05"]
    watcher = subprocess.Popen(command, stdout=terminal, stderr=subprocess.PIPE, env=env)
    os.close(terminal)
    seen = b""

    def read_until(text: bytes) -> bytes:
        data = seen
        while text not in data:
            ready, _, _ = select.select([controller], [], [], 30)
            assert ready, f"no {text!r} after 30 s: {data!r}"
            data += os.read(controller, 4096)
        return data

    try:
        seen = read_until(b"Start")
        subprocess.run([sys.executable, "-c", WATCHER, str(path)], check=True, timeout=60)
        seen = read_until(b"Step 2")
        watcher.send_signal(signal.SIGINT)
        assert watcher.wait(timeout=30) == 0
    finally:
        watcher.kill()
        watcher.wait(timeout=30)
        os.close(controller)
        if watcher.stderr is not None:
            watcher.stderr.close()
    assert (b"\x1b[2J" in seen) is clears
    assert (b"----" in seen) is not clears


# A log deleted and created again under the follower: ext4 and tmpfs hand the new file the
# old inode at once, and its last line may be the same bytes at the same offset.


def recreate(path: Path, data: bytes) -> Callable[[], None]:
    def run() -> None:
        path.unlink()
        path.write_bytes(data)

    return run


def ship_a_log(tmp_path: Path) -> tuple[Path, bytes]:
    """``log.jsonl`` holding a plan "Ship A", then a note: its path and the note's line."""
    path = tmp_path / "log.jsonl"
    note = line(1, "note", {})
    path.write_bytes(plan_line(0, "Ship A") + note)
    return path, note


async def first_or_replaced(next_event: Awaitable[Any]) -> Any:
    """The event a stream gives next (within 5 s), or "replaced" if it says its log was."""
    try:
        return await asyncio.wait_for(next_event, 5)
    except LogReplaced:
        return "replaced"


def test_a_log_recreated_under_the_follower_is_replaced_even_on_the_same_inode(
    tmp_path: Path,
) -> None:
    path, note = ship_a_log(tmp_path)
    seen = follow(path, [recreate(path, plan_line(0, "Ship C") + note)])
    assert seen == [[todo("Ship A")], [todo("Ship C")]]


def test_a_log_recreated_under_a_reader_stream_is_replaced_even_on_the_same_inode(
    tmp_path: Path,
) -> None:
    from dsh_tool_todo.stores.jsonl import JsonlReader

    path, note = ship_a_log(tmp_path)

    async def main() -> list[Any]:
        reader = JsonlReader(tmp_path, watch=False, poll_interval=0.01)
        seen: list[Any] = []
        stream = reader.follow("log", after=1)
        try:
            waiting = asyncio.ensure_future(anext(stream))
            await asyncio.sleep(0.1)  # the follower stands at the end of the log
            recreate(path, plan_line(0, "Ship C") + note + line(2, "note", {}))()
            seen.append(await first_or_replaced(waiting))
        finally:
            await stream.aclose()
            await reader.aclose()
        return seen

    assert asyncio.run(main()) == ["replaced"]


def test_a_log_recreated_between_snapshot_and_follow_is_replaced_even_on_the_same_inode(
    tmp_path: Path,
) -> None:
    from dsh_tool_todo.stores.jsonl import JsonlReader

    path, note = ship_a_log(tmp_path)

    async def main() -> list[Any]:
        reader = JsonlReader(tmp_path, watch=False, poll_interval=0.01)
        snapshot = await reader.snapshot("log")
        recreate(path, plan_line(0, "Ship C") + note + line(2, "note", {}))()
        stream = reader.follow("log", after=snapshot.last_seq, since=snapshot)
        try:
            return [await first_or_replaced(anext(stream))]
        finally:
            await stream.aclose()
            await reader.aclose()

    assert asyncio.run(main()) == ["replaced"]


def test_a_log_removed_and_written_again_is_followed_as_a_replaced_log(tmp_path: Path) -> None:
    """A rotation that deletes, then creates: a look between the two found no file and
    ended the follower (``watch`` exited with ENOENT)."""
    path = tmp_path / "s.jsonl"
    path.write_bytes(plan_line(0, "old"))

    def remove() -> None:
        path.unlink()

    def write_again() -> None:
        path.write_bytes(plan_line(0, "new"))

    plans = follow(path, [remove, lambda: None, lambda: None, write_again, lambda: None])
    assert [[item["content"] for item in plan or []] for plan in plans] == [["old"], ["new"]]


def test_a_log_removed_for_good_ends_the_follower_with_file_not_found(tmp_path: Path) -> None:
    from dsh_tool_todo.stores.jsonl import _tail

    path = tmp_path / "s.jsonl"
    path.write_bytes(plan_line(0, "old"))
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        if len(slept) == 1:
            path.unlink()

    plans = follow_plan(path, interval=0.05, sleep=sleep)
    assert next(plans) == [todo("old")]
    with pytest.raises(FileNotFoundError):
        next(plans)
    assert sum(slept[1:]) == pytest.approx(_tail.REAPPEAR_SECONDS)
