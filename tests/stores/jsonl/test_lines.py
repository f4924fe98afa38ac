"""``loads_line`` reads every line exactly as ``json.loads`` does; the tail read agrees with
the full replay whatever escapes a writer used."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsh_tool_todo import InvalidLog, replay
from dsh_tool_todo.core.contract import EVENT_TYPE, TURN_START
from dsh_tool_todo.stores.jsonl import current_plan, read_events
from dsh_tool_todo.stores.jsonl._lines import loads_line

SETTINGS = settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def outcome(parse: Any, line: bytes) -> str:
    """What a parser makes of ``line``: its value (repr: NaN is not equal to itself, and
    key order counts), or the kind of error it raises."""
    try:
        return repr(parse(line))
    except RecursionError:
        return "RecursionError"
    except ValueError:
        return "ValueError"


def assert_same(line: bytes) -> None:
    assert outcome(loads_line, line) == outcome(json.loads, line), line


# --- JSON text written the ways a foreign writer may write it ----------------------


def escape_char(char: str, rng: random.Random) -> str:
    """One character as JSON allows it: itself (if allowed), or a \\u escape in either case."""
    code = ord(char)
    forms = [f"\\u{code:04x}", f"\\u{code:04X}"] if code < 0x10000 else []
    if char == "/":
        forms.append("\\/")
    if code >= 0x20 and char not in '"\\':
        forms.append(char)
    if code >= 0x10000:  # a surrogate pair
        high, low = divmod(code - 0x10000, 0x400)
        forms.append(f"\\u{0xD800 + high:04x}\\u{0xDC00 + low:04x}")
        forms.append(char)
    return rng.choice(forms or [json.dumps(char)[1:-1]])


def encode_string(text: str, rng: random.Random) -> str:
    return '"' + "".join(escape_char(char, rng) for char in text) + '"'


def encode(
    value: Any, rng: random.Random, spaces: tuple[str, ...] = ("", " ", "\t", "\r\n")
) -> str:
    space = rng.choice(spaces)
    if isinstance(value, dict):
        items = list(value.items())
        if items and rng.random() < 0.2:  # a repeated key: the last one wins in both parsers
            key, _ = rng.choice(items)
            items.insert(0, (key, rng.choice([1, "x", None, {}])))
        body = ",".join(
            f"{space}{encode_string(k, rng)}{space}:{encode(v, rng, spaces)}" for k, v in items
        )
        return "{" + body + space + "}"
    if isinstance(value, list):
        return "[" + ",".join(encode(item, rng, spaces) for item in value) + "]"
    if isinstance(value, str):
        return encode_string(value, rng)
    return json.dumps(value)


_TYPES = st.sampled_from(
    [EVENT_TYPE, TURN_START, "turn/end", "message", "todo/writes", "Turn/Start", "write", "x"]
) | st.text(max_size=12)
_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)


@st.composite
def event_lines(draw: st.DrawFn) -> bytes:
    event = {
        "seq": draw(st.integers(0, 2**70) | st.sampled_from([1.0, "1", None])),
        "type": draw(_TYPES),
        "data": draw(st.dictionaries(st.text(max_size=8), _VALUES, max_size=3) | _VALUES),
    }
    keys = draw(st.permutations(list(event)))
    ordered = {key: event[key] for key in keys}
    rng = random.Random(draw(st.integers(0, 2**32)))
    text = encode(ordered, rng)
    return text.encode("utf-8", "surrogatepass")


# Bytes that change how a parser reads what follows.
_NOISE = st.sampled_from(
    [b"\\", b'"', b",", b"}", b"]", b"{", b"\x00", b"\x01", b"\x7f", b"\xff", b"\xed\xa0\x80",
     b"\xef\xbb\xbf", b"\\ud800", b"\\udc00", b"NaN", b"Infinity", b"-", b"0", b"01", b".",
     b"e", b"\\u00", b"\\x41", b"\\u0077", b"\\u0074", b"write", b"start", b" ", b"\t", b"\x0b",
     b"\x0c", b"\n", b"\r", b"\xc0\x80", b"true", b"tru", b"null", b"[", b":"]
)  # fmt: skip


@st.composite
def mutated_lines(draw: st.DrawFn) -> bytes:
    line = bytearray(draw(event_lines()))
    for _ in range(draw(st.integers(1, 4))):
        where = draw(st.integers(0, len(line)))
        action = draw(st.sampled_from(["insert", "delete", "replace", "cut"]))
        noise = draw(_NOISE)
        if action == "insert":
            line[where:where] = noise
        elif action == "delete":
            del line[where : where + draw(st.integers(1, 3))]
        elif action == "replace":
            line[where : where + len(noise)] = noise
        else:
            del line[where:]
    return bytes(line)


@SETTINGS
@given(event_lines())
def test_a_line_written_any_way_json_allows_reads_the_same(line: bytes) -> None:
    assert_same(line)


@SETTINGS
@given(mutated_lines())
def test_a_damaged_line_reads_the_same(line: bytes) -> None:
    assert_same(line)


@SETTINGS
@given(st.binary(max_size=40))
def test_arbitrary_bytes_read_the_same(line: bytes) -> None:
    assert_same(line)


@pytest.mark.parametrize(
    "line",
    [
        b'{"seq":1,"type":"todo\\/write","data":{"todos":[]}}',
        b'{"seq":1,"type":"\\u0074odo/write","data":{"todos":[]}}',
        b'{"seq":1,"type":"turn/st\\u0061rt","type":"turn/end","data":{}}',
        b'{"seq":1,"type":"t","data":{}}',
        b' {"seq":1,"type":"t","data":{}}',
        b'{"seq":1,"type":"t","data":{}} ',
        b'{"seq":1,"type":"t","data":{}}}',
        b'{"seq":1,"type":"t","data":{}}{}',
        b'{"seq":1,"type":"t","data":{"a":NaN}}',
        b'{"seq":1,"type":"t","data":{"a":"\\ud800"}}',
        b'{"seq":1,"type":"t","data":{"a":"\xed\xa0\x80"}}',
        b'{"seq":1,"type":"t","data":{"a":"\xff"}}',
        b'{"seq":1,"type":"t","data":{"a":"\x01"}}',
        b'\xef\xbb\xbf{"seq":1,"type":"t","data":{}}',
        b'{\x00"\x00}',
        b"{}",
        b"{",
        b"}",
        b"",
        b"{" + b'"a":[' * 5000 + b"]" * 5000 + b"}",
        b'{"seq":1,"seq":true,"type":"t","data":{}}',
    ],
)
def test_lines_json_reads_in_its_own_ways(line: bytes) -> None:
    assert_same(line)


def test_the_errors_are_json_s_own() -> None:
    with pytest.raises(json.JSONDecodeError, match=r"^Extra data: line 1 column 3"):
        loads_line(b"{}}")
    with pytest.raises(json.JSONDecodeError, match=r"^Expecting property name enclosed"):
        loads_line(b"{,}")
    with pytest.raises(UnicodeDecodeError, match=r"can't decode byte 0xff"):
        loads_line(b'{"a":"\xff"}')


# --- a whole log: the read from the end agrees with the full replay -----------------


def _line(seq: int, kind: str, data: dict[str, Any], rng: random.Random) -> bytes:
    # one line: any JSON whitespace but the newline
    text = encode({"seq": seq, "type": kind, "data": data}, rng, ("", " ", "\t", "\r"))
    return text.encode("utf-8") + b"\n"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            _TYPES,
            st.lists(st.sampled_from(["Plan", "Ship", "Test"]), unique=True, max_size=3),
        ),
        max_size=12,
    ),
    st.integers(0, 2**32),
)
def test_current_plan_agrees_with_the_replay_whatever_the_escapes(
    tmp_path_factory: pytest.TempPathFactory, log: list[tuple[str, list[str]]], seed: int
) -> None:
    rng = random.Random(seed)
    path = tmp_path_factory.mktemp("skim") / "log.jsonl"
    lines = []
    for seq, (kind, contents) in enumerate(log):
        data: dict[str, Any] = (
            {"todos": [{"content": c, "status": "pending"} for c in contents]}
            if kind == EVENT_TYPE
            else {"note": rng.choice(["write", "start", "wr\u00efte", "plain", "a\nb"])}
        )
        lines.append(_line(seq, kind, data, rng))
    path.write_bytes(b"".join(lines))
    assert current_plan(path) == replay(read_events(path))


def test_a_damaged_line_after_the_plan_still_fails_the_read(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    rng = random.Random(0)
    path.write_bytes(
        _line(0, EVENT_TYPE, {"todos": []}, rng)
        + b'{"seq":1,"type":"turn/end","data":{"a":1}\n'
        + _line(2, "turn/end", {}, rng)
    )
    with pytest.raises(InvalidLog, match=r"log\.jsonl, line 2: not a session event"):
        current_plan(path)
