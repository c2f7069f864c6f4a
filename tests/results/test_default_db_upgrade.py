"""The user's default results database at an older schema is upgraded when a run is
stored (issue 27); a database the user named (``--db``, ``$TOKENMARK_DB``, a URL) never
is without ``tokenmark db upgrade``: the run is then not stored, with the command that
upgrades it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.faces.conftest import make_run
from tokenmark.api import results as results_api
from tokenmark.datadir import default_db_path
from tokenmark.errors import StoreError
from tokenmark.store import Store
from tokenmark.store import engine as store_engine


def _old_db(url: str) -> None:
    eng = store_engine.create(url)
    try:
        store_engine.upgrade(eng, "0005")
    finally:
        eng.dispose()


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_run(tmp_path_factory.mktemp("run") / "r", 10)


def test_the_default_database_is_upgraded_and_says_so(run_folder: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TOKENMARK_DB", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    path = default_db_path()
    assert path.is_relative_to(tmp_path)
    _old_db(f"sqlite:///{path}")
    rep = results_api.store_run(run_folder)
    assert rep.written and rep.runs == 1 and rep.upgraded_from == "0005"
    with Store.open(str(path), create=False) as st:
        assert st.revision() == store_engine.HEAD_REVISION and st.counts()["runs"] == 1
    again = results_api.store_run(run_folder)
    assert again.upgraded_from is None  # upgraded once


def test_a_named_database_is_never_upgraded_without_the_command(
        run_folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    named = tmp_path / "mine.db"
    _old_db(f"sqlite:///{named}")
    with pytest.raises(StoreError, match=r"schema 0005; this tokenmark needs 0006: run "
                       r"'tokenmark db upgrade --db sqlite:///.*mine.db'"):
        results_api.store_run(run_folder, db=str(named))
    monkeypatch.setenv("TOKENMARK_DB", str(named))  # named by the environment: the same
    with pytest.raises(StoreError, match="tokenmark db upgrade"):
        results_api.store_run(run_folder)
    eng = store_engine.create(f"sqlite:///{named}")
    try:
        assert store_engine.current_revision(eng) == "0005"  # left as it was
    finally:
        eng.dispose()
