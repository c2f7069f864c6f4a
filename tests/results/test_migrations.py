"""Schema migrations keep a user's rows: each one upgraded from the schema before it with
rows in it, on SQLite and PostgreSQL (``db`` runs each test on both).

0002 -> 0003 (issue 22): results gain ``source``, ``host_processor``,
``host_processors_per_node``, ``published_unit``, ``quirks`` and ``table_value``.
Published rows that existed were read from result trees (``logs``); the user's runs
become ``run``.

0003 -> 0004 (issue 24): ``tests/results/test_run_rows.py``.
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
    with pytest.raises(StoreError, match="schema 0002; this tokenmark needs 0004: run "
                       "'tokenmark db upgrade"):
        Store.open(db)
    eng = store_engine.create(store_engine.resolve_url(db))
    try:
        assert store_engine.upgrade(eng) == store_engine.HEAD_REVISION == "0004"
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


def test_the_head_revision_constant_is_alembics_head():
    assert store_engine.HEAD_REVISION == store_engine.head_revision()
