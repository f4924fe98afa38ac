"""The scripted agent session that ``dsh-todo demo`` plays through the reference host."""

from __future__ import annotations

import textwrap
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import closing, contextmanager, suppress
from pathlib import Path
from typing import Any, TextIO

from ..core.contract import EVENT_TYPE, TURN_START
from ..core.options import PLUGIN_NAME
from ..errors import UsageError
from ..host import Host
from ..host.loader import discover_plugins
from ..plans.checklist import render_checklist
from ..stores import open_session
from ._output import shown_path

__all__: list[str] = []

Todo = dict[str, str]


def _todos(*items: tuple[str, str]) -> dict[str, list[Todo]]:
    return {"todos": [{"content": content, "status": status} for content, status in items]}


READ, FLAG, TESTS, DOCS = (
    "Read the report command",
    "Add the --json flag",
    "Write tests for --json",
    "Document --json in the README",
)
FIND, PASS, CHECK, NOTE = (
    "Find where CI runs report",
    "Pass --json there",
    "Run CI and check its output",
    "Note --json in the CHANGELOG",
)

# Each turn: what the user asked, then the model's todo_write calls in order. The last turn is
# still at work when the script ends: what a viewer shows after the demo is a plan in progress.
SCRIPT: list[tuple[str, list[Any]]] = [
    (
        "Add a --json flag to the report command.",
        [
            _todos((READ, "in_progress"), (FLAG, "pending"), (TESTS, "pending"), (DOCS, "pending")),
            # Two tasks active at once: refused unless the deployment allows parallel work.
            _todos(
                (READ, "completed"),
                (FLAG, "in_progress"),
                (TESTS, "in_progress"),
                (DOCS, "pending"),
            ),
            _todos(
                (READ, "completed"), (FLAG, "in_progress"), (TESTS, "pending"), (DOCS, "pending")
            ),
            # A status borrowed from another tool: refused, and the error says what to send.
            '{"todos": [{"content": "Read the report command", "status": "done"}]}',
            _todos(
                (READ, "completed"), (FLAG, "completed"), (TESTS, "in_progress"), (DOCS, "pending")
            ),
            _todos(
                (READ, "completed"),
                (FLAG, "completed"),
                (TESTS, "completed"),
                (DOCS, "in_progress"),
            ),
            _todos(
                (READ, "completed"), (FLAG, "completed"), (TESTS, "completed"), (DOCS, "completed")
            ),
        ],
    ),
    (
        "Make CI call report with --json too.",
        [
            _todos((FIND, "in_progress"), (PASS, "pending"), (CHECK, "pending"), (NOTE, "pending")),
            _todos(
                (FIND, "completed"), (PASS, "in_progress"), (CHECK, "pending"), (NOTE, "pending")
            ),
            _todos(
                (FIND, "completed"), (PASS, "completed"), (CHECK, "in_progress"), (NOTE, "pending")
            ),
        ],
    ),
]


def run_demo(
    log: Path,
    out: TextIO,
    *,
    parallel: bool = False,
    draw: Callable[[list[Todo]], str] = render_checklist,
    go_on: Callable[[], bool] = lambda: True,
) -> bool:
    """Play :data:`SCRIPT` for one agent whose session is the JSONL log at ``log``.

    ``go_on`` is called before each step (a turn's start, a call): it sets the pace, and
    returning ``False`` stops the session there. Whether the whole script was played."""
    host = Host(discover_plugins(), {PLUGIN_NAME: {"allowParallelInProgress": parallel}})
    with closing(open_session(log)) as session:
        agent = host.new_agent(session)
        session.subscribe(lambda event: _redraw(event, out, draw))
        for number, (prompt, calls) in enumerate(SCRIPT, start=1):
            if not go_on():
                return False
            print(f"\n=== turn {number} — user: {prompt}", file=out, flush=True)
            session.append(TURN_START, {"prompt": prompt})
            for args in calls:
                if not go_on():
                    return False
                print(f"\nmodel → todo_write {_summary(args)}", file=out)
                print(f"tool  → {host.call_tool('todo_write', args, agent=agent)}", file=out)
                out.flush()
            if number < len(SCRIPT):
                session.append("turn/end", {})
    print(
        f"\n(the agent is still at work on turn {len(SCRIPT)}: its plan stays in progress)",
        file=out,
    )
    print(f"session log: {shown_path(log, out)}", file=out, flush=True)
    return True


def paced(seconds: float, stop: threading.Event | None = None) -> Callable[[], bool]:
    """A ``go_on`` for :func:`run_demo` that waits ``seconds`` before each step, and stops the
    session once ``stop`` is set."""
    if stop is not None:
        return lambda: not stop.wait(seconds)

    def sleep() -> bool:
        time.sleep(seconds)
        return True

    return sleep


def _redraw(event: Mapping[str, Any], out: TextIO, draw: Callable[[list[Todo]], str]) -> None:
    if event["type"] == EVENT_TYPE:  # as a UI does: from the session event, not the result
        print(textwrap.indent(draw(event["data"]["todos"]), "    "), file=out)


def _summary(args: Any) -> str:
    """The raw text where the model sent one, else the size of the list it sent."""
    if isinstance(args, str):
        return args
    statuses = [item["status"] for item in args["todos"]]
    counted = ", ".join(f"{statuses.count(s)} {s}" for s in dict.fromkeys(statuses))
    return f"with {len(statuses)} todos ({counted})"


def demo_home() -> Path:
    """The default place (:func:`~dsh_tool_todo.stores._home.default_home`) as the directory a
    demo writes its log in; a database there is refused, since the demo writes a file."""
    from ..stores import open_owners
    from ..stores._home import HOME_VARIABLE, default_home, is_database
    from ._sources import check_home

    place = default_home()
    if not is_database(place):
        check_home(place, otherwise=_OTHER_LOG)
        with open_owners(place, max_owners=1) as owners:  # the picker tells a database
            directory = owners.directory
    if is_database(place) or directory is None:
        raise UsageError(
            f"{HOME_VARIABLE} names a database, and the demo writes a JSONL log file: {_OTHER_LOG}"
        )
    return directory


_OTHER_LOG = "pass --log PATH (a new file)"


def make_home(directory: Path) -> None:
    """Make the default place ``directory`` if missing; one that cannot be made is said as the
    default place it is (a bare "Not a directory" named no place)."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        from ..stores._home import HOME_VARIABLE
        from ._sources import home_named

        raise UsageError(
            f"the default place {directory} ({home_named()}) cannot be made: "
            f"{error.strerror or error}; point {HOME_VARIABLE} at a directory, or {_OTHER_LOG}"
        ) from None


@contextmanager
def removed_if_empty(log: Path) -> Iterator[None]:
    """Run the demo into ``log``, a new file; a demo that ends having written nothing (refused,
    failed or stopped before its first step) leaves no empty log behind for a pick to find."""
    try:
        yield
    finally:
        with suppress(OSError):
            if log.stat().st_size == 0:
                log.unlink()


def fresh_log(directory: Path) -> Path:
    """A new, empty log in the default place ``directory`` (made if missing) that no earlier
    demo wrote: ``demo.jsonl``, else ``demo-2.jsonl``, ``demo-3.jsonl``..."""
    make_home(directory)
    number = 1
    while True:
        log = directory / ("demo.jsonl" if number == 1 else f"demo-{number}.jsonl")
        try:
            log.open("x").close()  # made here, so two demos started at once never share one
        except FileExistsError:
            number += 1
        else:
            return log


def next_hint(log: Path) -> str:
    """The commands that show ``log``, as this shell runs them: this ``dsh-todo`` by absolute
    path unless PATH finds it, and ``serve`` only when the web extra is installed (with no
    SOURCE when the log is in the default place, which ``serve`` then reads)."""
    import importlib.util
    import os
    import shlex
    import shutil

    from ..stores._home import default_home
    from ._mcp import own_command

    command = own_command()
    found = shutil.which("dsh-todo")
    if found is not None and [os.path.realpath(found)] == [*map(os.path.realpath, command)]:
        command = ["dsh-todo"]
    me = shlex.join(command)
    hint = f"next: {me} show {shlex.quote(str(log))}"
    if all(importlib.util.find_spec(name) for name in ("starlette", "uvicorn", "sse_starlette")):
        home = os.path.realpath(default_home())
        source = "" if os.path.realpath(log.parent) == home else f" {shlex.quote(str(log.parent))}"
        hint += f"    (or: {me} serve{source})"
    return hint
