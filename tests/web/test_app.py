"""The web view's finite requests, in process: pages, the session list, the tail page, errors."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from dsh_tool_todo.core.contract import EVENT_TYPE
from dsh_tool_todo.errors import SessionNotFound, UsageError
from dsh_tool_todo.stores.jsonl import JsonlReader
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

    assert [(event["seq"], event["type"]) for event in body["events"]] == [(1, EVENT_TYPE)]


def test_tail_page_reads_from_the_end_only(tmp_path: Path) -> None:
    # The first line is not an event: a reader that started at byte 0 would refuse the log.
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"garbage that is not an event\n")
    with path.open("ab") as log:
        for seq in range(1, 4):
            event = {"seq": seq, "type": EVENT_TYPE, "data": {"todos": [todo(f"t{seq}")]}}
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
        "decidedBy": {"seq": 1, "type": EVENT_TYPE},
    }
    assert (beta["plan"], beta["decidedBy"]) == (None, {"seq": 1, "type": "turn/start"})


def test_an_invalid_log_is_reported_not_served(tmp_path: Path) -> None:
    bad = {"seq": 0, "type": EVENT_TYPE, "data": {"todos": [todo("a"), todo("a")]}}
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


def test_nothing_but_get_is_answered(logs: Path) -> None:
    async def call(client: httpx.AsyncClient) -> list[int]:
        return [
            (await client.post("/api/sessions")).status_code,
            (await client.delete("/api/sessions/alpha/events")).status_code,
            (await client.put("/s/alpha")).status_code,
        ]

    assert run_requests(create_app(logs), call) == [405, 405, 405]


def test_the_page_scripts_never_write_html() -> None:
    scripts = sorted((Path(create_app.__code__.co_filename).parent / "static").glob("*.js"))
    assert [script.name for script in scripts] == ["app.js", "requests.js"]

    for script in scripts:
        text = script.read_text()
        for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
            assert sink not in text, (script.name, sink)


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
        {"seq": 0, "type": EVENT_TYPE, "data": {"todos": "x"}},
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
        log.write(json.dumps({"seq": 0, "type": EVENT_TYPE, "data": {"todos": [todo("A")]}}))
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
        "from dsh_tool_todo.errors import MissingExtra\n"
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
