"""The suite's own setup. Doctest collection: the adapter modules (and their tests' scripted
models) whose frameworks `dev` installs on Python 3.11+ only, and CrewAI's, which dev does not
install (.ci/run tests it in an environment of its own)."""

import os
import shutil
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path

import pytest

collect_ignore: list[str] = []
if sys.version_info < (3, 11):  # google-adk 2.x needs 3.11; pyproject's dev says why for the rest
    collect_ignore += [
        f"src/dsh_tool_todo/integrations/{name}.py"
        for name in ("claude_agent_sdk", "google_adk", "llama_index", "strands")
    ]
    # their scripted models import them too (the tests themselves skip where they are missing)
    scripted = ("google_adk", "llama_index", "strands")
    collect_ignore += [f"tests/integrations/scripted_{name}.py" for name in scripted]
if find_spec("crewai") is None:  # a path given on the command line is still collected
    collect_ignore += [
        "src/dsh_tool_todo/integrations/crewai.py",
        "tests/integrations/test_crewai.py",
    ]


# The slowest test files, summed over their tests' setup, call and teardown: printed after
# pytest's own --durations list, so a slow suite says which file to look at first.
_file_seconds: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    path = report.nodeid.split("::", 1)[0]
    _file_seconds[path] = _file_seconds.get(path, 0.0) + report.duration


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _file_seconds:
        return
    terminalreporter.write_sep("=", "slowest 10 files")
    slowest = sorted(_file_seconds.items(), key=lambda item: item[1], reverse=True)[:10]
    for path, seconds in slowest:
        terminalreporter.write_line(f"{seconds:8.2f}s {path}")


# What the suite needs from the machine, checked once before the first test runs: the Node
# packages of the wire-format tests are installed here when missing (npm, no root), and a
# PostgreSQL server that does not answer ends the run at once, in one line, instead of
# failing each of the store tests on its own.
NODE_DIR = Path(__file__).parent / "tests" / "node"


def _needs_postgresql(item: pytest.Item) -> bool:
    return bool({"pg_dsn", "empty_pg_dsn"} & set(getattr(item, "fixturenames", ()))) or (
        "postgres" in Path(str(item.path)).as_posix()
    )


def _install_node_packages() -> None:
    npm = shutil.which("npm")
    if npm is None or (NODE_DIR / "node_modules").is_dir():
        return  # without npm the node tests fail, each saying what to install
    done = subprocess.run(
        [npm, "ci", "--prefix", str(NODE_DIR), "--no-audit", "--no-fund"],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.exit(f"npm ci --prefix {NODE_DIR} failed:\n{done.stderr}", returncode=1)


def _check_postgresql() -> None:
    try:
        import psycopg
    except ImportError:
        return  # the dev extra brings it; the store tests say so themselves
    from tests.stores.conftest import ADMIN_DSN as dsn

    try:
        psycopg.Connection.connect(dsn, connect_timeout=5).close()
    except psycopg.OperationalError as error:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        pytest.exit(
            f"the PostgreSQL tests need a server at {dsn} ({reason}): start PostgreSQL, or "
            "point DSH_TODO_TEST_DSN at one (docs/contributing.md)",
            returncode=1,
        )


# What each test needs beyond Python, as markers, so the edit loop can leave it out:
# `pytest -m "not browser and not postgres and not node and not frameworks"` (docs/contributing.md).
NEEDS = {
    "browser": "Chromium (tests/web/browser)",
    "postgres": "a PostgreSQL server (DSH_TODO_TEST_DSN)",
    "node": "Node.js and tests/node's packages (installed by the run itself)",
    "frameworks": "the agent frameworks of the dev extra (tests/integrations, the docs' examples)",
}


def pytest_configure(config: pytest.Config) -> None:
    # the developer's own default place is never where a test records (nor what its
    # subprocesses read): a test that wants one names a temporary directory
    os.environ.pop("DSH_TODO_HOME", None)
    for marker, needs in NEEDS.items():
        config.addinivalue_line("markers", f"{marker}: needs {needs}")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    root = Path(__file__).parent
    for item in items:
        path = Path(str(item.path))
        if not path.is_relative_to(root):
            continue
        where = path.relative_to(root).as_posix()
        if where.startswith("tests/web/browser/"):
            item.add_marker("browser")
        if _needs_postgresql(item):
            item.add_marker("postgres")
        if "node" in getattr(item, "fixturenames", ()):  # the web stream's readers under node
            item.add_marker("node")
        if where.startswith("tests/integrations/") or where == "tests/test_docs.py":
            item.add_marker("frameworks")


def pytest_collection_finish(session: pytest.Session) -> None:
    if session.config.option.collectonly:
        return
    if any(item.get_closest_marker("node") for item in session.items):
        _install_node_packages()
    if any(item.get_closest_marker("postgres") for item in session.items):
        _check_postgresql()
