"""The shapes of a call: the arguments the model sends and the result it gets back."""

from __future__ import annotations

import sys
from typing import Annotated, Literal

from pydantic import ConfigDict, Field

from .contract import CONTENT_DESCRIPTION, STATUS_DESCRIPTION, TODOS_DESCRIPTION

__all__ = ["Status", "TodoCounts", "TodoItem", "TodoResult"]

if sys.version_info >= (3, 12):
    from typing import TypedDict
else:  # pydantic reads TypedDicts only from typing_extensions before 3.12
    from typing_extensions import TypedDict

Status = Literal["pending", "in_progress", "completed"]
_STRICT = ConfigDict(extra="forbid", strict=True)


# No docstrings on the two argument shapes: pydantic would put them in the schema.
class TodoItem(TypedDict):
    __pydantic_config__ = _STRICT  # type: ignore[misc]
    content: Annotated[str, Field(description=CONTENT_DESCRIPTION)]
    status: Annotated[Status, Field(description=STATUS_DESCRIPTION)]


class TodoWriteArgs(TypedDict):
    __pydantic_config__ = _STRICT  # type: ignore[misc]
    # fail_fast: a refused list stops at its first bad item, so a huge bad call costs
    # pydantic one error, not one per item; _rejections.py then names every problem.
    todos: Annotated[list[TodoItem], Field(description=TODOS_DESCRIPTION, fail_fast=True)]


class TodoCounts(TypedDict):
    pending: int
    inProgress: int
    completed: int


class TodoResult(TypedDict):
    """The canonical result of a call: the list as recorded, and its counts."""

    todos: list[TodoItem]
    counts: TodoCounts
