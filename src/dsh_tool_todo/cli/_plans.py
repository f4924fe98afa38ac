"""``dsh-todo show`` and ``watch``: one session's plan, once or as it changes, with the
plan-health signals of its current turn and what a person asked in it under it. The log is
picked and opened through the picker: a file, the log of ``--session`` in a directory or a
database, or the most recently written one there (then said: on stderr by ``show``, in
``watch``'s title)."""

from __future__ import annotations

import argparse
import contextlib
import shlex
import sys
from collections.abc import Coroutine, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from ..core.schema import canonical_json
from ..errors import TodoError
from ..plans.checklist import escape_content
from ..stores import current_plan, follow_plans, open_log, pick_log
from ._output import clear_screen, drawer, print_utf8, shown_path, text_out
from ._sources import source_or_home

if TYPE_CHECKING:
    from ..core.health import Signal

__all__: list[str] = []

REDRAW_SEPARATOR = "----"


def show(args: argparse.Namespace, out: TextIO) -> int:
    target, session, latest = _pick(args)
    if latest:
        say_picked("showing", target, session)
    plan = current_plan(target, session)
    if args.format == "json":
        print_utf8(out, canonical_json(plan))
    elif args.format == "acp":
        from ..plans.acp import plan_update

        print_utf8(out, canonical_json(plan_update(plan or [])))
    else:
        text = text_out(out, args.ascii)
        print(drawer(text, args.ascii)(plan or []), file=text)
        signals, asked = turn_state(target, session)
        if args.health:
            _print_signals(text, signals)
        from ._requests import print_waiting

        print_waiting(text, target, session)  # still in the inbox: watch follows the log alone
        _print_asked(text, asked)
    return 0


def watch(args: argparse.Namespace, out: TextIO) -> int:
    wait = _say_waiting if args.wait else None
    target, session, latest = _pick(args)
    try:
        # a request taken, withdrawn or told, or a turn's end, redraws the plan too: how what
        # was asked stands is drawn under it (requests still in the inbox are not: filing
        # one writes no log, and following the inbox too would take a second follower)
        title, plans = follow_plans(target, session, wait=wait, interval=args.interval)
    except FileNotFoundError as error:
        again = ["dsh-todo", "watch", *([] if args.log is None else [args.log])]
        again += [*([] if args.session is None else ["--session", args.session]), "--wait"]
        raise FileNotFoundError(
            f"{error} (to wait for it to appear: {shlex.join(again)})"
        ) from None
    text = text_out(out, args.ascii)
    draw = drawer(text, args.ascii)
    clear = clear_screen(out)
    title += " (the most recently written)" if latest else ""
    header = escape_content(title, encoding=text.encoding)
    lead = clear
    signals: list[Signal] = []
    asked: list[Any] = []
    for plan in plans:
        print(f"{lead}{header}\n{draw(plan or [])}", file=text, flush=False)
        # rotated away between the plan's read and this one: what was read last stands, as
        # the plan does, until the log is back
        with contextlib.suppress(OSError, TodoError):
            signals, asked = turn_state(target, session)
        if args.health:
            _print_signals(text, signals)
        _print_asked(text, asked)
        text.flush()
        lead = clear or f"{REDRAW_SEPARATOR}\n"  # piped or TERM=dumb: redraws one after another
    return 0


def say_picked(doing: str, target: str, session: str | None) -> None:
    """Say on stderr which log was picked as the most recently written (``show``, ``ask``)."""
    what = target if session is None else f"session '{session}'"
    shown = escape_content(what, encoding=getattr(sys.stderr, "encoding", None))
    print(
        f"dsh-todo: {doing} {shown}, the most recently written (--session picks another)",
        file=sys.stderr,
    )


def _pick(args: argparse.Namespace) -> tuple[str, str | None, bool]:
    """The log ``show`` or ``watch`` reads, as ``(target, session)``, and whether it was picked
    as the most recently written of its source (no ``--session`` given for a directory or a
    database); picked once, so the plan and its health lines are of the same log."""
    awaited = getattr(args, "wait", False) and args.session is not None
    source = source_or_home(args.log, awaited=awaited)
    target, session = pick_log(source, args.session)
    return target, session, args.session is None and (target, session) != (source, None)


def turn_signals(target: str, session: str | None = None) -> list[Signal]:
    """The plan-health signals of the current turn of a JSONL log, or of ``session`` in the
    database a URL names (:mod:`dsh_tool_todo.core.health`): what ``show`` and ``watch``
    print under the plan."""
    return turn_state(target, session)[0]


def turn_state(target: str, session: str | None = None) -> tuple[list[Signal], list[Any]]:
    """:func:`turn_signals`, and what was asked in the current turn
    (``fleet.turn_asked``), from one read back from the end: to the turn's start and the one
    before it, at most ``fleet.MAX_TURN_WRITES`` events (``turn_window(..., asked=True)``,
    the read ``dsh-todo sessions`` makes of each log)."""
    import asyncio

    from ..core.health import turn_health
    from ..plans.fleet import turn_asked, turn_window

    async def read() -> tuple[list[Any], bool]:
        reader, name = open_log(target, session)
        try:
            return await turn_window(reader, name, asked=True)
        finally:
            await reader.aclose()

    if session is None:  # a log file (a database needs --session): its reads never wait
        events, whole = _run_without_a_loop(read())
    else:
        events, whole = asyncio.run(read())
    return turn_health(events, partial=not whole), turn_asked(events)


def _run_without_a_loop(
    reading: Coroutine[Any, Any, tuple[list[Any], bool]],
) -> tuple[list[Any], bool]:
    """A coroutine that never waits, run to its end in place: no event loop is made per
    redraw, so a Ctrl-C can never leave one half closed for the collector to report."""
    try:
        reading.send(None)
    except StopIteration as done:
        window: tuple[list[Any], bool] = done.value
        return window
    reading.close()
    raise RuntimeError("a log file's read waited: it needs an event loop")


def _print_signals(text: TextIO, signals: Sequence[Signal]) -> None:
    """The plan-health signals of the turn under the plan, one line each, escaped."""
    from ..core.health import describe

    for signal in signals:
        print("! " + escape_content(describe(signal), encoding=text.encoding), file=text)


def _print_asked(text: TextIO, asked: Sequence[Mapping[str, Any]]) -> None:
    """What was asked in the turn, under the plan, as ``show`` prints it: one line each."""
    from ..core.requests import Request
    from ._requests import asked_line

    for state in asked:
        request = Request.from_json(state)
        if request is not None:
            line = asked_line(request, str(state["status"]))
            print(escape_content(line, encoding=text.encoding), file=text)


def _say_waiting(what: str) -> None:
    shown = shown_path(what)
    print(f"dsh-todo: waiting for {shown} to appear (Ctrl-C to stop)", file=sys.stderr, flush=True)
