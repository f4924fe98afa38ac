"""Count the plan-health signals in Claude Code session transcripts (JSONL), per signal.

Each ``TodoWrite`` tool call of the main agent becomes a ``todo/write`` of its
``content``/``status`` pairs, each user prompt (not a tool result, not a meta
message) a ``turn/start``; sub-agent lines (``isSidechain``) are left out. Then
``dsh_tool_todo.core.health.plan_health`` runs over the result.

    python scripts/health_of_transcripts.py TRANSCRIPT.jsonl...
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from typing import Any

from dsh_tool_todo.core.health import KINDS, plan_health


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


def main(paths: list[str]) -> int:
    total: Counter[str] = Counter()
    writes = turns = 0
    for path in paths:
        events = events_of(path)
        writes += sum(1 for e in events if e["type"] == "todo/write")
        turns += sum(1 for e in events if e["type"] == "turn/start")
        found = Counter(signal.kind for signal in plan_health(events))
        total.update(found)
        print(path, dict(found))
    print(f"{len(paths)} transcripts, {turns} user turns, {writes} TodoWrite calls")
    for kind in KINDS:
        share = f"{total[kind] / writes:.1%}" if writes else "-"
        print(f"  {kind:18} {total[kind]:4}  ({share} of writes)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
