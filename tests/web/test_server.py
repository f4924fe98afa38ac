"""``dsh-todo serve`` as a process: safe defaults, a token beyond loopback, Ctrl-C mid-stream."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from .conftest import ServeProcess, SseStream, plan_write, todo, write_log

Starter = Callable[..., ServeProcess]


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dsh_tool_todo", *args],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_ctrl_c_stops_the_server_within_a_second_with_streams_open(
    tmp_path: Path, serve_process: Starter, sse: Callable[..., SseStream]
) -> None:
    write_log(tmp_path / "s.jsonl", [plan_write(todo("A"))])
    child = serve_process(tmp_path)
    streams = [sse(f"{child.url}/api/sessions/s/stream") for _ in range(3)]
    for stream in streams:
        stream.projection()

    took = child.interrupt()

    assert child.process.returncode == 0
    # Within a second on an idle machine (docs/web.md); a loaded one schedules the exit later.
    # What this tells apart is a server waiting on its open streams, which never ends.
    assert took < 5.0, f"stopping took {took:.2f} s"


def test_binding_beyond_loopback_needs_the_explicit_flag(tmp_path: Path) -> None:
    result = run_cli("serve", str(tmp_path), "--host", "0.0.0.0", "--port", "8799")

    assert result.returncode == 2
    assert result.stderr == (
        "dsh-todo: error: --host 0.0.0.0 is reachable from other machines; pass --expose to "
        "allow it (a token will then be required)\n"
    )


def test_an_exposed_server_warns_and_requires_the_token_it_prints(
    tmp_path: Path, serve_process: Starter
) -> None:
    write_log(tmp_path / "s.jsonl", [plan_write(todo("A"))])
    child = serve_process(
        tmp_path, "--host", "0.0.0.0", "--expose", "--allow-host", "127.0.0.1", wait_for="Token:"
    )
    token = next(line for line in child.first_lines if line.startswith("Token: "))[7:]

    bare = httpx.get(f"{child.url}/api/sessions", timeout=5)
    with_token = httpx.get(
        f"{child.url}/api/sessions", headers={"authorization": f"Bearer {token}"}, timeout=5
    )
    child.interrupt()
    assert child.process.stderr is not None
    warning = child.process.stderr.read()

    assert len(token) >= 32
    assert bare.status_code == 401
    assert with_token.status_code == 200
    assert "warning: serving on 0.0.0.0, beyond this machine" in warning


def test_expose_on_a_loopback_host_warns_that_it_changes_nothing(
    tmp_path: Path, serve_process: Starter
) -> None:
    write_log(tmp_path / "s.jsonl", [plan_write(todo("A"))])
    child = serve_process(tmp_path, "--expose")
    assert httpx.get(f"{child.url}/api/sessions", timeout=5).status_code == 200  # no token
    child.interrupt()
    assert child.process.stderr is not None
    assert (
        "dsh-todo: warning: --expose has no effect with --host 127.0.0.1, which only this "
        "machine reaches" in child.process.stderr.read()
    )


def test_a_taken_port_gets_one_line_and_exit_2(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_cli("serve", str(tmp_path), "--port", str(port))

    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr == (
        f"dsh-todo: error: cannot listen on 127.0.0.1:{port}: Address already in use: pass "
        "another --port\n"
    )


@pytest.mark.parametrize("framework", ["uvicorn", "starlette", "sse_starlette"])
def test_without_the_web_extra_the_error_names_it(tmp_path: Path, framework: str) -> None:
    script = (
        f"import sys; sys.modules[{framework!r}] = None\n"
        "from dsh_tool_todo.cli import main\n"
        f"sys.exit(main(['serve', {str(tmp_path)!r}]))"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=30, check=False
    )

    assert result.returncode == 2
    assert result.stderr.startswith("dsh-todo: error: ")
    assert "needs the 'web' extra: install dsh-tool-todo[web]" in result.stderr
    assert "pip install '.[web]'" in result.stderr
    assert framework in result.stderr
    assert len(result.stderr.splitlines()) == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["serve", ".", "--host", "0.0.0.0", "--expose"],
            "--host 0.0.0.0 answers on every address: name the ones clients use with "
            "--allow-host (checked against the Host header of each request)",
        ),
        (
            ["serve", "/nonexistent/dir"],
            "/nonexistent/dir: not a directory of session logs (there is nothing there)",
        ),
        (["serve", ".", "--port", "0"], "--port must be from 1 to 65535 (got 0)"),
    ],
)
def test_bad_arguments_get_one_line_and_exit_2(args: list[str], message: str) -> None:
    result = run_cli(*args)

    assert result.returncode == 2
    assert result.stderr == f"dsh-todo: error: {message}\n"


@pytest.mark.parametrize("allowed", ["", "http://viewer.lan", "viewer.lan:99999", "*.lan"])
def test_an_allow_host_no_host_header_can_carry_gets_one_line_and_exit_2(allowed: str) -> None:
    result = run_cli("serve", ".", "--allow-host", "viewer.lan", "--allow-host", allowed)

    assert result.returncode == 2
    assert result.stderr == (
        f"dsh-todo: error: --allow-host {allowed!r} names no host a Host header carries: give "
        "name, name:port or [v6]:port (viewer.lan, proxy.lan:443, [fd00::1]:8765), with no "
        "scheme, path, space or wildcard\n"
    )


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://viewer:hunter2-secret@127.0.0.1:1/agents",
        "postgresql://viewer@127.0.0.1:1/agents?password=hunter2-secret",
        "postgres://viewer:hunter2-secret@127.0.0.1:1/agents?sslmode=disable",
    ],
)
def test_a_database_that_cannot_be_read_is_one_line_before_any_banner(url: str) -> None:
    """It printed "Serving..." and then a line per reconnection attempt of its pool."""
    result = run_cli("serve", url)

    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.startswith("dsh-todo: error: PostgreSQL at 127.0.0.1:1/agents: ")
    assert result.stderr.count("\n") == 1
    assert "hunter2-secret" not in result.stderr


@pytest.mark.parametrize("form", ["user", "query", "scheme"])
def test_the_banner_names_a_database_without_its_password(
    serve_process: Starter, form: str
) -> None:
    from psycopg.conninfo import conninfo_to_dict

    from dsh_tool_todo.stores import postgres

    from ..stores.conftest import fresh_database

    with fresh_database() as dsn:
        postgres.setup(dsn)
        params = conninfo_to_dict(dsn)
        where = f"{params.get('host', '127.0.0.1')}:{params.get('port', 5432)}/{params['dbname']}"
        user = params.get("user", "postgres")
        url = {
            "user": f"postgresql://{user}:hunter2-secret@{where}",
            "query": f"postgresql://{user}@{where}?password=hunter2-secret",
            "scheme": f"postgres://{user}:hunter2-secret@{where}?sslmode=disable",
        }[form]
        child = serve_process(url)
        child.interrupt()
    assert child.process.stderr is not None
    said = "\n".join(child.first_lines) + child.process.stderr.read()

    assert "hunter2-secret" not in said
    assert child.first_lines[0].startswith(f"Serving PostgreSQL at {where} (read-only)")


def test_a_store_that_goes_away_while_served_is_said_once_per_episode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A database gone while served flooded stderr, a line per reconnection attempt of its
    pool (and per retry of the list's changes): one line now, again once it answered."""
    import io
    import logging

    import uvicorn

    from dsh_tool_todo.web import server

    pool, ours = logging.getLogger("psycopg.pool"), logging.getLogger("dsh_tool_todo")
    refused = "connection failed: connection refused\n\tIs the server running on that host?"

    def run(self: object, sockets: object = None) -> None:
        for _ in range(5):  # one episode: the pool tries again and again
            pool.warning("error connecting in %r: %s", "pool-1", refused)
            ours.warning("session list changes: %s; asking again in %.0f s", "gone", 2.0)
        pool.info("adding new connection to the pool")  # it answers again
        for _ in range(3):  # a second episode
            pool.warning("error connecting in %r: %s", "pool-1", refused)

    monkeypatch.setattr(uvicorn.Server, "run", run)
    err = io.StringIO()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    server.serve(
        str(tmp_path),
        host="127.0.0.1",
        port=port,
        expose=False,
        allow_hosts=[],
        out=io.StringIO(),
        err=err,
    )

    pool_line = (
        f"dsh-todo serve: warning: {tmp_path}: error connecting in 'pool-1': connection failed: "
        "connection refused (said once until it answers again)"
    )
    list_line = (
        "dsh-todo serve: warning: session list changes: gone; asking again in 2 s (said once "
        "until it answers again)"
    )
    assert err.getvalue().splitlines() == [pool_line, list_line, pool_line]
    assert capsys.readouterr().err == ""
    assert (pool.handlers, pool.propagate, ours.handlers, ours.propagate) == ([], True, [], True)


def test_a_pool_that_connects_ends_its_episode_in_its_own_words() -> None:
    """The episode's end is read from the pool's own log line: the installed psycopg_pool
    still says so when it connects."""
    import asyncio
    import io

    from psycopg_pool import AsyncConnectionPool

    from dsh_tool_todo.web import server

    from ..stores.conftest import fresh_database

    async def connect(dsn: str) -> None:
        async with AsyncConnectionPool(dsn, min_size=1, open=False) as pool:
            await pool.wait()

    with fresh_database() as dsn, server._said_once_per_episode(io.StringIO(), "db") as said:
        said.failing[server.POOL_LOGGER] = 0.0
        asyncio.run(connect(dsn))
        assert server.POOL_LOGGER not in said.failing


def test_a_key_value_dsn_is_refused_without_echoing_its_password() -> None:
    result = run_cli("serve", "host=127.0.0.1 dbname=agents password=hunter2-secret")

    assert result.returncode == 2
    assert "hunter2-secret" not in result.stderr
    assert result.stderr == (
        "dsh-todo: error: SOURCE looks like a key=value conninfo, which serve does not take: "
        "give it as a postgresql:// URL\n"
    )


@pytest.mark.skipif(sys.platform == "win32", reason="no RLIMIT_NOFILE on Windows")
def test_serve_raises_the_soft_open_file_limit_toward_the_hard_one() -> None:
    import resource

    from dsh_tool_todo.web.server import OPEN_FILES, _raise_open_files

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
        wanted = OPEN_FILES if hard == resource.RLIM_INFINITY else min(hard, OPEN_FILES)
        assert _raise_open_files() == wanted
        assert resource.getrlimit(resource.RLIMIT_NOFILE) == (wanted, hard)
        assert _raise_open_files(100) == wanted  # never lowered
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.mark.skipif(not Path("/proc/self/limits").exists(), reason="reads /proc/PID/limits")
def test_a_serve_started_at_a_low_soft_limit_runs_with_a_raised_one(
    tmp_path: Path, serve_process: Callable[..., ServeProcess]
) -> None:
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))  # the child inherits it
    try:
        child = serve_process(tmp_path)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    limits = Path(f"/proc/{child.process.pid}/limits").read_text()
    (row,) = [line for line in limits.splitlines() if line.startswith("Max open files")]
    assert int(row.split()[3]) > 256
