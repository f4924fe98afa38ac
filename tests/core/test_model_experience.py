"""The first error names every problem of a call, so one retry repairs any real shape.

The literal model (tests/literal_model.py) changes exactly what an error names and nothing
more: every shape seen in real use must converge in at most two calls, in both modes.
"""

from __future__ import annotations

import json
import sys
import tracemalloc
from typing import Annotated, Any, Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ConfigDict, Field, TypeAdapter, ValidationError

from dsh_tool_todo import ToolCallRejected
from dsh_tool_todo.core import _rejections as rejections
from dsh_tool_todo.core import contract
from dsh_tool_todo.core._echo import echo
from dsh_tool_todo.core._validation import args_adapter, validate_call
from dsh_tool_todo.core.tool import todo_write_tool
from dsh_tool_todo.stores.memory import MemorySession
from tests.core.test_properties import ANY_ARGUMENTS
from tests.literal_model import ALL_SHAPES, SNAPSHOT, calls_to_accept, first_errors, literal_fix

if sys.version_info >= (3, 12):
    from typing import TypedDict
else:
    from typing_extensions import TypedDict

TOOLS = {
    parallel: todo_write_tool(allow_parallel_in_progress=parallel) for parallel in (False, True)
}


# --- real shapes, through the literal model ----------------------------------------------------


@pytest.mark.parametrize("parallel", [False, True])
@pytest.mark.parametrize("shape", list(ALL_SHAPES))
def test_every_real_shape_converges_in_at_most_two_calls(shape: str, parallel: bool) -> None:
    calls, texts = calls_to_accept(TOOLS[parallel], ALL_SHAPES[shape])
    assert calls <= 2, texts
    assert texts[-1].startswith("Updated todo list: ")
    assert len(texts[0]) <= contract.MAX_ERROR_CHARS
    assert "more problems" not in texts[0]


def test_the_first_error_of_each_shape_is_its_snapshot() -> None:
    """Run ``python -m tests.literal_model`` to rewrite the snapshot after a deliberate change."""
    assert first_errors() == json.loads(SNAPSHOT.read_text(encoding="utf-8"))


def test_the_literal_model_changes_only_what_the_text_names() -> None:
    """Told one problem, it fixes one: a shape needs one call per problem when errors name one."""
    args = ALL_SHAPES["Copilot"]
    only_the_arguments = literal_fix(args, "Error: invalid todos: unknown argument `operation`")
    assert only_the_arguments == {"todoList": args["todoList"]}
    assert literal_fix(args, "Error: invalid todos: something else entirely") == args


def test_the_accepted_path_never_runs_the_explanation(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_args: object, **_kwargs: object) -> str:
        raise AssertionError("the explanation ran for an accepted call")

    monkeypatch.setattr("dsh_tool_todo.core._validation.refusal", refuse)
    monkeypatch.setattr("dsh_tool_todo.core._validation.list_refusal", refuse)
    todos = [{"content": f"Step {n}", "status": "pending"} for n in range(12)]
    for args in ({"todos": todos}, json.dumps({"todos": todos})):
        assert validate_call(args, allow_parallel=False)["counts"]["pending"] == 12


# --- clauses and how they combine ----------------------------------------------------------------


def text_of(args: Any, *, parallel: bool = False) -> str:
    with pytest.raises(ToolCallRejected, match=r"^Error: ") as caught:
        validate_call(args, allow_parallel=parallel)
    return caught.value.model_text


def test_repeated_problems_are_summarised_never_listed_item_by_item() -> None:
    todos = [{"content": f"Step {n}", "status": "done", "id": n} for n in range(1000)]
    todos[7]["priority"] = "high"
    todos.append({"content": "Last", "status": "pending", "id": 1000, "note": "x"})
    assert text_of({"todos": todos}) == (
        "Error: invalid todos: unknown key `id` in every item; unknown key `priority` at index 7; "
        "unknown key `note` at index 1000; `status` must be one of pending, in_progress, "
        'completed (got "done": use completed); '
        "each todo is {content, status}, with no other keys"
    )
    five: list[dict[str, Any]] = [{"content": f"Step {n}", "status": "pending"} for n in range(10)]
    for index in (1, 3, 5, 7, 9):
        five[index]["id"] = index
    assert "unknown key `id` at 5 indexes;" in text_of({"todos": five})
    four = [dict(item) for item in five]
    del four[9]["id"]
    assert "unknown key `id` at index 1, 3, 5, 7;" in text_of({"todos": four})


def test_names_that_do_not_fit_are_counted() -> None:
    item = {"content": "a", "status": "pending", **{f"key_{n:05d}": n for n in range(10_000)}}
    text = text_of({"todos": [item]})
    assert text.startswith("Error: invalid todo at index 0: unknown keys `key_00000`, `key_00001`")
    assert " and 99" in text
    assert text.endswith(" more; each todo is {content, status}, with no other keys")
    assert len(text) <= contract.MAX_ERROR_CHARS
    statuses = [{"content": f"s{n}", "status": f"state {n} " + "x" * 60} for n in range(50)]
    text = text_of({"todos": statuses})
    assert text.startswith("Error: invalid todos: `status` must be one of pending, in_progress")
    assert text.endswith(" and 48 more)")


def test_clauses_that_do_not_fit_are_counted() -> None:
    todos: list[Any] = [{"content": f"s{n}", "status": "pending"} for n in range(6)]
    todos[0] = {"status": "pending", "x" * 39: 1, "y" * 39: 2, "z" * 39: 3}
    todos[1] = {"content": 1, "status": 2, "w" * 39: 1}
    todos[2] = {"content": [], "status": "q" * 39, "v" * 39: 1}
    todos[3] = "not an object"
    args = {"todos": todos, "a" * 39: 1, "b" * 39: 2, "c" * 39: 3}
    text = text_of(args)
    assert len(text) <= contract.MAX_ERROR_CHARS
    assert text.startswith("Error: invalid todos: unknown arguments `aaaa")
    assert text.endswith(" more problems")


def test_a_list_sent_as_a_json_string_is_named_and_its_items_checked() -> None:
    listed = json.dumps([{"content": "a", "status": "done"}])
    assert text_of({"todos": listed}) == (
        "Error: invalid todos: `todos` is a JSON string; send the array itself; "
        '`status` must be one of pending, in_progress, completed (got "done": use completed); '
        "each todo is {content, status}, with no other keys"
    )
    assert text_of({"tasks": listed}) == (
        "Error: invalid todos: missing `todos`: `tasks` is a JSON string; send its array as "
        "`todos`, each todo {content, status}; "
        '`status` must be one of pending, in_progress, completed (got "done": use completed)'
    )


def test_two_arrays_and_no_todos_are_named_without_a_guess() -> None:
    assert text_of({"plan": [], "steps": []}) == (
        "Error: invalid todos: unknown arguments `plan`, `steps`; missing `todos`, the array of "
        "every todo; todo_write takes only `todos`; each todo is {content, status}, "
        "with no other keys"
    )


def test_statuses_without_a_counterpart_say_what_to_do_instead() -> None:
    todos = [{"content": name, "status": name} for name in ("cancelled", "failed", "blocked")]
    todos.append({"content": "skip", "status": "Skipped"})
    assert text_of({"todos": todos}) == (
        "Error: invalid todos: `status` must be one of pending, in_progress, completed "
        '(got "cancelled", "failed", "blocked", "Skipped": drop the item, or keep it pending '
        "and say why in its content)"
    )


def test_too_many_in_progress_is_named_in_a_schema_error_in_strict_mode_only() -> None:
    todos = [
        {"content": "a", "status": "in_progress", "id": 1},
        {"content": "b", "status": "Doing"},
    ]
    strict = text_of({"todos": todos})
    assert strict.endswith(
        "at most one task may be in_progress (got 2); " + contract.ITEMS_HINT.format()
    )
    assert "at most one" not in text_of({"todos": todos}, parallel=True)


def test_echo_is_the_one_helper_for_echoed_values() -> None:
    assert echo("plain text") == "plain text"
    assert echo("x" * 41) == "x" * 40 + "…"
    assert echo("a\x1b\x7f\x9b\u2028\ud800") == "a\\u001b\\u007f\\u009b\\u2028\\ud800"
    assert echo("\x00" * 20) == "\\u0000" * 6 + "…"
    assert echo('say "hi" \\', quoted=True) == 'say \\"hi\\" \\\\'
    assert echo('say "hi"') == 'say "hi"'


# --- properties ---------------------------------------------------------------------------------

_STRICT = ConfigDict(extra="forbid", strict=True)


class _Item(TypedDict):
    __pydantic_config__ = _STRICT  # type: ignore[misc]
    content: str
    status: Literal["pending", "in_progress", "completed"]


class _Args(TypedDict):
    __pydantic_config__ = _STRICT  # type: ignore[misc]
    todos: Annotated[list[_Item], Field()]


ORACLE = TypeAdapter(_Args)


def schema_accepts(args: Any) -> bool:
    """pydantic's judgement, built apart from the library: strict, unknown keys forbidden, and a
    text pydantic cannot parse judged by what Python decodes it to."""
    try:
        if isinstance(args, (str, bytes)):
            try:
                ORACLE.validate_json(args)
            except ValidationError as error:
                if error.errors()[0]["type"] != "json_invalid":
                    return False
                try:
                    decoded = json.loads(args)
                except (ValueError, RecursionError):
                    return False
                return schema_accepts(decoded)
        else:
            ORACLE.validate_python(args)
    except ValidationError:
        return False
    return True


def is_list_stage(text: str) -> bool:
    """A text whose head is the seed's text of an item or list check."""
    return text.startswith(
        (
            contract.EMPTY_CONTENT,
            contract.CALL_HEAD + contract.DUPLICATE.split("{")[0],
            contract.CALL_HEAD + contract.TOO_MANY.split("{")[0],
        )
    )


PROPERTY_SETTINGS = settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@PROPERTY_SETTINGS
@given(args=ANY_ARGUMENTS | st.sampled_from(list(ALL_SHAPES.values())), parallel=st.booleans())
def test_any_error_is_one_short_inert_line_and_the_verdict_is_pydantics(
    args: Any, parallel: bool
) -> None:
    text = TOOLS[parallel].call(args, MemorySession())
    if text.startswith("Updated todo list: "):
        assert schema_accepts(args)
        return
    assert len(text) <= contract.MAX_ERROR_CHARS
    assert len(text.splitlines()) == 1
    assert not any(ord(char) < 0x20 or 0x7F <= ord(char) < 0xA0 for char in text), text
    text.encode("utf-8")
    assert "pydantic" not in text
    assert "http" not in text
    assert is_list_stage(text) == schema_accepts(args), text


_LONG_TEXT = st.text(st.characters(exclude_categories=()), min_size=30, max_size=90)
WIDE_ITEMS = st.lists(
    st.dictionaries(
        st.sampled_from(["content", "status", "title", "id"]) | _LONG_TEXT,
        _LONG_TEXT | st.integers() | st.sampled_from(["done", "todo", "cancelled", "pending"]),
        max_size=6,
    ),
    min_size=1,
    max_size=60,
)
WIDE_ARGUMENTS = st.builds(
    lambda todos, extra, key: {key: todos, **extra},
    WIDE_ITEMS,
    st.dictionaries(_LONG_TEXT, st.integers(), max_size=8),
    st.sampled_from(["todos", "plan", "todoList"]),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(args=WIDE_ARGUMENTS, parallel=st.booleans())
def test_many_long_distinct_problems_still_fit_one_line(args: Any, parallel: bool) -> None:
    text = TOOLS[parallel].call(args, MemorySession())
    assert len(text) <= contract.MAX_ERROR_CHARS, text
    assert len(text.splitlines()) == 1
    assert not any(ord(char) < 0x20 or 0x7F <= ord(char) < 0xA0 for char in text), text
    text.encode("utf-8")


@PROPERTY_SETTINGS
@given(args=ANY_ARGUMENTS, parallel=st.booleans())
def test_a_retry_as_the_text_says_never_makes_a_call_worse(args: Any, parallel: bool) -> None:
    """Whatever the literal model changes, it never raises and the next call is judged too."""
    text = TOOLS[parallel].call(args, MemorySession())
    if text.startswith("Error: ") and isinstance(args, dict):
        TOOLS[parallel].call(literal_fix(args, text), MemorySession())


# --- what refusing costs -------------------------------------------------------------------------


def _peak_bytes(args: Any) -> int:
    tracemalloc.start()
    try:
        with pytest.raises(ToolCallRejected):
            validate_call(args, allow_parallel=False)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_huge_bad_list_costs_pydantic_one_error_not_one_per_item() -> None:
    raw = '{"todos":[' + ",".join(["0"] * 200_000) + "]}"
    with pytest.raises(ValidationError) as caught:
        args_adapter().validator.validate_json(raw)
    assert caught.value.error_count() == 1


def _decoding_peak(args: Any) -> int:
    """What decoding the input from its JSON text costs: the size of the input as objects."""
    raw = args if isinstance(args, str) else json.dumps(args)
    tracemalloc.start()
    try:
        json.loads(raw)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize(
    "build",
    [
        lambda n: '{"todos":[' + ",".join(["0"] * n) + "]}",
        lambda n: json.dumps(
            {"todos": [{"content": f"t{i}", "status": f"s{i}"} for i in range(n)]}
        ),
        lambda n: {"todos": [{"content": f"t{i}", "status": "done", "id": i} for i in range(n)]},
        lambda n: {"todos": [{"content": "same", "status": "pending"}] * n},
    ],
    ids=["zeros as JSON", "distinct bad statuses as JSON", "unknown key per item", "duplicates"],
)
def test_refusing_costs_memory_linear_in_the_input_not_per_error(build: Any) -> None:
    """Counted, not timed: the traced peak stays within the input's own size as objects plus
    a few pointers per item; materialising one error per item (pydantic's error list) costs
    about 1,000 bytes each."""
    validate_call({"todos": []}, allow_parallel=False)  # build the validator outside the count
    peaks = {}
    for items in (20_000, 80_000):
        args = build(items)
        peaks[items] = _peak_bytes(args)
        assert peaks[items] <= 2 * _decoding_peak(args) + 48 * items + 200_000
    assert peaks[80_000] <= 4.5 * peaks[20_000] + 200_000


def test_a_refusal_no_clause_explains_names_pydantics_first_place() -> None:
    """Defensive: should pydantic ever refuse what the walk finds sound, the text still says
    where, without reading a long error list."""
    with pytest.raises(ValidationError) as caught:
        args_adapter().validator.validate_python({"todos": [{"content": "a", "status": 1}]})
    text = rejections.refusal(
        {"todos": [{"content": "a", "status": "pending"}]}, allow_parallel=False, error=caught.value
    )
    assert text == "Error: invalid todos: unexpected value at `todos[0].status`"
