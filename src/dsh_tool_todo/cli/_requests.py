"""``dsh-todo ask``: a person's request against a session's plan, filed beside its log for the
agent to take (docs/requests.md); ``--list`` shows what waits and how each taken one stands."""

from __future__ import annotations

import argparse
import getpass
from typing import TextIO

from ..core.requests import Request
from ..core.schema import canonical_json
from ..errors import TodoError
from ..plans.checklist import escape_content
from ..stores.requests import PlanRequests
from ._output import print_utf8, text_out
from ._plans import _pick, say_picked

__all__: list[str] = []

KINDS = ("done", "reopen", "remove", "add", "note")
ASKED = {
    "done": 'mark "{}" completed',
    "reopen": 'reopen "{}"',
    "remove": 'remove "{}"',
    "add": 'add "{}"',
    "note": "note: {}",
}


def ask(args: argparse.Namespace, out: TextIO) -> int:
    target, session, latest = _pick(args)
    if latest:  # a request goes to one agent: say which, as show does
        say_picked("asking", target, session)
    requests = PlanRequests(target, session)
    by = args.by if args.by is not None else _login()
    if args.list:
        found = requests.read()
        if args.json:
            print_utf8(out, canonical_json(found.as_json()))
            return 0
        text = text_out(out, False)
        lines = [_line(r, "waiting") for r in found.waiting]
        lines += [_line(s.request, s.status) for s in found.taken]
        for line in lines or ["No requests."]:
            print(escape_content(line, encoding=text.encoding), file=text)
        return 0
    if args.withdraw is not None:
        requests.withdraw(args.withdraw, by=by)
        print(f"withdrawn: {args.withdraw}", file=out)
        return 0
    kind = next(k for k in KINDS if getattr(args, k) is not None)
    request = requests.file(kind, getattr(args, kind), by=by)
    if args.json:
        print_utf8(out, canonical_json(request.as_json()))
        return 0
    text = text_out(out, False)
    said = escape_content(_line(request, "waiting"), encoding=text.encoding)
    # an item of this plan: a new turn clears the plan, and the request lapses with it
    when = " of this turn" if kind in ("done", "reopen", "remove") else ""
    print(f"{said}; the agent is told at its next model call{when}", file=text)
    return 0


def _line(request: Request, status: str) -> str:
    return f"{request.id}  {status:<12} {_said(request)}  ({request.by})"


def _login() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container): say where it came from
        return "dsh-todo ask"


def print_waiting(text: TextIO, target: str, session: str | None) -> None:
    """The requests still waiting in the session's inbox, under the plan (``show``)."""
    try:
        found = PlanRequests(target, session).read()
    except TodoError:  # the plan was shown; a store that keeps no requests yet has none to add
        return
    for request in found.waiting:
        print(escape_content(asked_line(request, "waiting"), encoding=text.encoding), file=text)


def asked_line(request: Request, status: str) -> str:
    """One request under the plan, as ``show`` and ``watch`` print it (not escaped)."""
    return f"? {_said(request)} (asked by {request.by}): {status}"


def _said(request: Request) -> str:
    return ASKED[request.kind].format(request.content)
