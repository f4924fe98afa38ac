"""The web view: push latency from append to frame under load, and the tail page of a huge log.

Push latency: ``dsh-todo serve`` runs in its own process on a directory of
``sessions`` logs; one HTTP client here holds a stream on every session (a
browser opens only six connections per host, so a client library stands in
for many viewers); another process appends one ``todo/write`` a second to
each session, spread over the second, writing the wall-clock time into the
content. A frame's latency is its arrival time minus that stamp. The server's
CPU share is its user + system time over the measured window, from /proc.

Tail page: ``GET /events?limit=100`` on a 1 GiB log beside a 10 MiB one; the
page is read from the end of the file, so the two should cost the same.

    python benchmarks/bench_web.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_replay import write_log  # noqa: E402
from report import Row, fmt_ns  # noqa: E402

HOST = "127.0.0.1"
STAMP = "appended at "


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind((HOST, 0))
        port: int = probe.getsockname()[1]
        return port


def _appender(directory: str, sessions: int, seconds: float, start_at: float) -> None:
    """Append one todo/write a second to each session, spread evenly over the second."""
    from dsh_tool_todo.stores.jsonl import JsonlSession

    logs = [JsonlSession(Path(directory) / f"s{index:03}.jsonl") for index in range(sessions)]
    step = 1.0 / sessions
    count = 0
    while time.time() < start_at:
        time.sleep(0.001)
    try:
        while True:
            due = start_at + count * step
            if due - start_at >= seconds:
                break
            delay = due - time.time()
            if delay > 0:
                time.sleep(delay)
            content = f"{STAMP}{time.time_ns()}"
            logs[count % sessions].append(
                "todo/write", {"todos": [{"content": content, "status": "in_progress"}]}
            )
            count += 1
    finally:
        for log in logs:
            log.close()


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / os.sysconf("SC_CLK_TCK")


def _plan_of(frame: dict[str, Any], form: str | None) -> list[dict[str, str]]:
    """The plan a frame carries in stream form ``form`` (``None``: projection frames)."""
    if form is None:
        return frame.get("plan") or []
    if form == "ag-ui":  # the activity carries it; the state delta after it is the same plan
        if frame["type"] != "ACTIVITY_SNAPSHOT":
            return []
        return frame["content"]["todos"] or []
    return (frame.get("data") or {}).get("todos") or []


async def _hold_streams(
    port: int,
    sessions: int,
    until: float,
    latencies: list[float],
    ready: asyncio.Event,
    form: str | None = None,
) -> None:
    limits = httpx.Limits(max_connections=sessions + 10, max_keepalive_connections=0)
    timeout = httpx.Timeout(10.0, read=None)
    opened = 0

    async with httpx.AsyncClient(limits=limits, timeout=timeout) as client:

        async def one(index: int) -> None:
            nonlocal opened
            url = f"http://{HOST}:{port}/api/sessions/s{index:03}/stream"
            if form is not None:
                url += f"?format={form}"
            async with client.stream("GET", url) as response:
                lines = response.aiter_lines()
                async for line in lines:
                    # the snapshot (after the run's or message's start): the stream is live
                    opening = '"type":"RUN_STARTED"' in line or '"type":"start"' in line
                    if line.startswith("data:") and not opening:
                        break
                opened += 1
                if opened == sessions:
                    ready.set()
                async for line in lines:
                    if not line.startswith("data:"):
                        continue
                    arrived = time.time_ns()
                    frame = json.loads(line[5:])
                    plan = _plan_of(frame, form)
                    if plan and plan[0]["content"].startswith(STAMP):
                        sent = int(plan[0]["content"][len(STAMP) :])
                        latencies.append((arrived - sent) / 1e9)

        tasks = [asyncio.create_task(one(index)) for index in range(sessions)]
        try:
            await asyncio.sleep(max(0.0, until - time.time()))
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


def push_latency(sessions: int, seconds: float, form: str | None = None) -> dict[str, Any]:
    """Measure append→frame latency with ``sessions`` streams, each session appending 1/s.

    ``form`` reads the streams as ``?format=ag-ui`` or ``ai-sdk`` instead of projection frames.
    """
    directory = tempfile.mkdtemp(prefix="dsh-bench-web-")
    from dsh_tool_todo.stores.jsonl import JsonlSession

    for index in range(sessions):
        with JsonlSession(Path(directory) / f"s{index:03}.jsonl") as log:
            log.append("turn/start", {})
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "dsh_tool_todo", "serve", directory, "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        while "Ctrl-C" not in server.stdout.readline():
            if server.poll() is not None:
                error = server.stderr.read() if server.stderr else ""
                raise RuntimeError(f"dsh-todo serve did not start: {error}")

        latencies: list[float] = []

        async def run() -> tuple[float, float]:
            ready = asyncio.Event()
            warm_until = time.time() + 60
            holder = asyncio.create_task(
                _hold_streams(port, sessions, warm_until + seconds + 5, latencies, ready, form)
            )
            await asyncio.wait_for(ready.wait(), 60)
            start_at = time.time() + 0.5
            appender = multiprocessing.get_context("spawn").Process(
                target=_appender, args=(directory, sessions, seconds, start_at)
            )
            appender.start()
            await asyncio.sleep(max(0.0, start_at - time.time()))
            cpu_before, wall_before = _cpu_seconds(server.pid), time.monotonic()
            await asyncio.sleep(seconds)
            cpu_after, wall_after = _cpu_seconds(server.pid), time.monotonic()
            await asyncio.get_running_loop().run_in_executor(None, appender.join)
            await asyncio.sleep(0.5)  # the last frames
            holder.cancel()
            await asyncio.gather(holder, return_exceptions=True)
            return cpu_after - cpu_before, wall_after - wall_before

        cpu, wall = asyncio.run(run())
    finally:
        server.terminate()
        server.wait(timeout=10)
        for pipe in (server.stdout, server.stderr):
            if pipe is not None:
                pipe.close()
    latencies.sort()
    expected = int(sessions * seconds)
    return {
        "sessions": sessions,
        "seconds": seconds,
        "frames": len(latencies),
        "expected_frames": expected,
        "p50": statistics.median(latencies),
        "p99": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))],
        "max": latencies[-1],
        "server_cpu_share": cpu / wall,
    }


def tail_page(sizes_mb: tuple[int, int]) -> dict[str, Any]:
    """The median time of one tail page (100 events) on each log size, through the app."""
    from dsh_tool_todo.web.app import create_app

    directory = Path(tempfile.mkdtemp(prefix="dsh-bench-tail-"))
    result: dict[str, Any] = {}
    try:
        for megabytes in sizes_mb:
            write_log(directory / f"log{megabytes}.jsonl", megabytes * 2**20)
        app = create_app(directory)

        async def pages() -> dict[int, float]:
            times: dict[int, float] = {}
            async with app.router.lifespan_context(app):
                transport = httpx.ASGITransport(app=app)
                base = "http://127.0.0.1:8765"
                async with httpx.AsyncClient(transport=transport, base_url=base) as client:
                    for megabytes in sizes_mb:
                        url = f"/api/sessions/log{megabytes}/events?limit=100"
                        samples = []
                        for _ in range(30):
                            began = time.perf_counter()
                            response = await client.get(url)
                            samples.append(time.perf_counter() - began)
                            assert len(response.json()["events"]) == 100
                        times[megabytes] = statistics.median(samples)
            return times

        times = asyncio.run(pages())
        for megabytes in sizes_mb:
            result[f"{megabytes}MB"] = times[megabytes]
    finally:
        for megabytes in sizes_mb:
            (directory / f"log{megabytes}.jsonl").unlink(missing_ok=True)
        directory.rmdir()
    return result


def rows(*, quick: bool) -> list[Row]:
    # the server runs in a child process: without the web extra, say so here, not as its traceback
    import dsh_tool_todo.web.app  # noqa: F401

    sessions, seconds = (10, 3.0) if quick else (100, 30.0)
    push = push_latency(sessions, seconds)
    small, big = (10, 50) if quick else (10, 1024)
    tail = tail_page((small, big))
    ratio = tail[f"{big}MB"] / tail[f"{small}MB"]
    return [
        Row(
            "web push latency",
            f"{sessions} streams, {sessions} sessions appending 1/s, {seconds:.0f} s",
            f"p99 {fmt_ns(push['p99'] * 1e9)}",
            "goal 100 ms",
            push["p99"] / 0.1,
            target="p99 < 100 ms",
            met=push["p99"] < 0.1,
            note=(
                f"p50 {fmt_ns(push['p50'] * 1e9)}, max {fmt_ns(push['max'] * 1e9)}; "
                f"{push['frames']}/{push['expected_frames']} frames; "
                f"server CPU {push['server_cpu_share']:.0%} of one core"
            ),
            numbers=push,
        ),
        Row(
            "web tail page",
            f"100 events, {big} MiB log vs {small} MiB",
            fmt_ns(tail[f"{big}MB"] * 1e9),
            fmt_ns(tail[f"{small}MB"] * 1e9),
            ratio,
            target="flat (at most 2x)",
            met=ratio <= 2.0,
            numbers=tail,
        ),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--format",
        choices=["ag-ui", "ai-sdk"],
        help="only the push latency, with the streams read in this form and as projection "
        "frames, alternately, 3 rounds each",
    )
    args = parser.parse_args()
    if args.format:
        sessions, seconds = (10, 3.0) if args.quick else (100, 30.0)
        results: dict[str, list[float]] = {"projection": [], args.format: []}
        for _ in range(3):
            for form in (None, args.format):
                push = push_latency(sessions, seconds, form)
                assert push["frames"] == push["expected_frames"], push
                results[form or "projection"].append(push["p99"])
        for name, p99s in results.items():
            shown = ", ".join(fmt_ns(p99 * 1e9) for p99 in p99s)
            print(f"{name}: p99 per round {shown}; median {fmt_ns(statistics.median(p99s) * 1e9)}")
        return 0
    for row in rows(quick=args.quick):
        print(f"{row.section}: {row.case}: {row.contender} vs {row.reference}; {row.note}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
