"""Fixtures of the results tests: databases (SQLite and PostgreSQL), sample trees, CSV rows.

``db`` is parametrised: every test that takes it runs once on a SQLite file and once on
a fresh database of a throwaway PostgreSQL server started once per session (see
``tests/fixtures/postgres.py``; skipped with the install step when PostgreSQL is
missing, failed when ``TOKENMARK_REQUIRE`` lists ``postgres``).
"""

from __future__ import annotations

import itertools
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures.postgres import create_database, throwaway_cluster
from tests.paths import SAMPLES
from tests.results.support import csv_rows
from tokenmark.resultrows import ResultRow

_names = itertools.count()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "postgres: needs a PostgreSQL server (started by the tests themselves)")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the PostgreSQL half of every ``db`` test (``-m postgres`` / ``-m 'not postgres'``)."""
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is not None and callspec.params.get("db") == "postgres":
            item.add_marker("postgres")


@pytest.fixture(scope="session")
def pg_admin() -> Iterator[str]:
    with throwaway_cluster() as url:
        yield url


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A URL of an empty database of each kind."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'results.db'}"
    admin = request.getfixturevalue("pg_admin")
    return create_database(admin, f"tm_{next(_names)}")


@pytest.fixture
def sqlite_db(tmp_path: Path) -> str:
    return str(tmp_path / "results.db")


@pytest.fixture
def samples(tmp_path: Path) -> Path:
    """A private, writable copy of the shared sample folders."""
    dest = tmp_path / "samples"
    shutil.copytree(SAMPLES, dest)
    for p in dest.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    return dest


@pytest.fixture(scope="session")
def published() -> list[ResultRow]:
    """The 753 rows of the shared CSV of published LLM results, as result rows."""
    return csv_rows()
