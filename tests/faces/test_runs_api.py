"""``results_api.list_runs`` and ``get_run`` (what the web UI's run pages read), on SQLite
and on PostgreSQL."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures.postgres import create_database, throwaway_cluster
from tokenmark.api import results as results_api
from tokenmark.errors import BadInputError
from tokenmark.report import load_results

_names = itertools.count()


@pytest.fixture(scope="module")
def pg_admin() -> Iterator[str]:
    with throwaway_cluster() as url:
        yield url


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'results.db'}"
    return create_database(request.getfixturevalue("pg_admin"), f"tm_faces_runs_{next(_names)}")


def test_runs_round_trip(db: str, runs_root: Path) -> None:
    folders = sorted(runs_root.iterdir())
    for f in folders:
        assert results_api.store_run(f, db=db).written
    runs = results_api.list_runs(db=db)
    assert len(runs) == 3
    assert [r.started_utc for r in runs] == sorted((r.started_utc for r in runs), reverse=True)
    for f in folders:
        doc = load_results(f)
        match = [r for r in runs if r.summary == doc["summary"]]
        assert len(match) == 1
        rec = results_api.get_run(match[0].run_hash[:10], db=db)
        assert rec.verdicts == doc["verdicts"] and rec.settings == doc["settings"]
        assert rec.row.kind == "run" and rec.row.run_hash == rec.run_hash
        assert {(f.verdict, f.rule) for f in rec.findings} == {
            (k, x["rule"]) for k in ("mlperf", "tokenmark") for x in doc["verdicts"][k]["findings"]}
    assert results_api.list_runs(db=db, benchmark="llama3_1-8b", scenario="server")
    assert results_api.list_runs(db=db, scenario="Offline") == []


def test_get_run_refuses_bad_hashes(db: str, run_dir: Path) -> None:
    results_api.store_run(run_dir, db=db)
    for bad in ("abc", "not-hex-at-all", "%%%%%%%%%", "0" * 8):
        with pytest.raises(BadInputError):
            results_api.get_run(bad, db=db)
