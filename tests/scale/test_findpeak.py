"""find-peak under virtual time against systems whose capacity is known."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from tests.scale.support import (
    capacity,
    constant_settings,
    fixed_dataset,
    model,
    threshold,
)
from tokenmark.adapters.inprocess import LatencyModel
from tokenmark.api.run import SutSpec, default_dataset
from tokenmark.api.scale import find_peak
from tokenmark.config.layering import build_settings
from tokenmark.errors import BadInputError
from tokenmark.mlperf.settings import Scenario
from tokenmark.scale.findpeak import STOP_PREFIX, PeakSearch, ProbeKind


def test_peak_brackets_the_exact_dd_c_threshold(tmp_path):
    res = find_peak(constant_settings(), fixed_dataset(), model(8), tmp_path,
                    tolerance=0.02, virtual_time=True)
    truth = threshold(8, 0.5, 60)  # 7.7506/s; capacity 7.6923/s
    assert res.lo is not None and res.hi is not None
    assert res.lo <= truth < res.hi
    assert res.hi / res.lo <= 1.02
    assert res.rate == res.lo and res.confirmed is not None
    assert res.confirmed.verdicts.tokenmark.validity.value == "VALID"
    # every probe at or below capacity passed, every one above the threshold failed
    for p in res.probes:
        if p.rate <= capacity(8):
            assert p.passed
        if p.rate > truth * 1.001:
            assert p.judgement.kind is ProbeKind.TOO_HIGH


def test_overloaded_probes_stop_as_soon_as_failure_is_certain(tmp_path):
    res = find_peak(constant_settings(), fixed_dataset(), model(8), tmp_path,
                    start_qps=16, tolerance=0.05, virtual_time=True)
    first = res.probes[0]
    assert first.rate == 16 and first.judgement.kind is ProbeKind.TOO_HIGH
    assert first.judgement.reason.startswith(STOP_PREFIX)
    s = first.result.summary
    assert s.completed < s.scheduled / 4  # stopped long before the schedule's end
    # the stop rule is exact: p99 of the full schedule fails with one more request over
    n = s.scheduled
    assert f"of {n} requests over the TTFT limit" in first.judgement.reason
    assert f"{n - int(n * 0.99)} of {n}" in first.judgement.reason


def test_server_peak_is_below_capacity_respects_early_stopping_and_is_indexed(tmp_path):
    layered = build_settings("v6.0", "llama3.1-8b", Scenario.SERVER, profile="demo",
                             overrides={"min_duration_ms": 120_000})
    ds = default_dataset(layered)
    mean_out = sum(ds.sample(i).output_tokens for i in range(len(ds))) / len(ds)
    cap = 8 / (0.05 + (mean_out - 1) * 0.01)
    spec = SutSpec(model=LatencyModel(ttft_ns=50_000_000, tpot_ns=10_000_000, max_batch=8))
    res = find_peak(layered, ds, spec, tmp_path, start_qps=2.0, tolerance=0.03,
                    virtual_time=True)
    assert res.rate is not None and 0.85 * cap <= res.rate <= cap  # M/G/8: below capacity
    assert res.hi is not None and res.hi > res.rate
    # the 2/s probe held too few queries for early stopping: rerun with what it asked
    first, second = res.probes[0], res.probes[1]
    assert first.judgement.kind is ProbeKind.MORE_QUERIES
    assert second.rate == first.rate and second.min_query_count == (
        first.judgement.queries_needed) and second.passed
    assert res.confirmed is not None and res.confirmed.verdicts.mlperf.validity.value == "VALID"
    # every probe is a full results folder, listed in index.json and index.csv
    doc = json.loads((tmp_path / "index.json").read_text())
    with (tmp_path / "index.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(doc["probes"]) == len(rows) == len(res.probes)
    assert doc["peak_qps"] == res.rate and doc["confirmed_folder"] == rows[-1]["folder"]
    for row in rows:
        assert (tmp_path / row["folder"] / "results.json").is_file()
    assert rows[-1]["kind"] == "confirm" and rows[-1]["outcome"] == "valid"


def test_shorter_probes_leave_length_rules_to_the_confirming_run(tmp_path):
    res = find_peak(constant_settings(duration_s=60), fixed_dataset(), model(8), tmp_path,
                    probe_duration_s=20, tolerance=0.05, virtual_time=True)
    probes = [p for p in res.probes if p.kind == "probe"]
    assert all(p.result.settings.min_duration_ns == 20 * 10**9 for p in probes)
    assert res.confirmed is not None
    assert res.confirmed.settings.min_duration_ns == 60 * 10**9
    # a 20 s probe tolerates more overload than the 60 s run; the confirm decides
    assert res.rate is not None and res.rate <= threshold(8, 0.5, 20)


def test_bad_input_is_refused():
    with pytest.raises(BadInputError, match="needs latency limits"):
        find_peak(build_settings("v6.0", "llama3.1-8b", Scenario.POISSON,
                                 overrides={"target_qps": 1.0}),
                  fixed_dataset(), model(8), Path("/nonexistent"))
    with pytest.raises(BadInputError, match="not Offline"):
        find_peak(build_settings("v6.0", "llama3.1-8b", Scenario.OFFLINE),
                  fixed_dataset(), model(8), Path("/nonexistent"))


def test_search_brackets_then_bisects():
    s = PeakSearch(4.0, tolerance=0.1)
    assert s.next_rate() == 4.0
    s.record(4.0, True)
    assert s.next_rate() == 8.0
    s.record(8.0, False)
    assert s.next_rate() == pytest.approx(32**0.5)
    s.record(32**0.5, True)
    s.record(s.next_rate(), False)  # 6.73
    s.record(s.next_rate(), True)  # 6.17
    assert s.next_rate() is None and "converged" in s.note
    low = PeakSearch(4.0, min_rate=1.5)
    low.record(4.0, False)
    assert low.next_rate() == 2.0
    low.record(2.0, False)
    assert low.next_rate() is None and "no rate" in low.note
