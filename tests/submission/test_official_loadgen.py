"""`tokenmark run --loadgen official`: the mlcommons-loadgen package drives tokenmark's
in-process latency-model SUT for a few seconds; its logs are LoadGen's, tokenmark's
records agree with them, and a closed tree packaged from the run checks clean of
record mismatches."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.submission.test_package import MEAS, system_file
from tokenmark.adapters.inprocess import LatencyModel
from tokenmark.api import SutSpec, default_dataset
from tokenmark.config.layering import build_settings
from tokenmark.errors import ConfigError
from tokenmark.mllog import parse_detail
from tokenmark.settings import Scenario
from tokenmark.submission.check import check_tree
from tokenmark.submission.package import PackageSpec, package_runs

pytest.importorskip("mlperf_loadgen", reason="pip install mlcommons-loadgen (the loadgen extra)")

from tokenmark.submission_api import run_official_loadgen  # noqa: E402

# 200 queries/s for 2.5 s: ~500 queries, above the 459 early stopping needs at p99.
OVERRIDES = {"target_qps": 200.0, "min_duration_ms": 2500, "min_query_count": 470,
             "performance_sample_count": 100, "total_sample_count": 100}
MODEL = LatencyModel(ttft_ns=5_000_000, tpot_ns=1_000_000)


@pytest.fixture(scope="module")
def official_run(tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("official") / "perf"
    layered = build_settings("v6.0", "llama3.1-8b", Scenario.SERVER, profile="demo",
                             overrides=OVERRIDES)
    ds = default_dataset(layered, size=100, output_lengths="uniform:8:16")
    result = run_official_loadgen(layered, ds, SutSpec(kind="latency-model", model=MODEL), out)
    return out, result


def test_loadgen_writes_the_logs_and_tokenmark_the_records(official_run):
    out, result = official_run
    detail = parse_detail((out / "mlperf_log_detail.txt").read_text())
    assert str(detail["loadgen_version"]).startswith("6.0.")  # LoadGen's own log
    assert detail.tokenmark_note is None
    # the round's seeds, set by tokenmark over the installed LoadGen's mlperf.conf
    assert detail["effective_schedule_rng_seed"] == 3936089224930324775
    assert detail["requested_server_ttft_latency"] == 2_000_000_000
    n = detail["result_query_count"]
    assert n >= 470
    assert len((out / "records.jsonl").read_text().splitlines()) == n
    doc = json.loads((out / "results.json").read_text())
    assert doc["run"]["loadgen"] == "official"
    cmp = doc["loadgen"]["comparison"]
    assert cmp["query_count"]["relative_difference"] == 0
    # throughput: the same completions over nearly the same span
    assert abs(cmp["tokens_per_second"]["relative_difference"]) < 0.01
    # latency: LoadGen times from its scheduled time, so never less than the records
    for k in ("ttft_p99_ns", "tpot_p99_ns", "latency_p99_ns"):
        assert cmp[k]["loadgen"] >= cmp[k]["tokenmark"] * 0.999 - 1e6, k
    # the modelled TTFT is a floor for both
    assert cmp["ttft_p99_ns"]["tokenmark"] >= 5_000_000
    assert result.verdicts.mlperf.validity.value == detail["result_validity"]


def test_a_closed_tree_from_the_run_matches_its_records(official_run, tmp_path):
    out, _ = official_run
    mp = tmp_path / "m.json"
    mp.write_text(json.dumps(MEAS))
    package_runs(PackageSpec(runs=(out,), output=tmp_path / "sub", submitter="Acme",
                             system=system_file(tmp_path, "closed"), measurements=mp,
                             division="closed"))
    report = check_tree(tmp_path / "sub", "v6.0")
    (r,) = report.results
    checks = {f.check for f in r.errors}
    assert "records" not in checks and "seeds" not in checks and "log consistency" not in checks
    assert "min duration" in checks  # a 2.5 s run is not a submission
    assert r.recomputed["records"] == r.recomputed["query count"]


def test_find_peak_is_server_only():
    layered = build_settings("v6.0", "llama3.1-8b", Scenario.OFFLINE, profile="demo")
    with pytest.raises(ConfigError, match="FindPeakPerformance searches Server"):
        run_official_loadgen(layered, default_dataset(layered, size=10), SutSpec(),
                             Path("/nonexistent"), find_peak=True)
