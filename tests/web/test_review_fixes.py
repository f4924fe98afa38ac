"""The web view's answers to hostile cookies, foreign Host headers, odd file names, owner keys."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from dsh_tool_todo.web.app import create_app

from .conftest import ASGI_PORT, plan_write, run_requests, todo, write_log

TOKEN = "s3cret"
COOKIE = f"dsh_todo_token_{ASGI_PORT}"


def get_with(app: object, url: str, headers: dict[str, str]) -> httpx.Response:
    async def call(client: httpx.AsyncClient) -> httpx.Response:
        return await client.get(url, headers=headers)

    response: httpx.Response = run_requests(app, call)
    return response


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    write_log(tmp_path / "alpha.jsonl", [plan_write(todo("A"))])
    return tmp_path


@pytest.mark.parametrize(
    "cookie",
    [
        f"theme=dark mode; {COOKIE}={TOKEN}",  # a space in a value
        f'prefs={{"a": 1, "b": [2, 3]}}; {COOKIE}={TOKEN}',  # JSON
        f"flag; {COOKIE}={TOKEN}",  # a name-only cookie
        f'{COOKIE}={TOKEN}; broken="unterminated; other=a=b=c',
        f'a=\\x00\\; ;;; =nameless; {COOKIE}="{TOKEN}"',  # quoted, as RFC 6265 allows
        f"dsh_todo_token={TOKEN}; session=abc,def",  # the old name, kept for one release
    ],
)
def test_the_token_cookie_is_found_beside_cookies_a_strict_parser_refuses(
    logs: Path, cookie: str
) -> None:
    app = create_app(logs, token=TOKEN)

    response = get_with(app, "/api/sessions", {"cookie": cookie})

    assert response.status_code == 200, response.text


@pytest.mark.parametrize(
    "cookie",
    [
        "theme=dark mode",
        f"{COOKIE}=wrong; other={TOKEN}",
        f"dsh_todo_token_9999={TOKEN}",  # another port's server
        f"x{COOKIE}={TOKEN}",
        "",
    ],
)
def test_a_cookie_header_without_this_servers_token_is_refused(logs: Path, cookie: str) -> None:
    app = create_app(logs, token=TOKEN)

    response = get_with(app, "/api/sessions", {"cookie": cookie})

    assert response.status_code == 401


def test_each_port_trades_the_token_for_a_cookie_of_its_own(tmp_path: Path) -> None:
    write_log(tmp_path / "alpha.jsonl", [plan_write(todo("A"))])
    first = create_app(tmp_path, port=8001, token="one")
    second = create_app(tmp_path, port=8002, token="two")
    both = "dsh_todo_token_8001=one; dsh_todo_token_8002=two"

    async def trade(client: httpx.AsyncClient) -> httpx.Response:
        return await client.get("/?token=one")

    traded = run_requests(first, trade, host="127.0.0.1:8001")
    on_first = run_requests(
        first,
        lambda client: client.get("/api/sessions", headers={"cookie": both}),
        host="127.0.0.1:8001",
    )
    on_second = run_requests(
        second,
        lambda client: client.get("/api/sessions", headers={"cookie": both}),
        host="127.0.0.1:8002",
    )

    assert traded.status_code == 303
    assert traded.headers["set-cookie"].startswith("dsh_todo_token_8001=one;")
    assert (on_first.status_code, on_second.status_code) == (200, 200)


def test_a_refused_host_is_told_which_flag_admits_it(logs: Path) -> None:
    app = create_app(logs, host="0.0.0.0", port=ASGI_PORT, extra_hosts=["viewer.lan"])

    response = get_with(app, "/api/sessions", {"host": f"127.0.0.1:{ASGI_PORT}"})

    assert response.status_code == 403
    assert response.text == (
        f"refused: the Host header (127.0.0.1:{ASGI_PORT}) does not name this server; "
        f"if clients reach it by that name, restart it with --allow-host 127.0.0.1:{ASGI_PORT}\n"
    )


def test_a_hostile_host_header_is_not_echoed_raw(logs: Path) -> None:
    app = create_app(logs)

    response = get_with(app, "/api/sessions", {"host": "evil\x1b[31m.example:1" + "x" * 300})

    assert response.status_code == 403
    assert "\x1b" not in response.text
    assert len(response.text) < 400


def test_a_file_name_that_is_not_utf_8_never_reaches_the_session_list(tmp_path: Path) -> None:
    write_log(tmp_path / "good.jsonl", [plan_write(todo("A"))])
    bad = os.path.join(os.fsencode(tmp_path), b"bad\xff\xfe.jsonl")
    with open(bad, "wb") as file:
        file.write(b'{"seq":0,"type":"turn/start","data":{}}\n')

    response = run_requests(create_app(tmp_path), lambda client: client.get("/api/sessions"))

    assert response.status_code == 200
    assert [row["name"] for row in response.json()["sessions"]] == ["good"]
    assert response.json()["total"] == 1


def test_owner_keys_are_given_decoded_beside_the_file_names(tmp_path: Path) -> None:
    for stem in ["alice%40example.com", "%42ob%20%53mith", "plain", "not%zzowner", "Upper"]:
        write_log(tmp_path / f"{stem}.jsonl", [plan_write(todo("A"))])

    async def calls(client: httpx.AsyncClient) -> tuple[httpx.Response, httpx.Response]:
        rows = await client.get("/api/sessions")
        page = await client.get("/api/sessions/alice%2540example.com/events")
        return rows, page

    rows, page = run_requests(create_app(tmp_path), calls)

    owners = {row["name"]: row["owner"] for row in rows.json()["sessions"]}
    assert owners == {
        "alice%40example.com": "alice@example.com",
        "%42ob%20%53mith": "Bob Smith",
        "plain": "plain",
        "not%zzowner": None,  # no owner key encodes to it: shown as the file name
        "Upper": None,  # an owner file name is lower case
    }
    assert (page.json()["session"], page.json()["owner"]) == (
        "alice%40example.com",
        "alice@example.com",
    )


def test_importing_the_app_without_the_extra_names_it() -> None:
    script = (
        "import sys; sys.modules['sse_starlette'] = None\n"
        "from dsh_tool_todo.integrations._extras import MissingExtra\n"
        "try:\n"
        "    import dsh_tool_todo.web.app\n"
        "except MissingExtra as error:\n"
        "    print(error)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )

    assert result.returncode == 0, result.stderr
    assert "the web view needs the 'web' extra" in result.stdout
    assert "pip install '.[web]'" in result.stdout
