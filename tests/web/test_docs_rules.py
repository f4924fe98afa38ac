"""docs/web.md's rules hold as the page words them: how a session's name goes into a path, and
which `--host` needs `--expose`."""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from dsh_tool_todo.errors import UsageError
from dsh_tool_todo.stores.owners import OwnerRegistry
from dsh_tool_todo.web.server import serve

from .conftest import LiveServer, plan_write, todo

PAGE = (Path(__file__).resolve().parents[2] / "docs" / "web.md").read_text(encoding="utf-8")
HOST_FLAG = re.compile(r"`--host ([^`]+)`")


def section(heading: str) -> str:
    return PAGE.partition(f"\n{heading}\n")[2].partition("\n#")[0]


def test_a_name_goes_into_a_path_encoded_once_more_as_the_page_says(
    tmp_path: Path, live_server: Callable[..., LiveServer]
) -> None:
    text = section("### Session names in paths")
    assert "`encodeURIComponent(name)`" in text
    assert 'urllib.parse.quote(name, safe="")' in text.replace("\n", " ")
    answers = {
        path: int(status)
        for path, status in re.findall(r"`(/api/sessions/[^`]+)` answers (\d{3})", text)
    }
    assert answers == {
        "/api/sessions/lead%252fr1/family": 200,
        "/api/sessions/lead%2fr1/family": 404,
    }
    owners = OwnerRegistry(tmp_path)
    owners.session("lead/r1").append(*plan_write(todo("Read the sources", "in_progress")))
    owners.close()
    server = live_server(tmp_path)

    listed = httpx.get(f"{server.url}/api/sessions", timeout=10).json()["sessions"]
    (row,) = listed
    built = f"/api/sessions/{quote(row['name'], safe='')}/family"
    got = {path: httpx.get(server.url + path, timeout=10).status_code for path in answers}

    assert (row["name"], row["owner"]) == ("lead%2fr1", "lead/r1")
    assert built == "/api/sessions/lead%252fr1/family"
    assert got == answers


def test_loopback_hosts_serve_without_expose_and_reachable_ones_need_it(tmp_path: Path) -> None:
    """The "Loopback only, unless told" bullet: the hosts it says serve as they are get past the
    address check (to the source check, here a missing directory); those it says need
    `--expose` are refused for want of it."""
    bullet = PAGE.partition("- **Loopback only, unless told.**")[2].partition("\n- **")[0]
    loopback_part, _, reachable_part = bullet.partition("An address other machines can reach")
    loopback = HOST_FLAG.findall(loopback_part.replace("\n  ", " "))
    reachable = HOST_FLAG.findall(
        reachable_part.partition("needs `--expose`")[0].replace("\n  ", " ")
    )
    assert "127.0.0.2" in loopback
    assert reachable
    missing = tmp_path / "missing"

    def start(host: str) -> None:
        serve(
            str(missing),
            host=host,
            port=8799,
            expose=False,
            allow_hosts=[],
            out=io.StringIO(),
            err=io.StringIO(),
        )

    for host in loopback:
        with pytest.raises(UsageError, match=re.escape(str(missing))):
            start(host)
    for host in reachable:
        with pytest.raises(UsageError, match=rf"^--host {re.escape(host)} .*pass --expose"):
            start(host)
