"""The table of published LLM results that ships with tokenmark, and what it answers on a
fresh install.

The packaged table (``tokenmark/data/published.csv.gz``) is derived, not typed: its v5.1,
v6.0 and v6.1 rows are rebuilt here from the shared official tables and sample trees and
must equal it; its v4.1 rows (from MLCommons' v4.1 ``summary_results.json``, which is not
in the shared data) are checked against the shared CSV read from the v4.1 result logs.
"""

from __future__ import annotations

import gzip
import math
import os
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.paths import SAMPLES, SHARED_DATA
from tests.results.support import csv_records
from tokenmark.api import results as results_api
from tokenmark.cli import app
from tokenmark.importer import scan
from tokenmark.importer.packaged import Source, build, load, packaged_path, source_line
from tokenmark.resultrows import SOURCE_LOGS, Label

SUMMARIES = SHARED_DATA / "mlperf" / "summaries"
TABLES = [SUMMARIES / "v5.1_summary_results.json", SUMMARIES / "v6.0_summary_results.json",
          SUMMARIES / "v6.1_summary.json"]


@pytest.fixture
def fresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh install: no database, no refreshed table, the packaged one in use."""
    db = tmp_path / "data" / "tokenmark" / "results.db"  # the default place
    monkeypatch.setenv("TOKENMARK_DB", str(db))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.delenv(results_api.PUBLISHED_ENV, raising=False)
    return db


def test_the_packaged_table_is_small_and_says_how_it_was_made():
    path = packaged_path()
    size = path.stat().st_size
    assert size < 200_000  # 2,066 rows in about 157 kB
    table = load(path)
    assert table.per_round() == {"v4.1": 337, "v5.0": 504, "v5.1": 416, "v6.0": 401,
                                 "v6.1": 408}
    head = "\n".join(table.provenance)
    assert table.made.startswith("20") and "tokenmark published refresh" in head
    for name, sha in (("v6.1_summary.json", "f40d71a728a8c1e6"),  # summaries/README.md
                      ("v4.1_summary_results.json", "8ec7a5b032f7d51c")):
        assert f"source: {name} sha256={sha}" in head
    assert "mlcommons/inference_results_v4.1 commit 4a0c8741" in head
    assert all(r.llm and r.label is Label.OFFICIAL for r in table.rows)
    with gzip.open(path, "rt") as f:
        assert f.readline().startswith("# tokenmark published MLPerf Inference LLM results")


def test_its_rows_of_v50_to_v61_are_the_shared_tables_and_trees_rebuilt():
    # v5.0: bench/data/mlperf_v5.0/v5.0_summary.csv (no official v5.0 table was at hand)
    v50 = Path(__file__).resolve().parents[2] / "bench" / "data" / "mlperf_v5.0"
    sources = []
    for p in [*TABLES, SAMPLES, v50 / "v5.0_summary.csv"]:
        s = scan(p)
        assert not s.errors
        sources.append(Source(str(p), s.rows, source_line(p, len(s.rows), len(s.rows),
                                                          sum(r.llm for r in s.rows), "x")))
    # the table leaves out the systems' free-text notes (what they say about the
    # accelerator count is kept in accelerators_stated and accelerator_note)
    rebuilt = {r.key: replace(r, notes="") for r in build(sources, version="test").rows
               if r.round != "v4.1"}
    shipped = {r.key: r for r in load(packaged_path()).rows if r.round != "v4.1"}
    assert rebuilt == shipped
    # the ten sample folders are the logs' rows, each with its table figure, equal
    logs = [r for r in shipped.values() if r.source == SOURCE_LOGS]
    assert len(logs) == 9  # the tenth sample (v4.1) is in the v4.1 rows
    assert all(r.table_value == r.value for r in logs)


def test_its_v41_rows_match_the_logs_read_into_the_shared_csv():
    """Every v4.1 row of the shared CSV (read from mlperf_log_summary.txt) is in the
    table: same result, same value to the summary's printing (Server figures printed with
    2 decimals, the table has the detail log's 6 significant digits), except gptj, whose
    checker figure is result_inferred_tokens_per_second where the CSV has samples/s, and
    SingleStream latencies (early-stopping estimate against the plain p90)."""
    table = {r.key: r for r in load(packaged_path()).rows if r.round == "v4.1"}
    seen = 0
    for x in csv_records():
        if x["round"] != "v4.1":
            continue
        folder = x["source_path"].split("/")[-5]
        scenario = x["scenario"]
        key = "|".join(("published", "v4.1", x["division"], x["submitter"], x["system_id"],
                        folder, scenario))
        row = table[key]
        seen += 1
        csv_value = float(x["result"])
        if x["benchmark"].startswith("gptj") and x["metric"] != "latency_ms_p90":
            assert row.unit == "Tokens/s" and x["metric"] in ("samples/s", "queries/s")
            # the table's tokens/s are the samples/s x 69, to the summary's printing
            # (2 decimals for Server queries/s: 113.739 / 69 = 1.648 -> 1.65)
            assert math.isclose(row.value / 69, csv_value, rel_tol=1e-4, abs_tol=0.0051), key
            continue
        if x["metric"] == "latency_ms_p90":
            # the checker's SingleStream figure is LoadGen's early-stopping estimate of the
            # p90 (early_stopping_latency_ss), the CSV the plain p90: never below it
            assert row.unit == "Latency (ms)" and row.value >= csv_value, key
            continue
        assert math.isclose(row.value, csv_value, rel_tol=1e-5), key
        assert (row.nodes, row.accelerators_per_node) == (int(x["number_of_nodes"]),
                                                          int(x["accelerators_per_node"]))
    assert seen == len(table) == 337


def test_a_fresh_install_answers_about_published_rounds(fresh):
    lb = results_api.leaderboard("deepseek-r1", "Offline", round="v6.1")
    assert lb.single_node and lb.multi_node
    assert results_api.software_gains("llama3.1-8b", "Offline", submitter="Intel")
    assert results_api.reproducibility(round="v6.1", vendor="amd")
    c = results_api.compare("v6.1/NVIDIA/GB300-NVL72_GB300-288GB_aarch64x72_TRT",
                            "v6.1/NVIDIA/VR-NVL72_VR-288GB_aarch64x72_TRT")
    assert {r.benchmark for r in c.ratios} == {"deepseek-r1", "qwen3-vl-235b-a22b"}
    s = results_api.scaling_efficiency("deepseek-r1", "Offline", accelerator="GB300",
                            submitter="NVIDIA", round="v6.1", base=72)
    assert [p.accelerators for p in s.points] == [8, 72, 288]
    assert not fresh.exists()  # reading never creates the database


def test_the_users_database_adds_to_the_published_table(fresh):
    rep = results_api.import_results(SAMPLES / "v6.0", db=fresh)
    assert rep.ok and fresh.exists()
    rows = results_api.list_results(db=fresh, round="v6.0", benchmark="llama2-70b-99",
                                    scenario="Offline", published=True)
    by = Counter(r.source for r in rows)
    # 42 published llama2-70b-99 Offline results of v6.0, 3 of them read from the logs
    assert len(rows) == 42 and by[SOURCE_LOGS] == 3
    assert len(results_api.list_results(db=fresh, round="v6.0")) == 8  # the database alone
    off = results_api.leaderboard("llama2-70b-99", "Offline", db=fresh, round="v6.0",
                                  published=False)
    on = results_api.leaderboard("llama2-70b-99", "Offline", db=fresh, round="v6.0")
    assert len(off.single_node) == 2 and len(on.single_node) > 2


def test_refresh_writes_a_table_the_analyses_then_read(fresh, tmp_path):
    runner = CliRunner()
    res = runner.invoke(app, ["published", "refresh", str(TABLES[2]), "--replace",
                              "--note", "v6.1 only"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    written = fresh.parent / "published.csv.gz"
    assert written.exists() and "408 results" in res.output
    assert load(written).per_round() == {"v6.1": 408}
    status = runner.invoke(app, ["published", "status"], env={"COLUMNS": "200"})
    assert str(written) in status.output and "about: v6.1 only" in status.output
    with pytest.raises(results_api.AnalysisError, match="two or more rounds"):
        results_api.software_gains("llama3.1-8b", "Offline", submitter="Intel")
    # refreshing from it adds rounds; the earlier sources stay in the provenance
    again = results_api.refresh_published([TABLES[1]])
    assert again.per_round == {"v6.0": 401, "v6.1": 408}
    assert sum(line.startswith("source: ") for line in again.provenance) == 2
    os.environ[results_api.PUBLISHED_ENV] = "0"
    try:
        assert results_api.published_table() is None
    finally:
        del os.environ[results_api.PUBLISHED_ENV]
    bad = runner.invoke(app, ["published", "refresh", str(tmp_path / "nope.json")])
    assert bad.exit_code == 2 and "nothing was written" in bad.output


def test_a_broken_table_is_one_clear_error(fresh, tmp_path, monkeypatch):
    broken = tmp_path / "published.csv.gz"
    broken.write_bytes(gzip.compress(b"# x\nround,division\nv6.1,closed\n"))
    monkeypatch.setenv(results_api.PUBLISHED_ENV, str(broken))
    res = CliRunner().invoke(app, ["leaderboard", "deepseek-r1", "Offline"])
    assert res.exit_code == 2
    assert "not a tokenmark published-results table" in res.output
    assert "tokenmark published refresh" in res.output
