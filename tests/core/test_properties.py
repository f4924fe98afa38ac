"""Whatever the model sends, the call either records it whole or answers a documented error."""

from __future__ import annotations

import json
import re
import string
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import dsh_tool_todo
from dsh_tool_todo import replay
from dsh_tool_todo.core import contract
from dsh_tool_todo.host import Host
from tests.conftest import options

HOSTS = {parallel: Host([dsh_tool_todo], options(parallel)) for parallel in (False, True)}
PROPERTY_SETTINGS = settings(
    max_examples=400,
    deadline=None,  # two shared, noisy cores: a slow example is not a failure
    suppress_health_check=[HealthCheck.too_slow],
)

# --- the documented texts, as regexes built from contract.py's own templates ------------

_FIELDS = {
    "index": r"\d+",
    "count": r"\d+",
    "field": "(?:content|status)",
    "expected": "(?:" + "|".join(map(re.escape, contract.MISSING_FIELD_EXPECTS.values())) + ")",
    "got": r'(?:string|boolean|number|null|array|object|".*")',
}


def template_regex(template: str, fields: dict[str, str] | None = None) -> re.Pattern[str]:
    """A regex matching exactly the texts ``template.format(...)`` can produce."""
    chosen = _FIELDS if fields is None else fields
    parts = []
    for literal, field, _spec, _conversion in string.Formatter().parse(template):
        parts.append(re.escape(literal))
        if field is not None:
            parts.append(chosen.get(field, ".+"))
    return re.compile("".join(parts), re.DOTALL)


ERROR_TEMPLATES = {
    name: value
    for name, value in vars(contract).items()
    if name.isupper() and isinstance(value, str) and value.startswith("Error: ")
}
ERRORS = {name: template_regex(template) for name, template in ERROR_TEMPLATES.items()}
SUCCESS = template_regex(
    contract.SUCCESS_TEXT,
    {key: rf"(?P<{key}>\d+)" for key in ("pending", "inProgress", "completed")},
)


# A text that names several problems: a head, then clauses (contract.py's combining rule).
CLAUSES = {
    name: template_regex(getattr(contract, name), {"where": ".*"})
    for name in (*contract.SCHEMA_CLAUSES, *contract.LIST_CLAUSES, "UNEXPECTED_VALUE")
}
HEADS = re.compile(
    r"Error: invalid todos: |Error: invalid todo at index \d+: |Error: invalid todo: "
)


def documented_error(text: str) -> str | None:
    """The name of the whole template ``text`` is, or of the first clause after its head."""
    whole = next((name for name, regex in ERRORS.items() if regex.fullmatch(text)), None)
    head = HEADS.match(text)
    if whole is not None or head is None:
        return whole
    rest = text[head.end() :]
    return next((name for name, regex in CLAUSES.items() if regex.match(rest)), None)


def test_the_regexes_cover_every_error_template() -> None:
    assert {"NOT_JSON", "DUPLICATE_CONTENT", "TOO_MANY_IN_PROGRESS", "NO_OWNER"} <= set(ERRORS)
    bad_status = contract.BAD_STATUS.format(values='"done": use completed')
    assert documented_error(contract.CALL_HEAD + bad_status) == "BAD_STATUS"
    assert documented_error(contract.ITEM_HEAD.format(index=3) + bad_status) == "BAD_STATUS"
    assert documented_error(contract.TOO_MANY_IN_PROGRESS.format(count=2)) is not None
    assert documented_error("Error: invalid todos: at most one task may be in_progress") is None
    assert documented_error("Error: invalid todo at index x: " + bad_status) is None
    assert (
        documented_error(contract.SUCCESS_TEXT.format(pending=1, inProgress=0, completed=0)) is None
    )
    assert SUCCESS.fullmatch("Updated todo list: 1 pending, 2 in progress, 3 completed.")
    assert not SUCCESS.fullmatch("Updated todo list: 1 pending, 2 in progress, 3 completed")


# --- what the model may send -----------------------------------------------------------

_TRICKY = ["\x00", "\ud800", "\udfff", " ", "\t", "\u2028", "`", '"', "\\", "{", "\u3000"]
ANY_TEXT = st.text(st.characters(exclude_categories=()) | st.sampled_from(_TRICKY), max_size=12)
KEYS = st.sampled_from(["todos", "content", "status"]) | ANY_TEXT
STATUS = st.sampled_from(contract.STATUSES)
NEAR_STATUS = st.sampled_from(["Pending", "in-progress", "done", "", " pending"]) | ANY_TEXT

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | ANY_TEXT
    | STATUS,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(KEYS, children, max_size=4),
    max_leaves=20,
)
CONTENT = st.text(
    st.characters(exclude_categories=()) | st.sampled_from(_TRICKY), min_size=1, max_size=12
).filter(lambda text: bool(text) and not text.isspace())
VALID_TODOS = st.lists(
    st.fixed_dictionaries({"content": CONTENT, "status": STATUS}),
    max_size=8,
    unique_by=lambda item: item["content"],
)

Mutation = Callable[[st.DrawFn, dict[str, Any]], Any]


def _some_item(draw: st.DrawFn, args: dict[str, Any]) -> dict[str, Any]:
    todos: list[dict[str, Any]] = args["todos"]
    if not todos:
        todos.append({"content": "Plan", "status": "pending"})
    item: dict[str, Any] = draw(st.sampled_from(todos))
    return item


def _drop_key(draw: st.DrawFn, args: dict[str, Any]) -> Any:
    del _some_item(draw, args)[draw(st.sampled_from(["content", "status"]))]
    return args


def _extra_item_key(draw: st.DrawFn, args: dict[str, Any]) -> Any:
    _some_item(draw, args)[draw(KEYS)] = draw(JSON_VALUES)
    return args


def _extra_argument(draw: st.DrawFn, args: dict[str, Any]) -> Any:
    args[draw(KEYS)] = draw(JSON_VALUES)
    return args


def _no_todos(draw: st.DrawFn, args: dict[str, Any]) -> Any:
    return {draw(KEYS.filter(lambda key: key != "todos")): args["todos"]}


def _todos_not_list(draw: st.DrawFn, args: dict[str, Any]) -> Any:
    args["todos"] = draw(JSON_VALUES)
    return args


def _item_not_object(draw: st.DrawFn, args: dict[str, Any]) -> Any:
    todos = args["todos"]
    todos.insert(draw(st.integers(0, len(todos))), draw(JSON_VALUES))
    return args


def _bad_content(draw: st.DrawFn, args: dict[str, Any]) -> Any:
    blank = st.sampled_from(["", " ", "\t\n", "\u3000", "\x1c"])
    _some_item(draw, args)["content"] = draw(blank | JSON_VALUES)
    return args


def _bad_status(draw: st.DrawFn, args: dict[str, Any]) -> Any:
    _some_item(draw, args)["status"] = draw(NEAR_STATUS | JSON_VALUES)
    return args


def _duplicate(draw: st.DrawFn, args: dict[str, Any]) -> Any:
    item = _some_item(draw, args)
    args["todos"].append({"content": item["content"], "status": draw(STATUS)})
    return args


def _several_in_progress(draw: st.DrawFn, args: dict[str, Any]) -> Any:
    for index in range(draw(st.integers(2, 4))):
        args["todos"].append({"content": f"Parallel step {index}", "status": "in_progress"})
    return args


def _wrapped(draw: st.DrawFn, args: dict[str, Any]) -> Any:
    return draw(st.sampled_from([[args], args["todos"], json.dumps(args)]))


MUTATIONS: list[Mutation | None] = [
    None,  # valid calls three times as often as any one mistake
    None,
    None,
    _drop_key,
    _extra_item_key,
    _extra_argument,
    _no_todos,
    _todos_not_list,
    _item_not_object,
    _bad_content,
    _bad_status,
    _duplicate,
    _several_in_progress,
    _wrapped,
]


@st.composite
def near_valid(draw: st.DrawFn) -> Any:
    """A valid call, then at most one deliberate mistake."""
    args: dict[str, Any] = {"todos": draw(VALID_TODOS)}
    mutation = draw(st.sampled_from(MUTATIONS))
    return args if mutation is None else mutation(draw, args)


@st.composite
def raw_json(draw: st.DrawFn) -> str | bytes:
    """The arguments as the JSON text the model streams: whole, cut short, or with junk."""
    value = draw(near_valid() | JSON_VALUES)
    text = json.dumps(value, ensure_ascii=draw(st.booleans()))
    shape = draw(st.sampled_from(["whole", "whole", "cut", "junk", "bytes"]))
    if shape == "cut":
        return text[: draw(st.integers(0, max(0, len(text) - 1)))]
    if shape == "junk":
        return text + draw(st.sampled_from([" x", "}", ",", "\x00"]))
    if shape == "bytes":
        return text.encode("utf-8", "surrogatepass")
    return text


ANY_ARGUMENTS = JSON_VALUES | near_valid() | near_valid() | raw_json()


# --- an oracle of the contract, written apart from the library --------------------------


def _has_surrogate(value: Any) -> bool:
    if isinstance(value, (str, bytes)):
        text = value if isinstance(value, str) else value.decode("utf-8", "surrogatepass")
        return any("\ud800" <= char <= "\udfff" for char in text) or "\\ud" in text.lower()
    if isinstance(value, dict):
        return any(_has_surrogate(key) or _has_surrogate(item) for key, item in value.items())
    if isinstance(value, list):
        return any(_has_surrogate(item) for item in value)
    return False


def decoded(args: Any) -> Any:
    if isinstance(args, (str, bytes)):
        try:
            return json.loads(args)
        except ValueError:
            return None
    return args


def contract_allows(args: Any, *, parallel: bool) -> bool:
    value = decoded(args)
    if not isinstance(value, dict) or set(value) != {"todos"}:
        return False
    todos = value["todos"]
    if not isinstance(todos, list):
        return False
    for item in todos:
        if not isinstance(item, dict) or set(item) != {"content", "status"}:
            return False
        content = item["content"]
        if (
            type(content) is not str
            or not content.strip()
            or item["status"] not in contract.STATUSES
        ):
            return False
    if len({item["content"] for item in todos}) != len(todos):
        return False
    return parallel or sum(item["status"] == "in_progress" for item in todos) <= 1


# --- the properties -------------------------------------------------------------------


@PROPERTY_SETTINGS
@given(args=ANY_ARGUMENTS, parallel=st.booleans())
def test_a_call_records_the_whole_list_or_answers_a_documented_error(
    args: Any, parallel: bool
) -> None:
    host = HOSTS[parallel]
    agent = host.new_agent()
    text = host.call_tool("todo_write", args, agent=agent)  # nothing else may escape
    text.encode("utf-8")  # a host can always send it on
    events = agent.session.events
    success = SUCCESS.fullmatch(text)
    event(documented_error(text) or "success")  # shown by --hypothesis-show-statistics
    if success is None:
        assert documented_error(text), text
        assert events == []
        # a call the contract allows may only fail on text pydantic will not decode
        assert not contract_allows(args, parallel=parallel) or _has_surrogate(args), text
        return
    assert contract_allows(args, parallel=parallel), text
    todos = decoded(args)["todos"]
    assert events == [{"seq": 0, "type": contract.EVENT_TYPE, "data": {"todos": todos}}]
    assert host.projection(agent.session, "todos") == todos
    shown = {key: int(count) for key, count in success.groupdict().items()}
    statuses = Counter(item["status"] for item in todos)
    assert shown == {
        "pending": statuses["pending"],
        "inProgress": statuses["in_progress"],
        "completed": statuses["completed"],
    }


@PROPERTY_SETTINGS
@given(args=ANY_ARGUMENTS)
def test_a_call_without_an_owner_is_refused_whatever_it_sends(args: Any) -> None:
    assert HOSTS[False].call_tool("todo_write", args) == contract.NO_OWNER


@st.composite
def parallel_session(draw: st.DrawFn) -> list[tuple[str, Any]]:
    """Calls a parallel deployment accepts, with turns between some, and one parallel plan."""
    steps: list[tuple[str, Any]] = [
        ("call", {"todos": todos}) for todos in draw(st.lists(VALID_TODOS, max_size=6))
    ]
    doubled = _several_in_progress(draw, {"todos": draw(VALID_TODOS)})
    steps.insert(draw(st.integers(0, len(steps))), ("call", doubled))
    for _ in range(draw(st.integers(0, 3))):
        steps.insert(draw(st.integers(0, len(steps))), ("turn", {}))
    return steps


@settings(max_examples=150, deadline=None)
@given(steps=parallel_session())
def test_a_log_written_with_parallel_allowed_replays_verified(
    steps: list[tuple[str, Any]],
) -> None:
    strict, parallel = HOSTS[False], HOSTS[True]
    agent = parallel.new_agent()
    refused_by_strict = 0
    for kind, args in steps:
        if kind == "turn":
            agent.session.append(contract.TURN_START, {})
            continue
        assert SUCCESS.fullmatch(parallel.call_tool("todo_write", args, agent=agent))
        strict_text = strict.call_tool("todo_write", args, agent=strict.new_agent())
        refused_by_strict += documented_error(strict_text) == "TOO_MANY_IN_PROGRESS"
    assert refused_by_strict >= 1  # the log holds a plan strict mode would refuse
    events = agent.session.events
    assert replay(events, verify=True) == parallel.projection(agent.session, "todos")
    assert replay(events, verify=True) == replay(events, verify=False)


# --- cases the properties found, kept as examples -----------------------------------------


def test_every_error_text_can_be_sent_as_utf8() -> None:
    todos = [{"content": "\ud800", "status": "pending"}] * 2
    text = HOSTS[False].call_tool("todo_write", {"todos": todos}, agent=HOSTS[False].new_agent())
    assert documented_error(text) == "DUPLICATE_CONTENT"
    text.encode("utf-8")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ('{"todos": [{"content": "\ud800", "status": "pending"}]}', "NOT_JSON"),
        ({"todos": [], "\ud800": 1}, "UNKNOWN_ARGUMENTS"),
        ({"todos": [{"content": "a", "status": "pending", "\ud800": 1}]}, "UNKNOWN_ITEM_KEYS"),
        ({"todos": [{"content": "a", "status": "pending\ud800"}]}, "BAD_STATUS"),
    ],
)
def test_a_lone_surrogate_gets_the_error_that_names_it(args: Any, expected: str) -> None:
    text = HOSTS[False].call_tool("todo_write", args, agent=HOSTS[False].new_agent())
    assert documented_error(text) == expected, text
