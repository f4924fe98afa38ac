"""Every rule a call is checked against, in the order the contract fixes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from dsh_tool_todo import ToolCallRejected
from dsh_tool_todo.core._validation import validate_call
from dsh_tool_todo.core.contract import EVENT_TYPE
from dsh_tool_todo.host import Host, HostAgent
from tests.conftest import HostFactory, todo

ALLOWED = "one of pending, in_progress, completed"


def call(host: Host, agent: HostAgent | None, args: Any) -> str:
    return host.call_tool("todo_write", args, agent=agent)


def rejected(host: Host, agent: HostAgent, args: Any) -> str:
    """The model-visible text of a call that must change nothing."""
    before = list(agent.session.events)
    text = call(host, agent, args)
    assert text.startswith("Error: "), text
    assert agent.session.events == before
    return text


def test_a_valid_call_appends_one_snapshot_and_returns_the_counts(
    host: Host, agent: HostAgent
) -> None:
    todos = [todo("Read spec", "completed"), todo("Write code", "in_progress"), todo("Ship")]
    text = call(host, agent, {"todos": todos})
    assert text == "Updated todo list: 1 pending, 1 in progress, 1 completed."
    events = [(event["type"], event["data"]) for event in agent.session.events]
    assert events == [(EVENT_TYPE, {"todos": todos})]
    (event,) = agent.session.events
    assert all(type(item) is dict for item in event["data"]["todos"])


def test_the_canonical_result(host: Host, agent: HostAgent) -> None:
    result = host.tools["todo_write"].execute(
        {"todos": [todo("a", "completed"), todo("b")]},
        type("Call", (), {"agent": agent})(),
    )
    assert result == {
        "todos": [todo("a", "completed"), todo("b")],
        "counts": {"pending": 1, "inProgress": 0, "completed": 1},
    }


def test_raw_json_arguments_are_accepted(host: Host, agent: HostAgent) -> None:
    args = json.dumps({"todos": [todo("Ünïcode ✓", "in_progress")]}, ensure_ascii=False)
    assert call(host, agent, args) == "Updated todo list: 0 pending, 1 in progress, 0 completed."
    assert call(host, agent, args.encode()) == (
        "Updated todo list: 0 pending, 1 in progress, 0 completed."
    )
    assert agent.session.events[-1]["data"]["todos"] == [todo("Ünïcode ✓", "in_progress")]


def test_an_empty_list_is_valid_and_clears_the_plan(host: Host, agent: HostAgent) -> None:
    call(host, agent, {"todos": [todo("a")]})
    assert call(host, agent, {"todos": []}) == (
        "Updated todo list: 0 pending, 0 in progress, 0 completed."
    )
    assert host.projection(agent.session, "todos") == []


def test_order_is_kept(host: Host, agent: HostAgent) -> None:
    todos = [todo(name) for name in "zyxabc"]
    call(host, agent, {"todos": todos})
    assert [item["content"] for item in agent.session.events[0]["data"]["todos"]] == list("zyxabc")


def test_no_agent_is_rejected_before_anything_else(host: Host) -> None:
    for args in ({"todos": [todo("a")]}, "not json", {"bogus": 1}):
        assert call(host, None, args) == "Error: todo_write requires an owning agent session"


@pytest.mark.parametrize("content", ["", " ", "\t\n", "\u3000"])
def test_empty_or_blank_content(host: Host, agent: HostAgent, content: str) -> None:
    text = rejected(host, agent, {"todos": [todo("fine"), todo(content)]})
    assert text == "Error: invalid todo: `content` must be a non-empty string"


def test_duplicate_content(host: Host, agent: HostAgent) -> None:
    text = rejected(host, agent, {"todos": [todo("a"), todo("b"), todo("a", "completed")]})
    assert text == 'Error: invalid todos: duplicate content "a"'


def test_strict_mode_allows_one_in_progress(make_host: HostFactory) -> None:
    host = make_host(parallel=False)
    agent = host.new_agent()
    todos = [todo("a", "in_progress"), todo("b", "in_progress"), todo("c", "in_progress")]
    text = rejected(host, agent, {"todos": todos})
    assert text == "Error: invalid todos: at most one task may be in_progress (got 3)"
    assert call(host, agent, {"todos": todos[:1]}).startswith("Updated")


def test_parallel_mode_allows_any_number_in_progress(make_host: HostFactory) -> None:
    host = make_host(parallel=True)
    agent = host.new_agent()
    todos = [todo(name, "in_progress") for name in "abcd"]
    assert call(host, agent, {"todos": todos}) == (
        "Updated todo list: 0 pending, 4 in progress, 0 completed."
    )


def test_item_rules_come_before_list_rules_and_the_text_names_them_all(
    host: Host, agent: HostAgent
) -> None:
    todos = [todo("a", "in_progress"), todo("a", "in_progress"), todo("")]
    assert rejected(host, agent, {"todos": todos}) == (
        "Error: invalid todo: `content` must be a non-empty string; "
        'duplicate content "a"; at most one task may be in_progress (got 2)'
    )
    todos = [todo("a", "in_progress"), todo("a", "in_progress")]
    assert rejected(host, agent, {"todos": todos}) == (
        'Error: invalid todos: duplicate content "a"; at most one task may be in_progress (got 2)'
    )
    todos = [todo("a"), todo("b"), todo("a"), todo("b"), todo("c")]
    assert rejected(host, agent, {"todos": todos}) == (
        'Error: invalid todos: duplicate content "a"; duplicate content "b"'
    )


def test_the_seed_texts_are_byte_exact_when_theirs_is_the_only_problem(
    make_host: HostFactory,
) -> None:
    host = make_host(parallel=False)
    agent = host.new_agent()
    todos = [todo(""), todo("b"), todo("  ")]
    assert rejected(host, agent, {"todos": todos}) == (
        "Error: invalid todo: `content` must be a non-empty string"
    )
    todos = [todo("a"), todo("b"), todo("a")]
    assert rejected(host, agent, {"todos": todos}) == 'Error: invalid todos: duplicate content "a"'
    todos = [todo("a", "in_progress"), todo("b", "in_progress")]
    assert rejected(host, agent, {"todos": todos}) == (
        "Error: invalid todos: at most one task may be in_progress (got 2)"
    )


def test_schema_rules_come_before_item_rules_which_the_text_adds(
    host: Host, agent: HostAgent
) -> None:
    todos: list[dict[str, Any]] = [todo(""), {"content": "b", "status": "done"}]
    assert rejected(host, agent, {"todos": todos}) == (
        "Error: invalid todos: `status` must be one of pending, in_progress, completed "
        '(got "done": use completed); `content` must be a non-empty string at index 0'
    )
    todos = [
        {"content": "a", "status": "in_progress", "id": 1},
        {"content": "a", "status": "In Progress", "id": 2},
    ]
    assert rejected(host, agent, {"todos": todos}) == (
        "Error: invalid todos: unknown key `id` in every item; `status` must be one of "
        'pending, in_progress, completed (got "In Progress": use in_progress); '
        'duplicate content "a"; at most one task may be in_progress (got 2); '
        "each todo is {content, status}, with no other keys"
    )


ITEM_SHAPE = "each todo is {content, status}, with no other keys"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            {"todos": [{"content": "a", "status": "done"}]},
            f"Error: invalid todo at index 0: `status` must be {ALLOWED} "
            '(got "done": use completed)',
        ),
        (
            {"todos": [todo("a"), {"content": "b", "status": "PENDING"}]},
            f"Error: invalid todo at index 1: `status` must be {ALLOWED} "
            '(got "PENDING": use pending)',
        ),
        (
            {"todos": [{"content": "a", "status": "ready"}]},
            f'Error: invalid todo at index 0: `status` must be {ALLOWED} (got "ready")',
        ),
        (
            {"todos": [{"content": "a", "status": "cancelled"}]},
            f'Error: invalid todo at index 0: `status` must be {ALLOWED} (got "cancelled": '
            "drop the item, or keep it pending and say why in its content)",
        ),
        (
            {"todos": [{"content": "a", "status": 1}]},
            f"Error: invalid todo at index 0: `status` must be {ALLOWED} (got number)",
        ),
        (
            {"todos": [{"content": 7, "status": "pending"}]},
            "Error: invalid todo at index 0: `content` must be a string (got number)",
        ),
        (
            {"todos": [{"content": True, "status": "pending"}]},
            "Error: invalid todo at index 0: `content` must be a string (got boolean)",
        ),
        (
            {"todos": [{"content": None, "status": "pending"}]},
            "Error: invalid todo at index 0: `content` must be a string (got null)",
        ),
        (
            {"todos": [{"content": "a", "status": "pending", "id": "1"}]},
            f"Error: invalid todo at index 0: unknown key `id`; {ITEM_SHAPE}",
        ),
        (
            {"todos": [{"content": "a", "status": "pending", "activeForm": "Doing a"}]},
            f"Error: invalid todo at index 0: unknown key `activeForm`; {ITEM_SHAPE}",
        ),
        (
            {"todos": [todo("a"), {"content": "b", "status": "pending", "priority": "high"}]},
            f"Error: invalid todo at index 1: unknown key `priority`; {ITEM_SHAPE}",
        ),
        (
            {"todos": [{"status": "pending"}]},
            "Error: invalid todo at index 0: missing `content` (a short imperative line)",
        ),
        (
            {"todos": [{"title": "Ship", "status": "pending"}]},
            "Error: invalid todo at index 0: missing `content`: rename `title` to `content`",
        ),
        (
            {"todos": [{"content": "a"}]},
            f"Error: invalid todo at index 0: missing `status` ({ALLOWED})",
        ),
        (
            {"todos": ["a"]},
            f"Error: invalid todo at index 0: expected an object (got string); {ITEM_SHAPE}",
        ),
        (
            {"todos": [{"content": "a", "status": "pending", "subtasks": [todo("b")]}]},
            f"Error: invalid todo at index 0: unknown key `subtasks`; {ITEM_SHAPE}",
        ),
        (
            {},
            f"Error: invalid todos: missing `todos`, the array of every todo; {ITEM_SHAPE}",
        ),
        (
            {"todos": {"content": "a", "status": "pending"}},
            f"Error: invalid todos: `todos` must be an array (got object); {ITEM_SHAPE}",
        ),
        (
            {"todos": [], "merge": True},
            "Error: invalid todos: unknown argument `merge`; todo_write takes only `todos`",
        ),
        (
            {"todos": '[{"content": "a", "status": "pending"}]'},
            f"Error: invalid todos: `todos` is a JSON string; send the array itself; {ITEM_SHAPE}",
        ),
        (
            {"plan": [{"step": "a", "status": "pending"}], "explanation": "why"},
            "Error: invalid todos: unknown argument `explanation`; missing `todos`: send the "
            "array `plan` as `todos`, each todo {content, status}; missing `content` at "
            "index 0: rename `step` to `content`",
        ),
        ([], "Error: invalid todos: the arguments must be an object {todos: [...]}"),
        (None, "Error: invalid todos: the arguments must be an object {todos: [...]}"),
        (
            '{"todos": [',
            "Error: invalid todos: the arguments are not valid JSON "
            "(EOF while parsing a list at line 1 column 11)",
        ),
    ],
)
def test_schema_errors_name_the_place_and_what_to_send(
    host: Host, agent: HostAgent, args: Any, expected: str
) -> None:
    assert rejected(host, agent, args) == expected


def test_error_texts_never_carry_pydantic_dumps_or_urls(host: Host, agent: HostAgent) -> None:
    for args in ({"todos": [{"content": 1, "status": "x", "y": 2}]}, "[", {"todos": 3}):
        text = rejected(host, agent, args)
        assert "pydantic" not in text
        assert "http" not in text
        assert "\n" not in text


def test_hostile_keys_and_values_are_quoted_safely(host: Host, agent: HostAgent) -> None:
    text = rejected(host, agent, {"todos": [{"content": "a", "status": "\x1b[2J" + "x" * 100}]})
    assert "\x1b" not in text
    assert "\\u001b[2J" in text
    assert text.endswith('…")')
    text = rejected(host, agent, {"todos": [{"content": "a", "status": "pending", "\ud800": 1}]})
    text.encode("utf-8")


def test_validate_call_is_pure() -> None:
    args = {"todos": [todo("a", "in_progress")]}
    assert validate_call(args, allow_parallel=False) == validate_call(args, allow_parallel=False)
    with pytest.raises(ToolCallRejected, match=r"at most one task may be in_progress \(got 2\)"):
        validate_call(
            {"todos": [todo("a", "in_progress"), todo("b", "in_progress")]}, allow_parallel=False
        )


def test_json_text_is_judged_by_what_python_decodes_it_to(host: Host, agent: HostAgent) -> None:
    escaped_surrogate = r'{"todos": [{"content": "\ud800 half a pair", "status": "pending"}]}'
    assert call(host, agent, escaped_surrogate).startswith("Updated todo list: 1 pending")
    assert agent.session.events[-1]["data"]["todos"][0]["content"] == "\ud800 half a pair"
    not_a_number = '{"todos": [{"content": NaN, "status": "pending"}]}'
    assert rejected(host, agent, not_a_number) == (
        "Error: invalid todo at index 0: `content` must be a string (got number)"
    )
    assert rejected(host, agent, "[" * 100_000).startswith(
        "Error: invalid todos: the arguments are not valid JSON (recursion limit exceeded"
    )


# --- hardening: what an error echoes, and what refusing costs ------------------------------


@pytest.mark.parametrize(
    "content",
    ["a", "Write the parser", "x" * 200, 'quotes " and \\ backslashes', "naïve ✓ 中文 \u3000 end"],
)
def test_the_duplicate_text_is_the_seed_byte_for_byte_for_ordinary_content(content: str) -> None:
    with pytest.raises(ToolCallRejected) as caught:
        validate_call({"todos": [todo(content), todo(content)]}, allow_parallel=False)
    assert caught.value.model_text == f'Error: invalid todos: duplicate content "{content}"'


def test_a_long_duplicate_is_cut_and_control_characters_are_escaped() -> None:
    huge = "\x1b[2J\x07" + "y" * 2_000_000 + "\n"
    with pytest.raises(ToolCallRejected, match="duplicate content") as caught:
        validate_call({"todos": [todo(huge), todo(huge)]}, allow_parallel=False)
    text = caught.value.model_text
    assert text == 'Error: invalid todos: duplicate content "\\u001b[2J\\u0007' + "y" * 185 + '…"'
    assert len(text) <= 400
    for content in ("x" * 201, "a\nb\rc\x7f\x85\x9b\u2028\u2029\ud800"):
        with pytest.raises(ToolCallRejected) as caught:
            validate_call({"todos": [todo(content), todo(content)]}, allow_parallel=False)
        shown = caught.value.model_text
        assert len(shown.splitlines()) == 1
        assert not any(ord(char) < 0x20 or 0x7F <= ord(char) < 0xA0 for char in shown)
        shown.encode("utf-8")
    assert shown.endswith('"a\\u000ab\\u000dc\\u007f\\u0085\\u009b\\u2028\\u2029\\ud800"')


def test_a_lone_surrogate_in_a_status_value_gets_the_status_error() -> None:
    with pytest.raises(ToolCallRejected) as caught:
        validate_call({"todos": [todo("a", "pending\ud800")]}, allow_parallel=False)
    assert caught.value.model_text == (
        f'Error: invalid todo at index 0: `status` must be {ALLOWED} (got "pending\\ud800")'
    )
