"""Fixtures of the framework adapters' tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def no_model_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test may reach a real model API through pydantic-ai."""
    import pydantic_ai.models

    monkeypatch.setattr(pydantic_ai.models, "ALLOW_MODEL_REQUESTS", False)
