"""Schema migrations keep a user's rows: each one upgraded from the schema before it with
rows in it, on SQLite and PostgreSQL (``db`` runs each test on both).

0002 -> 0003 (issue 22): results gain ``source``, ``host_processor``,
``host_processors_per_node``, ``published_unit``, ``quirks`` and ``table_value``.
Published rows that existed were read from result trees (``logs``); the user's runs
become ``run``.

0003 -> 0004 (issue 24): ``tests/results/test_run_rows.py``; 0004 -> 0005 (issue 20):
findings keep their level.
"""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from tokenmark.errors import StoreError
from tokenmark.resultrows import SOURCE_LOGS, SOURCE_RUN, Label
from tokenmark.store import Store
from tokenmark.store import engine as store_engine
from tokenmark.store.schema import metadata

_RESULT = {
    "kind": "published", "label": "official", "round": "v6.0", "division": "closed",
    "category": "datacenter", "availability": "available", "submitter": "NVIDIA",
    "system_id": "GB300-NVL72_GB300-288GB_aarch64x72_TRT",
    "system_name": "NVIDIA GB300 NVL72", "accelerator_model": "NVIDIA GB300",
    "accelerators_per_node": 4, "nodes": 18, "total_accelerators": 72,
    "accelerators_stated": None, "accelerators_used": 72, "accelerator_note": "",
    "benchmark": "deepseek-r1", "benchmark_folder": "deepseek-r1", "scenario": "Offline",
    "metric": "result_tokens_per_second", "value": 679740.0, "unit": "Tokens/s",
    "summary_value": 679740.0, "validity": "VALID", "inferred": False,
    "power_value": None, "power_unit": None, "accuracy": json.dumps({"exact_match": 81.6}),
    "weight_data_types": "fp4", "framework": "TensorRT-LLM", "notes": "",
    "source_path": "v6.0/closed/NVIDIA/results/x72/deepseek-r1/Offline",
    "content_hash": "a" * 64, "system_ref": None, "run_ref": None,
}


def _row_at_0002(conn: sa.Connection, **over: object) -> None:
    values = {**_RESULT, **over}
    values["natural_key"] = "|".join(("published" if values["kind"] == "published" else "run",
                                      str(values["round"]), str(values["system_id"]),
                                      str(values["scenario"])))
    cols = ", ".join(values)
    conn.execute(sa.text(f"INSERT INTO results ({cols}) VALUES "
                         f"({', '.join(':' + c for c in values)})"), values)


def test_0003_from_0002_with_rows(db):
    eng = store_engine.create(store_engine.resolve_url(db))
    try:
        store_engine.upgrade(eng, "0002")
        assert store_engine.current_revision(eng) == "0002"
        with eng.begin() as conn:
            run = {"run_hash": "b" * 64, "started_utc": "2026-12-01T00:00:00Z",
                   "tokenmark_version": "0.1.0", "round": "v6.0", "benchmark": "llama3.1-8b",
                   "scenario": "Server", "mode": "performance", "mlperf_validity": "VALID",
                   "tokenmark_validity": "VALID", "profile_note": "", "run": "{}",
                   "settings": "{}", "summary": "{}", "verdicts": "{}",
                   "source_path": "results/x/results.json"}
            conn.execute(sa.text(f"INSERT INTO runs ({', '.join(run)}) VALUES "
                                 f"({', '.join(':' + c for c in run)})"), run)
            run_id = conn.execute(sa.text("SELECT id FROM runs")).scalar_one()
            _row_at_0002(conn)
            _row_at_0002(conn, kind="run", label="unverified", division="open",
                         submitter="local", system_id="sut", benchmark="llama3.1-8b",
                         benchmark_folder="llama3.1-8b", scenario="Server", value=1234.5,
                         run_ref=run_id, content_hash="b" * 64)
    finally:
        eng.dispose()
    with pytest.raises(StoreError, match="schema 0002; this tokenmark needs 0006: run "
                       "'tokenmark db upgrade"):
        Store.open(db)
    eng = store_engine.create(store_engine.resolve_url(db))
    try:
        assert store_engine.upgrade(eng) == store_engine.HEAD_REVISION == "0006"
        with eng.connect() as conn:
            got = conn.execute(sa.text(
                "SELECT kind, source, host_processor, host_processors_per_node, "
                "published_unit, quirks, table_value, weight_data_types, value "
                "FROM results ORDER BY kind")).all()
            diff = compare_metadata(MigrationContext.configure(conn), metadata)
    finally:
        eng.dispose()
    assert diff == []
    assert [tuple(r) for r in got] == [
        ("published", SOURCE_LOGS, "", None, "", "", None, "fp4", 679740.0),
        ("run", SOURCE_RUN, "", None, "", "", None, "fp4", 1234.5),
    ]
    with Store.open(db) as st:
        rows = {r.kind: r for r in st.rows()}
    assert rows["published"].label is Label.OFFICIAL
    assert rows["published"].accuracy == {"exact_match": 81.6}
    assert rows["run"].run_hash == "b" * 64 and rows["run"].source == SOURCE_RUN


def test_0005_from_0004_with_rows_keeps_finding_levels(db):
    """0004 -> 0005 (issue 20): findings gain ``level``; a stored finding takes the level
    its run's verdicts give it (``machine_busy`` is a warn finding), the rest ``fail``."""
    warn = {"rule": "machine_busy", "verdict": "tokenmark", "passed": False, "level": "warn",
            "observed": "other processes used 1.5 cores", "required": "< 0.5 cores",
            "advice": "", "detail": ""}
    fail = {**warn, "rule": "send_lag", "level": "fail", "observed": "9 ms"}
    verdicts = {"mlperf": {"validity": "VALID", "failed_rules": [], "findings": []},
                "tokenmark": {"validity": "INVALID", "failed_rules": ["send_lag"],
                              "findings": [warn, fail]}}
    eng = store_engine.create(store_engine.resolve_url(db))
    try:
        store_engine.upgrade(eng, "0004")
        with eng.begin() as conn:
            run = {"run_hash": "c" * 64, "started_utc": "2026-12-03T00:00:00Z",
                   "tokenmark_version": "0.1.0", "round": "v6.0", "benchmark": "llama3.1-8b",
                   "scenario": "Server", "mode": "performance", "mlperf_validity": "VALID",
                   "tokenmark_validity": "INVALID", "profile_note": "", "run": "{}",
                   "settings": "{}", "summary": "{}", "verdicts": json.dumps(verdicts),
                   "source_path": "results/y/results.json"}
            conn.execute(sa.text(f"INSERT INTO runs ({', '.join(run)}) VALUES "
                                 f"({', '.join(':' + c for c in run)})"), run)
            run_id = conn.execute(sa.text("SELECT id FROM runs")).scalar_one()
            for f in (warn, fail, {**fail, "rule": "unlisted"}):
                row = {"run_id": run_id, **{k: f[k] for k in (
                    "verdict", "rule", "passed", "observed", "required", "advice", "detail")}}
                conn.execute(sa.text(f"INSERT INTO findings ({', '.join(row)}) VALUES "
                                     f"({', '.join(':' + c for c in row)})"), row)
        assert store_engine.upgrade(eng) == "0006"
        with eng.connect() as conn:
            got = conn.execute(sa.text("SELECT rule, level FROM findings ORDER BY id")).all()
            diff = compare_metadata(MigrationContext.configure(conn), metadata)
    finally:
        eng.dispose()
    assert diff == []
    assert [tuple(r) for r in got] == [("machine_busy", "warn"), ("send_lag", "fail"),
                                       ("unlisted", "fail")]


def test_the_head_revision_constant_is_alembics_head():
    assert store_engine.HEAD_REVISION == store_engine.head_revision()


def test_0006_from_0005_with_rows_adds_series_and_keeps_everything(db, tmp_path):
    """0005 -> 0006 (issue 27): ``series`` and ``series_points`` are new tables; the runs,
    findings and results stored before are kept as they were, and a sweep stores into
    the upgraded database beside them."""
    eng = store_engine.create(store_engine.resolve_url(db))
    try:
        store_engine.upgrade(eng, "0005")
        with eng.begin() as conn:
            run = {"run_hash": "d" * 64, "started_utc": "2026-12-03T00:00:00Z",
                   "tokenmark_version": "0.1.0", "round": "v6.0", "benchmark": "llama3.1-8b",
                   "scenario": "Server", "mode": "performance", "mlperf_validity": "VALID",
                   "tokenmark_validity": "VALID", "profile_note": "", "run": "{}",
                   "settings": "{}", "summary": "{}", "verdicts": "{}",
                   "source_path": "results/z/results.json"}
            conn.execute(sa.text(f"INSERT INTO runs ({', '.join(run)}) VALUES "
                                 f"({', '.join(':' + c for c in run)})"), run)
            run_id = conn.execute(sa.text("SELECT id FROM runs")).scalar_one()
            finding = {"run_id": run_id, "verdict": "tokenmark", "rule": "send_lag",
                       "passed": True, "observed": "1 ms", "required": "< 2 ms", "advice": "",
                       "detail": "", "level": "fail"}
            conn.execute(sa.text(f"INSERT INTO findings ({', '.join(finding)}) VALUES "
                                 f"({', '.join(':' + c for c in finding)})"), finding)
            _row_at_0002(conn, source="logs", host_processor="", published_unit="",
                         quirks="")
            before = {t: conn.execute(sa.text(f"SELECT * FROM {t} ORDER BY id")).all()
                      for t in ("runs", "findings", "results")}
        with pytest.raises(StoreError, match="schema 0005; this tokenmark needs 0006"):
            Store.open(db)
        assert store_engine.upgrade(eng) == "0006"
        with eng.connect() as conn:
            after = {t: conn.execute(sa.text(f"SELECT * FROM {t} ORDER BY id")).all()
                     for t in before}
            diff = compare_metadata(MigrationContext.configure(conn), metadata)
    finally:
        eng.dispose()
    assert diff == [] and after == before
    from tests.scale.support import constant_settings, fixed_dataset, model
    from tokenmark.api import results as results_api
    from tokenmark.api.scale import sweep

    sweep(constant_settings(duration_s=10), fixed_dataset(), model(8), tmp_path / "sw",
          rates=(4.0, 6.0), virtual_time=True)
    rep = results_api.store_run(tmp_path / "sw", db=db)
    assert rep.written and rep.series == 1 and rep.runs == 2 and rep.upgraded_from is None
    with Store.open(db) as st:
        (got,) = st.series()
        assert [p.data["value"] for p in got.points] == [4.0, 6.0]
        assert {r.run_hash for r in st.runs()} == {p.run_hash for p in got.points}
        assert st.counts()["series"] == 1 and st.counts()["runs"] == 3
