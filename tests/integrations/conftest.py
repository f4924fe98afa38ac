"""Fixtures of the framework adapters' tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture
def no_model_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test may reach a real model API through pydantic-ai."""
    import pydantic_ai.models

    monkeypatch.setattr(pydantic_ai.models, "ALLOW_MODEL_REQUESTS", False)


@pytest.fixture
def unreachable() -> Iterator[Any]:
    """Owners (an ``OwnerRegistry``) in a PostgreSQL that cannot be reached: a pool that gives
    up after 0.5 s."""
    # imported here: not every environment that runs these tests has the postgres extra
    from psycopg_pool import ConnectionPool

    from dsh_tool_todo.stores.owners import OwnerRegistry
    from dsh_tool_todo.stores.postgres import PostgresSession

    with (
        ConnectionPool(
            "postgresql://postgres@127.0.0.1:1/none", min_size=1, timeout=0.5, open=True
        ) as pool,
        OwnerRegistry(open_session=lambda key: PostgresSession(pool, key)) as owners,
    ):
        yield owners
