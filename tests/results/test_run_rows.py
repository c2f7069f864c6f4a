"""How runs become database rows: an accuracy-mode run is an accuracy result (its scores,
judged against the round's targets), never a performance row; and a database of the
previous schema, with rows in it, upgrades to this one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sqlalchemy as sa

from tokenmark.adapters.inprocess import LatencyModel
from tokenmark.api import results as results_api
from tokenmark.api.run import SutSpec, default_dataset, run_benchmark
from tokenmark.config.layering import build_settings
from tokenmark.mlperf.settings import Scenario
from tokenmark.store import Store
from tokenmark.store import engine as store_engine


@pytest.fixture(scope="module")
def accuracy_run(tmp_path_factory) -> Path:
    """A native Offline accuracy run: every sample of a 200-sample set once."""
    layered = build_settings("v6.0", "llama3.1-8b", Scenario.OFFLINE, profile="demo",
                             overrides={"mode": "accuracy", "total_sample_count": 200,
                                        "performance_sample_count": 200})
    out = tmp_path_factory.mktemp("acc")
    run_benchmark(layered, default_dataset(layered, size=200, output_lengths="8"),
                  SutSpec(model=LatencyModel(ttft_ns=1_000_000, tpot_ns=100_000)), out,
                  virtual_time=True)
    return out


def test_an_accuracy_run_is_judged_by_the_rules_of_accuracy_mode(accuracy_run):
    """LoadGen judges no performance in accuracy mode: no minimum duration (the run took
    a fraction of Offline's 600 s), queries or early stopping; every sample answered."""
    doc = json.loads((accuracy_run / "results.json").read_text())
    assert doc["run"]["mode"] == "AccuracyOnly"
    ml = doc["verdicts"]["mlperf"]
    assert ml["validity"] == "VALID"
    assert [f["rule"] for f in ml["findings"]] == ["all_queries_answered"]
    assert len((accuracy_run / "mlperf_log_accuracy.json").read_text().splitlines()) == 202


def test_an_accuracy_run_is_stored_as_an_accuracy_result(accuracy_run, db):
    rep = results_api.store_run(accuracy_run, db=db)
    assert rep.ok and rep.counts is not None and rep.counts.runs_added == 1
    assert results_api.list_results(db=db) == []  # no performance row
    (run,) = results_api.list_runs(db=db)
    assert run.row is None and run.is_accuracy and run.accuracy == ()
    assert (run.info("benchmark"), run.info("scenario")) == ("llama3.1-8b", "Offline")
    assert results_api.list_runs(db=db, benchmark="llama3.1-8b", scenario="offline") != []
    assert results_api.list_runs(db=db, scenario="Server") == []
    # scored: accuracy.txt as the reference evaluation prints it; stored again, the run is
    # unchanged and its scores are added, each judged at v6.0's llama3.1-8b targets
    (accuracy_run / "accuracy.txt").write_text(
        "{'rouge1': 38.5, 'rouge2': 15.1, 'rougeL': 24.6, 'rougeLsum': 35.8, "
        "'gen_len': 8000000, 'gen_num': 200}\nhash=" + "0" * 64 + "\n")
    try:
        again = results_api.store_run(accuracy_run, db=db)
        assert again.counts is not None and again.counts.runs_added == 0
        (run,) = results_api.list_runs(db=db)
    finally:
        (accuracy_run / "accuracy.txt").unlink()
    got = {a.metric: a for a in run.accuracy}
    assert set(got) == {"rouge1", "rouge2", "rougeL", "rougeLsum", "gen_len", "gen_num"}
    # 99% of 38.7792 = 38.391408; 99% of 15.9075 = 15.748425; 99% of 24.4957 = 24.250743;
    # 99% of 35.793 = 35.43507; GEN_LEN within 90%..110% of 8167644 = 7350879.6..8984408.4
    assert got["rouge1"].lower_bound == pytest.approx(38.391408) and got["rouge1"].passed
    assert got["rouge2"].passed is False
    assert got["rougeL"].passed and got["rougeLsum"].passed
    assert (got["gen_len"].lower_bound, got["gen_len"].upper_bound) == pytest.approx(
        (7350879.6, 8984408.4))
    assert got["gen_len"].passed and got["gen_num"].passed is None


def _old_schema_db(url: str) -> str:
    """A database at schema 0003 holding what tokenmark then stored: a performance run
    with its row, an accuracy run stored as a performance row, and a published row."""
    eng = store_engine.create(url)
    try:
        store_engine.upgrade(eng, "0003")
        meta = sa.MetaData()
        meta.reflect(eng)
        runs, results, findings = (meta.tables[t] for t in ("runs", "results", "findings"))
        assert "tokenmark_value" not in results.c and "accuracy_results" not in meta.tables
        with eng.begin() as conn:
            for i, mode in enumerate(("PerformanceOnly", "AccuracyOnly")):
                run_id = conn.execute(runs.insert().values(
                    run_hash=f"{i:064x}", started_utc="2026-12-01T00:00:00", round="v6.0",
                    tokenmark_version="0.1.0", benchmark="llama3.1-8b", scenario="Offline",
                    mode=mode, mlperf_validity="INVALID", tokenmark_validity="INVALID",
                    profile_note="", run={"round": "v6.0", "benchmark": "llama3.1-8b",
                                          "scenario": "Offline", "mode": mode},
                    settings={}, summary={}, verdicts={}, source_path=f"r{i}/results.json",
                )).inserted_primary_key[0]
                conn.execute(findings.insert().values(
                    run_id=run_id, verdict="mlperf", rule="min_duration", passed=False,
                    observed="1 s", required=">= 600 s", advice="", detail=""))
                conn.execute(results.insert().values(
                    natural_key=f"run|{i:064x}", kind="run", label="unverified",
                    round="v6.0", division="open", submitter="local", system_id="sut",
                    system_name="", accelerator_model="", accelerator_note="",
                    benchmark="llama3.1-8b", benchmark_folder="llama3.1-8b",
                    scenario="Offline", metric="tokenmark:summary.loadgen.tokens_per_second",
                    value=2152669.0 if mode == "AccuracyOnly" else 2126.2, unit="Tokens/s",
                    validity="INVALID", inferred=False, accuracy={}, weight_data_types="",
                    framework="", notes="", source_path=f"r{i}/results.json",
                    content_hash=f"{i:064x}", run_ref=run_id))
            conn.execute(results.insert().values(
                natural_key="published|v6.0|closed|X|box|llama3.1-8b|Offline",
                kind="published", label="official", round="v6.0", division="closed",
                submitter="X", system_id="box", system_name="", accelerator_model="",
                accelerator_note="", benchmark="llama3.1-8b", benchmark_folder="llama3.1-8b",
                scenario="Offline", metric="result_tokens_per_second", value=15000.0,
                unit="Tokens/s", validity="VALID", inferred=False, accuracy={},
                weight_data_types="", framework="", notes="", source_path="p",
                content_hash="c"))
    finally:
        eng.dispose()
    return url


def test_the_previous_schema_upgrades_with_its_rows(db):
    url = _old_schema_db(db)
    status = results_api.db_upgrade(url)
    assert status.revision == status.head == store_engine.head_revision()
    with Store.open(url) as st:
        rows = {r.key: r for r in st.rows()}
        runs = {r.run_hash: r for r in st.runs()}
        counts = st.counts()
    # the accuracy run's "throughput" row is gone; the run and its finding stay
    assert set(rows) == {f"run|{0:064x}", "published|v6.0|closed|X|box|llama3.1-8b|Offline"}
    assert rows[f"run|{0:064x}"].value == 2126.2
    assert rows[f"run|{0:064x}"].tokenmark_value is None
    assert counts["runs"] == 2 and counts["findings"] == 2 and counts["accuracy_results"] == 0
    acc = runs[f"{1:064x}"]
    assert acc.row is None and acc.is_accuracy and acc.findings[0].rule == "min_duration"
    assert runs[f"{0:064x}"].row is not None


def test_score_prints_a_table_of_the_targets(accuracy_run, tmp_path):
    """`tokenmark score`: the targets judged in a table (metric, score, required, verdict)
    and the evaluation's figures, not Python reprs; --json for scripts."""
    from typer.testing import CliRunner

    from tokenmark.cli import app

    refs = tmp_path / "refs.jsonl"
    refs.write_text("".join(json.dumps({"output": f"answer number {i}"}) + "\n"
                            for i in range(200)))
    args = ["score", str(accuracy_run), "--references", str(refs)]
    try:
        res = CliRunner().invoke(app, [*args, "--json"])
        assert res.exit_code == 1  # a synthetic model's output meets no ROUGE target
        doc = json.loads(res.stdout)
        assert doc["passed"] is False and doc["samples"] == 200
        by = {t["metric"]: t for t in doc["targets"]}
        assert by["ROUGE1"]["lower_bound"] == pytest.approx(38.391408)
        assert by["ROUGE1"]["passed"] is False
        res = CliRunner().invoke(app, args, terminal_width=120)
    finally:
        (accuracy_run / "accuracy.txt").unlink(missing_ok=True)
    assert res.exit_code == 1
    text = res.stdout
    assert "TargetResult(" not in text and "llama3.1-8b: accuracy targets (200 samples" in text
    row = next(ln for ln in text.splitlines() if "ROUGE1" in ln)
    assert ">= 38.3914" in row and "FAIL" in row
    assert f"{by['ROUGE1']['value']:g}" in row
    assert "wrote " in text and "accuracy.txt" in text
