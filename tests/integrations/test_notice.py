"""integrations/_notice.py: a store that fails while requests are taken never fails the model
request the notice was for; a WARNING says why, and the requests wait in the inbox."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from dsh_tool_todo.errors import LogBusy, StoreUnavailable, UsageError
from dsh_tool_todo.integrations._notice import atold, told
from dsh_tool_todo.stores.owners import OwnerRegistry
from tests.integrations import requests_scenario as scenario
from tests.integrations.adapter_contract import Unopenable, opener


@pytest.mark.parametrize(
    "cause",
    [
        LogBusy("ada.jsonl: another session is writing this log (one writer per log)"),
        StoreUnavailable("session 'ada' on PostgreSQL at 127.0.0.1:1/none: refused"),
        OverflowError("int too large to convert to float"),  # what no store should raise
    ],
)
def test_a_session_that_cannot_be_opened_tells_nothing_and_warns(
    cause: Exception, caplog: pytest.LogCaptureFixture
) -> None:
    owners = OwnerRegistry(open_session=opener(Unopenable(cause)))
    with caplog.at_level(logging.WARNING, logger="dsh_tool_todo"):
        assert told(owners, scenario.OWNER) is None
        assert asyncio.run(atold(owners, scenario.OWNER)) is None
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 2
    assert all(f"owner {scenario.OWNER!r}: requests were not taken" in m for m in warned)
    assert all(str(cause) in m for m in warned)


def test_a_store_that_works_tells_the_notice_once(tmp_path: Path) -> None:
    owners, log = scenario.planned(tmp_path)
    scenario.ask(log)
    assert told(owners, scenario.OWNER) == scenario.notice()
    assert told(owners, scenario.OWNER) is None
    owners.close()


def test_a_misuse_is_the_developers_to_see_not_a_warning() -> None:
    owners = OwnerRegistry(open_session=opener(Unopenable(UsageError("await atake_requests"))))
    with pytest.raises(UsageError, match="await atake_requests"):
        told(owners, scenario.OWNER)
