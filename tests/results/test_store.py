"""The results database on SQLite and PostgreSQL: schema, idempotence, transactions.

Every test taking ``db`` runs on both (see ``conftest.py``).
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from tests.paths import SAMPLES
from tokenmark.api import results as results_api
from tokenmark.errors import StoreError
from tokenmark.importer import scan
from tokenmark.resultrows import Label
from tokenmark.store import Store, writer
from tokenmark.store import engine as store_engine
from tokenmark.store.schema import metadata


def test_migrations_build_exactly_the_schema_the_code_uses(db):
    with Store.open(db) as st:
        assert st.revision() == store_engine.head_revision()
        with st.engine.connect() as conn:
            diff = compare_metadata(MigrationContext.configure(conn), metadata)
    assert diff == []


def test_import_then_reimport_changes_nothing(db):
    first = results_api.import_results(SAMPLES, db=db)
    assert first.ok and first.written and first.counts is not None
    assert (first.counts.added, first.counts.updated) == (10, 0)
    with Store.open(db) as st:
        before = (st.counts(), st.fingerprint())
        assert before[0] == {"results": 10, "systems": 8, "runs": 0, "findings": 0,
                             "accuracy_results": 0, "official": 10}
    again = results_api.import_results(SAMPLES, db=db)
    assert again.counts is not None
    assert (again.counts.added, again.counts.updated, again.counts.unchanged) == (0, 0, 10)
    with Store.open(db) as st:
        assert (st.counts(), st.fingerprint()) == before


def test_rows_read_back_equal_rows_written(db):
    s = scan(SAMPLES)
    with Store.open(db) as st:
        st.write(s.rows, s.runs, list(s.systems.values()))
        back = {r.key: r for r in st.rows()}
    assert back == {r.key: r for r in s.rows}
    with Store.open(db) as st:
        assert [r.system_id for r in st.rows({"benchmark": "deepseek-r1",
                                              "scenario": "server"})] == [
            "GB300-NVL72_GB300-288GB_aarch64x288_TRT"]
        with pytest.raises(ValueError, match="cannot filter"):
            st.rows({"value": 1})


def test_changed_content_updates_in_place_and_labels_follow(db, samples):
    results_api.import_results(samples, db=db)
    summary = next(samples.rglob("Dell/results/*/*/Offline/performance/run_1/"
                                 "mlperf_log_summary.txt"))
    summary.write_text(summary.read_text().replace("Min duration satisfied : Yes",
                                                   "Min duration satisfied : Yes "))
    again = results_api.import_results(samples, db=db)
    assert again.counts is not None
    assert (again.counts.added, again.counts.updated, again.counts.unchanged) == (0, 1, 9)
    relabel = results_api.import_results(samples, db=db, official=False)
    assert relabel.counts is not None and relabel.counts.updated == 10
    with Store.open(db) as st:
        assert st.counts()["results"] == 10 and st.counts()["official"] == 0


def test_a_failed_write_leaves_nothing_behind(db, monkeypatch):
    s = scan(SAMPLES)
    with Store.open(db) as st:
        before = st.fingerprint()
        calls = {"n": 0}
        real = writer.result_values

        def failing(row):
            calls["n"] += 1
            if calls["n"] == 5:
                raise RuntimeError("disk on fire")
            return real(row)

        monkeypatch.setattr(writer, "result_values", failing)
        with pytest.raises(RuntimeError, match="disk on fire"):
            st.write(s.rows, s.runs, list(s.systems.values()))
        assert st.fingerprint() == before and st.counts()["systems"] == 0


def test_an_old_schema_is_refused_with_the_upgrade_command(db):
    eng = store_engine.create(store_engine.resolve_url(db))
    try:
        with eng.begin() as conn:
            conn.execute(sa.text("CREATE TABLE alembic_version (version_num VARCHAR(32) "
                                 "NOT NULL PRIMARY KEY)"))
            conn.execute(sa.text("INSERT INTO alembic_version VALUES ('0000')"))
    finally:
        eng.dispose()
    with pytest.raises(StoreError, match="newer than this tokenmark knows"):
        Store.open(db)


def test_db_status_and_upgrade(db):
    status = results_api.db_status(db)
    assert status.revision is None and status.counts == {}
    up = results_api.db_upgrade(db)
    assert up.revision == up.head and up.counts["results"] == 0
    if db.startswith("sqlite"):
        with pytest.raises(StoreError, match="holds no results database"):
            Store.open(db.replace("results.db", "other.db"), create=False)
    else:
        with pytest.raises(StoreError, match="cannot open the results database"):
            Store.open(db + "_never_created")


def test_database_location(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv(store_engine.DB_ENV, raising=False)
    assert store_engine.resolve_url(None) == f"sqlite:///{tmp_path}/xdg/tokenmark/results.db"
    monkeypatch.setenv(store_engine.DB_ENV, str(tmp_path / "env.db"))
    assert store_engine.resolve_url(None) == f"sqlite:///{tmp_path}/env.db"
    assert store_engine.resolve_url(tmp_path / "flag.db") == f"sqlite:///{tmp_path}/flag.db"
    assert store_engine.resolve_url("postgresql://u@h/d") == "postgresql+psycopg://u@h/d"
    with pytest.raises(StoreError, match="neither SQLite nor PostgreSQL"):
        store_engine.create("mysql://u@h/d")
    with pytest.raises(StoreError, match="no driver"):
        store_engine.create("postgresql+nosuchdriver://u@h/d")


def test_unverified_rows_say_so(db, samples):
    results_api.import_results(samples / "v6.0", db=db, official=False)
    rows = results_api.list_results(db=db, label="unverified")
    assert len(rows) == 8 and all(r.label is Label.UNVERIFIED for r in rows)
    assert results_api.list_results(db=db, label="official") == []
