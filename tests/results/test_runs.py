"""The user's own runs: a real tokenmark run's results folder, stored unverified."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokenmark.adapters.inprocess import LatencyModel
from tokenmark.api import results as results_api
from tokenmark.api.run import SutSpec, default_dataset, run_benchmark
from tokenmark.config.layering import build_settings
from tokenmark.mlperf.settings import Scenario
from tokenmark.resultrows import Label
from tokenmark.store import Store


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """A real run's results folder: llama3.1-8b Server, demo profile, virtual time."""
    settings = build_settings("v6.0", "llama3.1-8b", Scenario.SERVER, profile="demo")
    out = tmp_path_factory.mktemp("run")
    run_benchmark(settings, default_dataset(settings),
                  SutSpec(model=LatencyModel(ttft_ns=40_000_000, tpot_ns=7_000_000)), out,
                  virtual_time=True)
    return out


def test_a_run_is_stored_unverified_with_its_findings(run_dir, db):
    doc = json.loads((run_dir / "results.json").read_text())
    rep = results_api.store_run(run_dir, db=db)
    assert rep.ok and rep.runs == 1 and rep.counts is not None and rep.counts.runs_added == 1
    [row] = results_api.list_results(db=db)
    assert row.kind == "run" and row.label is Label.UNVERIFIED
    assert (row.round, row.benchmark, row.scenario) == ("v6.0", "llama3.1-8b", "Server")
    assert row.value == doc["summary"]["loadgen"]["tokens_per_second"]
    assert row.unit == "Tokens/s" and row.validity == doc["verdicts"]["tokenmark"]["validity"]
    n_findings = sum(len(doc["verdicts"][k]["findings"]) for k in ("mlperf", "tokenmark"))
    with Store.open(db) as st:
        counts, fp = st.counts(), st.fingerprint()
    assert counts["runs"] == 1 and counts["findings"] == n_findings > 0
    again = results_api.import_results(run_dir, db=db)  # a folder holding a run, too
    assert again.counts is not None and again.counts.runs_added == 0
    with Store.open(db) as st:
        assert st.fingerprint() == fp


def test_a_run_with_a_system_description(run_dir, tmp_path, sqlite_db):
    system = tmp_path / "my-box.json"
    system.write_text(json.dumps({"system_name": "my box", "number_of_nodes": 1,
                                  "accelerators_per_node": 2,
                                  "accelerator_model_name": "NVIDIA L40S",
                                  "system_type": "datacenter"}))
    results_api.store_run(run_dir / "results.json", db=sqlite_db, system=system)
    [row] = results_api.list_results(db=sqlite_db)
    assert (row.system_id, row.accelerator_model, row.total_accelerators) == (
        "my-box", "NVIDIA L40S", 2)
    assert row.per_accelerator == row.value / 2


def test_bad_run_files(tmp_path, sqlite_db):
    bad = tmp_path / "a" / "results.json"
    bad.parent.mkdir()
    bad.write_text('{"schema": "tokenmark.results/9", "run": {}}')
    rep = results_api.import_results(tmp_path / "a", db=sqlite_db)
    assert "schema 'tokenmark.results/9' is not 'tokenmark.results/1'" in rep.errors[0].reason
    bad.write_text('{"schema": "tokenmark.results/1", "run": {"round": "v6.0"')
    rep = results_api.store_run(bad, db=sqlite_db)
    assert "is not valid JSON" in rep.errors[0].reason and not rep.written
