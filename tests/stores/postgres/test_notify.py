"""Notifications after commit: the process's notifier, and the followers' catch-up poll.

An append commits its row without a NOTIFY (a notifying commit takes a
cluster-wide lock until its WAL is flushed); the process's notifier sends the
notification afterwards, coalesced. Whatever stops a notification (a writer
killed between commit and notify, the notifier's connection cut, a storm of
foreign ones), a follower still gets every event, in order, once.
"""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import textwrap
import threading
import time
from typing import Any

import psycopg
import pytest

from dsh_tool_todo.core.listeners import Event
from dsh_tool_todo.errors import UsageError
from dsh_tool_todo.stores import postgres
from dsh_tool_todo.stores.postgres import PostgresFollower, PostgresSession, _notify, _pools
from tests.stores.postgres.test_hostile import before_query, insert_row, notify

SESSION = "agent-n"


async def take(follower: PostgresFollower, count: int, within: float = 10.0) -> list[int]:
    seqs: list[int] = []
    for _ in range(count):
        event: Event = await asyncio.wait_for(follower.__anext__(), within)
        seqs.append(event["seq"])
    return seqs


def listen(dsn: str) -> psycopg.Connection[Any]:
    conn = psycopg.Connection.connect(dsn, autocommit=True)
    conn.execute(f"LISTEN {postgres.CHANNEL}")
    return conn


def heard(conn: psycopg.Connection[Any], within: float) -> list[str]:
    return [n.payload for n in conn.notifies(timeout=within, stop_after=1000)]


class Held:
    """The notifier's sends held back until ``release()``: what a commit alone sends."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.gate = threading.Event()
        send = _notify.Notifier._send

        def held_send(notifier: _notify.Notifier, batch: Any) -> None:
            self.gate.wait(30)
            send(notifier, batch)

        monkeypatch.setattr(_notify.Notifier, "_send", held_send)

    def release(self) -> None:
        self.gate.set()


def test_an_append_commits_without_notifying_and_the_notifier_announces_it_after(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    held = Held(monkeypatch)
    with listen(pg_dsn) as listener, PostgresSession(pg_dsn, SESSION) as session:
        session.append("note", {"n": 0})
        assert postgres.read_tail(pg_dsn, SESSION)[-1]["seq"] == 0  # committed and visible
        assert heard(listener, 0.5) == []  # and its transaction sent nothing
        held.release()
        assert heard(listener, 2.0) == [f"0:{SESSION}"]


def test_the_notifier_coalesces_what_piles_up_into_one_transaction_a_session(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    held = Held(monkeypatch)
    with listen(pg_dsn) as listener:
        sessions = [PostgresSession(pg_dsn, f"s{n}") for n in range(3)]
        sessions[0].append("note", {})  # the thread takes this one and waits at the gate
        time.sleep(0.2)
        for _ in range(5):
            for session in sessions:
                session.append("note", {})
        notifier = _pools.notifier_for(_pools.shared_pool(pg_dsn))
        before = notifier.sent
        held.release()
        assert notifier.flush(5.0)
        assert notifier.sent - before == 2  # the first append's, then everything since in one
        assert sorted(heard(listener, 1.0)) == ["0:s0", "4:s1", "4:s2", "5:s0"]
        for session in sessions:
            session.close()


def test_an_event_never_announced_reaches_the_follower_by_the_poll(pg_dsn: str) -> None:
    async def main() -> list[int]:
        async with PostgresFollower(pg_dsn, SESSION, poll_interval=0.2) as follower:
            first = asyncio.ensure_future(take(follower, 2, within=5.0))
            await asyncio.sleep(0.3)
            insert_row(pg_dsn, SESSION, 0)  # a commit nobody notifies
            insert_row(pg_dsn, SESSION, 1)
            return await first

    assert asyncio.run(main()) == [0, 1]


WRITER = textwrap.dedent(
    """
    import os, signal, sys
    from dsh_tool_todo.stores.postgres import PostgresSession, _notify

    def killed(notifier, session_id, seq):  # right after the commit, before any NOTIFY
        if seq == int(sys.argv[3]):
            os.kill(os.getpid(), signal.SIGKILL)
        post(notifier, session_id, seq)

    post = _notify.Notifier.post
    _notify.Notifier.post = killed
    session = PostgresSession(sys.argv[1], sys.argv[2])
    while True:
        session.append("note", {})
    """
)


def test_a_writer_killed_between_commit_and_notify_loses_no_event_to_its_follower(
    pg_dsn: str,
) -> None:
    async def main() -> list[int]:
        async with PostgresFollower(pg_dsn, SESSION, poll_interval=0.3) as follower:
            done = await asyncio.to_thread(
                subprocess.run, [sys.executable, "-c", WRITER, pg_dsn, SESSION, "4"], timeout=60
            )
            assert done.returncode == -9
            return await take(follower, 5, within=5.0)

    assert asyncio.run(main()) == [0, 1, 2, 3, 4]
    assert [event["seq"] for event in postgres.read_tail(pg_dsn, SESSION)] == [0, 1, 2, 3, 4]


EXITING_WRITER = textwrap.dedent(
    """
    import sys
    from dsh_tool_todo.stores.postgres import PostgresSession

    PostgresSession(sys.argv[1], sys.argv[2]).append("note", {})
    """
)


def test_a_writer_that_exits_at_once_still_sends_its_last_notification(pg_dsn: str) -> None:
    async def main() -> float:
        # A poll too slow to be what delivers it: the exiting process's notifier must.
        async with PostgresFollower(pg_dsn, SESSION, poll_interval=600) as follower:
            waiting = asyncio.ensure_future(take(follower, 1, within=20.0))
            await asyncio.sleep(0.2)
            args = [sys.executable, "-c", EXITING_WRITER, pg_dsn, SESSION]
            done = await asyncio.to_thread(subprocess.run, args, timeout=60)
            assert done.returncode == 0
            exited = time.monotonic()
            assert await waiting == [0]
            return time.monotonic() - exited

    assert asyncio.run(main()) < 5.0


def test_a_notifier_whose_connection_was_cut_sends_on_a_new_one(pg_dsn: str) -> None:
    async def main() -> list[int]:
        with PostgresSession(pg_dsn, SESSION) as session:
            async with PostgresFollower(pg_dsn, SESSION, poll_interval=600) as follower:
                await asyncio.to_thread(session.append, "note", {})
                assert await take(follower, 1) == [0]
                with psycopg.Connection.connect(pg_dsn, autocommit=True) as admin:
                    # the activity view may show the notifier's query a moment after it ran,
                    # under load: wait for it, bounded, rather than read it once
                    deadline = time.monotonic() + 10.0
                    cut: list[tuple[Any, ...]] = []
                    while not cut and time.monotonic() < deadline:
                        cut = admin.execute(
                            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                            "WHERE datname = current_database() AND query LIKE '%pg_notify(%'"
                            " AND pid <> pg_backend_pid()"
                        ).fetchall()
                        if not cut:
                            await asyncio.sleep(0.05)
                assert cut == [(True,)]
                await asyncio.to_thread(session.append, "note", {})
                return await take(follower, 1, within=5.0)

    assert asyncio.run(main()) == [1]


def test_a_notifier_that_cannot_reach_the_server_says_so_and_followers_catch_up(
    pg_dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    notifier = _notify.Notifier("postgresql://nobody@127.0.0.1:1/none", {"connect_timeout": 1})
    with caplog.at_level(logging.WARNING, logger="dsh_tool_todo"):
        notifier.post(SESSION, 3)
        assert notifier.flush(10.0)
        started = time.monotonic()
        notifier.post(SESSION, 4)  # the same refusal: not said again, and not asked at once
        assert notifier.flush(10.0)
        waited = time.monotonic() - started
    notifier.close()
    assert caplog.text.count("could not notify 1 session(s) on") == 1
    assert "catch up at their next poll" in caplog.text
    assert waited >= _notify.RETRY_SECONDS * 0.9


def test_a_storm_of_foreign_notifications_naming_the_session_invents_and_skips_nothing(
    pg_dsn: str,
) -> None:
    async def main() -> list[int]:
        async with PostgresFollower(pg_dsn, SESSION, poll_interval=0.2) as follower:
            stop = threading.Event()

            def storm() -> None:
                with psycopg.Connection.connect(pg_dsn, autocommit=True) as conn:
                    n = 0
                    while not stop.is_set():
                        payloads = [f"{n * 100 + k}:{SESSION}" for k in range(100)]
                        payloads += ["9" * 19 + f":{SESSION}", ":", "x"]
                        conn.execute(
                            "SELECT pg_notify(%s, p) FROM unnest(%s::text[]) AS p",
                            (postgres.CHANNEL, payloads),
                        )
                        n += 1

            def write() -> None:
                with PostgresSession(pg_dsn, SESSION) as session:
                    for n in range(50):
                        session.append("note", {"n": n})
                        time.sleep(0.005)

            storming = threading.Thread(target=storm)
            storming.start()
            try:
                await asyncio.to_thread(write)
                seqs = await take(follower, 50, within=10.0)
                extra = asyncio.ensure_future(follower.__anext__())
                await asyncio.sleep(0.6)  # woken many times, by the storm and the poll
                assert not extra.done()
                extra.cancel()
                await asyncio.gather(extra, return_exceptions=True)
            finally:
                stop.set()
                await asyncio.to_thread(storming.join)
            return seqs

    assert asyncio.run(main()) == list(range(50))


def test_a_follower_whose_connections_are_cut_mid_stream_misses_and_repeats_nothing(
    pg_dsn: str,
) -> None:
    async def main() -> list[int]:
        async with PostgresFollower(
            pg_dsn, SESSION, reconnect_delay=0.05, poll_interval=0.3
        ) as follower:
            stop = threading.Event()

            def cut() -> None:
                with psycopg.Connection.connect(pg_dsn, autocommit=True) as admin:
                    while not stop.wait(0.05):
                        admin.execute(  # the hub's LISTEN and read connections
                            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                            "WHERE datname = current_database() AND pid <> pg_backend_pid() "
                            "AND (query LIKE 'LISTEN%%' OR query LIKE '%%seq > %%' "
                            "OR query LIKE '%%unnest%%max(seq)%%')"
                        )

            def write() -> None:
                with PostgresSession(pg_dsn, SESSION) as session:
                    for n in range(100):
                        session.append("note", {"n": n})
                        time.sleep(0.01)

            cutting = threading.Thread(target=cut)
            cutting.start()
            try:
                writing = asyncio.ensure_future(asyncio.to_thread(write))
                seqs = await take(follower, 100, within=10.0)
                await writing
            finally:
                stop.set()
                await asyncio.to_thread(cutting.join)
            return seqs

    assert asyncio.run(main()) == list(range(100))


def test_a_foreign_notification_with_a_huge_seq_does_not_hide_a_later_unannounced_commit(
    pg_dsn: str,
) -> None:
    async def main() -> list[int]:
        async with PostgresFollower(pg_dsn, SESSION, poll_interval=0.2) as follower:
            notify(pg_dsn, f"{2**62}:{SESSION}")  # "heard of" far ahead of the log
            await asyncio.sleep(0.3)
            insert_row(pg_dsn, SESSION, 0)  # then a commit nobody announces
            return await take(follower, 1, within=5.0)

    assert asyncio.run(main()) == [0]


@pytest.mark.parametrize("interval", [0, -1, 3601, "1", True, float("nan")])
def test_a_bad_poll_interval_is_refused(interval: object) -> None:
    with pytest.raises(UsageError, match=r"poll_interval must be seconds in \(0, 3600\]"):
        PostgresFollower("postgresql://x", SESSION, poll_interval=interval)  # type: ignore[arg-type]


def test_a_closed_notifier_still_sends_and_keeps_its_thread_for_the_next_posts(
    pg_dsn: str,
) -> None:
    notifier = _notify.Notifier(pg_dsn, {})
    with listen(pg_dsn) as listener:
        try:
            notifier.post(SESSION, 0)
            notifier.close()  # as close_shared_pools() does, under a session that lives on
            assert heard(listener, 1.0) == [f"0:{SESSION}"]
            notifier.post(SESSION, 1)
            assert notifier.flush(5.0)
            time.sleep(0.2)  # a thread that ends when idle would have ended by now
            thread = notifier._thread
            notifier.post(SESSION, 2)
            assert notifier.flush(5.0)
            assert heard(listener, 1.0) == [f"1:{SESSION}", f"2:{SESSION}"]
            assert thread is not None  # not one thread per post
            assert thread.is_alive()
            assert notifier._thread is thread
        finally:
            notifier.close()


def count_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many sessions each of the hubs' reads asked for, in order."""
    sizes: list[int] = []

    async def count(params: tuple[Any, ...]) -> None:
        sizes.append(len(params[0]))

    before_query(monkeypatch, postgres._sql.READ_AFTER_EACH, count)
    return sizes


def test_followers_woken_together_read_together_and_each_gets_its_own_events(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    sessions = [f"many-{n}" for n in range(12)]
    for session_id in sessions[:6]:  # half of them start with a backlog
        insert_row(pg_dsn, session_id, 0)
    sizes = count_reads(monkeypatch)

    async def main() -> list[list[int]]:
        followers = [PostgresFollower(pg_dsn, session_id) for session_id in sessions]
        # two more on one session, from different seqs: one batch answers each its own
        followers.append(PostgresFollower(pg_dsn, sessions[0], after_seq=0))
        followers.append(PostgresFollower(pg_dsn, sessions[0]))
        for follower in followers:
            await follower.__aenter__()
        with_backlog = [f for f in followers if f.session_id in sessions[:6] and f.last_seq < 0]
        assert [await take(follower, 1) for follower in with_backlog] == [[0]] * 7
        waiting = [asyncio.ensure_future(take(f, 2 if f.last_seq < 0 else 1)) for f in followers]
        await asyncio.sleep(0.5)
        sizes.clear()
        rows = [(s, 1) for s in sessions[:6]] + [(s, seq) for s in sessions[6:] for seq in (0, 1)]
        with psycopg.Connection.connect(pg_dsn) as conn:  # one transaction, one wake-up for all
            conn.cursor().executemany(
                f"INSERT INTO {postgres.TABLE} (session_id, seq, type, data) "
                "VALUES (%s, %s, 'note', '{}')",
                rows,
            )
            conn.execute(
                "SELECT pg_notify(%s, payload) FROM unnest(%s::text[]) AS payload",
                (postgres.CHANNEL, [f"1:{session_id}" for session_id in sessions]),
            )
        results = await asyncio.gather(*waiting)
        for follower in followers:
            await follower.aclose()
        return results

    assert asyncio.run(main()) == [[1]] * 6 + [[0, 1]] * 6 + [[1], [1]]
    # 14 followers woke on one notifying transaction; their reads went in a few queries
    assert sum(sizes) >= 14
    assert len(sizes) < 7, sizes


def test_a_follower_cancelled_while_its_read_waits_leaves_the_others_theirs(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    insert_row(pg_dsn, "kept", 0)
    insert_row(pg_dsn, "dropped", 0)

    async def slow(params: tuple[Any, ...]) -> None:
        await asyncio.sleep(0.3)  # both reads wait here, in one batch

    before_query(monkeypatch, postgres._sql.READ_AFTER_EACH, slow)

    async def main() -> list[int]:
        async with (
            PostgresFollower(pg_dsn, "kept") as kept,
            PostgresFollower(pg_dsn, "dropped") as dropped,
        ):
            wanted = asyncio.ensure_future(take(kept, 1))
            cancelled = asyncio.ensure_future(take(dropped, 1))
            await asyncio.sleep(0.1)
            cancelled.cancel()
            with pytest.raises(asyncio.CancelledError):
                await cancelled
            return await wanted

    assert asyncio.run(main()) == [0]


def test_a_read_that_fails_fails_every_follower_waiting_on_it_with_the_store_error(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def refused(params: tuple[Any, ...]) -> None:
        await asyncio.sleep(0.1)
        raise psycopg.errors.InsufficientPrivilege("permission denied for table")

    before_query(monkeypatch, postgres._sql.READ_AFTER_EACH, refused)

    async def main() -> list[str]:
        async with (
            PostgresFollower(pg_dsn, "one") as one,
            PostgresFollower(pg_dsn, "two") as two,
        ):
            results = await asyncio.gather(take(one, 1), take(two, 1), return_exceptions=True)
        return [str(result) for result in results]

    messages = asyncio.run(main())
    assert len(messages) == 2
    for message in messages:
        assert "permission denied" in message


def test_a_follower_that_read_to_the_end_reads_again_only_when_woken(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for seq in range(3):
        insert_row(pg_dsn, SESSION, seq)
    sizes = count_reads(monkeypatch)

    async def main() -> list[int]:
        async with PostgresFollower(pg_dsn, SESSION, poll_interval=3600) as follower:
            assert await take(follower, 3) == [0, 1, 2]
            later = asyncio.ensure_future(take(follower, 1))
            await asyncio.sleep(0.5)
            assert len(sizes) == 1  # the backlog's read, and none while nothing moved
            insert_row(pg_dsn, SESSION, 3)
            notify(pg_dsn, f"3:{SESSION}")
            return await later

    assert asyncio.run(main()) == [3]
    assert len(sizes) == 2


def test_a_backlog_longer_than_one_read_is_read_to_its_end_without_a_wake_up(
    pg_dsn: str,
) -> None:
    total = 2 * postgres._sql.MAX_BATCH + 7
    with psycopg.Connection.connect(pg_dsn) as conn:
        conn.execute(
            f"INSERT INTO {postgres.TABLE} (session_id, seq, type, data) "
            "SELECT %s, n, 'note', '{}' FROM generate_series(0, %s) AS n",
            (SESSION, total - 1),
        )

    async def main() -> list[int]:
        async with PostgresFollower(pg_dsn, SESSION, poll_interval=3600) as follower:
            return await take(follower, total, within=5.0)

    assert asyncio.run(main()) == list(range(total))
