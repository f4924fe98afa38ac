"""``DSH_TODO_HOME`` holding a libpq ``key=value`` conninfo: a database, as a URL is, never a
directory named after it (its password in the name, and in every message naming the place)."""

from __future__ import annotations

from pathlib import Path

import pytest
from psycopg.conninfo import conninfo_to_dict

from dsh_tool_todo import stores
from dsh_tool_todo.errors import UsageError
from dsh_tool_todo.stores._home import home_from_environment, home_not_made_yet, is_database

CONNINFOS = [
    "host=127.0.0.1 user=postgres password=s3cretPW dbname=x",
    "  host = 127.0.0.1   dbname=x password='with space and \\' quote' ",
    "dbname=x password=a\\ b%&=?#/",
    "service=plans",
]


@pytest.mark.parametrize("conninfo", CONNINFOS)
def test_a_conninfo_home_is_given_as_the_url_libpq_reads_the_same(conninfo: str) -> None:
    url = home_from_environment({"DSH_TODO_HOME": conninfo})

    assert url is not None
    assert url.startswith("postgresql://?")
    assert conninfo_to_dict(url) == conninfo_to_dict(conninfo)
    assert is_database(url)
    assert not home_not_made_yet(url)


def test_a_conninfo_that_does_not_parse_is_still_a_database_never_a_directory() -> None:
    broken = "host=127.0.0.1 password='unterminated"
    place = home_from_environment({"DSH_TODO_HOME": broken})
    assert place == broken
    assert is_database(broken)
    assert not home_not_made_yet(broken)


def test_a_path_that_merely_contains_an_equals_sign_stays_a_path(tmp_path: Path) -> None:
    named = tmp_path / "a=b"
    assert home_from_environment({"DSH_TODO_HOME": str(named)}) == str(named)
    assert not is_database(str(named))


@pytest.mark.parametrize("scheme", ["POSTGRESQL", "Postgres"])
def test_a_url_home_is_a_database_whatever_the_case_of_its_scheme(scheme: str) -> None:
    place = home_from_environment({"DSH_TODO_HOME": f"{scheme}://127.0.0.1/plans"})
    assert place == f"{scheme.lower()}://127.0.0.1/plans"  # as libpq reads a URL
    assert is_database(f"{scheme}://127.0.0.1/plans")
    assert not home_not_made_yet(f"{scheme}://127.0.0.1/plans")


def test_owners_given_a_conninfo_are_refused_not_made_a_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(
        UsageError, match=r"looks like a key=value conninfo, not a directory"
    ) as info:
        stores.open_owners(CONNINFOS[0])
    assert "s3cretPW" not in str(info.value)
    assert list(tmp_path.iterdir()) == []
