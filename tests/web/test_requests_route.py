"""The request route of ``dsh-todo serve --requests``: off by default, guarded by its own token
and the Origin check, bounded in size and rate; what it files the agent's writer takes."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from dsh_tool_todo.errors import UsageError
from dsh_tool_todo.stores._inbox import take_requests
from dsh_tool_todo.stores.jsonl import JsonlReader, JsonlSession
from dsh_tool_todo.web import _requests
from dsh_tool_todo.web.app import create_app
from tests._builders import plan

from .conftest import ASGI_PORT, HOST, run_requests

ORIGIN = f"http://{HOST}:{ASGI_PORT}"


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    with JsonlSession(tmp_path / "ada.jsonl") as agent:
        agent.append("todo/write", plan("Write the tests", "Ship it"))
    return tmp_path


async def token_of(client: httpx.AsyncClient) -> dict[str, str]:
    given = (await client.get("/api/requests/token")).json()
    return {given["header"]: given["token"], "origin": ORIGIN}


def test_the_route_is_off_unless_the_server_is_started_with_requests(logs: Path) -> None:
    async def calls(client: httpx.AsyncClient) -> list[object]:
        posted = await client.post(
            "/api/sessions/ada/requests", json={"kind": "note", "content": "x"}
        )
        listed = await client.get("/api/sessions/ada/requests")
        # the page asks for the token on every session page: off is an answer, not a 404
        token = await client.get("/api/requests/token")
        return [token.status_code, token.json()["token"], posted.status_code, listed.status_code]

    assert run_requests(create_app(logs), calls) == [200, None, 404, 404]
    assert not (logs / "ada.jsonl.requests").exists()


def test_a_request_from_the_page_is_filed_and_the_agent_takes_it(logs: Path) -> None:
    async def calls(client: httpx.AsyncClient) -> tuple[Any, Any]:
        headers = await token_of(client)
        filed = await client.post(
            "/api/sessions/ada/requests",
            json={"kind": "done", "content": "Ship it", "by": "grace"},
            headers=headers,
        )
        return filed, (await client.get("/api/sessions/ada/requests")).json()

    filed, listed = run_requests(create_app(logs, requests=True), calls)
    assert filed.status_code == 201
    assert filed.json()["kind"] == "done"
    assert [r["id"] for r in listed["waiting"]] == [filed.json()["id"]]
    with JsonlSession(logs / "ada.jsonl") as agent:
        assert [r.id for r in take_requests(agent)] == [filed.json()["id"]]


@pytest.mark.parametrize(
    ("headers", "status", "message"),
    [
        ({}, 403, "request token"),
        ({"x-dsh-todo-request": "wrong", "origin": ORIGIN}, 403, "request token"),
        ("token-only", 403, "Origin"),
        ("token-evil-origin", 403, "Origin"),
    ],
)
def test_a_request_without_the_token_or_from_another_origin_is_refused(
    logs: Path, headers: Any, status: int, message: str
) -> None:
    async def calls(client: httpx.AsyncClient) -> httpx.Response:
        sent = headers
        if isinstance(headers, str):
            sent = await token_of(client)
            if headers == "token-only":
                del sent["origin"]
            else:
                sent["origin"] = "http://evil.example"
        return await client.post(
            "/api/sessions/ada/requests", json={"kind": "note", "content": "x"}, headers=sent
        )

    answer = run_requests(create_app(logs, requests=True), calls)
    assert answer.status_code == status
    assert message in answer.json()["error"]
    assert not (logs / "ada.jsonl.requests").exists()


def test_a_cookie_alone_never_files_a_request(logs: Path) -> None:
    """With --expose the view's token is a cookie a browser sends on a cross-site form post:
    it must not be enough."""

    async def calls(client: httpx.AsyncClient) -> httpx.Response:
        client.cookies.set(f"dsh_todo_token_{ASGI_PORT}", "secret")
        return await client.post(
            "/api/sessions/ada/requests",
            content=b'{"kind": "note", "content": "x"}',
            headers={"origin": ORIGIN, "content-type": "text/plain"},
        )

    answer = run_requests(create_app(logs, token="secret", requests=True), calls)
    assert answer.status_code == 403


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        (b"x" * 5000, 413, "at most 4096 bytes"),
        (b"[1]", 400, "JSON object"),
        (b"{", 400, "JSON object"),
        (b'{"kind": "rename", "content": "x"}', 400, "`kind` is one of"),
        (b'{"kind": "note", "content": 5}', 400, "must be strings"),
        (b'{"kind": "done", "content": "Deploy"}', 400, "no item 'Deploy'"),
    ],
)
def test_a_bad_body_is_refused_and_files_nothing(
    logs: Path, body: bytes, status: int, message: str
) -> None:
    async def calls(client: httpx.AsyncClient) -> httpx.Response:
        return await client.post(
            "/api/sessions/ada/requests", content=body, headers=await token_of(client)
        )

    answer = run_requests(create_app(logs, requests=True), calls)
    assert (answer.status_code, message in answer.json()["error"]) == (status, True)
    assert not (logs / "ada.jsonl.requests").exists()


def test_requests_past_the_rate_are_refused(logs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_requests, "RATE", 3)

    async def calls(client: httpx.AsyncClient) -> list[int]:
        headers = await token_of(client)
        codes = []
        for n in range(5):
            answer = await client.post(
                "/api/sessions/ada/requests",
                json={"kind": "note", "content": f"note {n}"},
                headers=headers,
            )
            codes.append(answer.status_code)
        return codes

    assert run_requests(create_app(logs, requests=True), calls) == [201, 201, 201, 429, 429]


def test_a_request_is_withdrawn_from_the_page(logs: Path) -> None:
    async def calls(client: httpx.AsyncClient) -> tuple[int, int, Any]:
        headers = await token_of(client)
        filed = await client.post(
            "/api/sessions/ada/requests", json={"kind": "add", "content": "Docs"}, headers=headers
        )
        ident = filed.json()["id"]
        gone = await client.post(f"/api/sessions/ada/requests/{ident}/withdraw", headers=headers)
        again = await client.post(f"/api/sessions/ada/requests/{ident}/withdraw", headers=headers)
        return (
            gone.status_code,
            again.status_code,
            (await client.get("/api/sessions/ada/requests")).json(),
        )

    assert run_requests(create_app(logs, requests=True), calls) == (
        200,
        400,
        {"taken": [], "waiting": []},
    )


def test_an_unknown_session_answers_404(logs: Path) -> None:
    async def calls(client: httpx.AsyncClient) -> list[int]:
        headers = await token_of(client)
        posted = await client.post(
            "/api/sessions/ghost/requests", json={"kind": "add", "content": "x"}, headers=headers
        )
        return [(await client.get("/api/sessions/ghost/requests")).status_code, posted.status_code]

    assert run_requests(create_app(logs, requests=True), calls) == [404, 404]


def test_requests_with_a_reader_need_the_source_named(logs: Path) -> None:
    with pytest.raises(UsageError, match="pass requests= the directory or URL it reads"):
        create_app(JsonlReader(logs), requests=True)


def test_an_unknown_session_is_the_views_404_naming_no_path_of_the_server(logs: Path) -> None:
    async def calls(client: httpx.AsyncClient) -> list[Any]:
        headers = await token_of(client)
        answers = [
            await client.get("/api/sessions/ghost/requests"),
            await client.post(
                "/api/sessions/ghost/requests",
                json={"kind": "note", "content": "x"},
                headers=headers,
            ),
            await client.post("/api/sessions/ghost/requests/r1/withdraw", headers=headers),
            await client.post("/api/sessions/ada/requests/r1/withdraw", headers=headers),
        ]
        return [(a.status_code, a.json()["error"]) for a in answers]

    answers = run_requests(create_app(logs, requests=True), calls)
    assert answers[:3] == [(404, "no session 'ghost' is served")] * 3
    assert answers[3] == (400, "no pending request 'r1' of this session")
    assert not any(str(logs) in error for _, error in answers)


def test_refused_requests_do_not_count_toward_the_rate(
    logs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_requests, "RATE", 2)

    async def calls(client: httpx.AsyncClient) -> list[int]:
        headers = await token_of(client)
        codes = []
        for content in ("Deploy", "Deploy", "Deploy", "Ship it"):  # three refusals, then one
            answer = await client.post(
                "/api/sessions/ada/requests",
                json={"kind": "done", "content": content},
                headers=headers,
            )
            codes.append(answer.status_code)
        return codes

    assert run_requests(create_app(logs, requests=True), calls) == [400, 400, 400, 201]


def test_a_body_declared_too_long_is_refused_before_it_is_read(logs: Path) -> None:
    async def calls(client: httpx.AsyncClient) -> int:
        headers = {**(await token_of(client)), "content-length": "10000000000"}
        answer = await client.post("/api/sessions/ada/requests", content=b"{}", headers=headers)
        return answer.status_code

    assert run_requests(create_app(logs, requests=True), calls) == 413


def test_a_log_named_by_hand_takes_requests_from_the_page_and_no_owners_log_gets_them(
    tmp_path: Path,
) -> None:
    from dsh_tool_todo.stores import open_session

    with JsonlSession(tmp_path / "Bob Smith.jsonl") as agent:
        agent.append("todo/write", plan("Ship it"))
    with open_session(tmp_path, "Bob Smith") as owner:  # the owner key's log: another file
        owner.append("todo/write", plan("Ship it"))
    (owners_log,) = [p for p in tmp_path.glob("*.jsonl") if p.name != "Bob Smith.jsonl"]

    async def calls(client: httpx.AsyncClient) -> list[int]:
        headers = await token_of(client)
        codes = []
        for name in ("Bob Smith", owners_log.stem):
            filed = await client.post(
                f"/api/sessions/{quote(name, safe='')}/requests",  # as the page names it
                json={"kind": "note", "content": f"for {name}", "by": "grace"},
                headers=headers,
            )
            codes.append(filed.status_code)
        return codes

    assert run_requests(create_app(tmp_path, requests=True), calls) == [201, 201]
    with JsonlSession(tmp_path / "Bob Smith.jsonl") as agent:
        assert [r.content for r in take_requests(agent)] == ["for Bob Smith"]
    with JsonlSession(owners_log) as owner:
        assert [r.content for r in take_requests(owner)] == [f"for {owners_log.stem}"]
