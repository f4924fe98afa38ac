"""The request routes of ``dsh-todo serve``: filing off unless ``--requests``, guarded by its own
token and the Origin check, bounded in size and rate; what it files the agent's writer takes.
Reading what was asked is on every server, under the view's own guards."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from dsh_tool_todo.cli._plans import turn_state
from dsh_tool_todo.errors import UsageError
from dsh_tool_todo.stores._inbox import take_requests
from dsh_tool_todo.stores.jsonl import JsonlReader, JsonlSession
from dsh_tool_todo.stores.requests import PlanRequests
from dsh_tool_todo.web import _requests
from dsh_tool_todo.web.app import create_app
from tests._builders import plan

from .conftest import ASGI_PORT, HOST, LiveServer, SseStream, run_requests

ORIGIN = f"http://{HOST}:{ASGI_PORT}"


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    with JsonlSession(tmp_path / "ada.jsonl") as agent:
        agent.append("todo/write", plan("Write the tests", "Ship it"))
    return tmp_path


async def token_of(client: httpx.AsyncClient) -> dict[str, str]:
    given = (await client.get("/api/requests/token")).json()
    return {given["header"]: given["token"], "origin": ORIGIN}


def test_filing_is_off_unless_the_server_is_started_with_requests_and_reading_is_not(
    logs: Path,
) -> None:
    async def calls(client: httpx.AsyncClient) -> list[object]:
        posted = await client.post(
            "/api/sessions/ada/requests", json={"kind": "note", "content": "x"}
        )
        listed = await client.get("/api/sessions/ada/requests")
        # the page asks for the token on every session page: off is an answer, not a 404
        token = await client.get("/api/requests/token")
        return [token.status_code, token.json()["token"], posted.status_code, listed.status_code]

    assert run_requests(create_app(logs), calls) == [200, None, 404, 200]
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


def test_requests_filed_at_once_count_each_other_toward_the_rate(
    logs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rate was judged before a filing and counted after it: 80 at once all got in."""
    monkeypatch.setattr(_requests, "RATE", 3)
    filing = PlanRequests.afile

    async def in_turn(self: PlanRequests, *args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(0.01)  # the others arrive while this one is filed (a database's)
        return await filing(self, *args, **kwargs)

    monkeypatch.setattr(PlanRequests, "afile", in_turn)

    async def calls(client: httpx.AsyncClient) -> list[int]:
        headers = await token_of(client)
        answers = await asyncio.gather(
            *(
                client.post(
                    "/api/sessions/ada/requests",
                    json={"kind": "note", "content": f"note {n}"},
                    headers=headers,
                )
                for n in range(8)
            )
        )
        return sorted(answer.status_code for answer in answers)

    assert run_requests(create_app(logs, requests=True), calls) == [201] * 3 + [429] * 5


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
        {"taken": [], "waiting": [], "asked": []},
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


def listed(app: Any, name: str = "ada") -> Any:
    async def calls(client: httpx.AsyncClient) -> Any:
        answer = await client.get(f"/api/sessions/{name}/requests")
        assert answer.status_code == 200, answer.text
        return answer.json()

    return run_requests(app, calls)


def test_a_plain_server_lists_what_is_waiting_and_what_the_turn_asked_as_show_reads_it(
    logs: Path,
) -> None:
    log = logs / "ada.jsonl"
    done = PlanRequests(log).file("done", "Ship it", by="grace")
    with JsonlSession(log) as agent:
        take_requests(agent)
    note = PlanRequests(log).file("note", "Use the staging database", by="grace")

    first = listed(create_app(logs))
    assert [r["id"] for r in first["waiting"]] == [note.id]
    assert [(r["id"], r["status"]) for r in first["asked"]] == [(done.id, "pending")]
    assert first["asked"] == turn_state(str(log))[1]  # the list `dsh-todo show` prints
    assert {k: first[k] for k in ("taken", "waiting")} == PlanRequests(log).read().as_json()

    with JsonlSession(log) as agent:
        agent.append("todo/write", plan("Write the tests", "Ship it", status="completed"))
    assert [r["status"] for r in listed(create_app(logs))["asked"]] == ["honoured"]
    with JsonlSession(log) as agent:
        agent.append("turn/start", {})
    after = listed(create_app(logs))
    # settled in the turn before: no longer asked in this one, still among those taken
    assert (after["asked"], [r["status"] for r in after["taken"]]) == ([], ["honoured"])


def test_the_read_route_keeps_the_views_guards_on_a_plain_server(logs: Path) -> None:
    async def calls(client: httpx.AsyncClient) -> list[Any]:
        path = "/api/sessions/ada/requests"
        bearer = {"authorization": "Bearer secret"}
        answers = [
            await client.get(path),
            await client.get(path, headers={**bearer, "host": "evil.example:8765"}),
            await client.get("/api/sessions/ghost/requests", headers=bearer),
            await client.get(path, headers=bearer),
        ]
        return [(a.status_code, a.text) for a in answers]

    answers = run_requests(create_app(logs, token="secret"), calls)
    assert [status for status, _ in answers] == [401, 403, 404, 200]
    assert answers[2][1] == '{"error":"no session \'ghost\' is served"}'
    assert not any(str(logs) in text for _, text in answers)


def test_a_reader_given_reads_the_inboxes_of_its_source(logs: Path) -> None:
    filed = PlanRequests(logs, "ada").file("add", "Docs", by="grace")
    for app in (create_app(JsonlReader(logs)), create_app(JsonlReader(logs), inboxes=logs)):
        assert [r["id"] for r in listed(app)["waiting"]] == [filed.id]


def test_the_stream_tells_of_request_events_only_when_asked_to(
    logs: Path, live_server: Callable[..., LiveServer], sse: Callable[..., SseStream]
) -> None:
    server = live_server(logs)
    url = f"{server.url}/api/sessions/ada/stream"
    told, plain = sse(f"{url}?requests=1"), sse(url)
    for stream in (told, plain):
        stream.projection()
    PlanRequests(logs, "ada").file("done", "Ship it", by="grace")
    with JsonlSession(logs / "ada.jsonl") as agent:
        take_requests(agent)
        agent.append("todo/write", plan("Write the tests", "Ship it", status="completed"))
    frame = told.named_event()
    assert (frame.event, frame.full_id, frame.json()["cause"]) == (
        "requests",
        None,
        "request/taken",
    )
    assert told.named_event().event == "projection"
    assert plain.named_event().event == "projection"  # the request event is not sent


@pytest.mark.parametrize("query", ["requests=2", "requests=1&format=ag-ui"])
def test_the_streams_requests_option_is_1_or_0_on_this_librarys_frames(
    logs: Path, query: str
) -> None:
    async def calls(client: httpx.AsyncClient) -> httpx.Response:
        # bounded: a stream that took the query would never end
        return await asyncio.wait_for(client.get(f"/api/sessions/ada/stream?{query}"), 30)

    answer = run_requests(create_app(logs), calls)
    assert answer.status_code == 400
    assert "`requests` is 1 or 0, without `format`" in answer.json()["error"]


def test_a_filing_waiting_on_the_inbox_lock_holds_up_no_other_answer(logs: Path) -> None:
    import fcntl

    async def calls(client: httpx.AsyncClient) -> tuple[bool, int, int]:
        headers = await token_of(client)
        inbox = logs / "ada.jsonl.requests"
        inbox.touch()
        with inbox.open("rb") as held:
            fcntl.flock(held, fcntl.LOCK_EX)  # another filer's, or the writer taking
            filing = asyncio.ensure_future(
                client.post(
                    "/api/sessions/ada/requests",
                    json={"kind": "note", "content": "wait for it"},
                    headers=headers,
                )
            )
            await asyncio.sleep(0.05)  # let the filing reach the lock
            listed = await client.get("/api/sessions")
            waiting = not filing.done()
        return waiting, listed.status_code, (await filing).status_code

    assert run_requests(create_app(logs, requests=True), calls) == (True, 200, 201)


def test_a_filing_refused_for_its_inbox_names_no_path_of_the_server(logs: Path) -> None:
    os.mkfifo(logs / "ada.jsonl.requests")

    async def calls(client: httpx.AsyncClient) -> httpx.Response:
        return await client.post(
            "/api/sessions/ada/requests",
            json={"kind": "note", "content": "hi"},
            headers=await token_of(client),
        )

    answer = run_requests(create_app(logs, requests=True), calls)
    assert answer.status_code == 400
    assert answer.json()["error"].startswith("ada.jsonl.requests is not a regular file")
    assert str(logs) not in answer.text


def test_an_origin_of_another_scheme_is_refused(logs: Path) -> None:
    async def calls(client: httpx.AsyncClient) -> int:
        headers = {**await token_of(client), "origin": ORIGIN.replace("http", "evil", 1)}
        answer = await client.post(
            "/api/sessions/ada/requests", json={"kind": "note", "content": "hi"}, headers=headers
        )
        return answer.status_code

    assert run_requests(create_app(logs, requests=True), calls) == 403
