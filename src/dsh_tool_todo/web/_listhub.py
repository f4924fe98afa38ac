"""One waiter on a reader's list changes per app, ringing every open session list.

An open list page holds a stream (``/api/sessions/stream``) that says only
*that* its rows changed; the page then asks for the list again. So the list's
data has one path (``/api/sessions``), and the cost of an idle page is one
open connection: the hub's single task waits on the reader's
:meth:`~dsh_tool_todo.protocols.LogReader.changes` and runs only while a list
is open. A reader without ``changes`` is asked for nothing: every list is rung
every ``fallback`` seconds instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

__all__ = ["ListHub", "OpenList"]

_log = logging.getLogger("dsh_tool_todo")
RETRY = 2.0  # seconds before a reader whose changes failed is asked again


class OpenList:
    """One open list: the names it shows contain ``needle``; ``rung`` is set on a change."""

    def __init__(self, query: str) -> None:
        self.needle = query.casefold()
        self.rung = asyncio.Event()

    def tell(self, names: frozenset[str] | None) -> None:
        if names is None or not self.needle or any(self.needle in n.casefold() for n in names):
            self.rung.set()


class ListHub:
    def __init__(self, reader: Any, *, fallback: float = 2.0) -> None:
        self._reader = reader
        self._fallback = fallback
        self._lists: set[OpenList] = set()
        self._task: asyncio.Task[None] | None = None

    @contextlib.asynccontextmanager
    async def open(self, query: str) -> AsyncIterator[OpenList]:
        handle = OpenList(query)
        self._lists.add(handle)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())
        try:
            yield handle
        finally:
            self._lists.discard(handle)
            if not self._lists and self._task is not None:
                # Not awaited: this runs as a client's stream is torn down, maybe cancelled
                # itself; the task closes the reader's iterator on its way out.
                self._task.cancel()
                self._task = None

    async def aclose(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def ring(self, names: frozenset[str] | None) -> None:
        """Ring the open lists that show any of ``names`` (every list for ``None``)."""
        self._ring(names)

    def _ring(self, names: frozenset[str] | None) -> None:
        for handle in list(self._lists):
            handle.tell(names)

    async def _run(self) -> None:
        changes: Callable[[], AsyncIterator[frozenset[str]]] | None = getattr(
            self._reader, "changes", None
        )
        while True:
            if changes is None:
                await asyncio.sleep(self._fallback)
                self._ring(None)
                continue
            iterator = changes()
            try:
                async for names in iterator:
                    self._ring(names)
            except asyncio.CancelledError:
                raise
            except Exception as error:  # a store that went away: the lists ask and are told
                _log.warning("session list changes: %s; asking again in %.0f s", error, RETRY)
                self._ring(None)
                await asyncio.sleep(RETRY)
            finally:
                aclose = getattr(iterator, "aclose", None)
                if aclose is not None:
                    with contextlib.suppress(Exception):
                        await aclose()
