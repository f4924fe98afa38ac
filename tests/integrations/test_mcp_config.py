"""`dsh-todo mcp --print-config` per client, where the server records, and the page that says so.

Each printed shape is run as a client runs it: exactly its command and arguments, through the
official MCP client, in an environment of the client's own (no `DSH_TODO_HOME`, another
working directory); the plan must land in the place `DSH_TODO_HOME` named where it was printed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import mcp
import pytest

from dsh_tool_todo.cli._mcp import CLIENTS, mcp_client_config
from dsh_tool_todo.integrations.mcp import DEFAULT_OWNER
from dsh_tool_todo.stores._home import default_home
from dsh_tool_todo.stores.jsonl import current_plan

DSH_TODO = str(Path(sys.executable).parent / "dsh-todo")
PLAN = {"todos": [{"content": "Show the plan live", "status": "in_progress"}]}
PAGE = Path(__file__).resolve().parents[2] / "docs" / "integrations" / "mcp.md"
# The key each client reads its servers under.
SHAPES = {
    "claude": "mcpServers",
    "cursor": "mcpServers",
    "vscode": "servers",
    "zed": "context_servers",
}


@pytest.fixture(autouse=True)
def own_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home of the test's own: the per-user state directory is never the developer's."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    monkeypatch.delenv("DSH_TODO_HOME", raising=False)
    return home


def printed(*flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [DSH_TODO, "mcp", *flags],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=60,
    )


def entry_of(config: dict[str, Any], client: str) -> dict[str, Any]:
    assert list(config) == [SHAPES[client]]
    assert list(config[SHAPES[client]]) == ["todo"]
    entry: dict[str, Any] = config[SHAPES[client]]["todo"]
    return entry


def call_as_a_client(entry: dict[str, Any], cwd: Path, env: dict[str, str]) -> dict[str, Any]:
    """One `todo_write` call through the official client on exactly ``entry``'s command."""
    from mcp.client.stdio import StdioServerParameters, stdio_client

    parameters = StdioServerParameters(
        command=entry["command"], args=entry["args"], env=env, cwd=str(cwd)
    )

    async def run() -> Any:
        with (cwd / "server.err").open("w", encoding="utf-8") as errlog:
            if hasattr(mcp, "Client"):
                async with mcp.Client(stdio_client(parameters, errlog=errlog)) as client:
                    return await client.call_tool("todo_write", PLAN)
            async with (
                stdio_client(parameters, errlog=errlog) as (read, write),
                mcp.ClientSession(read, write) as session,
            ):
                await session.initialize()
                return await session.call_tool("todo_write", PLAN)

    result: dict[str, Any] = asyncio.run(run()).model_dump(by_alias=True, mode="json")
    assert (cwd / "server.err").read_text(encoding="utf-8") == ""
    return result


@pytest.mark.parametrize("client", CLIENTS)
def test_each_clients_config_records_to_dsh_todo_home_by_absolute_path(
    client: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "plans"
    monkeypatch.setenv("DSH_TODO_HOME", str(home))
    run = printed("--print-config", *(["--client", client] if client != "claude" else []))
    assert run.returncode == 0, run.stderr
    assert run.stderr == (
        f"dsh-todo mcp: note: the default place {home} (DSH_TODO_HOME) does not exist yet; the "
        "server creates it when it first records\n"
    )
    entry = entry_of(json.loads(run.stdout), client)
    assert Path(entry["command"]).is_absolute()
    assert entry["args"] == ["mcp", "--log-dir", str(home)]
    extras: dict[str, dict[str, Any]] = {"vscode": {"type": "stdio"}, "zed": {"env": {}}}
    extra = extras.get(client, {})
    assert entry == {"command": entry["command"], "args": entry["args"], **extra}
    # the client's own environment: no venv on PATH, no DSH_TODO_HOME, a directory of its own
    elsewhere = tmp_path / "client"
    elsewhere.mkdir()
    env = {"PATH": "/usr/bin:/bin", "HOME": str(elsewhere)}
    assert call_as_a_client(entry, elsewhere, env)["isError"] is False
    assert current_plan(only_log(home)) == PLAN["todos"]


def test_the_config_names_the_per_user_state_directory_when_no_variable_names_a_place(
    own_home: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    run = printed("--print-config", "--owner", "ada")
    entry = entry_of(json.loads(run.stdout), "claude")
    state = own_home / ".local" / "state" / "dsh-todo"
    assert entry["args"] == ["mcp", "--log-dir", str(state), "--owner", "ada"]
    assert entry["args"][2] == default_home()
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    entry = entry_of(json.loads(printed("--print-config").stdout), "claude")
    assert entry["args"][2] == str(tmp_path / "state" / "dsh-todo")


def test_a_client_running_dsh_todo_mcp_with_no_flags_records_to_the_default_place(
    tmp_path: Path,
) -> None:
    home = tmp_path / "plans"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "DSH_TODO_HOME": str(home)}
    entry = {"command": DSH_TODO, "args": ["mcp"]}
    assert call_as_a_client(entry, tmp_path, env)["isError"] is False
    assert current_plan(only_log(home)) == PLAN["todos"]


def only_log(home: Path) -> Path:
    """The one log a server started with no --owner made: ``mcp-<time>-<pid>``."""
    (log,) = home.iterdir()
    assert re.fullmatch(rf"{DEFAULT_OWNER}-\d{{8}}-\d{{6}}-\d+\.jsonl", log.name), log.name
    return log


def test_two_servers_started_with_no_owner_each_record_a_log_of_their_own_at_once(
    tmp_path: Path,
) -> None:
    home = tmp_path / "plans"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "DSH_TODO_HOME": str(home)}
    entry = {"command": DSH_TODO, "args": ["mcp", "--wait-owner", "0"]}

    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()

    async def both() -> list[Any]:
        return await asyncio.gather(
            asyncio.to_thread(call_as_a_client, entry, first, env),
            asyncio.to_thread(call_as_a_client, entry, second, env),
        )

    assert [result["isError"] for result in asyncio.run(both())] == [False, False]
    logs = sorted(home.iterdir())
    assert len(logs) == 2
    assert [current_plan(log) for log in logs] == [PLAN["todos"]] * 2


def test_in_memory_keeps_todays_config_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "plans"
    monkeypatch.setenv("DSH_TODO_HOME", str(home))
    run = printed("--print-config", "--in-memory", "--client", "vscode")
    assert (run.returncode, run.stderr) == (0, "")
    entry = entry_of(json.loads(run.stdout), "vscode")
    assert entry["args"] == ["mcp", "--in-memory"]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "DSH_TODO_HOME": str(home)}
    assert call_as_a_client(entry, tmp_path, env)["isError"] is False
    assert not home.exists()


def test_a_config_of_no_log_dir_says_in_memory() -> None:
    # stdio_config builds its command line here: with no log_dir, a plan in memory, said so
    server = argparse.Namespace(parallel=True, log_dir=None, owner="mcp", wait_owner=None)
    (entry,) = mcp_client_config(server)["mcpServers"].values()
    assert entry["args"] == ["mcp", "--parallel", "--in-memory"]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--in-memory", "--owner", "a"], r"--in-memory keeps the plan in the server's memory"),
        (["--in-memory", "--log-dir", "/tmp"], r"leave out --log-dir and --owner"),
        (["--client", "zed"], r"--client chooses the shape .* pass --print-config too"),
        (["--print-config", "--client", "emacs"], r"argument --client: invalid choice: 'emacs'"),
        (["--log-dir", "postgresql://db/plans"], r"argument --log-dir: names a database"),
    ],
)
def test_flags_that_do_not_go_together_are_refused(flags: list[str], message: str) -> None:
    run = printed(*flags)
    assert (run.returncode, run.stdout) == (2, "")
    assert run.stderr.count("\n") == 1
    assert re.search(message, run.stderr), run.stderr


@pytest.mark.parametrize("print_config", [[], ["--print-config"]], ids=["serve", "print-config"])
def test_a_default_place_in_a_database_is_refused(
    print_config: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DSH_TODO_HOME", "postgresql://someone:secret@db.example/plans")
    run = printed(*print_config)
    assert (run.returncode, run.stdout) == (2, "")
    assert run.stderr == (
        "dsh-todo: error: DSH_TODO_HOME names a PostgreSQL database, and dsh-todo mcp records "
        "to a directory: a server holds its owner's log while it runs and a second one waits for "
        "it (--wait-owner), which a database session does not do. Pass --log-dir DIR or "
        "--in-memory\n"
    )


@pytest.mark.parametrize("print_config", [[], ["--print-config"]], ids=["serve", "print-config"])
def test_a_default_place_that_cannot_be_a_directory_is_refused_before_anything(
    print_config: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a-file").write_text("", encoding="utf-8")
    monkeypatch.setenv("DSH_TODO_HOME", str(tmp_path / "a-file"))
    run = printed(*print_config)
    assert (run.returncode, run.stdout) == (2, "")
    assert run.stderr == (
        f"dsh-todo: error: the default place {tmp_path / 'a-file'} (DSH_TODO_HOME): is not a "
        "directory; name a directory with --log-dir DIR (or DSH_TODO_HOME), or pass --in-memory\n"
    )
    monkeypatch.setenv("DSH_TODO_HOME", str(tmp_path / "a-file" / "plans"))
    run = printed(*print_config)
    assert (run.returncode, run.stdout) == (2, "")
    assert run.stderr == (
        f"dsh-todo: error: the default place {tmp_path / 'a-file' / 'plans'} (DSH_TODO_HOME): "
        f"cannot be written: {tmp_path / 'a-file'} is not a directory this user can write to; "
        "name another with --log-dir DIR (or DSH_TODO_HOME), or pass --in-memory\n"
    )


# --- the page ----------------------------------------------------------------------------------

# Each client's section, and what it must name: the file or command the config goes into.
SECTIONS = {
    "Claude Desktop": ["claude_desktop_config.json", "Application Support/Claude", "%APPDATA%"],
    "Claude Code": ["claude mcp add todo --", ".mcp.json", "permissions", "--disallowedTools"],
    "Cursor": ["~/.cursor/mcp.json", ".cursor/mcp.json"],
    "VS Code": [".vscode/mcp.json", '"type": "stdio"', "Configure Tools"],
    "Zed": ["context_servers", "settings.json"],
}
SECTION_CLIENT = {"Claude Desktop": "claude", "Cursor": "cursor", "VS Code": "vscode", "Zed": "zed"}


def sections(text: str) -> dict[str, str]:
    parts = re.split(r"^### (.+)$", text, flags=re.M)
    pairs = zip(parts[1::2], parts[2::2], strict=True)
    return {title.strip(): body.split("\n## ")[0] for title, body in pairs}


def test_the_page_says_where_to_watch_near_the_top() -> None:
    text = PAGE.read_text(encoding="utf-8")
    heads = re.findall(r"^## (.+)$", text, flags=re.M)
    assert heads[0] == "See the plan live"
    live = text.split("## See the plan live")[1].split("\n## ")[0]
    for said in (
        "default place",
        "DSH_TODO_HOME",
        "dsh-todo watch ",
        "dsh-todo serve",
    ):
        assert said in live


def test_each_client_has_a_section_naming_its_file_and_its_printed_shape() -> None:
    found = sections(PAGE.read_text(encoding="utf-8"))
    for title, names in SECTIONS.items():
        assert title in found, f"no section for {title}"
        for name in names:
            assert name in found[title], f"{title}'s section does not name {name}"
    for title, client in SECTION_CLIENT.items():
        (shown,) = re.findall(r"```json\n(.*?)```", found[title], flags=re.S)
        server = argparse.Namespace(parallel=False, log_dir="/x", owner="o", wait_owner=None)
        printed_shape = mcp_client_config(server, client)
        assert list(json.loads(shown)) == list(printed_shape)
        (shown_entry,) = json.loads(shown)[SHAPES[client]].values()
        assert set(shown_entry) == set(printed_shape[SHAPES[client]]["todo"])
        if client != "claude":
            assert f"--client {client}" in found[title]


def test_the_help_and_pages_say_what_a_server_with_no_owner_records() -> None:
    """`mcp --help`, docs/cli.md and this page said `--owner` defaulted to `mcp`, and the page's
    first configuration carried `--owner mcp`: with none, a server records a log of its own
    (`mcp-<date>-<time>-<pid>`), and `--print-config` prints no `--owner`."""
    run = printed("--help")
    helped = " ".join(run.stdout.split())
    cli_page = " ".join((PAGE.parents[1] / "cli.md").read_text(encoding="utf-8").split())
    page = PAGE.read_text(encoding="utf-8")
    (first,) = re.findall(r"```json\n(.*?)```", page.split("\n## ")[1], flags=re.S)
    assert "(default: mcp)" not in helped
    assert "mcp-<date>-<time>-<pid>" in helped
    assert "(default: mcp)" not in cli_page
    assert "(default `mcp`)" not in cli_page
    assert "mcp-<date>-<time>-<pid>" in cli_page
    default = argparse.Namespace(parallel=False, log_dir="/x", owner=None, wait_owner=None)
    (entry,) = json.loads(first)["mcpServers"].values()
    assert [arg for arg in entry["args"] if arg.startswith("--")] == [
        arg
        for arg in mcp_client_config(default)["mcpServers"]["todo"]["args"]
        if arg.startswith("--")
    ]
