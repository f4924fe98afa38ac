"""The PostgreSQL store under faults: a server restart, killed connections, timeouts, a full pool.

Whatever breaks, three things hold: an acknowledged event is in the log
exactly once, the seqs stay gapless, and a call that failed says so (a
``ToolFailure`` through the tool) without leaving anything half-written. The
restart runs on a throwaway cluster of its own (``initdb`` in a temporary
directory, on a free port); the other faults run in a fresh database of the
shared server.
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.pq import TransactionStatus
from psycopg_pool import ConnectionPool

from dsh_tool_todo import stores, todo_write_tool
from dsh_tool_todo.core.contract import EVENT_TYPE
from dsh_tool_todo.errors import ToolFailure
from dsh_tool_todo.stores import postgres
from dsh_tool_todo.stores.postgres import CommitUnknown, PostgresSession, _pools, _sql
from tests.stores.contract import Event, new_host
from tests.stores.postgres.test_session import insert_row

SESSION = "agent-1"
IDLE = TransactionStatus.IDLE


def step_plan(n: int) -> list[dict[str, str]]:
    """The todos of step ``n``: one, in progress."""
    return [{"content": f"Step {n}", "status": "in_progress"}]


def rows(dsn: str, session_id: str = SESSION) -> list[Event]:
    return postgres.read_tail(dsn, session_id, limit=100_000)


# --- a throwaway cluster --------------------------------------------------------------


def _bindir() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found:
        pytest.fail("initdb not found under /usr/lib/postgresql/*/bin", pytrace=False)
    return Path(found[-1]).parent


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Cluster:
    """A PostgreSQL cluster of the test's own, run as the ``postgres`` user when we are root."""

    def __init__(self) -> None:
        self.bindir = _bindir()
        self.root = Path(tempfile.mkdtemp(prefix="dsh-todo-pg-"))
        self.data = self.root / "data"
        self.port = _free_port()
        self.as_owner: list[str] = []
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres", "postgres")
            self.as_owner = ["runuser", "-u", "postgres", "--"]
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8")

    def dsn(self, dbname: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}"

    def start(self) -> None:
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1"
        log = str(self.root / "server.log")
        self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l", log, "-w", "start")

    def stop(self, mode: str = "immediate") -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def remove(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):
            self.stop("fast")
        shutil.rmtree(self.root, ignore_errors=True)

    def _run(self, program: str, *args: str) -> None:
        command = [*self.as_owner, str(self.bindir / program), *args]
        subprocess.run(command, check=True, capture_output=True, cwd=self.root, timeout=120)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    server = Cluster()
    try:
        server.start()
        yield server
    finally:
        server.remove()


@pytest.fixture
def cluster_dsn(cluster: Cluster) -> Iterator[str]:
    name = f"test_{os.urandom(8).hex()}"
    with psycopg.Connection.connect(cluster.dsn(), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    dsn = cluster.dsn(name)
    postgres.setup(dsn)
    yield dsn
    postgres.close_shared_pools()
    with psycopg.Connection.connect(cluster.dsn(), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


class FollowerThread:
    """A follower on an event loop of its own, collecting what it yields."""

    def __init__(self, dsn: str, session_id: str) -> None:
        self.events: list[Event] = []
        self.errors: list[BaseException] = []
        self._loop = asyncio.new_event_loop()
        self._follower = postgres.PostgresFollower(dsn, session_id, reconnect_delay=0.2)
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._task = asyncio.run_coroutine_threadsafe(self._collect(), self._loop)

    async def _collect(self) -> None:
        try:
            async for event in self._follower:
                self.events.append(event)
        except BaseException as error:
            self.errors.append(error)
            raise

    def wait_for(self, count: int, seconds: float = 30.0) -> None:
        deadline = time.monotonic() + seconds
        while len(self.events) < count and time.monotonic() < deadline and not self.errors:
            time.sleep(0.05)

    def close(self) -> None:
        self._task.cancel()
        with contextlib.suppress(BaseException):
            self._task.result(5)
        asyncio.run_coroutine_threadsafe(self._follower.aclose(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()


def until_recorded(call: Callable[[], str], seconds: float = 30.0) -> str:
    """Retry a tool call that fails with ToolFailure, as a host would, until it records."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return call()
        except ToolFailure:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


# --- the server restarts --------------------------------------------------------------


def test_a_server_restart_loses_nothing_acknowledged_and_everything_recovers(
    cluster: Cluster, cluster_dsn: str
) -> None:
    pool: ConnectionPool[Any] = ConnectionPool(
        cluster_dsn, min_size=2, max_size=4, timeout=1.0, kwargs={"autocommit": True}, open=False
    )
    pool.open(wait=True)
    follower = FollowerThread(cluster_dsn, SESSION)
    try:
        session = PostgresSession(pool, SESSION)
        heard: list[int] = []
        session.subscribe(lambda event: heard.append(event["seq"]))
        host = new_host()
        agent = host.new_agent(session=session)

        def call(n: int) -> str:
            return host.call_tool("todo_write", {"todos": step_plan(n)}, agent=agent)

        acknowledged = [n for n in range(20) if call(n)]
        follower.wait_for(20)
        cluster.stop("immediate")  # a crash, as far as clients can tell
        for n in range(100, 103):
            with pytest.raises(ToolFailure, match="could not be appended"):
                call(n)
        assert host.projection(session, "todos") == step_plan(19)
        cluster.start()
        until_recorded(lambda: call(20))
        acknowledged.append(20)
        acknowledged += [n for n in range(21, 40) if call(n)]

        recorded = rows(cluster_dsn)
        assert [event["seq"] for event in recorded] == list(range(len(recorded)))
        contents = [event["data"]["todos"][0]["content"] for event in recorded]
        assert contents == [f"Step {n}" for n in acknowledged]  # none lost, none invented
        assert heard == list(range(len(recorded)))
        assert host.projection(session, "todos") == step_plan(39)
        follower.wait_for(len(recorded))
        assert follower.errors == []
        assert follower.events == recorded
    finally:
        follower.close()
        pool.close()


# --- connections killed, statements cancelled, the pool exhausted -----------------------


def test_connections_killed_under_a_writer_lose_and_duplicate_nothing(pg_dsn: str) -> None:
    pool: ConnectionPool[Any] = ConnectionPool(
        pg_dsn, min_size=2, max_size=4, timeout=5.0, kwargs={"autocommit": True}, open=False
    )
    pool.open(wait=True)
    stop = threading.Event()

    def killer() -> None:
        with psycopg.Connection.connect(pg_dsn, autocommit=True) as conn:
            while not stop.is_set():
                conn.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
                time.sleep(0.003)

    session = PostgresSession(pool, SESSION)
    heard: list[Event] = []
    session.subscribe(heard.append)
    acknowledged: list[int] = []
    unknown: list[int] = []
    messages: list[str] = []
    failed = 0
    thread = threading.Thread(target=killer)
    thread.start()
    try:
        for n in range(300):
            try:
                session.append("note", {"n": n})
                acknowledged.append(n)
            except CommitUnknown:
                unknown.append(n)
            except postgres.PostgresUnavailable as error:
                messages.append(str(error))
                failed += 1
    finally:
        stop.set()
        thread.join()
    session.append("note", {"n": "last"})  # settles an outcome still unknown
    pool.close()
    recorded = rows(pg_dsn)
    numbers = [event["data"]["n"] for event in recorded]
    assert [event["seq"] for event in recorded] == list(range(len(recorded)))
    assert numbers[-1] == "last"
    assert set(acknowledged) <= set(numbers[:-1]) <= set(acknowledged) | set(unknown)
    assert len(numbers) == len(set(numbers))
    assert heard == recorded
    assert failed + len(unknown) > 0, "the killer never hit an append: the test proved nothing"
    assert all(f"session '{SESSION}'" in message for message in messages)


def test_a_statement_timeout_fails_the_append_and_records_nothing(pg_dsn: str) -> None:
    timed = psycopg.conninfo.make_conninfo(pg_dsn, options="-c statement_timeout=200")
    with ConnectionPool(timed, min_size=1, max_size=2, kwargs={"autocommit": True}) as pool:
        session = PostgresSession(pool, SESSION)
        session.append("note", {"n": 0})
        host = new_host()
        agent = host.new_agent(session=session)
        with psycopg.Connection.connect(pg_dsn) as blocker:
            blocker.execute(f"LOCK TABLE {postgres.TABLE} IN EXCLUSIVE MODE")
            with pytest.raises(ToolFailure, match=r"statement cancelled.*not recorded"):
                host.call_tool("todo_write", {"todos": step_plan(1)}, agent=agent)
            blocker.rollback()
        host.call_tool("todo_write", {"todos": step_plan(2)}, agent=agent)
    recorded = rows(pg_dsn)
    assert [event["seq"] for event in recorded] == [0, 1]
    assert recorded[1]["data"] == {"todos": step_plan(2)}


def test_an_exhausted_pool_fails_the_append_clearly_and_records_nothing(pg_dsn: str) -> None:
    with ConnectionPool(pg_dsn, min_size=1, max_size=1, timeout=0.3) as pool:
        session = PostgresSession(pool, SESSION)
        with (
            pool.connection(),  # the only connection, held elsewhere
            pytest.raises(
                postgres.PostgresUnavailable,
                match=r"no connection.*all 1 connections of the pool are in use.*not recorded",
            ),
        ):
            session.append("note", {"n": 0})
        assert session.append("note", {"n": 1})["seq"] == 0
    assert [event["data"] for event in rows(pg_dsn)] == [{"n": 1}]


# --- the commit whose answer never arrived --------------------------------------------


class FlakyConnection(psycopg.Connection[Any]):
    """Breaks at chosen statements, before or after the server ran them, as a dropped link does.

    ``faults`` maps a statement (or ``"COMMIT"``) to the faults its next
    executions meet: ``"before"`` (never sent), ``"after"`` (ran, answer lost)
    or, for the read back, ``"miss"`` (finds nothing, as while the server still commits).
    """

    faults: dict[str, list[str]] = {}  # noqa: RUF012 - set per test through the fixture

    def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
        fault = self._next(query if isinstance(query, str) else "")
        self._break("before", fault)
        if fault == "miss":  # a read back that finds nothing: the COMMIT is not visible yet
            params = (params[0], -1)
        cursor = super().execute(query, params, **kwargs)
        self._break("after", fault)
        return cursor

    def commit(self) -> None:
        # only a COMMIT that ends a transaction meets a fault, not the pool's no-op one
        fault = self._next("COMMIT") if self.info.transaction_status != IDLE else "none"
        self._break("before", fault)
        super().commit()
        self._break("after", fault)

    def _next(self, key: str) -> str:
        planned = self.faults.get(key, [])
        return planned.pop(0) if planned else "none"

    def _break(self, when: str, fault: str) -> None:
        if fault == when:
            self.close()
            raise psycopg.OperationalError("server closed the connection unexpectedly")


@pytest.fixture(params=["autocommit", "transaction"])
def flaky_pool(pg_dsn: str, request: pytest.FixtureRequest) -> Iterator[ConnectionPool[Any]]:
    """An autocommit pool (an append is its INSERT alone) or not (INSERT, then COMMIT)."""
    FlakyConnection.faults = {
        _sql.INSERT: [],
        _sql.INSERT_CALL: [],
        _sql.READ_ONE: [],
        "COMMIT": [],
    }
    with ConnectionPool(
        pg_dsn,
        connection_class=FlakyConnection,
        min_size=1,
        max_size=3,
        timeout=2.0,
        kwargs={"autocommit": True} if request.param == "autocommit" else {},
    ) as pool:
        yield pool


def seqs_heard(session: PostgresSession) -> list[int]:
    """The seq of each event ``session`` tells its listeners, as they are told."""
    heard: list[int] = []
    session.subscribe(lambda event: heard.append(event["seq"]))
    return heard


def committing(pool: ConnectionPool[Any], insert: str = _sql.INSERT) -> str:
    """The statement whose answer is the commit's: the INSERT alone, or the COMMIT after it."""
    return insert if pool.kwargs.get("autocommit") else "COMMIT"  # type: ignore[union-attr]


@pytest.mark.parametrize("read_back", [[], ["miss"]], ids=["read-back", "still-in-flight"])
def test_an_append_committed_before_the_connection_broke_is_acknowledged_once(
    pg_dsn: str, flaky_pool: ConnectionPool[Any], read_back: list[str]
) -> None:
    """``still-in-flight``: the commit is not yet visible when read back; the resend then
    meets our own row, which is acknowledged, not a conflict."""
    session = PostgresSession(flaky_pool, SESSION)
    heard = seqs_heard(session)
    FlakyConnection.faults[committing(flaky_pool)] += ["after"]
    FlakyConnection.faults[_sql.READ_ONE] += read_back
    assert session.append("note", {"n": 0})["seq"] == 0
    assert session.append("note", {"n": 1})["seq"] == 1
    assert [event["data"]["n"] for event in rows(pg_dsn)] == [0, 1]
    assert heard == [0, 1]
    assert FlakyConnection.faults[committing(flaky_pool)] == []  # the fault was met
    assert FlakyConnection.faults[_sql.READ_ONE] == []


@pytest.mark.parametrize(
    ("statement", "fault"),
    [("insert", "before"), ("insert", "after"), ("commit", "before")],
)
def test_an_append_that_was_not_committed_is_sent_again_at_its_seq(
    pg_dsn: str, flaky_pool: ConnectionPool[Any], statement: str, fault: str
) -> None:
    session = PostgresSession(flaky_pool, SESSION)
    key = _sql.INSERT if statement == "insert" else committing(flaky_pool)
    FlakyConnection.faults[key] += [fault]
    assert session.append("note", {"n": 0})["seq"] == 0
    assert FlakyConnection.faults[key] == []
    assert [event["data"]["n"] for event in rows(pg_dsn)] == [0]


def test_an_append_that_breaks_twice_before_commit_fails_and_records_nothing(
    pg_dsn: str, flaky_pool: ConnectionPool[Any]
) -> None:
    session = PostgresSession(flaky_pool, SESSION)
    FlakyConnection.faults[_sql.INSERT] += ["before", "before"]
    with pytest.raises(postgres.PostgresUnavailable, match=f"session '{SESSION}' on PostgreSQL"):
        session.append("note", {"n": 0})
    assert session.append("note", {"n": 1})["seq"] == 0
    assert [event["data"]["n"] for event in rows(pg_dsn)] == [1]


@pytest.mark.parametrize(("fault", "recorded"), [("after", [0, 1]), ("before", [1])])
def test_an_outcome_that_cannot_be_checked_is_settled_before_the_next_append(
    pg_dsn: str, flaky_pool: ConnectionPool[Any], fault: str, recorded: list[int]
) -> None:
    session = PostgresSession(flaky_pool, SESSION)
    heard: list[Event] = []
    session.subscribe(heard.append)
    host = new_host()
    agent = host.new_agent(session=session)
    FlakyConnection.faults[committing(flaky_pool)] += [fault]
    FlakyConnection.faults[_sql.READ_ONE] += ["before", "before"]
    with pytest.raises(ToolFailure, match=r"seq 0: .*could not be asked.*next append checks"):
        host.call_tool("todo_write", {"todos": step_plan(0)}, agent=agent)
    host.call_tool("todo_write", {"todos": step_plan(1)}, agent=agent)
    log = rows(pg_dsn)
    assert [event["data"]["todos"] for event in log] == [step_plan(n) for n in recorded]
    assert heard == log  # the settled event reached the listeners, in order
    assert host.projection(session, "todos") == step_plan(1)


def test_a_row_found_in_the_place_of_an_unknown_commit_makes_the_writer_stale(
    pg_dsn: str, flaky_pool: ConnectionPool[Any]
) -> None:
    session = PostgresSession(flaky_pool, SESSION)
    FlakyConnection.faults[committing(flaky_pool)] += ["before"]
    FlakyConnection.faults[_sql.READ_ONE] += ["before", "before"]
    with pytest.raises(CommitUnknown, match="seq 0"):
        session.append("note", {"n": 0})
    insert_row(pg_dsn, SESSION, 0, "note", '{"by": "another writer"}')
    with pytest.raises(postgres.WriterConflict, match=f"session '{SESSION}': seq 0"):
        session.append("note", {"n": 1})
    assert [event["data"] for event in rows(pg_dsn)] == [{"by": "another writer"}]


def test_a_resend_that_meets_a_row_it_cannot_read_back_is_unknown_then_settled(
    pg_dsn: str, flaky_pool: ConnectionPool[Any]
) -> None:
    session = PostgresSession(flaky_pool, SESSION)
    heard = seqs_heard(session)
    FlakyConnection.faults[committing(flaky_pool)] += ["after"]
    FlakyConnection.faults[_sql.READ_ONE] += ["miss", "before", "before"]
    with pytest.raises(CommitUnknown, match=r"seq 0: .*next append checks"):
        session.append("note", {"n": 0})
    assert session.append("note", {"n": 1})["seq"] == 1  # seq 0 settled as ours first
    assert heard == [0, 1]
    assert [event["data"]["n"] for event in rows(pg_dsn)] == [0, 1]


class FlakyAsyncConnection(psycopg.AsyncConnection[Any]):
    """:class:`FlakyConnection` for the asyncio session."""

    faults: dict[str, list[str]] = {}  # noqa: RUF012 - set per test

    async def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
        fault = self._next(query if isinstance(query, str) else "")
        await self._break("before", fault)
        cursor = await super().execute(query, params, **kwargs)
        await self._break("after", fault)
        return cursor

    async def commit(self) -> None:
        fault = self._next("COMMIT") if self.info.transaction_status != IDLE else "none"
        await self._break("before", fault)
        await super().commit()
        await self._break("after", fault)

    def _next(self, key: str) -> str:
        planned = self.faults.get(key, [])
        return planned.pop(0) if planned else "none"

    async def _break(self, when: str, fault: str) -> None:
        if fault == when:
            await self.close()
            raise psycopg.OperationalError("server closed the connection unexpectedly")


def test_the_async_session_settles_lost_answers_as_the_sync_one_does(pg_dsn: str) -> None:
    from psycopg_pool import AsyncConnectionPool

    from dsh_tool_todo.stores.postgres import AsyncPostgresSession

    FlakyAsyncConnection.faults = {
        # an autocommit pool: each append is its INSERT alone, which commits it
        _sql.INSERT: ["before", "none", "after", "before"],
        _sql.READ_ONE: ["none", "none", "before", "before"],
    }

    async def main() -> list[Event]:
        heard: list[Event] = []
        async with (
            AsyncConnectionPool(
                pg_dsn,
                connection_class=FlakyAsyncConnection,
                min_size=1,
                max_size=3,
                timeout=2.0,
                kwargs={"autocommit": True},
                open=False,
            ) as pool,
            AsyncPostgresSession(pool, SESSION) as session,
        ):
            session.subscribe(heard.append)
            await session.append("note", {"n": 0})  # insert lost: sent again
            await session.append("note", {"n": 1})  # committed, answer lost: read back
            with pytest.raises(CommitUnknown, match="seq 2"):
                await session.append("note", {"n": 2})  # lost, and cannot be checked
            await session.append("note", {"n": 3})  # settles seq 2 (absent) first
        return heard

    heard = asyncio.run(main())
    recorded = rows(pg_dsn)
    assert [event["data"]["n"] for event in recorded] == [0, 1, 3]
    assert heard == recorded
    assert all(not planned for planned in FlakyAsyncConnection.faults.values())


def test_a_session_on_an_unreachable_server_says_why_the_pool_got_no_connection() -> None:
    with (
        ConnectionPool(
            "postgresql://postgres@127.0.0.1:1/none", min_size=1, timeout=0.5, open=True
        ) as pool,
        pytest.raises(postgres.PostgresUnavailable, match=r"127\.0\.0\.1:1/none.*refused"),
    ):
        PostgresSession(pool, SESSION)


def _refused_write(how: str, conninfo: str) -> None:
    """One write to ``conninfo`` by a sync or an async session, or by a tool call."""
    if how == "sync":
        PostgresSession(conninfo, SESSION).append("note", {})
    elif how == "async":

        async def write() -> None:
            try:
                await postgres.AsyncPostgresSession(conninfo, SESSION).append("note", {})
            finally:
                await postgres.close_async_shared_pools()

        asyncio.run(write())
    else:
        tool = todo_write_tool(allow_parallel_in_progress=False)
        with stores.open_owners(conninfo) as owners:
            owners.call(SESSION, tool, {"todos": step_plan(0)})


@pytest.mark.parametrize("how", ["sync", "async", "tool"])
def test_a_server_that_refuses_connections_fails_a_write_at_once(how: str) -> None:
    conninfo = f"postgresql://postgres@127.0.0.1:{_free_port()}/none"  # nothing listens there
    failure = ToolFailure if how == "tool" else postgres.PostgresUnavailable
    started = time.monotonic()
    try:
        with pytest.raises(failure, match=r"127\.0\.0\.1:\d+/none.*refused"):
            _refused_write(how, conninfo)
    finally:
        postgres.close_shared_pools()
    assert time.monotonic() - started < 1.5  # not the pool's 10 s timeout


def test_a_pool_busy_past_the_first_wait_still_lends_its_connection(pg_dsn: str) -> None:
    with ConnectionPool(pg_dsn, min_size=1, max_size=1, timeout=10) as pool:
        session = PostgresSession(pool, SESSION)
        held = pool.getconn()  # the only connection, busy past FIRST_WAIT

        def release_once_probed() -> None:
            deadline = time.monotonic() + 30
            while _pools.probed(pool) is None and time.monotonic() < deadline:
                time.sleep(0.01)
            pool.putconn(held)

        releasing = threading.Thread(target=release_once_probed)
        releasing.start()
        try:
            assert session.append("note", {"n": 0})["seq"] == 0
        finally:
            releasing.join(timeout=30)
        assert _pools.probed(pool) == _pools.Probe(None, refused=False)  # it answered: waited


def test_a_server_too_slow_to_answer_a_probe_is_waited_for_not_refused() -> None:
    pool: ConnectionPool[Any] = ConnectionPool("postgresql://127.0.0.1:1/none", open=False)
    slow = _pools.remember(pool, psycopg.errors.ConnectionTimeout("connection timeout expired"))
    assert not slow.refused
    assert _pools.remember(pool, psycopg.OperationalError("Connection refused")).refused


# --- a call id whose commit answer was lost (issue 23) --------------------------------


def keyed(n: int) -> dict[str, Any]:
    return {"todos": step_plan(n), "callId": f"call_{n}"}


@pytest.mark.parametrize("read_back", ["finds it", "misses it"])
def test_a_keyed_append_whose_commit_answer_was_lost_is_recorded_and_heard_once(
    pg_dsn: str, flaky_pool: ConnectionPool[Any], read_back: str
) -> None:
    session = PostgresSession(flaky_pool, SESSION)
    heard = seqs_heard(session)
    FlakyConnection.faults[committing(flaky_pool, _sql.INSERT_CALL)] += ["after"]
    if read_back == "misses it":  # the resend meets our own row through the call index
        FlakyConnection.faults[_sql.READ_ONE] += ["miss"]
    first = session.append(EVENT_TYPE, keyed(0))
    assert first["seq"] == 0
    assert session.append(EVENT_TYPE, keyed(0)) == first  # the engine's retry
    assert session.append("note", {})["seq"] == 1
    assert [event["seq"] for event in rows(pg_dsn)] == [0, 1]
    assert heard == [0, 1]
    assert (
        FlakyConnection.faults[committing(flaky_pool, _sql.INSERT_CALL)]
        == FlakyConnection.faults[_sql.READ_ONE]
        == []
    )


def test_a_keyed_append_left_unknown_is_settled_then_its_retry_is_the_same_call(
    pg_dsn: str, flaky_pool: ConnectionPool[Any]
) -> None:
    session = PostgresSession(flaky_pool, SESSION)
    heard = seqs_heard(session)
    FlakyConnection.faults[committing(flaky_pool, _sql.INSERT_CALL)] += ["after"]
    FlakyConnection.faults[_sql.READ_ONE] += ["before", "before"]
    with pytest.raises(CommitUnknown, match="seq 0"):
        session.append(EVENT_TYPE, keyed(0))
    answer = session.append(EVENT_TYPE, keyed(0))  # settles seq 0 first: it was recorded
    assert answer == {"seq": 0, "type": EVENT_TYPE, "data": keyed(0)}
    assert heard == [0]
    assert [event["data"] for event in rows(pg_dsn)] == [keyed(0)]
