from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path

import pytest

import dsh_tool_todo
from dsh_tool_todo.host import Host, HostAgent

SNAPSHOTS = Path(__file__).parent / "snapshots"
HostFactory = Callable[..., Host]

# One small plan of each status, for the frontends' snapshot tests.
PLAN = [
    {"content": "Read the report command", "status": "completed"},
    {"content": "Add the --json flag", "status": "in_progress"},
    {"content": "Write tests", "status": "pending"},
]


def pytest_configure(config: pytest.Config) -> None:
    # A shell without job control starts its background commands with Ctrl-C ignored, and an
    # ignored signal stays ignored through exec: the CLIs these tests stop with SIGINT would
    # never see it. A handler (not SIG_IGN) is reset to the default in each child.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def options(parallel: bool) -> dict[str, dict[str, bool]]:
    return {"dsh-tool-todo": {"allowParallelInProgress": parallel}}


def todo(content: str, status: str = "pending") -> dict[str, str]:
    return {"content": content, "status": status}


@pytest.fixture
def make_host() -> HostFactory:
    """A fresh host, hence a fresh plugin manager, per call."""

    def build(*, parallel: bool = False, projections: bool = True) -> Host:
        return Host([dsh_tool_todo], options(parallel), projections=projections)

    return build


@pytest.fixture
def host(make_host: HostFactory) -> Host:
    return make_host()


@pytest.fixture
def agent(host: Host) -> HostAgent:
    return host.new_agent()


def snapshot(name: str) -> str:
    return (SNAPSHOTS / name).read_text(encoding="utf-8")
