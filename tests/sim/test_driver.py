"""The simulator's driver against hand-computed times and against the real runner on a
fake clock driving the emulated server's engine (one performance model, one stepping)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from tokenmark.adapters.emulated_sut import EmulatedSUT
from tokenmark.clock import FakeClock, run_virtual
from tokenmark.config.layering import build_settings
from tokenmark.dataset import LengthDistribution, SyntheticDataset
from tokenmark.errors import ConfigError
from tokenmark.loadgen.runner import Runner
from tokenmark.metrics.stats import Column
from tokenmark.metrics.summary import Accumulator
from tokenmark.mlperf.scenarios import Schedule, ScheduleKind, build_schedule
from tokenmark.mlperf.settings import Scenario, effective
from tokenmark.perfmodel import (
    CostModel,
    Deployment,
    Efficiency,
    Precision,
    ServingPolicy,
    find_accelerator,
    find_model,
)
from tokenmark.records import RequestRecord
from tokenmark.sim.cluster import Cluster, Router
from tokenmark.sim.driver import simulate
from tokenmark.sim.explain import WeightedColumn, explain
from tokenmark.sim.run import run_simulation

H200 = find_accelerator("H200")
L8B = find_model("llama3.1-8b")
EFF = Efficiency(mfu=0.5, mbu=0.8, step_overhead_ns=1_000_000, seq_overhead_ns=2_000)


def _deployment(replicas: int = 1, **policy: int) -> Deployment:
    return Deployment(H200, L8B, Precision.FP8, replicas=replicas, efficiency=EFF,
                      policy=ServingPolicy(**policy))


def _timed(times: list[int], samples: list[int]) -> Schedule:
    n = len(times)
    return Schedule(kind=ScheduleKind.TIMED, scenario=Scenario.SERVER,
                    sample_index=np.asarray(samples, dtype=np.int64),
                    query_id=np.arange(n, dtype=np.int64),
                    scheduled_ns=np.asarray(times, dtype=np.int64))


def test_two_requests_by_hand():
    d = _deployment()
    cm = CostModel(d)
    inp = np.array([100, 40])
    out = np.array([3, 2])
    # request 0 at t=0, request 1 at t=1 ns (it waits for the first step to end)
    r = simulate(_timed([0, 1], [0, 1]), inp, out, Cluster(d))
    s1 = cm.step([(100, 0)], []).total_ns  # prefill of request 0 -> its first token
    t1 = s1
    s2 = cm.step([(40, 0)], [101]).total_ns  # request 0 decodes, request 1 prefills
    t2 = t1 + s2
    s3 = cm.step([], [102, 41]).total_ns  # both decode: 0 finishes (3 tokens), 1 finishes
    t3 = t2 + s3
    assert r.first.tolist() == [t1, t2]
    assert r.done.tolist() == [t3, t3]
    assert r.admitted.tolist() == [0, t1]
    assert r.end_ns == t3


def test_offline_burst_is_queued_before_the_first_step():
    d = _deployment()
    inp = np.full(50, 100)
    out = np.full(50, 4)
    zeros = [0] * 50
    r = simulate(_timed(zeros, list(range(50))), inp, out, Cluster(d))
    # all 50 prompts (5000 tokens) fit one 8192-token step: every first token together
    assert len(set(r.first.tolist())) == 1
    assert r.admitted.tolist() == [0] * 50


def _runner_records(d: Deployment, schedule: Schedule, ds: SyntheticDataset,
                    stream: bool) -> list[RequestRecord]:
    clock = FakeClock()
    sut = EmulatedSUT(clock, d, stream=stream)
    recs: list[RequestRecord] = []
    runner = Runner(schedule, ds, sut, clock, consumers=[recs.append])
    run_virtual(runner.run(), clock)
    return sorted(recs, key=lambda r: r.seq)


@pytest.mark.parametrize("stream", [False, True])
def test_driver_agrees_with_the_runner_on_a_fake_clock(stream):
    layered = build_settings("v6.0", "llama3.1-8b", Scenario.SERVER, profile="demo",
                             overrides={"target_qps": 40.0, "min_duration_ms": 5_000,
                                        "min_query_count": 150,
                                        "performance_sample_count": 64,
                                        "total_sample_count": 64})
    ds = SyntheticDataset(64, LengthDistribution.parse("uniform:50:900"),
                          LengthDistribution.parse("uniform:2:60"), seed=3)
    eff = effective(layered.settings, len(ds))
    sched = build_schedule(eff, len(ds))
    d = _deployment(replicas=2, max_num_seqs=8, max_batched_tokens=512)
    recs = _runner_records(d, sched, ds, stream)
    r = simulate(sched, ds.input_token_counts, ds.output_token_counts, Cluster(d))
    assert len(recs) == len(r) == len(sched)
    assert [x.first_token_ns for x in recs] == r.first.tolist()
    assert [x.done_ns for x in recs] == r.done.tolist()
    assert [x.output_tokens for x in recs] == r.output_tokens.tolist()
    if stream:  # every token streamed: the runner's ITL is the engines' step times
        acc = Accumulator()
        for x in recs:
            acc.add(x)
        run_itl = acc.finish(len(recs)).itl.distribution()
        cluster = Cluster(d)
        simulate(sched, ds.input_token_counts, ds.output_token_counts, cluster)
        from tokenmark.sim.explain import itl_column

        _same(itl_column(cluster.engines).distribution(), run_itl)


def test_closed_loop_agrees_with_the_runner():
    layered = build_settings("v6.0", "llama3.1-8b", Scenario.CLOSED_LOOP,
                             overrides={"concurrency": 3, "min_duration_ms": 2_000,
                                        "min_query_count": 20})
    ds = SyntheticDataset(32, LengthDistribution.parse("uniform:50:400"),
                          LengthDistribution.parse("uniform:2:30"), seed=5)
    eff = effective(layered.settings, len(ds))
    sched = build_schedule(eff, len(ds))
    d = _deployment()
    recs = _runner_records(d, sched, ds, stream=False)
    r = simulate(sched, ds.input_token_counts, ds.output_token_counts, Cluster(d))
    assert len(recs) == len(r)
    assert [x.scheduled_ns for x in recs] == r.scheduled.tolist()
    assert [x.first_token_ns for x in recs] == r.first.tolist()
    assert [x.done_ns for x in recs] == r.done.tolist()


def test_offline_burst_agrees_with_the_runner():
    """Every sample sent at once: the emulator plans them together, as the driver does
    (arrivals before kicks at equal times)."""
    layered = build_settings("v6.0", "llama3.1-8b", Scenario.OFFLINE,
                             overrides={"min_query_count": 60, "min_duration_ms": 0,
                                        "offline_expected_qps": 1.0,
                                        "performance_sample_count": 40,
                                        "total_sample_count": 40})
    ds = SyntheticDataset(40, LengthDistribution.parse("uniform:50:600"),
                          LengthDistribution.parse("uniform:2:20"), seed=9)
    eff = effective(layered.settings, len(ds))
    sched = build_schedule(eff, len(ds))
    d = _deployment(replicas=2, max_num_seqs=16, max_batched_tokens=2048)
    recs = _runner_records(d, sched, ds, stream=False)
    r = simulate(sched, ds.input_token_counts, ds.output_token_counts, Cluster(d))
    assert len(recs) == len(r) == len(sched) >= 60
    assert len(set(r.admitted.tolist())) > 1  # the burst queued behind max_num_seqs
    assert [x.first_token_ns for x in recs] == r.first.tolist()
    assert [x.done_ns for x in recs] == r.done.tolist()


def test_the_emulator_refuses_a_disaggregated_deployment():
    d = replace(_deployment(replicas=2), policy=ServingPolicy(prefill_replicas=1))
    with pytest.raises(ConfigError, match="aggregated replicas only; this deployment has 1 "
                                          "prefill-only"):
        EmulatedSUT(FakeClock(), d)


def test_concurrency_cap_serialises_requests():
    d = _deployment()
    inp = np.array([100, 100, 100])
    out = np.array([5, 5, 5])
    r = simulate(_timed([0, 0, 0], [0, 1, 2]), inp, out, Cluster(d), max_concurrency=1)
    assert r.issued.tolist() == [0, r.done[0], r.done[1]]
    assert r.first[1] > r.done[0] and r.first[2] > r.done[1]


def test_disaggregated_prefill_hands_the_kv_cache_over():
    d = replace(_deployment(replicas=2), policy=ServingPolicy(prefill_replicas=1))
    cluster = Cluster(d)
    r = simulate(_timed([0], [0]), np.array([1000]), np.array([3]), cluster)
    cm = CostModel(d)
    prefill = cm.step([(1000, 0)], []).total_ns
    assert r.first[0] == prefill  # the first token comes from the prefill replica
    transfer = cluster.kv_transfer_ns(1000, 0, 1)
    # KV of 1000 tokens over one direction of NVLink at 70%, plus the fixed latency
    assert transfer == int(1000 * d.kv_bytes_per_token / (450 * 0.7)) + 20_000
    dec = cm.step([], [1001]).total_ns + cm.step([], [1002]).total_ns
    assert r.done[0] == prefill + transfer + dec


def test_router_least_loaded_balances_and_round_robin_alternates():
    d = _deployment(replicas=3)
    rr = Cluster(d)
    assert [rr.route() for _ in range(6)] == [0, 1, 2, 0, 1, 2]
    ll = Cluster(d, Router.LEAST_LOADED)
    picks = [ll.route() for _ in range(3)]
    assert sorted(picks) == [0, 1, 2]
    ll.finished(picks[1])
    assert ll.route() == picks[1]


def test_weighted_column_equals_the_expanded_column():
    rng = np.random.default_rng(0)
    values = rng.integers(1, 1000, size=200)
    weights = rng.integers(0, 5, size=200)
    col = Column()
    col.extend(np.repeat(values, weights).tolist())
    _same(WeightedColumn(values, weights).distribution(), col.distribution())


def _same(a, b) -> None:
    """Distributions equal exactly, the standard deviation up to float rounding."""
    assert replace(a, stdev=0.0) == replace(b, stdev=0.0)
    assert a.stdev == pytest.approx(b.stdev, rel=1e-9)


def test_explanation_names_the_binding_limit():
    layered = build_settings("v6.0", "llama3.1-8b", Scenario.OFFLINE, profile="demo",
                             overrides={"min_query_count": 400, "offline_expected_qps": 1.0})
    ds = SyntheticDataset(256, LengthDistribution.parse("uniform:100:300"),
                          LengthDistribution.parse("uniform:50:100"), seed=1)
    eff = effective(layered.settings, len(ds))
    run = run_simulation(eff, ds, Cluster(_deployment(max_num_seqs=16)))
    ex = run.explanation
    assert ex["binding_limit"] == "max_num_seqs" and ex["batch"]["max"] == 16
    split = ex["step_time_split"]
    assert sum(split.values()) == pytest.approx(1.0, abs=1e-4)
    busy = sum(e.stats.busy_ns for e in Cluster(_deployment()).engines)  # a fresh cluster
    assert busy == 0
    # a lightly loaded Server run is limited by the arrival rate, not by the replica
    server = build_settings("v6.0", "llama3.1-8b", Scenario.SERVER, profile="demo",
                            overrides={"target_qps": 2.0, "min_duration_ms": 10_000,
                                       "min_query_count": 20})
    run = run_simulation(effective(server.settings, len(ds)), ds, Cluster(_deployment()))
    assert run.explanation["binding_limit"] == "arrival rate"
    assert run.summary.tokens_per_second and run.verdicts.mlperf.validity.value in (
        "VALID", "INVALID")
    # the same light load on a replica whose every step takes 200 ms: it keeps up with
    # the arrivals, but each token takes 200 ms against the 100 ms TPOT limit, so the run
    # fails its latency limits and says so, not "arrival rate"
    slow = Deployment(H200, L8B, Precision.FP8, efficiency=replace(
        EFF, step_overhead_ns=200_000_000))
    run = run_simulation(effective(server.settings, len(ds)), ds, Cluster(slow))
    assert run.verdicts.mlperf.validity.value == "INVALID"
    assert run.explanation["binding_limit"] == "latency limits"
    assert "perf_constraints failed" in run.explanation["binding_limit_reason"]
    assert "TPOT" in run.explanation["binding_limit_reason"]


def test_explain_queueing_is_admission_minus_send():
    ms = 1_000_000
    ex = explain([], np.array([5 * ms, 9 * ms]), np.array([0, 0]), np.array([0, 2 * ms]),
                 np.array([1 * ms, 4 * ms]), np.array([True, True]))
    assert ex["queueing_ms"] == {"mean": 1.5, "p50": 2.0, "p99": 2.0}
    assert ex["time_to_first_token_ms"]["mean"] == 7.0
