"""The fleet view at 10,000 sessions: first paint, change-to-list latency, idle cost.

Each measurement runs ``dsh-todo serve`` in its own process, on a directory of
10,000 JSONL logs and on a PostgreSQL database of 10,000 sessions:

- first paint: the first ``GET /api/sessions?limit=200`` a freshly started
  server answers (what the list page draws first), median of ``rounds`` starts;
- change to list: a client holds the list stream (``/api/sessions/stream``)
  and asks for the list each time it rings, as the page does; another process
  writes a ``todo/write`` to a random session every 100 ms whose in-progress
  item carries the wall-clock time; the latency is the time the row first
  shows that item minus that stamp, p99 over 100 changes;
- idle page: the server's CPU time (user + system, from /proc) over a window
  while one list stream is open and nothing changes;
- idle streams (JSONL): 1,000 session streams held open on 1,000 logs, the
  server's CPU share over a window and its RSS, beside the same server with the
  directory watcher off (each stream polls its log every 25 ms, as before).

    python benchmarks/bench_fleet.py [--quick]
    python benchmarks/bench_fleet.py --paint 7 --against OTHER/src   # first paint only
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_web import HOST, _cpu_seconds, _free_port  # noqa: E402
from report import Row, fmt_ns  # noqa: E402

SESSIONS = 10_000
STAMP = "changed at "
ADMIN_DSN = os.environ.get("DSH_TODO_BENCH_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")
_SERVE = (
    "import sys, uvicorn; from pathlib import Path; "
    "from dsh_tool_todo.stores.jsonl import JsonlReader; "
    "from dsh_tool_todo.web.app import create_app; "
    "port = int(sys.argv[2]); "
    "reader = JsonlReader(Path(sys.argv[1]), watch=sys.argv[3] == 'watch'); "
    "print('Ctrl-C', flush=True); "
    "uvicorn.run(create_app(reader, port=port), host='127.0.0.1', port=port, log_level='warning')"
)


def _line(seq: int, kind: str, data: object) -> bytes:
    return json.dumps({"seq": seq, "type": kind, "data": data}, separators=(",", ":")).encode()


def _plan(active: str) -> dict[str, Any]:
    return {
        "todos": [
            {"content": "Read the issue", "status": "completed"},
            {"content": active, "status": "in_progress"},
            {"content": "Write the tests", "status": "pending"},
        ]
    }


def _directory(sessions: int) -> Path:
    directory = Path(tempfile.mkdtemp(prefix="dsh-bench-fleet-"))
    for number in range(sessions):
        parent = {"parent": f"s{number // 10:05}"} if number >= 10 else None
        lines = [_line(0, "session/link", parent)] if parent else []
        lines.append(_line(len(lines), "todo/write", _plan("Start")))
        (directory / f"s{number:05}.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    return directory


@contextmanager
def _database(sessions: int) -> Iterator[str]:
    import psycopg

    from dsh_tool_todo.stores import postgres

    name = f"bench_fleet_{uuid.uuid4().hex}"
    try:
        admin = psycopg.Connection.connect(ADMIN_DSN, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as error:
        raise OSError(str(error).strip().splitlines()[0]) from None
    with admin:
        admin.execute(f"CREATE DATABASE {name}")
    parts = urlsplit(ADMIN_DSN)
    url = urlunsplit(parts._replace(path=f"/{name}"))
    try:
        postgres.setup(url)
        with psycopg.Connection.connect(url, autocommit=True) as conn:
            plan = json.dumps(_plan("Start"))
            conn.execute(
                f"INSERT INTO {postgres.TABLE} (session_id, seq, type, data) "
                "SELECT format('s%%s', lpad(n::text, 5, '0')), s, "
                "CASE s WHEN 0 THEN 'session/link' ELSE 'todo/write' END, "
                "CASE s WHEN 0 THEN json_build_object('parent', "
                "format('s%%s', lpad((n / 10)::text, 5, '0'))) ELSE %s::json END "
                "FROM generate_series(0, %s) AS n, generate_series(0, 1) AS s",
                (plan, sessions - 1),
            )
        yield url
    finally:
        postgres.close_shared_pools()
        with psycopg.Connection.connect(ADMIN_DSN, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@contextmanager
def _server(source: str, *, watch: bool = True) -> Iterator[tuple[int, subprocess.Popen[str]]]:
    port = _free_port()
    if source.startswith("postgresql://") or watch:
        command = [sys.executable, "-m", "dsh_tool_todo", "serve", source, "--port", str(port)]
    else:
        command = [sys.executable, "-c", _SERVE, source, str(port), "poll"]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        while "Ctrl-C" not in server.stdout.readline():
            if server.poll() is not None:
                error = server.stderr.read() if server.stderr else ""
                raise RuntimeError(f"the server did not start: {error}")
        yield port, server
    finally:
        server.terminate()
        server.wait(timeout=10)
        for pipe in (server.stdout, server.stderr):
            if pipe is not None:
                pipe.close()


def first_paint(source: str, rounds: int) -> dict[str, float]:
    cold, warm = [], []
    for _ in range(rounds):
        with _server(source) as (port, _), httpx.Client(timeout=60) as client:
            url = f"http://{HOST}:{port}/api/sessions?limit=200"
            began = time.perf_counter()
            body = client.get(url).json()
            cold.append(time.perf_counter() - began)
            assert body["total"] == SESSIONS, body.get("total")
            began = time.perf_counter()
            client.get(url).raise_for_status()
            warm.append(time.perf_counter() - began)
    cold.sort()
    warm.sort()
    return {"cold": cold[len(cold) // 2], "warm": warm[len(warm) // 2], "rounds": rounds}


def _write_change(source: str, name: str, seq: int, stamp: str) -> None:
    if source.startswith("postgresql://"):
        import psycopg

        from dsh_tool_todo.stores import postgres

        with psycopg.Connection.connect(source, autocommit=True) as conn:
            conn.execute(
                f"INSERT INTO {postgres.TABLE} (session_id, seq, type, data) "
                "VALUES (%s, %s, 'todo/write', %s)",
                (name, seq, json.dumps(_plan(stamp))),
            )
        return
    with open(Path(source) / f"{name}.jsonl", "ab") as log:
        log.write(_line(seq, "todo/write", _plan(stamp)) + b"\n")


async def _change_latency(port: int, source: str, changes: int) -> list[float]:
    base = f"http://{HOST}:{port}"
    seen: dict[str, float] = {}
    ready = asyncio.Event()
    async with httpx.AsyncClient(base_url=base, timeout=httpx.Timeout(30, read=None)) as client:

        async def look() -> None:
            body = (await client.get("/api/sessions?limit=200")).json()
            now = time.time()
            for row in body["sessions"]:
                doing = row.get("workingOn") or ""
                if doing.startswith(STAMP) and doing not in seen:
                    seen[doing] = now - float(doing[len(STAMP) :])

        async def listen() -> None:
            async with client.stream("GET", "/api/sessions/stream") as response:
                ready.set()
                async for line in response.aiter_lines():
                    if line.startswith("event: changed"):
                        await look()

        listener = asyncio.create_task(listen())
        await ready.wait()
        await asyncio.sleep(1.0)
        next_seq: dict[str, int] = {}
        names = [f"s{number:05}" for number in range(SESSIONS)]
        random.seed(19)
        for _ in range(changes):
            name = random.choice(names)
            seq = next_seq.get(name, 2 if int(name[1:]) >= 10 else 1)
            next_seq[name] = seq + 1
            stamp = f"{STAMP}{time.time():.6f}"
            await asyncio.to_thread(_write_change, source, name, seq, stamp)
            await asyncio.sleep(0.1)
        await asyncio.sleep(2.0)
        listener.cancel()
        await asyncio.gather(listener, return_exceptions=True)
    return sorted(seen.values()) + [float("inf")] * (changes - len(seen))


def change_latency(source: str, changes: int) -> dict[str, Any]:
    with _server(source) as (port, _):
        latencies = asyncio.run(_change_latency(port, source, changes))
    return {
        "changes": changes,
        "p50": latencies[len(latencies) // 2],
        "p99": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))],
        "missed": sum(1 for value in latencies if value == float("inf")),
    }


async def _hold(port: int, paths: list[str], seconds: float, pid: int) -> tuple[float, int]:
    limits = httpx.Limits(max_connections=len(paths) + 10, max_keepalive_connections=0)
    opened = asyncio.Event()
    count = 0
    async with httpx.AsyncClient(limits=limits, timeout=httpx.Timeout(30, read=None)) as client:

        async def one(path: str) -> None:
            nonlocal count
            async with client.stream("GET", f"http://{HOST}:{port}{path}") as response:
                lines = response.aiter_lines()
                async for _ in lines:
                    break
                count += 1
                if count == len(paths):
                    opened.set()
                async for _ in lines:
                    pass

        tasks = [asyncio.create_task(one(path)) for path in paths]
        await asyncio.wait_for(opened.wait(), 120)
        await asyncio.sleep(2.0)  # settle
        cpu, wall = _cpu_seconds(pid), time.monotonic()
        await asyncio.sleep(seconds)
        share = (_cpu_seconds(pid) - cpu) / (time.monotonic() - wall)
        rss = _rss(pid)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return share, rss


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def idle_page(source: str, seconds: float) -> dict[str, float]:
    with _server(source) as (port, server):
        httpx.get(f"http://{HOST}:{port}/api/sessions?limit=200", timeout=60).raise_for_status()
        share, rss = asyncio.run(_hold(port, ["/api/sessions/stream"], seconds, server.pid))
    return {"cpu_share": share, "rss": rss, "seconds": seconds}


def idle_streams(streams: int, seconds: float) -> dict[str, Any]:
    directory = _directory(streams)
    paths = [f"/api/sessions/s{number:05}/stream" for number in range(streams)]
    result: dict[str, Any] = {"streams": streams, "seconds": seconds}
    for label, watch in (("watched", True), ("polled", False)):
        with _server(str(directory), watch=watch) as (port, server):
            share, rss = asyncio.run(_hold(port, paths, seconds, server.pid))
        result[label] = {"cpu_share": share, "rss": rss}
    shutil.rmtree(directory, ignore_errors=True)
    return result


def rows(*, quick: bool) -> list[Row]:
    # the server runs in a child process: without the web extra, say so here, not as its traceback
    import dsh_tool_todo.web.app  # noqa: F401

    rounds, changes, idle_seconds = (1, 30, 5.0) if quick else (3, 100, 60.0)
    stream_count, stream_seconds = (200, 5.0) if quick else (1000, 30.0)
    result: list[Row] = []
    directory = _directory(SESSIONS)
    sources: list[tuple[str, Any]] = [("JSONL", lambda: _nullcontext(str(directory)))]
    sources.append(("PostgreSQL", lambda: _database(SESSIONS)))
    for label, opened in sources:
        try:
            with opened() as source:
                paint = first_paint(source, rounds)
                print(f"{label} first paint: {paint}", file=sys.stderr)
                change = change_latency(source, changes)
                print(f"{label} change latency: {change}", file=sys.stderr)
                idle = idle_page(source, idle_seconds)
                print(f"{label} idle page: {idle}", file=sys.stderr)
        except OSError as error:
            result.append(Row("fleet list", f"{label}: {error}", "—", "—", None))
            continue
        result += [
            Row(
                "fleet list first paint",
                f"{label}, {SESSIONS} sessions, fresh server, limit 200",
                fmt_ns(paint["cold"] * 1e9),
                "goal 300 ms",
                paint["cold"] / 0.3,
                target="≤ 300 ms",
                met=paint["cold"] <= 0.3,
                note=f"warm {fmt_ns(paint['warm'] * 1e9)}; median of {rounds} starts",
                numbers=paint,
            ),
            Row(
                "fleet list change latency",
                f"{label}, {SESSIONS} sessions, {changes} changes 100 ms apart",
                f"p99 {fmt_ns(change['p99'] * 1e9)}",
                "goal 1 s",
                change["p99"] / 1.0,
                target="p99 ≤ 1 s",
                met=change["p99"] <= 1.0,
                note=f"p50 {fmt_ns(change['p50'] * 1e9)}; {change['missed']} never shown",
                numbers=change,
            ),
            Row(
                "fleet list idle page",
                f"{label}, {SESSIONS} sessions, one open list, {idle_seconds:.0f} s",
                f"{idle['cpu_share']:.2%} of a core",
                "goal 2%",
                idle["cpu_share"] / 0.02,
                target="≤ 2% of a core",
                met=idle["cpu_share"] <= 0.02,
                note=f"server RSS {idle['rss'] / 2**20:.0f} MiB",
                numbers=idle,
            ),
        ]
    shutil.rmtree(directory, ignore_errors=True)
    streams = idle_streams(stream_count, stream_seconds)
    print(f"idle streams: {streams}", file=sys.stderr)
    watched, polled = streams["watched"], streams["polled"]
    result.append(
        Row(
            "idle session streams",
            f"JSONL, {stream_count} streams held {stream_seconds:.0f} s, watcher vs polling",
            f"{watched['cpu_share']:.1%} of a core, {watched['rss'] / 2**20:.0f} MiB",
            f"{polled['cpu_share']:.1%} of a core, {polled['rss'] / 2**20:.0f} MiB",
            watched["cpu_share"] / polled["cpu_share"] if polled["cpu_share"] else None,
            target="≤ 10% of a core, RSS not above polling's",
            met=watched["cpu_share"] <= 0.10 and watched["rss"] <= polled["rss"] * 1.05,
            numbers=streams,
        )
    )
    return result


@contextmanager
def _nullcontext(value: str) -> Iterator[str]:
    yield value


def paint_against(rounds: int, trees: dict[str, str]) -> dict[str, dict[str, list[float]]]:
    """First paint only, on one directory of ``SESSIONS`` logs: a fresh server of each tree
    (label: its ``src`` directory, put on ``PYTHONPATH``) in turn, ``rounds`` times, the
    order alternating; each tree's times, sorted."""
    directory = _directory(SESSIONS)
    found: dict[str, dict[str, list[float]]] = {label: {"cold": [], "warm": []} for label in trees}
    saved = os.environ.get("PYTHONPATH")
    try:
        for round_ in range(rounds):
            order = list(trees.items())
            for label, src in order if round_ % 2 == 0 else order[::-1]:
                os.environ["PYTHONPATH"] = src
                paint = first_paint(str(directory), 1)
                found[label]["cold"].append(paint["cold"])
                found[label]["warm"].append(paint["warm"])
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
        shutil.rmtree(directory, ignore_errors=True)
    return {label: {k: sorted(v) for k, v in times.items()} for label, times in found.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--paint",
        type=int,
        metavar="ROUNDS",
        help="only the JSONL first paint, ROUNDS fresh servers of this tree (and of --against)",
    )
    parser.add_argument(
        "--against",
        metavar="SRC",
        help="with --paint: another tree's src directory, its servers alternating with these",
    )
    args = parser.parse_args()
    if args.paint:
        trees = {"this tree": str(HERE.parent / "src")}
        if args.against:
            trees["against"] = args.against
        for label, times in paint_against(args.paint, trees).items():
            shown = {
                kind: f"{fmt_ns(found[len(found) // 2] * 1e9)} "
                f"[{', '.join(f'{t * 1e3:.0f}' for t in found)} ms]"
                for kind, found in times.items()
            }
            print(f"{label}: first paint median {shown['cold']}; second request {shown['warm']}")
        print(f"load average {os.getloadavg()[0]:.1f}")
        return 0
    for row in rows(quick=args.quick):
        print(f"{row.section}: {row.case}: {row.contender} vs {row.reference}; {row.note}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
