"""The shortcut for accepted calls says yes only where the full validation says yes, with the
very same result; everything else, and every text the model reads, comes from the full path."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsh_tool_todo.core._accept import accept_counted, accepts_logged, as_result
from dsh_tool_todo.core._validation import args_adapter, check_todos, parse_todos, validate_call
from dsh_tool_todo.errors import InvalidLog, ToolCallRejected
from dsh_tool_todo.stores.jsonl._tail import read_snapshot
from tests._builders import todo, todo_write

SETTINGS = settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def accept_json(raw: str | bytes, *, allow_parallel: bool) -> Any:
    """The shortcut's answer as the canonical result, or ``None`` (run the full validation)."""
    counted = accept_counted(raw, allow_parallel)
    return None if counted is None else as_result(counted)


def full(raw: str | bytes, allow_parallel: bool) -> Any:
    """The full validation: pydantic's pass, then the item and list rules."""
    return check_todos(
        parse_todos(raw, allow_parallel=allow_parallel), allow_parallel=allow_parallel
    )


def outcome(validate: Any, raw: str | bytes, allow_parallel: bool) -> str:
    """A result (repr: key order and types count) or the refusal text the model reads."""
    try:
        return repr(validate(raw, allow_parallel=allow_parallel))
    except ToolCallRejected as rejected:
        return "refused: " + rejected.model_text


def assert_agrees(raw: str | bytes) -> None:
    for allow_parallel in (False, True):
        fast = accept_json(raw, allow_parallel=allow_parallel)
        expected = outcome(full, raw, allow_parallel)
        if fast is not None:
            assert repr(fast) == expected, raw
        assert outcome(validate_call, raw, allow_parallel) == expected, raw


# --- arguments written every way JSON allows, and many ways it does not ---------------


def escape_char(char: str, rng: random.Random) -> str:
    code = ord(char)
    forms = [json.dumps(char)[1:-1]]
    if code < 0x10000:
        forms += [f"\\u{code:04x}", f"\\u{code:04X}"]
    else:
        high, low = divmod(code - 0x10000, 0x400)
        forms.append(f"\\u{0xD800 + high:04x}\\u{0xDC00 + low:04x}")
    if code >= 0x20 and char not in '"\\':  # lone surrogates raw too: a str can hold them
        forms.append(char)
    if char == "/":
        forms.append("\\/")
    return rng.choice(forms)


def encode(value: Any, rng: random.Random) -> str:
    space = rng.choice(["", "", " ", "\n  ", "\t"])
    colon = rng.choice([":", ": ", " : "])
    if isinstance(value, dict):
        items = list(value.items())
        if items and rng.random() < 0.15:  # a repeated key: pydantic and the parser keep the last
            key, _ = rng.choice(items)
            items.insert(rng.randrange(len(items) + 1), (key, rng.choice(["x", 1, None])))
        body = ",".join(f"{space}{encode(k, rng)}{colon}{encode(v, rng)}" for k, v in items)
        return "{" + body + space + "}"
    if isinstance(value, list):
        return "[" + ",".join(space + encode(item, rng) for item in value) + space + "]"
    if isinstance(value, str):
        return '"' + "".join(escape_char(char, rng) for char in value) + '"'
    if isinstance(value, float) and value != value:
        return "NaN"
    return json.dumps(value)


_CONTENT = st.sampled_from(
    ["Plan", "Ship it", "Test", " ", "", "\t\n", "\u3000", "a\u0000b", "caf\u00e9", "\ud800",
     "x\udc00y", "\U0001f600 done", "a\\b", 'say "hi"', "</script>", "todo/write"]
) | st.text(max_size=6)  # fmt: skip
_STATUS = st.sampled_from(
    ["pending", "in_progress", "completed", "Pending", "done", "in_progress ", "pending\ud800", ""]
)
_ODD = st.sampled_from([None, True, 0, 1.5, float("nan"), [], {}, "x"])


@st.composite
def items(draw: st.DrawFn) -> Any:
    kind = draw(st.integers(0, 9))
    if kind == 0:
        return draw(_ODD)
    item: dict[str, Any] = {}
    if kind != 1:
        item["content"] = draw(_CONTENT) if kind != 2 else draw(_ODD)
    if kind != 3:
        item["status"] = draw(_STATUS) if kind not in (4, 5) else draw(_ODD | _STATUS)
    if kind == 6:
        item[draw(st.sampled_from(["priority", "id", "Content"]))] = draw(_ODD)
    keys = list(item)
    if draw(st.booleans()):
        keys.reverse()
    return {key: item[key] for key in keys}


@st.composite
def arguments(draw: st.DrawFn) -> str | bytes:
    todos = draw(st.lists(items(), max_size=6))
    if draw(st.integers(0, 3)) == 0 and todos:  # a repeated content
        todos.append(dict(todos[0]) if isinstance(todos[0], dict) else todos[0])
    shape = draw(st.integers(0, 12))
    args: Any = {"todos": todos}
    if shape == 0:
        args = todos
    elif shape == 1:
        args = {"todos": todos, "extra": 1}
    elif shape == 2:
        args = {"todo": todos}
    rng = random.Random(draw(st.integers(0, 2**32)))
    text = encode(args, rng)
    if draw(st.integers(0, 4)) == 0:  # damaged
        where = draw(st.integers(0, len(text)))
        text = (
            text[:where]
            + draw(st.sampled_from(["", "}", ",", '"', "\\", "]", "x"]))
            + text[where + draw(st.integers(0, 2)) :]
        )
    if draw(st.booleans()):
        return text.encode("utf-8", "surrogatepass")
    return text


@SETTINGS
@given(arguments())
def test_the_shortcut_agrees_with_the_full_validation(raw: str | bytes) -> None:
    assert_agrees(raw)


@SETTINGS
@given(st.binary(max_size=60) | st.text(max_size=60))
def test_arbitrary_text_agrees(raw: str | bytes) -> None:
    assert_agrees(raw)


@pytest.mark.parametrize(
    "raw",
    [
        '{"todos":[{"content":"a","status":"pending"},{"content":"a","status":"pending"}]}',
        '{"todos":[{"content":" ","status":"pending"}]}',
        '{"todos":[{"content":"","status":"pending"}]}',
        '{"todos":[{"content":"a","status":"in_progress"},{"content":"b","status":"in_progress"}]}',
        '{"todos":[{"status":"pending","content":"a"}]}',
        '{"todos":[{ "content":"a","status":"pending"}]}',
        '{"todos":[{"content":"a","status":"pending","content":"b"}]}',
        '{"todos":[{"content":"a","status":"pending"}],"todos":[]}',
        '{"todos":[{"content":"\\ud800","status":"pending"}]}',
        '{"todos":[{"content":"a","status":NaN}]}',
        '{"todos":[{"content":"a","status":"pending","x":1}]}',
        '{"todos":[]}',
        '\ufeff{"todos":[]}',
        '{"todos":[{"content":"{\\"content\\":","status":"pending"}]}',
        '{"todos":[{"content":"\ud800 raw","status":"pending"}]}',  # a raw lone surrogate
        '{"todos":[{"content":"a","status":"pending"}]} ',
        '{"todos":[{"content":"a","status":"pending"}]}x',
        '{"todos":[{"content":"a","status":"pending"},{"status":"pending","content":"b"}]}',
        '{"todos":[{"content":"a","status":"pending","x":1},{"content":"b"}]}',
        '{"todos":[["content","status"]]}',
        '{"todos":["cs"]}',
        '{"todos":[{"content":["a"],"status":"pending"}]}',
        '{"todos":[{"content":1,"status":"pending"}]}',
        '{"todos":[{"content":0,"status":"pending"}]}',
        '{"todos":[{"content":true,"status":"pending"}]}',
        '{"todos":[{"content":{"a":1},"status":"pending"}]}',
        '{"todos":[{"content":"a","status":"pending"},{"content":"\\u3000","status":"pending"}]}',
    ],
)
def test_edge_cases_agree(raw: str) -> None:
    assert_agrees(raw)
    assert_agrees(raw.encode("utf-8", "surrogatepass"))


@pytest.mark.parametrize(
    "raw",
    [
        json.dumps({"todos": [{"content": "Plan", "status": "in_progress"}]}),
        json.dumps({"todos": [{"content": "Plan", "status": "pending"}]}, separators=(",", ":")),
        json.dumps({"todos": [{"content": "caf\u00e9 \u2013 ok", "status": "completed"}]}),
        json.dumps({"todos": []}),
    ],
)
def test_ordinary_calls_take_the_shortcut(raw: str) -> None:
    fast = accept_json(raw, allow_parallel=False)
    assert fast is not None
    assert repr(fast) == repr(full(raw, False))
    assert accept_json(raw.encode(), allow_parallel=False) is not None


def test_a_refused_call_is_left_to_the_full_validation() -> None:
    raw = (
        '{"todos":[{"content":"a","status":"in_progress"},{"content":"b","status":"in_progress"}]}'
    )
    assert accept_json(raw, allow_parallel=False) is None
    with pytest.raises(ToolCallRejected, match="in_progress"):
        validate_call(raw, allow_parallel=False)
    assert accept_json(raw, allow_parallel=True) is not None


# --- a logged write's decoded todos: what every viewer checks of each deciding event ----


@SETTINGS
@given(st.lists(items(), max_size=6), st.booleans())
def test_a_logged_write_accepted_without_pydantic_is_one_the_full_validation_accepts(
    todos: list[Any], repeat: bool
) -> None:
    if repeat and todos:
        todos.append(todos[0])
    if accepts_logged(todos):
        validate_call({"todos": todos}, allow_parallel=True)  # raises if it would refuse


@pytest.mark.parametrize(
    "todos",
    [
        [{"content": "a", "status": "in_progress"}, {"content": "b", "status": "in_progress"}],
        [{"status": "pending", "content": "a"}],
        [{"content": "caf\u00e9 \ud800", "status": "completed"}],
        [],
    ],
)
def test_ordinary_logged_writes_are_accepted_without_pydantic(todos: list[Any]) -> None:
    assert accepts_logged(todos)


def test_reading_valid_logs_builds_no_validator_and_a_broken_one_is_still_refused(
    tmp_path: Path,
) -> None:
    """A fresh viewer's first list checked 200 deciding events and built pydantic's validator
    on the way (tens of milliseconds, on the first request)."""
    log = tmp_path / "s.jsonl"
    written = todo_write(todo("a", "in_progress"), todo("b"), seq=0)
    log.write_text(json.dumps(written) + "\n")
    args_adapter.cache_clear()
    assert read_snapshot(str(log)).deciding == written
    assert args_adapter.cache_info().currsize == 0
    log.write_text(json.dumps(todo_write(todo("a"), todo("a"), seq=0)) + "\n")
    with pytest.raises(InvalidLog, match="line 1: event 0: Error: invalid todos"):
        read_snapshot(str(log))
