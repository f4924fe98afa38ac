from __future__ import annotations

import importlib.util
import signal
import types
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import dsh_tool_todo
from dsh_tool_todo.host import Host, HostAgent

# PLAN, options and todo live in tests/_builders.py; named here too for the folders that
# import them from conftest.
from tests._builders import PLAN as PLAN
from tests._builders import options
from tests._builders import todo as todo

SNAPSHOTS = Path(__file__).parent / "snapshots"
SCRIPTS = Path(__file__).parents[1] / "scripts"
HostFactory = Callable[..., Host]


def pytest_configure(config: pytest.Config) -> None:
    # A shell without job control starts its background commands with Ctrl-C ignored, and an
    # ignored signal stays ignored through exec: the CLIs these tests stop with SIGINT would
    # never see it. A handler (not SIG_IGN) is reset to the default in each child.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


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


def script(name: str) -> types.ModuleType:
    """``scripts/<name>.py`` (a docs generator) imported as a module."""
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def snapshot(name: str) -> str:
    return (SNAPSHOTS / name).read_text(encoding="utf-8")


@pytest.fixture(params=["jsonl", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_place(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Where sessions are kept, each store in turn: a directory of JSONL logs, or the URL of a
    fresh PostgreSQL database set up for them."""
    if request.param == "jsonl":
        yield str(tmp_path)
        return
    from dsh_tool_todo.stores import postgres
    from tests.stores.conftest import fresh_database
    from tests.stores.postgres.test_admin import url

    with fresh_database() as conninfo:
        postgres.setup(conninfo)
        yield url(conninfo)
