"""``run --distributed ray`` on a local Ray instance.

Ground truth: the latency model's delays (TTFT 40 ms, TPOT 5 ms) and the schedule
itself. Each worker's clock is shifted by seconds (as another machine's would be); the
merged run shows the model's TTFT to the millisecond and sends on time only if the
measured offsets were applied.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from tokenmark.adapters.inprocess import LatencyModel, LatencyModelSUT
from tokenmark.api.run import SutSpec, default_dataset, run_benchmark
from tokenmark.api.scale import distributed_driver
from tokenmark.config.layering import build_settings
from tokenmark.errors import BadInputError
from tokenmark.mlperf.scenarios import build_schedule
from tokenmark.mlperf.settings import Scenario, effective
from tokenmark.output.records import read_records
from tokenmark.records import ErrorClass

pytestmark = pytest.mark.ray

TTFT = 40_000_000
TPOT = 5_000_000
OFFSETS = (3_000_000_000, -2_000_000_000)


def _settings(**kw):
    over = {"min_duration_ms": 2000, "target_qps": 200, "min_query_count": 500,
            "send_lag_limit_ms": 100.0, **kw}
    return build_settings("v6.0", "llama3.1-8b", Scenario.SERVER, profile="demo",
                          overrides=over)


def test_offsets_are_measured_and_corrected_and_records_merge(local_ray, tmp_path):
    layered = _settings()
    ds = default_dataset(layered)
    driver = distributed_driver("ray", workers=2, clock_offsets_ns=OFFSETS)
    res = run_benchmark(layered, ds, SutSpec(model=LatencyModel(ttft_ns=TTFT, tpot_ns=TPOT)),
                        tmp_path, driver=driver)
    doc = json.loads((tmp_path / "results.json").read_text())
    workers = doc["distributed"]["workers"]
    for w, injected in zip(workers, OFFSETS, strict=True):
        # the measured offset is the injected one, within its stated uncertainty (+ 1 ms)
        assert abs(w["clock_offset_ns"] - injected) <= w["clock_uncertainty_ns"] + 1_000_000
        assert not w["shared_clock"] and not w["lost"]
    assert sum(w["records_received"] for w in workers) == res.summary.issued
    # CPU is stated per worker and for the driver; the last merge comes after the last answer
    assert all(w["cpu_s"] > 0 for w in workers) and doc["distributed"]["driver_cpu_s"] > 0
    assert doc["distributed"]["last_merge_ns"] >= res.outcome.end_ns
    # the merged records are exactly the single-process schedule
    eff = effective(layered.settings, len(ds))
    sched = build_schedule(eff, len(ds))
    recs = sorted(read_records(tmp_path / "records.jsonl"), key=lambda r: r.seq)
    assert [r.seq for r in recs] == list(range(len(sched)))
    assert np.array_equal([r.scheduled_ns for r in recs], sched.scheduled_ns)
    assert np.array_equal([r.sample_index for r in recs], sched.sample_index)
    # on the driver's time base: on time, and the model's own latencies - seconds off if
    # uncorrected (the offsets are 3 s and -2 s); the margins hold on a busy machine
    # (median send lag 11 ms measured at a load of 6 on 2 cores)
    lags = np.array([r.issued_ns - r.scheduled_ns for r in recs])
    ttft = np.array([r.first_token_ns - r.issued_ns for r in recs])
    assert np.median(lags) < 200_000_000 and lags.min() > -100_000_000
    assert np.median(ttft) == pytest.approx(TTFT, abs=100_000_000)
    gaps = [b - a for r in recs for a, b in zip(r.chunk_ns, r.chunk_ns[1:], strict=False)]
    assert np.median(gaps) == TPOT  # worker-side gaps are untouched by the shift
    # one run: the same verdict structure and MLPerf logs as a single-process run
    assert res.summary.completed == len(sched) and res.summary.failed == 0
    assert {f.rule for f in res.verdicts.mlperf.findings} >= {"perf_constraints",
                                                              "early_stopping"}
    assert res.verdicts.mlperf.validity.value == "VALID"
    assert (tmp_path / "mlperf_log_summary.txt").is_file()
    assert doc["run"]["sut"]["distributed"] == "ray, 2 workers"


class _DyingSUT(LatencyModelSUT):
    """Kills its own worker process at its 150th request, in the first worker to try."""

    flag = ""

    def issue(self, query, handle):
        self.count = getattr(self, "count", 0) + 1
        if self.count == 150:
            try:
                os.close(os.open(self.flag, os.O_CREAT | os.O_EXCL))
                os._exit(1)
            except FileExistsError:
                pass
        super().issue(query, handle)


def test_a_lost_worker_makes_the_run_invalid_and_keeps_records(local_ray, tmp_path):
    layered = _settings(min_duration_ms=3000)
    ds = default_dataset(layered)
    flag = str(tmp_path / "died")

    def factory(clock):
        sut = _DyingSUT(clock, LatencyModel(ttft_ns=TTFT, tpot_ns=TPOT))
        sut.flag = flag
        return sut

    out = tmp_path / "run"
    res = run_benchmark(layered, ds, factory, out, driver=distributed_driver("ray", workers=2))
    assert Path(flag).exists()
    assert res.verdicts.tokenmark.validity.value == "INVALID"
    assert res.outcome.interrupted and "was lost" in res.outcome.interrupt_reason
    failed = {f.rule: f for f in res.verdicts.tokenmark.failed}
    assert "was lost" in failed["run_completed"].observed
    recs = list(read_records(out / "records.jsonl"))
    doc = json.loads((out / "results.json").read_text())
    lost = [w for w in doc["distributed"]["workers"] if w["lost"]]
    assert len(lost) == 1 and "its actor died" in lost[0]["lost"]
    # every record received is on disk: the lost worker's finished ones, and the other's
    assert len(recs) == sum(w["records_received"] for w in doc["distributed"]["workers"])
    assert lost[0]["records_received"] >= 50  # most of its first 149 had finished
    ok = [r for r in recs if r.error is None]
    assert ok and all(r.first_token_ns - r.scheduled_ns >= TTFT for r in ok)
    assert all(r.error is ErrorClass.UNANSWERED for r in recs if r.error is not None)


class _NamedSUT(LatencyModelSUT):
    def describe(self):
        return {**super().describe(), "model": f"model-of-pid-{os.getpid()}"}


def test_workers_that_see_different_models_fail_before_any_load(local_ray, tmp_path):
    layered = _settings()
    ds = default_dataset(layered)

    def factory(clock):
        return _NamedSUT(clock, LatencyModel(ttft_ns=TTFT, tpot_ns=TPOT))

    with pytest.raises(BadInputError, match="serve different models"):
        run_benchmark(layered, ds, factory, tmp_path, driver=distributed_driver("ray",
                                                                                workers=2))
    assert (tmp_path / "records.jsonl").read_text() == ""


def test_too_few_cpus_is_a_clear_error(local_ray):
    with pytest.raises(BadInputError, match="has 2 CPUs, fewer than the 4"):
        distributed_driver("ray", workers=4)
