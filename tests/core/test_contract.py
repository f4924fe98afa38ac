"""Every model-visible string, byte for byte."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_tool_todo.core import contract
from tests.conftest import HostFactory, script, snapshot
from tests.literal_model import first_errors

ROOT = Path(__file__).resolve().parents[2]
SEEDS = ROOT.parent / "shared" / "seeds"


@pytest.mark.parametrize(
    ("parallel", "name"),
    [(False, "description_single.txt"), (True, "description_parallel.txt")],
)
def test_description_snapshot(make_host: HostFactory, parallel: bool, name: str) -> None:
    assert make_host(parallel=parallel).tools["todo_write"].description == snapshot(name)


def test_strict_description_is_the_english_seed_verbatim() -> None:
    seed_file = SEEDS / "dsh-tool-todo.en.txt"
    if not seed_file.exists():
        pytest.skip(f"the specification is not beside this checkout (looked for {seed_file})")
    seed = seed_file.read_text(encoding="utf-8")
    assert f"\n{contract.DESCRIPTION_SINGLE}\n" in seed


def test_parallel_description_differs_only_in_the_in_progress_rule() -> None:
    single, parallel = contract.DESCRIPTION_SINGLE, contract.DESCRIPTION_PARALLEL
    assert "AT MOST ONE" in single
    assert "AT MOST ONE" not in parallel
    assert "EVERY todo you are actively advancing `in_progress`" in parallel
    assert "several when work runs in parallel" in parallel
    head = single[: single.index("Keep AT MOST ONE")]
    tail = single[single.index("Mark a todo `completed`") :]
    assert parallel.startswith(head)
    assert parallel.endswith(tail)
    assert abs(len(parallel) - len(single)) < 0.1 * len(single)


def test_stable_texts_are_the_seeds() -> None:
    assert contract.NO_OWNER == "Error: todo_write requires an owning agent session"
    assert contract.EMPTY_CONTENT == "Error: invalid todo: `content` must be a non-empty string"
    assert contract.DUPLICATE_CONTENT.format(content="x") == (
        'Error: invalid todos: duplicate content "x"'
    )
    assert contract.TOO_MANY_IN_PROGRESS.format(count=3) == (
        "Error: invalid todos: at most one task may be in_progress (got 3)"
    )
    assert contract.SUCCESS_TEXT.format(pending=1, inProgress=2, completed=3) == (
        "Updated todo list: 1 pending, 2 in progress, 3 completed."
    )


def test_the_contract_page_is_generated_from_the_contract() -> None:
    """Each clause template and the combining rule: run scripts/model_contract.py to refresh."""
    page = (ROOT / "docs" / "model-contract.md").read_text(encoding="utf-8")
    assert page == script("model_contract").updated(page), "run: python scripts/model_contract.py"
    for name in (*contract.SCHEMA_CLAUSES, *contract.LIST_CLAUSES, "UNEXPECTED_VALUE"):
        assert f"| `{name}` |" in page
    assert f"\n{first_errors()['OpenHands']}\n" in page  # the page's worked example


def test_the_seed_texts_are_a_head_and_a_clause() -> None:
    """The seed's texts are what the combining rule gives for one problem alone."""
    assert contract.CALL_HEAD + contract.DUPLICATE == contract.DUPLICATE_CONTENT
    assert contract.CALL_HEAD + contract.TOO_MANY == contract.TOO_MANY_IN_PROGRESS
    assert contract.EMPTY_CONTENT.endswith(contract.EMPTY_CONTENT_AT.format(where=""))


def test_the_request_notice_is_what_the_contract_page_shows() -> None:
    """docs/model-contract.md, "Request notice": the example and each kind's line, byte for byte."""
    from dsh_tool_todo.core.requests import KINDS, Request
    from dsh_tool_todo.plans.reminder import request_notice

    page = (Path(__file__).parents[2] / "docs" / "model-contract.md").read_text(encoding="utf-8")
    asked = Request("r1", "done", "Write the migration for the requests table", "ada", 0, 0.0)
    assert f"```text\n{request_notice([asked])}\n```" in page
    for kind in KINDS:
        assert f"| `{kind}` | `{contract.REQUEST_NOTICE_ITEMS[kind]}` |" in page
    assert contract.REQUEST_NOTICE_HEADER == "The user watching your todo list asks:"
    assert contract.REQUEST_NOTICE_FOOTER == (
        "Answer with todo_write (the ENTIRE list) or say why not."
    )
