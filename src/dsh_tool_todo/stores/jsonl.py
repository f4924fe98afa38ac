"""A session log on disk: one JSON event ``{seq, type, data}`` per line, each appended whole.

:class:`JsonlSession` takes :class:`~dsh_tool_todo.host.MemorySession`'s place
in a host; :mod:`.logread` reads the file back, even after a crash. One
session at a time may write a given file.

>>> import dsh_tool_todo, tempfile, pathlib
>>> from dsh_tool_todo.host import Host
>>> path = pathlib.Path(tempfile.mkdtemp()) / "agent.jsonl"
>>> host = Host([dsh_tool_todo], {"dsh-tool-todo": {"allowParallelInProgress": False}})
>>> with JsonlSession(path) as session:
...     agent = host.new_agent(session=session)
...     host.call_tool("todo_write", {"todos": [{"content": "Plan", "status": "pending"}]},
...                    agent=agent)
'Updated todo list: 1 pending, 0 in progress, 0 completed.'
>>> current_plan(path)
[{'content': 'Plan', 'status': 'pending'}]
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any

from pydantic_core import PydanticSerializationError, to_json

from ..errors import UsageError
from ..listeners import Listener, Listeners
from ..logread import (
    Event,
    TornTailWarning,
    current_plan,
    invalid_line,
    line_number,
    parse_event,
    read_events,
    split_tail,
    warn_torn,
)

__all__ = ["JsonlSession", "TornTailWarning", "current_plan", "read_events"]

# pydantic's encoder writes UTF-8 about four times faster than the standard
# library's; only text it cannot encode (lone surrogates a model wrote) takes
# the ASCII-escaping path, so a write never fails on model-written content.
_ESCAPING_ENCODER = json.JSONEncoder(ensure_ascii=True, separators=(",", ":"))
_OPEN_FLAGS = os.O_RDWR | os.O_CREAT | os.O_APPEND | getattr(os, "O_BINARY", 0)


class JsonlSession:
    """An append-only session log in a JSON Lines file; safe to append from several threads.

    With ``fsync=True`` each :meth:`append` returns only once its event is on
    disk; by default an event is handed to the OS and survives the process
    dying, but not the machine losing power.
    """

    def __init__(self, path: str | os.PathLike[str], *, fsync: bool = False) -> None:
        self.path = os.fspath(path)
        self.fsync = fsync
        self._listeners = Listeners()
        self._lock = threading.Lock()
        self._fd = os.open(self.path, _OPEN_FLAGS, 0o666)
        try:
            self._seq, self._end = self._recover()
        except BaseException:
            os.close(self._fd)
            raise

    @property
    def closed(self) -> bool:
        return self._fd < 0

    def append(self, type: str, data: Mapping[str, Any], /) -> Event:
        with self._lock:  # one line at a time, and listeners see events in log order
            if self._fd < 0:
                raise UsageError(f"{self.path}: the session log is closed")
            event: Event = {"seq": self._seq, "type": type, "data": data}
            self._write(_encode_line(event))
            self._seq += 1
            self._listeners.notify(event)
        return event

    def subscribe(self, listener: Listener, /) -> Callable[[], None]:
        return self._listeners.add(listener)

    def close(self) -> None:
        with self._lock:
            fd, self._fd = self._fd, -1
            if fd >= 0:
                os.close(fd)

    def __enter__(self) -> JsonlSession:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _write(self, line: bytes) -> None:
        try:
            written = os.write(self._fd, line)
            while written < len(line):  # a short write: a full disk, or a signal
                written += os.write(self._fd, line[written:])
            if self.fsync:
                os.fsync(self._fd)
        except BaseException:
            self._rollback()
            raise
        self._end += len(line)

    def _rollback(self) -> None:
        # A failed append must leave no partial line for the next one to be glued onto.
        try:
            os.ftruncate(self._fd, self._end)
        except OSError:
            fd, self._fd = self._fd, -1  # reopening will cut the torn bytes off
            os.close(fd)

    def _recover(self) -> tuple[int, int]:
        """The next seq and the size of the whole lines, after cutting off a torn tail."""
        with open(self._fd, "rb", closefd=False) as file:
            end, tail, lines = split_tail(file, self.path)
            last = next(lines, None)
            seq = 0
            if last is not None:
                event = parse_event(last[1])
                if event is None:
                    raise invalid_line(self.path, line_number(file, last[0]))
                seq = event["seq"] + 1
        if tail:
            os.ftruncate(self._fd, end)
            if self.fsync:
                os.fsync(self._fd)
            warn_torn(self.path, end, "cut off", stacklevel=4)
        elif end == 0 and self.fsync:
            _fsync_directory(self.path)  # a new file is durable only once its name is
        return seq, end


def _encode_line(event: Event) -> bytes:
    try:
        return to_json(event) + b"\n"
    except PydanticSerializationError:
        return (_ESCAPING_ENCODER.encode(event) + "\n").encode("ascii")


def _fsync_directory(path: str) -> None:
    if os.name != "posix":  # directories cannot be opened for fsync elsewhere
        return
    fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
