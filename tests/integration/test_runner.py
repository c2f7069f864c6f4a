"""End-to-end runs of the load generator against in-process systems with known delays.

The ground truth is the latency model itself: on a virtual clock, a request that is sent
on time must show TTFT = model TTFT, TPOT = model TPOT, E2E = TTFT + (n-1) * TPOT, to the
nanosecond; on the real clock within loose bounds.
"""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest

from tokenmark.adapters.inprocess import LatencyModel, LatencyModelSUT
from tokenmark.api.run import EXIT_INVALID, EXIT_VALID, SutSpec, default_dataset, run_benchmark
from tokenmark.clock import FakeClock, run_virtual
from tokenmark.config.layering import build_settings
from tokenmark.dataset import LengthDistribution, SyntheticDataset
from tokenmark.loadgen.runner import Runner
from tokenmark.metrics.summary import Accumulator, summarize
from tokenmark.mlperf.scenarios import build_schedule
from tokenmark.mlperf.settings import Scenario, effective
from tokenmark.output.records import read_records
from tokenmark.records import ErrorClass, Query
from tokenmark.sut import ResponseHandle

TTFT = 40_000_000
TPOT = 7_000_000


def model(**kw) -> SutSpec:
    return SutSpec(model=LatencyModel(ttft_ns=TTFT, tpot_ns=TPOT, **kw))


def test_server_metrics_equal_the_model_exactly(tmp_path, demo_server):
    ds = default_dataset(demo_server)
    res = run_benchmark(demo_server, ds, model(), tmp_path, virtual_time=True)
    s = res.summary
    recs = list(read_records(tmp_path / "records.jsonl"))
    assert len(recs) == s.issued == res.outcome.scheduled
    for r in recs:
        n = r.output_tokens
        assert r.issued_ns == r.scheduled_ns  # a virtual clock sends exactly on time
        assert r.first_token_ns - r.scheduled_ns == TTFT
        assert r.done_ns - r.scheduled_ns == TTFT + (n - 1) * TPOT
        assert n == ds.sample(r.sample_index).output_tokens
    assert set(s.ttft.percentiles.values()) == {TTFT}
    assert set(s.tpot.percentiles.values()) == {TPOT}
    assert set(s.itl.percentiles.values()) == {TPOT}
    assert s.send_lag.max == 0
    # LoadGen's token throughput: tokens / completion time of the last-issued query
    last = max(recs, key=lambda r: r.seq)
    assert s.final_query_done_ns == last.done_ns
    assert s.tokens_per_second == pytest.approx(
        sum(r.output_tokens for r in recs) / (last.done_ns / 1e9), rel=1e-12)
    assert res.verdicts.mlperf.validity.value == "VALID"
    assert res.exit_code == EXIT_VALID
    doc = json.loads((tmp_path / "results.json").read_text())
    assert doc["schema"] == "tokenmark.results/1" and doc["label"] == "unverified"
    assert doc["verdicts"]["mlperf"]["validity"] == "VALID"
    assert "demo" in doc["profile_note"]


def test_slow_server_fails_tpot_with_advice(tmp_path):
    layered = build_settings("v6.0", "llama3.1-8b", Scenario.SERVER, profile="demo",
                             overrides={"target_qps": 30})
    slow = SutSpec(model=LatencyModel(ttft_ns=TTFT, tpot_ns=150_000_000))
    res = run_benchmark(layered, default_dataset(layered), slow, tmp_path, virtual_time=True)
    failed = {f.rule: f for f in res.verdicts.mlperf.failed}
    assert "perf_constraints" in failed and "TPOT constrain not met" in failed[
        "perf_constraints"].advice
    assert "early_stopping" in failed
    assert res.exit_code == EXIT_INVALID


def test_too_short_run_is_invalid_for_early_stopping(tmp_path):
    layered = build_settings("v6.0", "llama3.1-8b", Scenario.SERVER, profile="demo",
                             overrides={"target_qps": 5, "min_duration_ms": 20_000,
                                        "performance_sample_count": 50,
                                        "total_sample_count": 50})
    res = run_benchmark(layered, default_dataset(layered), model(), tmp_path,
                        virtual_time=True)
    es = {f.rule: f for f in res.verdicts.mlperf.findings}["early_stopping"]
    assert not es.passed
    n = res.summary.queries_issued
    assert f"Would need to run at least {459 - n} more queries" in es.detail


def test_batching_queue_shows_in_ttft(tmp_path, demo_server):
    # max_batch 1: requests queue behind each other, so TTFT grows beyond the model's.
    res = run_benchmark(demo_server, default_dataset(demo_server), model(max_batch=1),
                        tmp_path, virtual_time=True)
    assert res.summary.ttft.max > TTFT
    assert res.summary.ttft.min == TTFT


def test_offline_and_single_stream(tmp_path):
    off = build_settings("v6.0", "llama3.1-8b", Scenario.OFFLINE, profile="demo",
                         overrides={"offline_expected_qps": 20, "min_duration_ms": 5000})
    res = run_benchmark(off, default_dataset(off), model(), tmp_path / "off", virtual_time=True)
    s = res.summary
    assert s.queries_issued == 1 and s.sample_count == len(default_dataset(off))
    assert s.samples_per_second == pytest.approx(s.sample_count / (s.max_latency_ns / 1e9))
    ss = build_settings("v6.0", "llama3.1-8b-edge", Scenario.SINGLE_STREAM, profile="demo",
                        overrides={"min_duration_ms": 3000, "min_query_count": 10,
                                   "performance_sample_count": 16, "total_sample_count": 16})
    ds = default_dataset(ss)
    res = run_benchmark(ss, ds, model(), tmp_path / "ss", virtual_time=True)
    recs = sorted(read_records(tmp_path / "ss" / "records.jsonl"), key=lambda r: r.seq)
    # one at a time: each query is sent when the previous one completed
    for a, b in zip(recs, recs[1:], strict=False):
        assert b.issued_ns == a.done_ns and b.scheduled_ns == b.issued_ns
    assert recs[-1].issued_ns >= 3_000_000_000 or len(recs) >= 10


class FlakySUT:
    """Fails every third request mid-stream; answers the rest after 1 ms."""

    name = "flaky"

    def __init__(self, clock):
        self.clock = clock

    def describe(self):
        return {"kind": "test"}

    async def start(self):
        pass

    async def flush(self):
        pass

    async def stop(self):
        pass

    def issue(self, q: Query, h: ResponseHandle) -> None:
        t = self.clock.now_ns() + 1_000_000
        if q.seq % 3 == 2:
            self.clock.call_at(t, lambda: (h.token(1), h.fail(ErrorClass.RESET_MID_STREAM, "x")))
        elif q.seq == 4:
            raise RuntimeError("boom")
        else:
            self.clock.call_at(t, lambda: (h.token(1), h.token(1), h.complete(2)))


def test_failures_are_records_and_make_the_run_invalid(tmp_path):
    layered = build_settings("v6.0", "llama3.1-8b", Scenario.POISSON,
                             overrides={"target_qps": 100, "min_duration_ms": 1000})
    ds = SyntheticDataset(10, LengthDistribution.parse("8"), LengthDistribution.parse("4"))
    res = run_benchmark(layered, ds, FlakySUT, tmp_path, virtual_time=True)
    recs = list(read_records(tmp_path / "records.jsonl"))
    errors = [r for r in recs if r.error is not None]
    assert {r.error for r in errors} == {ErrorClass.RESET_MID_STREAM, ErrorClass.SUT_ERROR}
    assert res.summary.errors["sut_error"] == 1
    assert res.summary.failed == len(errors)
    mid = next(r for r in errors if r.error is ErrorClass.RESET_MID_STREAM)
    assert mid.output_tokens == 1 and mid.first_token_ns > 0  # what streamed is kept
    assert res.verdicts.mlperf.validity.value == "not applicable"
    assert "error_rate" in {f.rule for f in res.verdicts.tokenmark.failed}


def test_concurrency_cap_delays_sends(tmp_path):
    layered = build_settings("v6.0", "llama3.1-8b", Scenario.CONSTANT,
                             overrides={"target_qps": 100, "min_duration_ms": 2000,
                                        "max_concurrency": 2})
    ds = SyntheticDataset(10, LengthDistribution.parse("8"), LengthDistribution.parse("10"))
    res = run_benchmark(layered, ds, model(), tmp_path, virtual_time=True)
    recs = sorted(read_records(tmp_path / "records.jsonl"), key=lambda r: r.issued_ns)
    # never more than 2 in flight at any send
    for r in recs:
        inflight = sum(1 for o in recs if o.issued_ns <= r.issued_ns < o.done_ns)
        assert inflight <= 2
    assert res.summary.send_lag.max > 0
    assert "send_lag" in {f.rule for f in res.verdicts.tokenmark.failed}


def test_interrupt_keeps_records_and_is_invalid(tmp_path, demo_server):
    eff = effective(demo_server.settings, 256)
    ds = default_dataset(demo_server)
    sched = build_schedule(eff, len(ds))
    clock = FakeClock()
    acc = Accumulator()
    from tokenmark.output.records import JsonlRecordSink

    sink = JsonlRecordSink(tmp_path / "records.jsonl")
    runner = Runner(sched, ds, LatencyModelSUT(clock, LatencyModel()), clock, sinks=[sink],
                    consumers=[acc.add])

    async def main():
        task = asyncio.ensure_future(runner.run())
        await clock.sleep_until(5_000_000_000)
        runner.request_stop("interrupted by the user (Ctrl-C)")
        return await task

    out = run_virtual(main(), clock)
    sink.close()
    assert out.interrupted and out.issued < len(sched)
    recs = list(read_records(tmp_path / "records.jsonl"))
    assert len(recs) == out.issued  # finished ones and the unanswered ones
    unanswered = [r for r in recs if r.error is ErrorClass.UNANSWERED]
    assert unanswered and all("Ctrl-C" in r.error_detail for r in unanswered)
    data = acc.finish(out.scheduled, interrupted=True, reason=out.interrupt_reason)
    from tokenmark.mlperf.rules import ClientStats, evaluate

    v = evaluate(summarize(data, eff), eff, ClientStats())
    assert v.mlperf.validity.value == "INVALID"
    assert "all_queries_answered" in {f.rule for f in v.mlperf.failed}


def test_real_clock_run_matches_model_within_bounds(tmp_path):
    layered = build_settings("v6.0", "llama3.1-8b", Scenario.POISSON,
                             overrides={"target_qps": 50, "min_duration_ms": 2000})
    ds = SyntheticDataset(20, LengthDistribution.parse("16"), LengthDistribution.parse("8"))
    res = run_benchmark(layered, ds, model(), tmp_path)
    s = res.summary
    # loose bounds: a shared 2-core machine; the tight figures belong to bench/
    assert TTFT <= s.ttft.percentiles[0.5] < TTFT + 5_000_000
    assert TPOT - 1_000_000 < s.tpot.percentiles[0.5] < TPOT + 2_000_000
    assert np.isclose(s.samples_per_second, 50, rtol=0.5)


def test_mlperf_logs_are_written_and_agree_with_results_json(tmp_path, demo_server):
    from tokenmark.mlperf.mllog import parse_detail, parse_summary

    res = run_benchmark(demo_server, default_dataset(demo_server), model(), tmp_path,
                        virtual_time=True)
    detail = parse_detail((tmp_path / "mlperf_log_detail.txt").read_text())
    summary = parse_summary((tmp_path / "mlperf_log_summary.txt").read_text())
    assert summary.result_validity == "VALID" and summary.scenario == "Server"
    assert detail["result_validity"] == "VALID"
    assert detail["result_first_token_99.00_percentile_latency_ns"] == TTFT
    assert detail["result_completed_tokens_per_second"] == pytest.approx(
        res.summary.tokens_per_second, rel=1e-5)
    from tokenmark.mlperf.lgrandom import loadable_sets

    assert detail["loaded_qsl_set"] == loadable_sets(256, 256, res.settings.seeds.qsl)[0]
    assert "tokenmark" in (detail.tokenmark_note or "")
    assert res.document["files"]["mlperf_logs"] == [
        "mlperf_log_summary.txt", "mlperf_log_detail.txt", "mlperf_log_accuracy.json"]
    # tokenmark's own patterns get no LoadGen-format logs
    own = build_settings("v6.0", "llama3.1-8b", Scenario.POISSON,
                         overrides={"target_qps": 20, "min_duration_ms": 1000})
    run_benchmark(own, default_dataset(own), model(), tmp_path / "own", virtual_time=True)
    assert not (tmp_path / "own" / "mlperf_log_summary.txt").exists()
