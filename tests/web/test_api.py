"""The web view's finite requests, in process: pages, the session list, the tail page, safety."""

from __future__ import annotations

import html.parser
import json
import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from dsh_tool_todo.errors import SessionNotFound, UsageError
from dsh_tool_todo.stores.jsonl import JsonlReader
from dsh_tool_todo.web._guard import CSP
from dsh_tool_todo.web.app import create_app

from .conftest import NOTE, TURN, plan_write, run_requests, todo, write_log

PLAN = [todo("Read", "completed"), todo("Write", "in_progress"), todo("Test")]


def get(app: Any, url: str, **kwargs: Any) -> httpx.Response:
    async def call(client: httpx.AsyncClient) -> httpx.Response:
        return await client.get(url, **kwargs)

    response: httpx.Response = run_requests(app, call)
    return response


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    write_log(tmp_path / "alpha.jsonl", [TURN, plan_write(*PLAN), NOTE])
    write_log(tmp_path / "beta.jsonl", [plan_write(todo("One")), TURN])
    os.utime(tmp_path / "alpha.jsonl", (1_700_000_000, 1_700_000_000))
    (tmp_path / "notes.txt").write_text("not a log")
    return tmp_path


def test_session_list_gives_name_last_activity_and_progress_newest_first(logs: Path) -> None:
    body = get(create_app(logs), "/api/sessions").json()

    assert [row["name"] for row in body["sessions"]] == ["beta", "alpha"]
    alpha = body["sessions"][1]
    assert alpha["lastActivity"] == 1_700_000_000
    assert alpha["progress"] == {"completed": 1, "total": 3, "inProgress": 1, "cleared": False}
    assert body["sessions"][0]["progress"]["cleared"] is True
    assert body["total"] == 2


def test_session_list_is_capped_and_filterable(tmp_path: Path) -> None:
    for number in range(30):
        write_log(tmp_path / f"agent-{number:02}.jsonl", [plan_write(todo("x"))])
    app = create_app(tmp_path)

    capped = get(app, "/api/sessions?limit=5").json()
    filtered = get(app, "/api/sessions?q=AGENT-1").json()

    assert (len(capped["sessions"]), capped["total"]) == (5, 30)
    assert sorted(row["name"] for row in filtered["sessions"]) == [f"agent-1{n}" for n in range(10)]
    assert get(app, "/api/sessions?limit=0").status_code == 400


def test_tail_page_gives_the_last_events_before_a_seq_oldest_first(tmp_path: Path) -> None:
    write_log(tmp_path / "s.jsonl", [plan_write(todo(f"step {n}")) for n in range(10)])
    app = create_app(tmp_path)

    last = get(app, "/api/sessions/s/events?limit=3").json()
    earlier = get(app, "/api/sessions/s/events?before=7&limit=3").json()
    first = get(app, "/api/sessions/s/events?before=2&limit=5").json()

    assert [event["seq"] for event in last["events"]] == [7, 8, 9]
    assert last["more"] is True
    assert [event["seq"] for event in earlier["events"]] == [4, 5, 6]
    assert [event["seq"] for event in first["events"]] == [0, 1]
    assert first["more"] is False
    assert last["events"][-1]["data"] == {"todos": [todo("step 9")]}


def test_tail_page_can_keep_only_some_types(logs: Path) -> None:
    body = get(create_app(logs), "/api/sessions/alpha/events?types=todo/write").json()

    assert [(event["seq"], event["type"]) for event in body["events"]] == [(1, "todo/write")]


def test_tail_page_reads_from_the_end_only(tmp_path: Path) -> None:
    # The first line is not an event: a reader that started at byte 0 would refuse the log.
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"garbage that is not an event\n")
    with path.open("ab") as log:
        for seq in range(1, 4):
            event = {"seq": seq, "type": "todo/write", "data": {"todos": [todo(f"t{seq}")]}}
            log.write(json.dumps(event).encode() + b"\n")

    body = get(create_app(tmp_path), "/api/sessions/s/events?limit=2").json()

    assert [event["seq"] for event in body["events"]] == [2, 3]


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("before=x", f"`before` must be an integer from 0 to {2**62} in plain digits (got 'x')"),
        ("limit=501", "`limit` must be an integer from 1 to 500 (got 501)"),
        ("before=-1", "`before` must be an integer from 0 to"),
    ],
)
def test_tail_page_refuses_bad_parameters_with_a_clear_message(
    logs: Path, query: str, message: str
) -> None:
    response = get(create_app(logs), f"/api/sessions/alpha/events?{query}")

    assert response.status_code == 400
    assert response.json()["error"].startswith(message)


HOSTILE_NUMBERS = ["+5", " 5", "5 ", "5_0", "\u0661\u0662", "0x5", "5.0", "9" * 30, "9" * 5000]


@pytest.mark.parametrize("raw", HOSTILE_NUMBERS)
@pytest.mark.parametrize(
    ("where", "what"),
    [
        ("/api/sessions?limit=", "`limit`"),
        ("/api/sessions/alpha/events?limit=", "`limit`"),
        ("/api/sessions/alpha/events?before=", "`before`"),
        ("/api/sessions/alpha/stream?after=", "`Last-Event-ID`"),
    ],
)
def test_numbers_from_clients_are_plain_ascii_digits_within_bounds(
    logs: Path, raw: str, where: str, what: str
) -> None:
    response = get(create_app(logs), where + quote(raw))

    assert response.status_code == 400
    message = response.json()["error"]
    assert message.startswith(f"{what}"), message
    assert "must be" in message
    assert len(message) < 200


@pytest.mark.parametrize(
    "where",
    [
        "/api/sessions?limit=1&limit=2",
        "/api/sessions/alpha/events?before=1&before=2",
        "/api/sessions/alpha/stream?after=1&after=2",
    ],
)
def test_a_number_given_twice_is_refused(logs: Path, where: str) -> None:
    response = get(create_app(logs), where)

    assert response.status_code == 400
    assert response.json()["error"].startswith("give `")
    assert "once (got 2: ['1', '2'])" in response.json()["error"]


@pytest.mark.parametrize("raw", [r for r in HOSTILE_NUMBERS if r.isascii()] + ["-2", "5" * 19])
def test_a_last_event_id_header_is_a_plain_seq_too(logs: Path, raw: str) -> None:
    response = get(create_app(logs), "/api/sessions/alpha/stream", headers={"last-event-id": raw})

    assert response.status_code == 400
    assert response.json()["error"].startswith("`Last-Event-ID` must be a seq from -1 to")


def test_projection_is_the_plan_with_its_state_version_and_seq(logs: Path) -> None:
    app = create_app(logs)

    alpha = get(app, "/api/sessions/alpha/projection").json()
    beta = get(app, "/api/sessions/beta/projection").json()

    assert alpha == {
        "key": "todos",
        "stateVersion": 2,
        "seq": 2,
        "cause": "snapshot",
        "plan": PLAN,
        "decidedBy": {"seq": 1, "type": "todo/write"},
    }
    assert (beta["plan"], beta["decidedBy"]) == (None, {"seq": 1, "type": "turn/start"})


def test_an_invalid_log_is_reported_not_served(tmp_path: Path) -> None:
    bad = {"seq": 0, "type": "todo/write", "data": {"todos": [todo("a"), todo("a")]}}
    (tmp_path / "bad.jsonl").write_text(json.dumps(bad) + "\n")

    response = get(create_app(tmp_path), "/api/sessions/bad/projection")

    assert response.status_code == 422
    assert 'duplicate content "a"' in response.json()["error"]


def test_lone_surrogates_travel_as_json_escapes(tmp_path: Path) -> None:
    write_log(tmp_path / "s.jsonl", [plan_write(todo("half \ud800 a pair"))])

    response = get(create_app(tmp_path), "/api/sessions/s/events")

    assert response.content.isascii()
    assert response.json()["events"][0]["data"]["todos"][0]["content"] == "half \ud800 a pair"


@pytest.mark.parametrize(
    "name", ["..%2Foutside", "%2E%2E", ".hidden", "missing", "notes", "a%00b", "out"]
)
def test_names_that_lead_nowhere_or_outside_are_unknown_sessions(
    logs: Path, tmp_path_factory: pytest.TempPathFactory, name: str
) -> None:
    outside = tmp_path_factory.mktemp("outside") / "secret.jsonl"
    write_log(outside, [plan_write(todo("secret"))])
    (logs / "out.jsonl").symlink_to(outside)
    (logs.parent / "outside.jsonl").write_text("")
    write_log(logs / ".hidden.jsonl", [plan_write(todo("hidden"))])

    response = get(create_app(logs), f"/api/sessions/{name}/events")

    assert response.status_code == 404
    assert "secret" not in response.text
    listed = get(create_app(logs), "/api/sessions").json()["sessions"]
    assert "out" not in [row["name"] for row in listed]


def test_source_refuses_names_with_separators_and_symlinks_leading_out(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    write_log(tmp_path / "secret.jsonl", [plan_write(todo("secret"))])
    (tmp_path / "logs" / "link.jsonl").symlink_to(tmp_path / "secret.jsonl")
    source = JsonlReader(tmp_path / "logs")

    for name in ("../secret", "link", "a/b", "a\\b", ""):
        with pytest.raises(SessionNotFound, match=f"^{re.escape(name)}$"):
            source.path_of(name)


def test_a_directory_that_is_not_one_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="not a directory of session logs"):
        create_app(tmp_path / "missing")


@pytest.mark.parametrize(
    "host", ["evil.example:8765", "127.0.0.1:9999", "attacker.test", "localhost.evil:8765", ""]
)
def test_a_host_header_not_naming_the_server_is_refused(logs: Path, host: str) -> None:
    async def call(client: httpx.AsyncClient) -> httpx.Response:
        return await client.get("/api/sessions", headers={"host": host})

    response: httpx.Response = run_requests(create_app(logs), call)

    assert response.status_code == 403
    assert "Host header" in response.text


@pytest.mark.parametrize("host", ["127.0.0.1:8765", "localhost:8765", "[::1]:8765"])
def test_loopback_names_of_the_served_port_are_accepted(logs: Path, host: str) -> None:
    async def call(client: httpx.AsyncClient) -> httpx.Response:
        return await client.get("/api/sessions", headers={"host": host})

    assert run_requests(create_app(logs), call).status_code == 200


def test_nothing_but_get_is_answered(logs: Path) -> None:
    async def call(client: httpx.AsyncClient) -> list[int]:
        return [
            (await client.post("/api/sessions")).status_code,
            (await client.delete("/api/sessions/alpha/events")).status_code,
            (await client.put("/s/alpha")).status_code,
        ]

    assert run_requests(create_app(logs), call) == [405, 405, 405]


class _Scripts(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.inline: list[str] = []
        self.sources: list[str] = []
        self.handlers: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handlers += [name for name, _ in attrs if name.startswith("on")]
        if tag == "script":
            source = dict(attrs).get("src")
            self._in_script = source is None
            if source:
                self.sources.append(source)

    def handle_data(self, data: str) -> None:
        if self._in_script and data.strip():
            self.inline.append(data)

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False


@pytest.mark.parametrize("path", ["/", "/s/alpha"])
def test_pages_carry_a_strict_csp_and_no_inline_script(logs: Path, path: str) -> None:
    response = get(create_app(logs), path)
    scripts = _Scripts()
    scripts.feed(response.text)

    assert response.status_code == 200
    assert response.headers["content-security-policy"] == CSP
    assert "script-src 'self';" in CSP
    assert "unsafe-inline" not in CSP
    assert response.headers["x-content-type-options"] == "nosniff"
    assert scripts.inline == []
    assert scripts.handlers == []
    assert scripts.sources == ["/static/app.js"]


def test_the_page_script_never_writes_html() -> None:
    script = (Path(create_app.__code__.co_filename).parent / "static" / "app.js").read_text()

    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
        assert sink not in script


@pytest.mark.parametrize("asset", ["/static/app.js", "/static/app.css", "/static/favicon.svg"])
def test_static_assets_are_served_from_the_package(logs: Path, asset: str) -> None:
    response = get(create_app(logs), asset)

    assert response.status_code == 200
    assert response.headers["content-security-policy"] == CSP
    assert response.headers["cache-control"] == "no-cache"
    assert "etag" in response.headers


def test_with_a_token_every_request_must_carry_it(logs: Path) -> None:
    app = create_app(logs, token="s3cret")

    async def calls(client: httpx.AsyncClient) -> list[httpx.Response]:
        bare = await client.get("/api/sessions")
        wrong = await client.get("/api/sessions", headers={"authorization": "Bearer nope"})
        bearer = await client.get("/api/sessions", headers={"authorization": "Bearer s3cret"})
        traded = await client.get("/s/alice%2540example?token=s3cret&x=1")
        with_cookie = await client.get("/api/sessions")  # the client keeps the cookie
        return [bare, wrong, bearer, traded, with_cookie]

    bare, wrong, bearer, traded, with_cookie = run_requests(app, calls)

    assert (bare.status_code, wrong.status_code) == (401, 401)
    assert "token" in bare.text
    assert bearer.status_code == 200
    assert traded.status_code == 303
    assert traded.headers["location"] == "/s/alice%2540example?x=1"
    assert "httponly" in traded.headers["set-cookie"].lower()
    assert "samesite=strict" in traded.headers["set-cookie"].lower()
    assert with_cookie.status_code == 200


def test_trading_the_token_never_redirects_off_this_server(logs: Path) -> None:
    """``GET //evil.example/?token=T`` must not answer ``Location: //evil.example/``, which a
    browser reads as another host (an open redirect carrying the reader away)."""
    app = create_app(logs, token="s3cret")

    async def trade(client: httpx.AsyncClient) -> httpx.Response:
        url = client.base_url.copy_with(raw_path=b"//evil.example/?token=s3cret")
        return await client.get(url)

    traded = run_requests(app, trade)

    assert traded.status_code == 303
    assert traded.headers["location"] == "/evil.example/"


def test_the_bearer_scheme_is_matched_without_regard_to_case(logs: Path) -> None:
    """RFC 9110 11.1: an authentication scheme is case-insensitive (``bearer``, ``BEARER``)."""
    app = create_app(logs, token="s3cret")

    async def calls(client: httpx.AsyncClient) -> list[int]:
        return [
            (
                await client.get("/api/sessions", headers={"authorization": f"{scheme} s3cret"})
            ).status_code
            for scheme in ("bearer", "BEARER")
        ]

    assert run_requests(app, calls) == [200, 200]


def test_unknown_sessions_are_404_on_every_endpoint(logs: Path) -> None:
    app = create_app(logs)

    for endpoint in ("events", "projection", "stream"):
        response = get(app, f"/api/sessions/nobody/{endpoint}")
        assert response.status_code == 404
        assert response.json() == {"error": "no session 'nobody' is served"}


def test_a_404_quotes_at_most_80_characters_of_the_name_escaped(logs: Path) -> None:
    name = "\u202e\x1b[2J" + "x" * 5000
    for endpoint in ("events", "projection", "stream", "family"):
        response = get(create_app(logs), f"/api/sessions/{quote(name)}/{endpoint}")
        assert response.status_code == 404
        message = response.json()["error"]
        assert message == (
            "no session '\\u202e\\x1b[2J" + "x" * 75 + "'... (5005 characters) is served"
        )


def bytes_read() -> int:
    """Bytes this process has read through read(2) so far (Linux ``/proc/self/io``)."""
    with open("/proc/self/io") as io:
        return next(int(row.split()[1]) for row in io if row.startswith("rchar:"))


def test_a17_a_tail_page_never_serves_an_invalid_write(tmp_path: Path) -> None:
    """A17: the page served a broken ``todo/write`` with 200; every reader checks it."""
    lines = [
        {"seq": 0, "type": "todo/write", "data": {"todos": "x"}},
        {"seq": 1, "type": "message/assistant", "data": {}},
    ]
    (tmp_path / "s.jsonl").write_text("".join(json.dumps(event) + "\n" for event in lines))

    response = get(create_app(tmp_path), "/api/sessions/s/events?limit=5")

    assert response.status_code == 422
    assert "s.jsonl, line 1: event 0: Error: invalid todos" in response.json()["error"]


def test_a12_a_filtered_page_reads_a_bounded_stretch_and_answers_a_cursor(tmp_path: Path) -> None:
    """A12: a rare type made one page read the whole log; now each page reads a bounded
    stretch and says where the next one starts, and walking the cursors finds every match."""
    path = tmp_path / "s.jsonl"
    filler = "x" * 100
    with path.open("w") as log:
        log.write(json.dumps({"seq": 0, "type": "todo/write", "data": {"todos": [todo("A")]}}))
        log.write("\n")
        for seq in range(1, 80_001):  # about 10 MiB of other events
            log.write(json.dumps({"seq": seq, "type": "note", "data": {"text": filler}}) + "\n")
    app = create_app(tmp_path)

    start = bytes_read()
    first = get(app, "/api/sessions/s/events?types=todo/write&limit=1").json()
    read = bytes_read() - start

    assert read < 3 << 20, f"one page read {read} bytes"
    assert (first["events"], first["more"]) == ([], True)
    pages, page = 1, first
    while not page["events"]:
        page = get(app, f"/api/sessions/s/events?types=todo/write&limit=1&before={page['cursor']}")
        page = page.json()
        pages += 1
    assert [event["seq"] for event in page["events"]] == [0]
    assert (page["more"], page["cursor"]) == (False, None)
    assert pages < 20
