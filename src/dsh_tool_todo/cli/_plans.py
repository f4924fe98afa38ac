"""``dsh-todo show`` and ``watch``: one session's plan, once or as it changes, with the
plan-health signals of its current turn under it. The log is opened through the picker."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Coroutine, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from ..core.schema import canonical_json
from ..plans.checklist import escape_content
from ..stores import current_plan, follow_plans, open_log
from ._output import clear_screen, drawer, print_utf8, text_out

if TYPE_CHECKING:
    from ..core.health import Signal

__all__: list[str] = []

REDRAW_SEPARATOR = "----"


def show(args: argparse.Namespace, out: TextIO) -> int:
    plan = current_plan(args.log, args.session)
    if args.format == "json":
        print_utf8(out, canonical_json(plan))
    elif args.format == "acp":
        from ..plans.acp import plan_update

        print_utf8(out, canonical_json(plan_update(plan or [])))
    else:
        text = text_out(out, args.ascii)
        print(drawer(text, args.ascii)(plan or []), file=text)
        if args.health:
            _print_signals(text, turn_signals(args.log, args.session))
    return 0


def watch(args: argparse.Namespace, out: TextIO) -> int:
    wait = _say_waiting if args.wait else None
    try:
        title, plans = follow_plans(args.log, args.session, wait=wait, interval=args.interval)
    except FileNotFoundError as error:
        raise FileNotFoundError(
            f"{error} (to wait for it to appear: dsh-todo watch --wait)"
        ) from None
    text = text_out(out, args.ascii)
    draw = drawer(text, args.ascii)
    clear = clear_screen(out)
    header = escape_content(title, encoding=text.encoding)
    lead = clear
    for plan in plans:
        print(f"{lead}{header}\n{draw(plan or [])}", file=text, flush=not args.health)
        if args.health:
            _print_signals(text, turn_signals(args.log, args.session))
            text.flush()
        lead = clear or f"{REDRAW_SEPARATOR}\n"  # piped or TERM=dumb: redraws one after another
    return 0


def turn_signals(target: str, session: str | None = None) -> list[Signal]:
    """The plan-health signals of the current turn of a JSONL log, or of ``session`` in the
    database a URL names (:mod:`dsh_tool_todo.core.health`): what ``show`` and ``watch``
    print under the plan. Reads back from the end to the turn's start, at most
    ``fleet.MAX_TURN_WRITES`` writes."""
    import asyncio

    from ..core.health import turn_health
    from ..plans.fleet import turn_events

    async def read() -> list[Any]:
        reader, name = open_log(target, session)
        try:
            return await turn_events(reader, name)
        finally:
            await reader.aclose()

    if session is None:  # a log file (a database needs --session): its reads never wait
        return turn_health(_run_without_a_loop(read()))
    return turn_health(asyncio.run(read()))


def _run_without_a_loop(reading: Coroutine[Any, Any, list[Any]]) -> list[Any]:
    """A coroutine that never waits, run to its end in place: no event loop is made per
    redraw, so a Ctrl-C can never leave one half closed for the collector to report."""
    try:
        reading.send(None)
    except StopIteration as done:
        events: list[Any] = done.value
        return events
    reading.close()
    raise RuntimeError("a log file's read waited: it needs an event loop")


def _print_signals(text: TextIO, signals: Sequence[Signal]) -> None:
    """The plan-health signals of the turn under the plan, one line each, escaped."""
    from ..core.health import describe

    for signal in signals:
        print("! " + escape_content(describe(signal), encoding=text.encoding), file=text)


def _say_waiting(what: str) -> None:
    print(f"dsh-todo: waiting for {what} to appear (Ctrl-C to stop)", file=sys.stderr, flush=True)
