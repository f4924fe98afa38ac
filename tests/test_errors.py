"""The error tree: one module of kinds, each also the built-in exception callers expect."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from dsh_tool_todo import errors
from dsh_tool_todo.stores.postgres import errors as postgres_errors

WARNINGS = {"TornTailWarning", "PluginLoadWarning"}


@pytest.mark.parametrize("name", sorted(set(errors.__all__) - WARNINGS))
def test_every_error_of_the_library_is_a_todo_error(name: str) -> None:
    assert issubclass(getattr(errors, name), errors.TodoError)


@pytest.mark.parametrize("name", sorted(WARNINGS))
def test_the_warnings_are_user_warnings_so_the_usual_filters_apply(name: str) -> None:
    warning = getattr(errors, name)
    assert issubclass(warning, UserWarning)
    assert not issubclass(warning, errors.TodoError)


@pytest.mark.parametrize(
    ("kind", "builtin"),
    [
        (errors.UsageError, TypeError),
        (errors.InvalidLog, ValueError),
        (errors.MissingExtra, ImportError),
        (errors.AcpUnavailable, ImportError),
        (errors.SessionNotFound, LookupError),
        (errors.StoreUnavailable, ConnectionError),
        (errors.OwnerNameError, ValueError),
        (postgres_errors.PostgresUnavailable, errors.StoreUnavailable),
        (postgres_errors.CommitUnknown, errors.StoreUnavailable),
        (postgres_errors.SchemaNotReady, errors.StoreNotReady),
        (postgres_errors.WriterConflict, errors.LogBusy),
    ],
)
def test_each_kind_is_caught_by_what_a_caller_already_catches(
    kind: type[Exception], builtin: type[Exception]
) -> None:
    with pytest.raises(builtin, match=r"^the message$"):
        raise kind("the message")


def test_a_refusal_carries_the_text_the_model_reads() -> None:
    refusal = errors.ToolCallRejected("todos: required")
    assert refusal.model_text == "todos: required" == str(refusal)


def test_missing_extra_names_the_extra_and_how_to_install_it_from_a_checkout() -> None:
    cause = ModuleNotFoundError("No module named 'nowhere_framework'", name="nowhere_framework")
    error = errors.missing_extra("dsh_tool_todo.integrations.x", "x-extra", cause)
    assert isinstance(error, errors.MissingExtra)
    assert str(error).startswith(
        "dsh_tool_todo.integrations.x needs the 'x-extra' extra: install dsh-tool-todo[x-extra]"
    )


def test_every_class_defined_in_an_errors_module_is_in_its_all() -> None:
    """Private classes (``_PathMissing``: an error that is also a built-in ``OSError``) are the
    stores' to raise, caught by their public bases."""
    for module in (errors, postgres_errors):
        source = Path(inspect.getfile(module)).read_text(encoding="utf-8")
        classes = [node for node in ast.parse(source).body if isinstance(node, ast.ClassDef)]
        assert {c.name for c in classes if not c.name.startswith("_")} == set(module.__all__)
        for private in (c for c in classes if c.name.startswith("_")):
            assert any(getattr(base, "id", "") in module.__all__ for base in private.bases), (
                f"{module.__name__}.{private.name} has no public base to be caught by"
            )
