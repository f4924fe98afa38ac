"""Row 1, a whole agent session: an agent opened, a handful of calls, then dropped.

The steady rows time call after call on one agent. Real use opens an agent,
makes a few calls and lets it go, so what opening costs, and what a first call
costs beyond a steady one, counts as much as the steady call. Here one session
is ``host.new_agent()`` and :data:`SESSION_CALLS` calls of 6 items (43-character
contents) whose statuses advance as an agent works; its reference is one strict
``validate_json`` pass over each of the same texts. Rounds of
:data:`SESSIONS_PER_ROUND` sessions per side, interleaved; the ratio is the
median of the per-round ratios.
"""

from __future__ import annotations

import json
from typing import Any

from report import Row, fmt_ns
from timing import Call, batched, interleaved
from workloads import limit_validator, new_host, real_todos

SESSION_CALLS = 8
SESSION_ITEMS = 6
SESSIONS_PER_ROUND = 100
SESSION_TARGET = 1.5
SECTION = "1 whole agent session"


def session_texts() -> list[str]:
    """The raw arguments of one session's calls: all pending, then each item in progress in
    turn with the ones before it completed, then all completed."""
    texts = []
    for step in range(SESSION_CALLS):
        items = real_todos(SESSION_ITEMS)
        for index, item in enumerate(items):
            done = index < step - 1 or step == SESSION_CALLS - 1
            item["status"] = (
                "completed" if done else "in_progress" if index == step - 1 else "pending"
            )
        texts.append(json.dumps({"todos": items}))
    return texts


def whole_session(host: Any, texts: list[str]) -> Call:
    """One session: a fresh agent on a fresh in-memory session, then each text called once."""
    call_tool = host.call_tool

    def session() -> object:
        agent = host.new_agent()
        for raw in texts:
            text = call_tool("todo_write", raw, agent=agent)
        return text

    return session


def limit_passes(texts: list[str]) -> Call:
    """The reference: one strict ``validate_json`` pass over each of the session's texts."""
    validate = limit_validator().validate_json

    def passes() -> object:
        for raw in texts:
            result = validate(raw)
        return result

    return passes


def check_session(host: Any, texts: list[str]) -> None:
    """Each call of a session is accepted, and its projection holds the last list."""
    agent = host.new_agent()
    for raw in texts:
        text = host.call_tool("todo_write", raw, agent=agent)
        assert text.startswith("Updated todo list"), text
    assert host.projection(agent.session, "todos") == json.loads(texts[-1])["todos"]


def rows(seconds: float) -> list[Row]:
    """The whole session against its limit; and, for information, its parts: opening an
    agent, a first call on it, and a steady call, each against one strict pass."""
    host = new_host()
    texts = session_texts()
    check_session(host, texts)
    session, limit = whole_session(host, texts), limit_passes(texts)
    result = interleaved(
        {"session": batched(session), "limit": batched(limit)},
        reference="limit",
        seconds=seconds,
        batch=SESSIONS_PER_ROUND,
    )
    ratio = result.ratio("session", "limit")
    ns = result.per_call_ns
    whole = Row(
        SECTION,
        f"new_agent + {SESSION_CALLS} calls of {SESSION_ITEMS} items",
        f"session {fmt_ns(ns['session'])}",
        f"{SESSION_CALLS} validate_json {fmt_ns(ns['limit'])}",
        ratio.median,
        target=f"≤{SESSION_TARGET}x",
        met=ratio.median <= SESSION_TARGET,
        note=f"{SESSIONS_PER_ROUND} sessions per round; middle half of rounds {ratio.text()}",
        numbers=result.numbers("session", "limit"),
    )
    return [whole, *part_rows(host, texts, seconds), *owner_rows(seconds)]


def part_rows(host: Any, texts: list[str], seconds: float) -> list[Row]:
    """Opening an agent, the first call on a fresh agent and a steady call, in the same rounds,
    each against one strict pass of the first text."""
    first = texts[0]
    validate = limit_validator().validate_json
    steady_agent = host.new_agent()

    def open_agent() -> object:
        return host.new_agent()

    def open_and_first_call() -> object:
        return host.call_tool("todo_write", first, agent=host.new_agent())

    def steady_call() -> object:
        return host.call_tool("todo_write", first, agent=steady_agent)

    def one_pass() -> object:
        return validate(first)

    def reset() -> None:
        steady_agent.session.events.clear()

    sides = {
        "open": batched(open_agent),
        "open+first": batched(open_and_first_call),
        "steady": batched(steady_call),
        "limit": batched(one_pass),
    }
    result = interleaved(sides, reference="limit", seconds=seconds, reset=reset)
    ns = result.per_call_ns
    labels = {
        "open": "new_agent()",
        "open+first": "new_agent() + first call",
        "steady": "a steady call",
    }
    return [
        Row(
            SECTION,
            f"parts: {labels[name]}",
            f"{labels[name]} {fmt_ns(ns[name])}",
            f"validate_json {fmt_ns(ns['limit'])}",
            result.ratio(name, "limit").median,
            target="info",
            note=f"middle half of rounds {result.ratio(name, 'limit').text()}",
            numbers=result.numbers(name, "limit"),
        )
        for name in labels
    ]


def owner_rows(seconds: float) -> list[Row]:
    """The owner registry, which opens a session on an owner's first call (the MCP server
    and web handlers use it): a new owner's first call, its session closed after it, against
    a steady call of one owner, in memory and in a JSONL directory, the host's projections
    attached on open as ``docs/owners.md`` shows."""
    import itertools
    import tempfile

    from dsh_tool_todo.stores.owners import OwnerRegistry

    host = new_host()
    tool = host.tools["todo_write"]
    first = session_texts()[0]
    validate = limit_validator().validate_json
    result_rows = []
    with tempfile.TemporaryDirectory(prefix="dsh-todo-owners-") as directory:
        for where, path in (("in memory", None), ("JSONL directory", directory)):
            owners = OwnerRegistry(path, on_open=lambda _key, session: host.new_agent(session))
            fresh = (f"owner-{n}" for n in itertools.count())
            owners.call("steady", tool, first)

            def open_first_close(owners: Any = owners, fresh: Any = fresh) -> object:
                key = next(fresh)
                text = owners.call(key, tool, first)
                owners.close(key)
                return text

            def steady(owners: Any = owners) -> object:
                return owners.call("steady", tool, first)

            def one_pass() -> object:
                return validate(first)

            result = interleaved(
                {
                    "open": batched(open_first_close),
                    "steady": batched(steady),
                    "limit": batched(one_pass),
                },
                reference="limit",
                seconds=seconds,
                warmup=20,
            )
            ns = result.per_call_ns
            ratio = result.ratio("open", "steady")
            result_rows.append(
                Row(
                    SECTION,
                    f"owner registry, {where}: a new owner's first call",
                    f"open + first call + close {fmt_ns(ns['open'])}",
                    f"a steady call {fmt_ns(ns['steady'])}",
                    ratio.median,
                    target="info",
                    note=(
                        f"steady call {result.ratio('steady', 'limit').median:.2f}x, "
                        f"open + first call {result.ratio('open', 'limit').median:.2f}x "
                        f"one strict pass ({fmt_ns(ns['limit'])}); "
                        f"middle half of rounds {ratio.text()}"
                    ),
                    numbers=result.numbers("open", "steady"),
                )
            )
            owners.close()
    return result_rows
