"""PostgreSQL store: load through the reference host, the current-plan query, and push latency.

Each figure is measured beside a reference in the same run, on a database
made for the run and dropped after it:

- load: P processes x A agents (one thread each) x C ``todo_write`` calls
  through the reference host, against the same threads doing a bare
  ``INSERT`` + ``pg_notify`` of an identical row in one transaction, in
  alternating phases of ten calls an agent; then the rows are counted:
  nothing lost, no seq twice. A fourth side makes the same calls, each with a
  new call id (sessions of their own): the call-id index on the append path.
- current plan: ``current_plan`` of a session with 1,000,000 rows against one
  with 10,000 (quick: 100,000), interleaved on one connection.
- push: commit to a follower in another process, p50 and p99.

``DSH_TODO_BENCH_DSN`` names the server (default: the machine's, 127.0.0.1:5432).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import statistics
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from report import Row, fmt_ns, fmt_rate, skipped
from timing import paired

ADMIN_DSN = os.environ.get("DSH_TODO_BENCH_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")
LOAD_TARGET = 1.5  # p99 of a call through the host vs p99 of a bare insert (no NOTIFY)
THROUGHPUT_TARGET = 0.9  # calls/s through the host vs bare inserts/s
PUSH_TARGET_MS = 100  # commit to a follower in another process, p99, under the load
ALONE_TARGET = 1.1  # one agent: a call vs a bare INSERT + pg_notify (the old append's floor)
PLAN_TARGET = 2.0  # current plan at the large log vs the small one
POOL_SIZE = 6  # connections per pool, per process: two pools a process stay far below 100


def rows(*, quick: bool) -> list[Row]:
    try:
        import psycopg  # noqa: F401

        from dsh_tool_todo.stores import postgres  # noqa: F401
    except ImportError as error:
        return [skipped("postgres", "all", f"the postgres extra is not installed ({error})")]
    try:
        with _database() as dsn:
            processes, agents, calls = (2, 4, 10) if quick else (4, 50, 200)
            small, large = (10_000, 100_000) if quick else (10_000, 1_000_000)
            return [
                *_load_rows(dsn, processes, agents, calls),
                _one_agent_row(dsn, seconds=2.0 if quick else 10.0),
                _plan_row(dsn, small, large, seconds=1.0 if quick else 5.0),
                _push_row(dsn, 20 if quick else 300),
            ]
    except OSError as error:
        return [skipped("postgres", "all", f"PostgreSQL unreachable ({error})")]


@contextmanager
def _database() -> Iterator[str]:
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    from dsh_tool_todo.stores import postgres

    name = f"bench_{uuid.uuid4().hex}"
    try:
        admin = psycopg.Connection.connect(ADMIN_DSN, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as error:
        raise OSError(str(error).strip().splitlines()[0]) from None
    with admin:
        admin.execute(f"CREATE DATABASE {name}")
    params = conninfo_to_dict(ADMIN_DSN)
    params["dbname"] = name
    dsn = make_conninfo(**{key: str(value) for key, value in params.items()})
    try:
        postgres.setup(dsn)
        yield dsn
    finally:
        postgres.close_shared_pools()
        with psycopg.Connection.connect(ADMIN_DSN, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


# --- load --------------------------------------------------------------------------------

FOLLOW_EVERY = 10  # agents of each process whose session a follower in another process follows


def _load_rows(dsn: str, processes: int, agents: int, calls: int) -> list[Row]:
    import psycopg

    from dsh_tool_todo.stores import postgres

    with psycopg.Connection.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE bench_bare (LIKE {postgres.TABLE} INCLUDING ALL)")
        conn.execute(f"CREATE TABLE bench_bare_notify (LIKE {postgres.TABLE} INCLUDING ALL)")
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(processes)
    results = context.Queue()
    followed = [
        f"load-{index}-{agent}"
        for index in range(processes)
        for agent in range(0, agents, FOLLOW_EVERY)
    ]
    heard_queue = context.Queue()
    stop = context.Event()
    follower = context.Process(
        target=_follow_load_worker, args=(dsn, followed, calls, stop, heard_queue), daemon=True
    )
    follower.start()
    assert heard_queue.get(timeout=120) == "ready"
    workers = [
        context.Process(
            target=_load_worker, args=(dsn, index, agents, calls, barrier, results), daemon=True
        )
        for index in range(processes)
    ]
    for worker in workers:
        worker.start()
    reports = [results.get(timeout=3600) for _ in workers]
    for worker in workers:
        worker.join(60)
    stop.set()
    heard: dict[str, list[int]]
    heard, trips = heard_queue.get(timeout=120)
    follower.join(30)
    errors = [error for report in reports for error in report["errors"]]
    ours = [ns for report in reports for ns in report["ours"]]
    keyed = [ns for report in reports for ns in report["keyed"]]
    bare = [ns for report in reports for ns in report["bare"]]
    notify = [ns for report in reports for ns in report["notify"]]
    acknowledged = sum(report["acknowledged"] for report in reports)
    wall = {
        side: max(report["wall"][side] for report in reports)
        for side in ("ours", "keyed", "bare", "notify")
    }
    acked_at: dict[str, list[int]] = {}
    for report in reports:
        acked_at.update(report["acked_at"])
    push = [
        heard_ns - acked_ns
        for session_id, times in acked_at.items()
        for heard_ns, acked_ns in zip(heard.get(session_id, []), times, strict=False)
    ]
    missed = sum(len(times) for times in acked_at.values()) - len(push)
    with psycopg.Connection.connect(dsn) as conn:
        counted = conn.execute(
            f"SELECT count(*), count(DISTINCT (session_id, seq)), count(DISTINCT session_id) "
            f"FROM {postgres.TABLE}"
        ).fetchone()
        ends = conn.execute(
            f"SELECT bool_and(last = n - 1) FROM (SELECT max(seq) AS last, count(*) AS n "
            f"FROM {postgres.TABLE} GROUP BY session_id) AS per_session"
        ).fetchone()
    assert counted is not None
    assert ends is not None
    count, distinct, sessions = (int(value) for value in counted)
    gapless = bool(ends[0])
    expected = processes * agents * calls * 2  # the plain calls' sessions and the keyed ones
    lost = expected - count
    duplicates = count - distinct
    shape = f"{processes} proc x {agents} agents x {calls} calls"
    p50_ours, p99_ours = _percentiles(ours)
    p50_bare, p99_bare = _percentiles(bare)
    p50_notify, p99_notify = _percentiles(notify)
    per_side = expected // 2
    rate = {side: per_side / wall[side] for side in wall}
    p50_keyed, p99_keyed = _percentiles(keyed)
    ratio = p99_ours / p99_bare
    correct = lost == 0 and duplicates == 0 and gapless and not errors and missed == 0
    p50_push, p99_push = _percentiles(push) if push else (float("nan"), float("nan"))
    p50_trip, p99_trip = _percentiles(trips) if trips else (float("nan"), float("nan"))
    return [
        Row(
            "postgres load",
            f"{shape}: p99 append",
            f"call_tool+PostgresSession p50 {fmt_ns(p50_ours)} p99 {fmt_ns(p99_ours)}",
            f"bare INSERT, one txn: p50 {fmt_ns(p50_bare)} p99 {fmt_ns(p99_bare)}",
            ratio,
            f"p99 ≤{LOAD_TARGET}x",
            ratio <= LOAD_TARGET,
            note=(
                f"p50 ratio {p50_ours / p50_bare:.2f}x; INSERT+pg_notify, one txn (the old "
                f"append): p50 {fmt_ns(p50_notify)} p99 {fmt_ns(p99_notify)}, "
                f"{p99_notify / p99_bare:.2f}x"
            ),
            numbers={
                "p50_ns": p50_ours,
                "p99_ns": p99_ours,
                "bare_p50_ns": p50_bare,
                "bare_p99_ns": p99_bare,
                "notify_p50_ns": p50_notify,
                "notify_p99_ns": p99_notify,
            },
        ),
        Row(
            "postgres load",
            f"{shape}: throughput",
            f"{fmt_rate(rate['ours'])} calls",
            f"{fmt_rate(rate['bare'])} bare INSERTs",
            rate["ours"] / rate["bare"],
            f"≥{THROUGHPUT_TARGET}x",
            rate["ours"] / rate["bare"] >= THROUGHPUT_TARGET,
            note=(
                f"INSERT+pg_notify (the old append): {fmt_rate(rate['notify'])}, "
                f"{rate['notify'] / rate['bare']:.2f}x"
            ),
            numbers={
                "calls_per_s": rate["ours"],
                "bare_per_s": rate["bare"],
                "notify_per_s": rate["notify"],
            },
        ),
        Row(
            "postgres load",
            f"{shape}: throughput with call ids",
            f"{fmt_rate(rate['keyed'])} calls, each with a new call id",
            f"{fmt_rate(rate['bare'])} bare INSERTs",
            rate["keyed"] / rate["bare"],
            f"≥{THROUGHPUT_TARGET}x",
            rate["keyed"] / rate["bare"] >= THROUGHPUT_TARGET,
            note=(
                f"vs the calls without one: {rate['keyed'] / rate['ours']:.2f}x the rate, "
                f"p50 {fmt_ns(p50_keyed)} vs {fmt_ns(p50_ours)} ({p50_keyed / p50_ours:.2f}x), "
                f"p99 {fmt_ns(p99_keyed)} vs {fmt_ns(p99_ours)}"
            ),
            numbers={
                "calls_per_s": rate["keyed"],
                "bare_per_s": rate["bare"],
                "plain_calls_per_s": rate["ours"],
                "p50_ns": p50_keyed,
                "p99_ns": p99_keyed,
            },
        ),
        Row(
            "postgres load",
            f"{shape}: integrity",
            f"{count:,} rows in {sessions} sessions",
            f"{expected:,} calls (half with call ids)",
            None,
            "0 lost, 0 duplicate, none unheard",
            correct,
            note=(
                f"{acknowledged} acknowledged, {lost} lost, {duplicates} duplicate seqs, "
                f"gapless {gapless}, {len(push)} events followed, {missed} never heard"
                + (f"; errors: {errors[:3]}" if errors else "")
            ),
            numbers={
                "expected": expected,
                "rows": count,
                "lost": lost,
                "duplicates": duplicates,
                "acknowledged": acknowledged,
                "missed": missed,
            },
        ),
        Row(
            "postgres load",
            f"{shape}: push under load",
            f"call returned → follower: p50 {fmt_ns(p50_push)} p99 {fmt_ns(p99_push)}",
            f"{len(followed)} sessions followed in another process; there, SELECT 1: "
            f"p50 {fmt_ns(p50_trip)} p99 {fmt_ns(p99_trip)}",
            p99_push / p99_trip,
            f"p99 ≤{PUSH_TARGET_MS} ms",
            p99_push <= PUSH_TARGET_MS * 1e6,
            note=(
                "monotonic clock shared by the processes; during the load; the ratio is against "
                "one round trip from the follower's process (every 20 ms), the floor of a push "
                "that reads after its wake-up"
            ),
            numbers={
                "p50_ns": p50_push,
                "p99_ns": p99_push,
                "events": len(push),
                "round_trip_p50_ns": p50_trip,
                "round_trip_p99_ns": p99_trip,
            },
        ),
    ]


def _percentiles(values: list[int]) -> tuple[float, float]:
    ordered = sorted(values)
    return (
        float(statistics.median(ordered)),
        float(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]),
    )


def _follow_load_worker(dsn: str, sessions: list[str], calls: int, stop: Any, out: Any) -> None:
    """Follow ``sessions`` until each has ``calls`` events; the monotonic time each was heard."""
    import asyncio

    from dsh_tool_todo.stores.postgres import PostgresFollower

    async def follow(session_id: str, heard: list[int]) -> None:
        async with PostgresFollower(dsn, session_id) as follower:
            async for event in follower:
                heard.append(time.monotonic_ns())
                if event["seq"] == calls - 1:
                    return

    async def ping(trips: list[int]) -> None:
        """The floor of any push that reads after a wake-up: one round trip to that server."""
        import psycopg

        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            while True:
                started = time.perf_counter_ns()
                await conn.execute("SELECT 1")
                trips.append(time.perf_counter_ns() - started)
                await asyncio.sleep(0.02)

    async def main() -> tuple[dict[str, list[int]], list[int]]:
        heard: dict[str, list[int]] = {session_id: [] for session_id in sessions}
        tasks = [asyncio.ensure_future(follow(s, heard[s])) for s in sessions]
        trips: list[int] = []
        await asyncio.sleep(1.0)  # joined and listening
        pinging = asyncio.ensure_future(ping(trips))
        out.put("ready")
        grace = 10.0  # once the writers are done, for the last events (and the poll) to arrive
        while not all(task.done() for task in tasks) and grace > 0:
            await asyncio.wait(tasks, timeout=0.5)
            if stop.is_set():
                grace -= 0.5
        for task in [*tasks, pinging]:
            task.cancel()
        await asyncio.gather(*tasks, pinging, return_exceptions=True)
        return heard, trips

    out.put(asyncio.run(main()))


def _load_worker(dsn: str, index: int, agents: int, calls: int, barrier: Any, results: Any) -> None:
    """One process: ``agents`` threads, each an agent of the reference host with its session."""
    from psycopg_pool import ConnectionPool
    from workloads import KeyedSession, new_host, real_args

    from dsh_tool_todo.stores import postgres
    from dsh_tool_todo.stores.postgres import PostgresSession

    errors: list[str] = []
    timed: dict[str, list[int]] = {"ours": [], "keyed": [], "bare": [], "notify": []}
    acknowledged = 0
    lock = threading.Lock()
    kwargs = {"autocommit": True}
    with (
        ConnectionPool(dsn, min_size=POOL_SIZE, max_size=POOL_SIZE, kwargs=kwargs) as pool,
        ConnectionPool(dsn, min_size=POOL_SIZE, max_size=POOL_SIZE) as bare_pool,
    ):
        host = new_host()
        ids = [f"load-{index}-{agent}" for agent in range(agents)]
        sessions = [PostgresSession(pool, session_id) for session_id in ids]
        handles = [host.new_agent(session=session) for session in sessions]
        # the same calls, each with a new call id: the call-id index on the append path
        keyed_handles = [
            host.new_agent(session=KeyedSession(PostgresSession(pool, f"keyed-{session_id}")))
            for session_id in ids
        ]
        followed = set(range(0, agents, FOLLOW_EVERY))
        acked_at: dict[str, list[int]] = {ids[agent]: [] for agent in followed}
        plans = [real_args(6, variant) for variant in range(8)]
        texts = [postgres.encode_data(json.loads(plan)) for plan in plans]
        # Many short alternating phases put every side under the same noise.
        rounds = max(1, calls // 10)
        chunks = [calls // rounds + (1 if r < calls % rounds else 0) for r in range(rounds)]
        done = [0] * agents
        wall = {"ours": 0.0, "keyed": 0.0, "bare": 0.0, "notify": 0.0}

        def calls_phase(agent: int, count: int, side: str = "ours") -> None:
            nonlocal acknowledged
            timings = []
            acked = acked_at.get(ids[agent]) if side == "ours" else None
            handle = (handles if side == "ours" else keyed_handles)[agent]
            for n in range(count):
                started = time.perf_counter_ns()
                try:
                    host.call_tool("todo_write", plans[n % 8], agent=handle)
                except Exception as error:
                    with lock:
                        errors.append(f"{type(error).__name__}: {error}")
                    continue
                timings.append(time.perf_counter_ns() - started)
                if acked is not None:
                    acked.append(time.monotonic_ns())
            with lock:
                timed[side].extend(timings)
                acknowledged += len(timings)

        def ours_phase(agent: int, count: int) -> None:
            calls_phase(agent, count)

        def keyed_phase(agent: int, count: int) -> None:
            calls_phase(agent, count, "keyed")

        def bare_phase(agent: int, count: int, table: str, notify: bool) -> list[int]:
            timings = []
            for n in range(count):
                seq = done[agent] + n
                started = time.perf_counter_ns()
                with bare_pool.connection() as conn:
                    conn.execute(
                        f"INSERT INTO {table} (session_id, seq, type, data) "
                        "VALUES (%s, %s, %s, %s)",
                        (ids[agent], seq, "todo/write", texts[n % 8]),
                    )
                    if notify:
                        conn.execute("SELECT pg_notify(%s, %s)", (table, f"{seq}:{ids[agent]}"))
                    conn.commit()
                timings.append(time.perf_counter_ns() - started)
            return timings

        def insert_phase(agent: int, count: int) -> None:
            timings = bare_phase(agent, count, "bench_bare", False)
            with lock:
                timed["bare"].extend(timings)

        def notify_phase(agent: int, count: int) -> None:
            timings = bare_phase(agent, count, "bench_bare_notify", True)
            with lock:
                timed["notify"].extend(timings)

        phases = (
            ("ours", ours_phase),
            ("keyed", keyed_phase),
            ("bare", insert_phase),
            ("notify", notify_phase),
        )
        for number, chunk in enumerate(chunks):
            # the order rotates, so no side always runs just after another
            turn = number % len(phases)
            for name, phase in phases[turn:] + phases[:turn]:
                barrier.wait()
                started = time.perf_counter()
                threads = [
                    threading.Thread(target=phase, args=(agent, chunk)) for agent in range(agents)
                ]
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join()
                wall[name] += time.perf_counter() - started
            for agent in range(agents):
                done[agent] += chunk
    results.put(
        {
            "errors": errors,
            "ours": timed["ours"],
            "keyed": timed["keyed"],
            "bare": timed["bare"],
            "notify": timed["notify"],
            "acknowledged": acknowledged,
            "wall": wall,
            "acked_at": acked_at,
        }
    )


# --- one agent alone -----------------------------------------------------------------------


def _one_agent_row(dsn: str, *, seconds: float) -> Row:
    """One agent on one thread: a call through the host against a bare INSERT + pg_notify."""
    import psycopg
    from workloads import new_host, real_args

    from dsh_tool_todo.stores import postgres
    from dsh_tool_todo.stores.postgres import PostgresSession

    with psycopg.Connection.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE bench_alone (LIKE {postgres.TABLE} INCLUDING ALL)")
    plans = [real_args(6, variant) for variant in range(8)]
    texts = [postgres.encode_data(json.loads(plan)) for plan in plans]
    host = new_host()
    with (
        PostgresSession(dsn, "alone") as session,
        psycopg.Connection.connect(dsn) as conn,
    ):
        agent = host.new_agent(session=session)
        counter = {"ours": 0, "bare": 0}

        def contender() -> object:
            counter["ours"] += 1
            return host.call_tool("todo_write", plans[counter["ours"] % 8], agent=agent)

        def reference() -> object:
            seq = counter["bare"]
            counter["bare"] += 1
            conn.execute(
                "INSERT INTO bench_alone (session_id, seq, type, data) VALUES (%s, %s, %s, %s)",
                ("alone", seq, "todo/write", texts[seq % 8]),
            )
            conn.execute("SELECT pg_notify('bench_alone', %s)", (f"{seq}:alone",))
            conn.commit()
            return None

        result = paired(contender, reference, seconds=seconds, batch_ns=20_000_000)
    return Row(
        "postgres alone",
        "one agent, one thread: a todo_write call",
        f"call_tool+PostgresSession {fmt_ns(result.contender_ns)}",
        f"bare INSERT+pg_notify, one txn {fmt_ns(result.reference_ns)}",
        result.ratio,
        f"≤{ALONE_TARGET}x",
        result.ratio <= ALONE_TARGET,
        note=f"{result.rounds} rounds, middle half {result.spread}",
        numbers=result.numbers(),
    )


# --- the current plan at two log lengths -----------------------------------------------------


def _plan_row(dsn: str, small: int, large: int, *, seconds: float) -> Row:
    import psycopg

    from dsh_tool_todo.stores import postgres
    from dsh_tool_todo.stores.postgres._sql import SUMMARY

    with psycopg.Connection.connect(dsn, autocommit=True) as conn:
        # The summary's row trigger upserts one row per inserted event: a single statement of
        # N events of one session updates that row N times in one transaction, each update
        # walking the versions the earlier ones left (3.3 s at 20,000 events, hours at a
        # million). The seed goes in with it off, and the summary is then summed up once.
        conn.execute(f"ALTER TABLE {postgres.TABLE} DISABLE TRIGGER {SUMMARY}_append")
        for session_id, count in (("plan-small", small), ("plan-large", large)):
            # a todo/write every tenth event, the rest host events; the log ends on notes
            conn.execute(
                f"INSERT INTO {postgres.TABLE} (session_id, seq, type, data) "
                "SELECT %s, n, CASE WHEN n %% 10 = 0 THEN 'todo/write' ELSE 'note' END, "
                "CASE WHEN n %% 10 = 0 THEN json_build_object('todos', json_build_array("
                "json_build_object('content', 'Step ' || n, 'status', 'in_progress'))) "
                "ELSE '{\"n\": 1}'::json END FROM generate_series(0, %s) AS n",
                (session_id, count - 1),
            )
        conn.execute(f"ALTER TABLE {postgres.TABLE} ENABLE TRIGGER {SUMMARY}_append")
        conn.execute(f"SELECT {SUMMARY}_resum(ARRAY['plan-small', 'plan-large'])")
        summed = conn.execute(f"SELECT last_seq FROM {SUMMARY} WHERE session_id = 'plan-large'")
        assert summed.fetchall() == [(large - 1,)]
        conn.execute(f"VACUUM ANALYZE {postgres.TABLE}")
        expected = [{"content": f"Step {(large - 1) // 10 * 10}", "status": "in_progress"}]
        assert postgres.current_plan(conn, "plan-large") == expected

        def contender() -> object:
            return postgres.current_plan(conn, "plan-large")

        def reference() -> object:
            return postgres.current_plan(conn, "plan-small")

        result = paired(contender, reference, seconds=seconds)
    return Row(
        "postgres current plan",
        f"{large:,} vs {small:,} rows",
        f"current_plan at {large:,} {fmt_ns(result.contender_ns)}",
        f"at {small:,} {fmt_ns(result.reference_ns)}",
        result.ratio,
        f"≤{PLAN_TARGET}x",
        result.ratio <= PLAN_TARGET,
        note=f"one index probe; {result.rounds} rounds, middle half {result.spread}",
        numbers=result.numbers(),
    )


# --- push latency ------------------------------------------------------------------------


def _push_row(dsn: str, events: int) -> Row:
    from dsh_tool_todo.stores.postgres import PostgresSession

    context = multiprocessing.get_context("spawn")
    received = context.Queue()
    follower = context.Process(
        target=_follow_worker, args=(dsn, "push", events + 1, received), daemon=True
    )
    with PostgresSession(dsn, "push") as session:
        session.append("turn/start", {})  # seq 0: the follower's sign that it is listening
        follower.start()
        assert received.get(timeout=60) == ("ready", 0)
        acknowledged: dict[int, int] = {}
        started: dict[int, int] = {}
        for n in range(events):
            before = time.monotonic_ns()
            seq = session.append("note", {"n": n})["seq"]
            acknowledged[seq] = time.monotonic_ns()
            started[seq] = before
            time.sleep(0.01)  # latency, not throughput: one event at a time
    heard: dict[int, int] = dict(received.get(timeout=60))
    follower.join(30)
    after_commit = sorted(heard[seq] - acknowledged[seq] for seq in acknowledged)
    after_start = sorted(heard[seq] - started[seq] for seq in started)
    p50, p99 = _percentiles(after_commit)
    s50, s99 = _percentiles(after_start)
    return Row(
        "postgres push",
        f"{events} events, follower in another process",
        f"append returned → follower: p50 {fmt_ns(p50)} p99 {fmt_ns(p99)}",
        f"append called → follower: p50 {fmt_ns(s50)} p99 {fmt_ns(s99)}",
        None,
        note="monotonic clock shared by the two processes; NOTIFY, then a read of the new rows",
        numbers={"p50_ns": p50, "p99_ns": p99, "from_call_p50_ns": s50, "from_call_p99_ns": s99},
    )


def _follow_worker(dsn: str, session_id: str, count: int, received: Any) -> None:
    import asyncio

    from dsh_tool_todo.stores.postgres import PostgresFollower

    async def follow() -> dict[int, int]:
        heard: dict[int, int] = {}
        async with PostgresFollower(dsn, session_id) as follower:
            async for event in follower:
                now = time.monotonic_ns()
                if event["seq"] == 0:
                    received.put(("ready", 0))
                else:
                    heard[event["seq"]] = now
                if event["seq"] == count - 1:
                    break
        return heard

    received.put(list(asyncio.run(follow()).items()))
