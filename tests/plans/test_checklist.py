from __future__ import annotations

import io

import pytest

from dsh_tool_todo.errors import UsageError
from dsh_tool_todo.plans.checklist import (
    NO_PLAN,
    escape_content,
    glyphs_encodable,
    plan_items,
    render_checklist,
    stream_style,
)
from tests._builders import PLAN, todo

GLYPHS = ("☑", "►", "☐")
ASCII = ("[x]", "[>]", "[ ]")
GREEN, YELLOW, RESET = "\x1b[32m", "\x1b[1;33m", "\x1b[0m"


@pytest.mark.parametrize("color", [False, True], ids=["plain", "colour"])
@pytest.mark.parametrize(
    ("ascii", "marks"), [(False, GLYPHS), (True, ASCII)], ids=["glyphs", "ascii"]
)
def test_each_status_has_its_mark_and_colour(
    ascii: bool, marks: tuple[str, ...], color: bool
) -> None:
    done, active, waiting = marks
    lines = [
        f"{done} Read the report command",
        f"{active} Add the --json flag",
        f"{waiting} Write tests",
    ]
    if color:
        lines[0] = GREEN + lines[0] + RESET
        lines[1] = YELLOW + lines[1] + RESET
    summary = "1/3 completed, 1 in progress"
    assert render_checklist(PLAN, ascii=ascii, color=color) == "\n".join([*lines, summary])


@pytest.mark.parametrize("encoding", ["ascii", "latin-1", "cp1252", "cp437", "no-such-codec"])
def test_ascii_when_the_encoding_lacks_the_glyphs(encoding: str) -> None:
    assert render_checklist(PLAN, encoding=encoding) == render_checklist(PLAN, ascii=True)


@pytest.mark.parametrize("encoding", [None, "utf-8", "UTF8", "utf-16", "gb18030"])
def test_glyphs_when_the_encoding_has_them(encoding: str | None) -> None:
    assert render_checklist(PLAN, encoding=encoding) == render_checklist(PLAN, ascii=False)


def test_an_explicit_choice_beats_the_encoding() -> None:
    assert render_checklist(PLAN, ascii=False, encoding="ascii").startswith("☑ ")
    assert render_checklist(PLAN, ascii=True, encoding="utf-8").startswith("[x] ")


def test_no_colour_by_default() -> None:
    assert "\x1b" not in render_checklist(PLAN)


@pytest.mark.parametrize("todos", [[], None])
def test_no_plan(todos: list[dict[str, str]] | None) -> None:
    assert render_checklist(todos) == NO_PLAN == "No plan."
    assert render_checklist(todos, ascii=True, color=True) == "No plan."


def test_summary_counts() -> None:
    done = [todo(f"Step {n}", "completed") for n in range(3)]
    assert render_checklist(done).splitlines()[-1] == "3/3 completed, 0 in progress"
    parallel = [
        todo("Lint", "in_progress"),
        todo("Test", "in_progress"),
    ]
    assert render_checklist(parallel).splitlines()[-1] == "0/2 completed, 2 in progress"


HOSTILE = [
    # retitle the window (OSC 0, BEL-terminated), then clear the screen (CSI 2J)
    ("\x1b]0;pwned\x07Fix it\x1b[2J", "\\x1b]0;pwned\\x07Fix it\\x1b[2J"),
    # OSC 8 hyperlink with ST terminator
    (
        "\x1b]8;;http://evil\x1b\\click\x1b]8;;\x1b\\",
        "\\x1b]8;;http://evil\\x1b\\click\\x1b]8;;\\x1b\\",
    ),
    # carriage return to overwrite the line, newline to forge another
    ("done\rFAKE", "done\\rFAKE"),
    ("one\ntwo\tthree", "one\\ntwo\\tthree"),
    # 8-bit CSI and OSC (C1), DEL, NUL, backspace
    ("\x9b2J\x9d0;t\x9c", "\\u009b2J\\u009d0;t\\u009c"),
    ("a\x7fb\x00c\x08", "a\\x7fb\\x00c\\x08"),
    # bidi overrides and isolates reorder what the user reads
    ("\u202eevil\u202c \u2066x\u2069", "\\u202eevil\\u202c \\u2066x\\u2069"),
    ("\u202a\u202b\u202d\u2067\u2068", "\\u202a\\u202b\\u202d\\u2067\\u2068"),
    # invisible format characters: BOM, tag characters, line separator
    ("a\ufeffb\U000e0041\u2028", "a\\ufeffb\\U000e0041\\u2028"),
    # a lone surrogate, which a JSON decoder lets through
    ("x\ud800", "x\\ud800"),
]


@pytest.mark.parametrize(("raw", "shown"), HOSTILE)
def test_escapes(raw: str, shown: str) -> None:
    assert escape_content(raw) == shown
    line = render_checklist([todo(raw, "pending")], color=True).splitlines()[0]
    assert line == f"☐ {shown}"


def test_rendered_output_is_inert() -> None:
    text = render_checklist([todo(raw, "in_progress") for raw, _ in HOSTILE])
    assert text.count("\n") == len(HOSTILE)  # one line per item, then the summary
    for line in text.split("\n"):
        assert line.isprintable(), line
    coloured = render_checklist([todo(raw, "completed") for raw, _ in HOSTILE], color=True)
    # the only escape sequences are the renderer's own colour codes
    stripped = coloured.replace("\x1b[32m", "").replace("\x1b[0m", "")
    assert "\x1b" not in stripped


@pytest.mark.parametrize(
    "text",
    [
        "Plain ASCII, with punctuation: [x] {y} \\ ~",
        "C:\\Users\\me\\notes.txt",
        "Ünïcödé, 日本語のテキスト, עברית, العربية",
        "emoji 🎉 and a family 👨\u200d👩\u200d👧",
        "Persian spelling: می\u200cخواهم",
        "no-break\u00a0space and ideographic\u3000space",
        "combining: e\u0301",
    ],
)
def test_ordinary_text_is_untouched(text: str) -> None:
    assert escape_content(text) == text


def test_content_the_encoding_cannot_carry_is_escaped() -> None:
    todos = [todo("Café 日本", "pending")]
    assert render_checklist(todos, encoding="latin-1") == (
        "[ ] Café \\u65e5\\u672c\n0/1 completed, 0 in progress"
    )
    assert render_checklist(todos, encoding="ascii") == (
        "[ ] Caf\\u00e9 \\u65e5\\u672c\n0/1 completed, 0 in progress"
    )
    assert escape_content("Café\x1b", encoding="no-such-codec") == "Caf\\u00e9\\x1b"


def test_glyphs_encodable() -> None:
    assert glyphs_encodable(None)
    assert glyphs_encodable("utf-8")
    assert not glyphs_encodable("ascii")
    assert not glyphs_encodable("rot13")  # not a text encoding


class _Stream(io.StringIO):
    def __init__(self, *, tty: bool, encoding: str | None) -> None:
        super().__init__()
        self._tty = tty
        self._encoding = encoding

    def isatty(self) -> bool:
        return self._tty

    @property
    def encoding(self) -> str | None:  # type: ignore[override]
        return self._encoding


def test_stream_style_terminal() -> None:
    stream = _Stream(tty=True, encoding="utf-8")
    assert stream_style(stream, environ={"TERM": "xterm-256color"}) == {
        "ascii": False,
        "color": True,
    }


def test_stream_style_pipe_and_legacy_encoding() -> None:
    assert stream_style(_Stream(tty=False, encoding="utf-8"), environ={}) == {
        "ascii": False,
        "color": False,
    }
    assert stream_style(_Stream(tty=True, encoding="cp437"), environ={}) == {
        "ascii": True,
        "color": True,
    }


@pytest.mark.parametrize("environ", [{"NO_COLOR": "1"}, {"TERM": "dumb"}])
def test_stream_style_respects_no_color_and_dumb_terminals(environ: dict[str, str]) -> None:
    assert stream_style(_Stream(tty=True, encoding="utf-8"), environ=environ)["color"] is False


def test_stream_style_empty_no_color_is_unset() -> None:
    assert stream_style(_Stream(tty=True, encoding="utf-8"), environ={"NO_COLOR": ""})["color"]


def test_stream_style_plain_string_io() -> None:
    stream = io.StringIO()
    style = stream_style(stream, environ={})
    assert style == {"ascii": False, "color": False}
    print(render_checklist(PLAN, **style), file=stream)
    assert stream.getvalue().startswith("☑ Read the report command\n")


def test_stream_style_feeds_render_checklist() -> None:
    style = stream_style(_Stream(tty=True, encoding="ascii"), environ={})
    assert (
        render_checklist(PLAN, **style).splitlines()[0]
        == "\x1b[32m[x] Read the report command\x1b[0m"
    )


def test_plan_items() -> None:
    assert plan_items(PLAN) == [
        ("Read the report command", "completed"),
        ("Add the --json flag", "in_progress"),
        ("Write tests", "pending"),
    ]
    assert plan_items(None) == []
    assert plan_items(()) == []


@pytest.mark.parametrize(
    ("todos", "message"),
    [
        ("not a list", r"todos must be a list of \{content, status\}, not str"),
        ({"todos": []}, r"todos must be a list of \{content, status\}, not dict"),
        ([["Plan", "pending"]], r"todo at index 0 must be a mapping \{content, status\}"),
        ([{"status": "pending"}], r"todo at index 0: content must be a string, got None"),
        (
            [todo(3, "pending")],
            r"todo at index 0: content must be a string, got 3",
        ),
        (
            [todo("a", "pending"), todo("b", "done")],
            r"todo at index 1: status must be one of pending, in_progress, completed, got 'done'",
        ),
        ([{"content": "a"}], r"todo at index 0: status must be one of .*, got None"),
    ],
)
def test_malformed_plans_are_refused(todos: object, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        render_checklist(todos)  # type: ignore[arg-type]
