"""Count the plan-health signals in Claude Code session transcripts (JSONL), per signal.

Each ``TodoWrite`` tool call of the main agent becomes a ``todo/write`` of its
``content``/``status`` pairs, each user prompt (not a tool result, not a meta
message) a ``turn/start``; sub-agent lines (``isSidechain``) are left out. Then
``dsh_tool_todo.core.health.plan_health`` runs over the result.

    python scripts/health_of_transcripts.py TRANSCRIPT.jsonl...

Claude Code keeps its transcripts in ``~/.claude/projects/<project>/<session>.jsonl``;
``examples/transcripts/`` holds two small hand-written ones (docs/fleet.md runs them).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from typing import Any

from dsh_tool_todo.core.health import KINDS, plan_health

# A harness's transcript holds no person's requests: its table is of the plan's own signals.
PLAN_KINDS = tuple(kind for kind in KINDS if kind != "not_honoured")


def events_of(path: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if not isinstance(entry, dict) or entry.get("isSidechain"):
                continue
            message = entry.get("message") or {}
            content = message.get("content") if isinstance(message, dict) else None
            if entry.get("type") == "user" and not entry.get("isMeta"):
                is_prompt = isinstance(content, str) or (
                    isinstance(content, list)
                    and any(isinstance(b, dict) and b.get("type") == "text" for b in content)
                )
                if is_prompt:
                    events.append({"seq": len(events), "type": "turn/start", "data": {}})
            if entry.get("type") == "assistant" and isinstance(content, list):
                for block in content:
                    if (
                        isinstance(block, dict)
                        and block.get("type") == "tool_use"
                        and block.get("name") == "TodoWrite"
                    ):
                        todos = [
                            {"content": t.get("content"), "status": t.get("status")}
                            for t in (block.get("input") or {}).get("todos", [])
                            if isinstance(t, dict)
                        ]
                        data = {"todos": todos}
                        events.append({"seq": len(events), "type": "todo/write", "data": data})
    return events


def many(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def counted(found: Counter[str]) -> str:
    """The signals of one transcript, in the order of ``KINDS``."""
    return ", ".join(f"{kind} {found[kind]}" for kind in PLAN_KINDS if found[kind]) or "no signals"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(__doc__ or "").split("\n\n")[0],
        epilog="example: python scripts/health_of_transcripts.py "
        "examples/transcripts/rename.jsonl examples/transcripts/release.jsonl",
    )
    parser.add_argument(
        "paths", nargs="+", metavar="TRANSCRIPT.jsonl", help="a Claude Code session transcript"
    )
    paths: list[str] = parser.parse_args(argv).paths
    total: Counter[str] = Counter()
    writes = turns = 0
    for path in paths:
        try:
            events = events_of(path)
        except (OSError, UnicodeDecodeError) as error:
            parser.error(f"cannot read {path}: {error}")
        own_writes = sum(1 for e in events if e["type"] == "todo/write")
        own_turns = sum(1 for e in events if e["type"] == "turn/start")
        found: Counter[str] = Counter(signal.kind for signal in plan_health(events))
        writes, turns = writes + own_writes, turns + own_turns
        total.update(found)
        shown = f"{many(own_turns, 'user turn')}, {many(own_writes, 'TodoWrite call')}"
        print(f"{path}: {shown}; {counted(found)}")
    shown = f"{many(turns, 'user turn')}, {many(writes, 'TodoWrite call')}"
    print(f"{many(len(paths), 'transcript')}, {shown}")
    for kind in PLAN_KINDS:
        share = f"{total[kind] / writes:.1%}" if writes else "-"
        print(f"  {kind:18} {total[kind]:4}  ({share} of writes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
