"""The notifier: one thread per process and conninfo that sends the NOTIFYs of committed appends.

Why the appends do not notify themselves: PostgreSQL serialises every
transaction that sends a notification on one cluster-wide lock, held from
when it queues its notifications until its commit is flushed to disk. With
the ``pg_notify`` inside the append, every append of every process on the
server waited for that lock in turn, one WAL flush at a time.

So an append commits its row alone (its WAL flush is shared with the other
commits of the moment, as any insert's is), and hands ``(session, seq)`` to
this process's notifier. The notifier sends, on a connection of its own, one
transaction with a ``pg_notify`` per session that has new events since its
last one (the newest seq of each), and commits it with ``synchronous_commit
off``: the transaction carries no data, so there is nothing to wait for disk
for, and the lock is held for microseconds instead of a flush. While it sends,
new appends pile up and go in the next transaction: under load one NOTIFY
transaction carries many appends.

A notification is a wake-up, never the record: a follower reads the rows from
the last seq it yielded. One that is never sent (the process was killed
between commit and notify, the notifier's connection broke) costs latency,
not events: the followers' hub polls the newest seq of the sessions it
follows (``follow.Hub``) and catches up.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

import psycopg

from . import _sql
from ._core import notice, reason, server_name

__all__ = ["GAP_SECONDS", "IDLE_SECONDS", "RETRY_SECONDS", "Notifier"]

_LOG = logging.getLogger("dsh_tool_todo")

IDLE_SECONDS = 10.0
"""A notifier with nothing to send for this long ends its thread and closes its connection."""
GAP_SECONDS = 0.025
"""The least time between two NOTIFY transactions of a notifier.

Alone, an append is announced at once; under load, what piles up in the gap
goes in one transaction, so a process sends at most 40 a second, whatever its
append rate. Each costs the server a transaction and every listener a pass
over the notification queue: at 500 a second a process (a 2 ms gap), four
busy writer processes took 10-15% off the server's insert rate, at 40 a second
nothing measurable (docs/postgres-reference.md). It adds at most this to a follower's
latency, and only while the process is busy.
"""
RETRY_SECONDS = 1.0
"""After a send failed (its notifications dropped: the followers' poll finds
those events), the notifier waits this long before it connects again."""


class Notifier:
    """Sends, coalesced and after commit, the NOTIFYs of the appends posted to it.

    ``post`` never blocks on I/O (a lock and a dict): it is called by sync
    sessions in their threads and by async sessions on their event loop alike.
    The thread starts at the first post and ends when idle; ``flush`` waits
    until everything posted so far has been sent (or given up on).
    """

    def __init__(
        self,
        conninfo: str,
        kwargs: Mapping[str, Any],
        *,
        idle: float = IDLE_SECONDS,
        gap: float = GAP_SECONDS,
    ) -> None:
        self.conninfo = conninfo
        self.where = server_name(conninfo)
        self.kwargs: dict[str, Any] = {"connect_timeout": 10, **kwargs, "autocommit": True}
        self.kwargs.pop("row_factory", None)
        self.idle = idle
        self.gap = gap
        self.sent = 0  # NOTIFY transactions committed (for tests and benchmarks)
        self._cond = threading.Condition()
        self._pending: dict[str, int] = {}  # session -> newest seq to announce
        self._busy = False
        self._thread: threading.Thread | None = None
        self._conn: psycopg.Connection[Any] | None = None
        self._failing = False
        self._stopping = False

    def post(self, session_id: str, seq: int) -> None:
        """Announce that ``seq`` of ``session_id`` is committed (sent soon, by the thread)."""
        with self._cond:
            if self._pending.get(session_id, -1) < seq:
                self._pending[session_id] = seq
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="dsh-todo-notifier", daemon=True
                )
                self._thread.start()
            else:
                self._cond.notify()

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait until everything posted so far is sent; whether that happened within ``timeout``."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._pending and not self._busy, timeout)

    def close(self, timeout: float = 5.0) -> None:
        """Send what is posted, then end the thread (a later post starts it again)."""
        self.flush(timeout)
        with self._cond:
            thread = self._thread
            self._stopping = True  # the thread ends as soon as it finds nothing to send
            self._cond.notify_all()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        with self._cond:
            self._stopping = False  # a session still holding it starts a thread again

    def _run(self) -> None:
        sent_at = 0.0
        try:
            while True:
                wait = sent_at + self.gap - time.monotonic()
                if wait > 0:
                    time.sleep(wait)  # what is posted meanwhile joins the next transaction
                with self._cond:
                    if not self._pending and not self._stopping:
                        self._cond.wait(self.idle)
                    if not self._pending:
                        self._thread = None
                        return
                    batch, self._pending = self._pending, {}
                    self._busy = True
                sent_at = time.monotonic()
                if not self._send(batch):
                    sent_at += RETRY_SECONDS  # a server that refused: not asked again at once
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()  # a flush() may be waiting
        except BaseException:  # never expected; the next post starts a fresh thread
            _LOG.exception("the notifier for %s stopped", self.where)
            with self._cond:
                self._busy = False
                if self._thread is threading.current_thread():
                    self._thread = None
                self._cond.notify_all()
        finally:
            conn, self._conn = self._conn, None
            if conn is not None:
                conn.close()

    def _send(self, batch: Mapping[str, int]) -> bool:
        payloads = [notice(session_id, seq) for session_id, seq in batch.items()]
        for attempt in (1, 2):  # an idle connection the server ended: once more, on a new one
            try:
                if self._conn is None or self._conn.closed:
                    self._conn = psycopg.Connection.connect(self.conninfo, **self.kwargs)
                self._conn.execute(_sql.NOTIFY, (payloads,))
                self.sent += 1
                self._failing = False
                return True
            except psycopg.Error as error:
                if self._conn is not None:
                    self._conn.close()
                    self._conn = None
                if attempt == 2 and not self._failing:  # said once, until it works again
                    self._failing = True
                    # Nothing is lost: the rows are committed, and followers poll for them.
                    _LOG.warning(
                        "could not notify %d session(s) on %s (%s); their followers catch up "
                        "at their next poll",
                        len(payloads),
                        self.where,
                        reason(error),
                    )
        return False
