"""The cost of carrying a lead's sub-agents on its AG-UI stream: frames and server CPU per write.

``dsh-todo serve`` runs in its own process on a directory holding a lead session and 20
sub-agents linked under it (``JsonlSession(path, parent=..., parent_call_id=...)``, keyed
``lead/agent-NN@cNN`` as the adapters key a delegated run, in an owner registry's file
names), each with a plan written. One client here holds one stream of the lead while a thread
here writes a plan of 6 items of 43 characters every 50 ms (each session of the fleet about
once a second):

- tree: ``?format=ag-ui&tree=1``, the writes going round the 21 sessions (lead first);
- single plan (the reference): ``?format=ag-ui``, as many writes, all to the lead: every
  write shown, as on the tree stream;
- lead alone: ``?format=ag-ui``, the writes going round the 21 sessions as for the tree: what
  the server pays for a fleet's writes while it shows only the lead's.

Frames per write: the stream's data frames after its opening, per write. Server CPU per
write: the server's time on a CPU, all its threads (``/proc/PID/task/*/schedstat``, in
nanoseconds; the process's clock ticks are kept beside it), from the first write to half a
second after the last frame arrived, less what it spent in as long a time with the stream
open and nothing written (measured over 2 s just before), per write. Each side runs on a
fresh copy of the fleet and a fresh server, the sides' order rotating from round to round; a
row's figures are the medians over the rounds.

    python benchmarks/bench_tree.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_fleet import _server  # noqa: E402
from bench_web import HOST, _cpu_seconds  # noqa: E402
from report import Row, fmt_ns  # noqa: E402
from workloads import real_todos  # noqa: E402

LEAD = "lead"
SUB_AGENTS = 20
ITEMS = 6  # the median plan length of real calls, each content 43 characters
PACE = 0.05  # seconds between two writes of the fleet
SETTLE = 0.5  # seconds after the last frame still counted: the list's reread (0.2 s gap) lands
IDLE = 2.0  # seconds the stream is held before the writes: what the server spends meanwhile
OPENING = {"tree": 3 + 2 * SUB_AGENTS, "single": 3, "lead": 3}  # frames before the first write


@dataclass(frozen=True)
class Side:
    name: str
    tree: bool  # the stream carries the sub-agents
    round_robin: bool  # the writes go round the fleet (else all to the lead)


SIDES = (
    Side("tree", True, True),
    Side("single", False, False),
    Side("lead", False, True),
)


def _keys() -> list[tuple[str, str | None]]:
    """Each session's owner key and the delegating call's id (``None``: the lead)."""
    return [(LEAD, None)] + [
        (f"{LEAD}/agent-{n:02}@c{n:02}", f"c{n:02}") for n in range(1, SUB_AGENTS + 1)
    ]


def _open_fleet(directory: Path) -> list[Any]:
    """The lead and its sub-agents' sessions, each with its first plan written, kept open."""
    from dsh_tool_todo.core.contract import EVENT_TYPE
    from dsh_tool_todo.stores.jsonl import JsonlSession
    from dsh_tool_todo.stores.owners import owner_file_name

    lead_name = owner_file_name(LEAD).removesuffix(".jsonl")
    sessions = []
    for index, (key, call) in enumerate(_keys()):
        link = {} if call is None else {"parent": lead_name, "parent_call_id": call}
        session = JsonlSession(directory / owner_file_name(key), **link)
        session.append(EVENT_TYPE, {"todos": real_todos(ITEMS, index)})
        sessions.append(session)
    return sessions


def _write(sessions: list[Any], targets: list[int]) -> None:
    """A plan written to ``sessions[target]`` for each target in turn, :data:`PACE` apart."""
    from dsh_tool_todo.core.contract import EVENT_TYPE

    start = time.monotonic()
    for count, target in enumerate(targets):
        delay = start + count * PACE - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        sessions[target].append(EVENT_TYPE, {"todos": real_todos(ITEMS, 100 + count)})


def _cpu_ns(pid: int) -> int:
    """The process's time on a CPU so far, every thread's, in nanoseconds."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError):  # a thread that ended meanwhile
            continue
    return total


async def _measure(
    port: int, pid: int, side: Side, sessions: list[Any], writes: int
) -> dict[str, Any]:
    query = "format=ag-ui&tree=1" if side.tree else "format=ag-ui"
    url = f"http://{HOST}:{port}/api/sessions/{LEAD}/stream?{query}"
    targets = [k % len(sessions) if side.round_robin else 0 for k in range(writes)]
    lead_writes = targets.count(0)
    expected = 2 * lead_writes + (len(targets) - lead_writes if side.tree else 0)
    kinds: Counter[str] = Counter()
    opened = asyncio.Event()

    async with httpx.AsyncClient(timeout=httpx.Timeout(30, read=None)) as client:

        async def listen() -> None:
            seen = 0
            async with client.stream("GET", url) as response:
                response.raise_for_status()
                async for line in response.aiter_lines():
                    if not line.startswith("data:"):
                        continue
                    seen += 1
                    if seen <= OPENING[side.name]:
                        if seen == OPENING[side.name]:
                            opened.set()
                        continue
                    kinds[json.loads(line[5:])["type"]] += 1

        listener = asyncio.create_task(listen())
        try:
            await asyncio.wait_for(opened.wait(), 60)
            await asyncio.sleep(1.0)  # the followers started, the rows read
            idle_ns, idle_began = _cpu_ns(pid), time.monotonic()
            await asyncio.sleep(IDLE)
            idle_share = (_cpu_ns(pid) - idle_ns) / 1e9 / (time.monotonic() - idle_began)
            ns, ticks, began = _cpu_ns(pid), _cpu_seconds(pid), time.monotonic()
            await asyncio.to_thread(_write, sessions, targets)
            deadline = time.monotonic() + 30
            while sum(kinds.values()) < expected and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            await asyncio.sleep(SETTLE)
            cpu_ns, cpu_ticks = _cpu_ns(pid) - ns, _cpu_seconds(pid) - ticks
            wall = time.monotonic() - began
        finally:
            listener.cancel()
            await asyncio.gather(listener, return_exceptions=True)
    frames = sum(kinds.values())
    return {
        "writes": writes,
        "frames": frames,
        "expected_frames": expected,
        "kinds": dict(kinds),
        "frames_per_write": frames / writes,
        "cpu_per_write": (cpu_ns / 1e9 - idle_share * wall) / writes,
        "gross_cpu_per_write": cpu_ns / 1e9 / writes,
        "cpu_ticks_per_write": cpu_ticks / writes,
        "window": wall,
        "idle_share": idle_share,
    }


def measure(side: Side, writes: int) -> dict[str, Any]:
    """One side on a fresh fleet and a fresh server."""
    directory = Path(tempfile.mkdtemp(prefix="dsh-bench-tree-"))
    sessions = _open_fleet(directory)
    try:
        with _server(str(directory)) as (port, server):
            return asyncio.run(_measure(port, server.pid, side, sessions, writes))
    finally:
        for session in sessions:
            session.close()
        shutil.rmtree(directory, ignore_errors=True)


def run_rounds(rounds: int, writes: int) -> dict[str, list[dict[str, Any]]]:
    """Every side once a round, the first side rotating from round to round."""
    results: dict[str, list[dict[str, Any]]] = {side.name: [] for side in SIDES}
    for number in range(rounds):
        order = SIDES[number % len(SIDES) :] + SIDES[: number % len(SIDES)]
        for side in order:
            result = measure(side, writes)
            print(f"round {number + 1} {side.name}: {result}", file=sys.stderr)
            results[side.name].append(result)
    return results


def _median(results: list[dict[str, Any]], key: str) -> float:
    return statistics.median(result[key] for result in results)


def rows(*, quick: bool) -> list[Row]:
    # the server runs in a child process: without the web extra, say so here, not as its traceback
    import dsh_tool_todo.web.app  # noqa: F401

    rounds, writes = (1, 5 * (SUB_AGENTS + 1)) if quick else (3, 20 * (SUB_AGENTS + 1))
    results = run_rounds(rounds, writes)
    tree, single, lead = (results[side.name] for side in SIDES)
    frames = {name: _median(found, "frames_per_write") for name, found in results.items()}
    cpu = {name: _median(found, "cpu_per_write") for name, found in results.items()}
    missed = {
        name: sum(r["expected_frames"] - min(r["frames"], r["expected_frames"]) for r in found)
        for name, found in results.items()
    }
    case = f"lead + {SUB_AGENTS} sub-agents, {writes} writes {PACE * 1000:.0f} ms apart"
    # each round's tree beside that round's single-plan stream: the ratio is their median
    paired = zip(tree, single, strict=True)
    ratios = sorted(t["cpu_per_write"] / s["cpu_per_write"] for t, s in paired)
    spread = ", ".join(f"{ratio:.2f}x" for ratio in ratios)
    numbers = {"rounds": rounds, "tree": tree, "single": single, "lead": lead}
    return [
        Row(
            "tree stream frames per write",
            f"AG-UI tree=1 vs one plan's stream, {case}",
            f"{frames['tree']:.2f}",
            f"{frames['single']:.2f}",
            frames["tree"] / frames["single"],
            target="≤ 1x (one activity per sub-agent write)",
            met=frames["tree"] <= frames["single"] and missed["tree"] == 0,
            note=(
                f"lead alone, fleet writing: {frames['lead']:.2f}; frames missing: "
                f"tree {missed['tree']}, single {missed['single']}"
            ),
            numbers=numbers,
        ),
        Row(
            "tree stream server CPU per write",
            f"AG-UI tree=1 vs one plan's stream, {case}",
            fmt_ns(cpu["tree"] * 1e9),
            fmt_ns(cpu["single"] * 1e9),
            statistics.median(ratios),
            target="goal ≤ 2x",
            met=statistics.median(ratios) <= 2,
            note=(
                f"lead alone, fleet writing: {fmt_ns(cpu['lead'] * 1e9)}; "
                f"ratio per round {spread}; idle with the stream open: tree "
                f"{_median(tree, 'idle_share'):.2%}, single {_median(single, 'idle_share'):.2%} "
                f"of a core; median of {rounds}"
            ),
        ),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one round of 105 writes")
    args = parser.parse_args()
    for row in rows(quick=args.quick):
        print(
            f"{row.section}: {row.case}: {row.contender} vs {row.reference} "
            f"({row.ratio:.2f}x); {row.note}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
