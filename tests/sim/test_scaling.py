"""Scaling across replicas: identical replicas behind a round-robin router are
independent (one replica fed every R-th arrival is exact), and LoadGen's last-query
term of a Server result against hand computation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tokenmark.mlperf.scenarios import Schedule, ScheduleKind
from tokenmark.mlperf.settings import Scenario
from tokenmark.perfmodel import (
    Deployment,
    Efficiency,
    Precision,
    ServingPolicy,
    find_accelerator,
    find_model,
)
from tokenmark.sim.cluster import Cluster
from tokenmark.sim.driver import simulate
from tokenmark.sim.scaling import (
    LastQuery,
    last_query_factors,
    loadgen_run_seconds,
    ratio_quantiles,
)

EFF = Efficiency(mfu=0.5, mbu=0.8, step_overhead_ns=1_000_000, seq_overhead_ns=2_000)


def _timed(times: np.ndarray, samples: np.ndarray) -> Schedule:
    return Schedule(kind=ScheduleKind.TIMED, scenario=Scenario.SERVER,
                    sample_index=samples.astype(np.int64),
                    query_id=np.arange(times.size, dtype=np.int64),
                    scheduled_ns=times.astype(np.int64))


def test_round_robin_replicas_are_independent():
    # three replicas behind round-robin under one Poisson stream of mixed lengths: each
    # request's latency equals the one a lone replica gives it when fed only its share
    # (every third arrival), which is what the Server search simulates
    d = Deployment(find_accelerator("H200"), find_model("llama3.1-8b"), Precision.FP8,
                   replicas=3, efficiency=EFF, policy=ServingPolicy(max_num_seqs=8))
    rng = np.random.default_rng(3)
    inp = rng.integers(50, 2000, size=64)
    out = rng.integers(2, 300, size=64)
    n = 240
    times = np.floor(np.cumsum(rng.exponential(2e7, size=n)))
    samples = rng.integers(0, 64, size=n)
    joint = simulate(_timed(times, samples), inp, out, Cluster(d))
    lat_joint = joint.done - joint.scheduled
    for k in range(3):
        mine = np.arange(k, n, 3)
        alone = simulate(_timed(times[mine], samples[mine]), inp, out,
                         Cluster(d.single_replica()))
        by_sched = dict(zip(joint.scheduled.tolist(), lat_joint.tolist(), strict=True))
        got = [by_sched[t] for t in alone.scheduled.tolist()]
        assert got == (alone.done - alone.scheduled).tolist()


def test_loadgen_run_is_the_longer_of_its_minimums():
    assert loadgen_run_seconds(165.0, 600.0, 100) == 600.0
    assert loadgen_run_seconds(165.0, 600.0, 236952) == pytest.approx(236952 / 165.0)
    with pytest.raises(ValueError, match="positive rate"):
        loadgen_run_seconds(0.0, 600.0, 100)


def test_last_query_factor_by_hand():
    # T = 900 s; last queries of 100 s and 300 s: 900/1000 and 900/1200, ascending
    f = last_query_factors(np.array([100e9, 300e9]), 900.0)
    assert f.tolist() == pytest.approx([0.75, 0.9])
    q = LastQuery(1.0, 900.0, np.array([100e9, 300e9]))
    assert q.expected == pytest.approx(0.825) and q.mean_latency_s == pytest.approx(200.0)
    # NVIDIA's v6.1 GB300 x72 DeepSeek-R1 Server run: 236,952 queries scheduled at
    # 165.21/s (T = 1,434.2 s), completed at 156.23/s: its last query took
    # T x (165.21 / 156.23 - 1) = 82.4 s, and that factor reproduces the completed rate
    t = 236952 / 165.21
    last = t * (165.21 / 156.23 - 1)
    (g,) = last_query_factors(np.array([last * 1e9]), t)
    assert 165.21 * g == pytest.approx(156.23, rel=1e-9)
    with pytest.raises(ValueError, match="issue span"):
        last_query_factors(np.array([1.0]), 0.0)


def test_ratio_quantiles_of_two_runs():
    # X in {0.8, 1.0} equally likely, Y = 1: X / Y is 0.8 half the time
    lo, hi, share = ratio_quantiles(np.array([0.8, 1.0]), np.array([1.0]), (0.05, 0.95),
                                    at=0.8)
    assert (lo, hi) == pytest.approx((0.8, 1.0))
    assert share == pytest.approx(0.5)
    # the same distribution on both sides: the ratio's median is 1, its band symmetric
    # in log: X, Y uniform on {0.5, 1}: X / Y in {0.5, 1, 1, 2}
    x = np.array([0.5, 1.0])
    lo, mid, hi = ratio_quantiles(x, x, (0.05, 0.5, 0.95))
    assert (lo, mid, hi) == pytest.approx((0.5, 1.0, 2.0))
    assert math.isclose(lo * hi, 1.0)
    with pytest.raises(ValueError, match="at least one"):
        ratio_quantiles(np.array([]), x, (0.5,))


def test_server_sweep_carries_the_last_query_spread():
    from tokenmark.api.simulation import scaling
    from tokenmark.config.layering import build_settings
    from tokenmark.sim.plan import ClusterSpec

    spec = ClusterSpec("H200", "llama3.1-8b", per_node=8, efficiency=EFF)
    off = scaling(build_settings("v6.0", "llama3.1-8b", Scenario.OFFLINE), spec, [8, 16],
                  requests=300)
    assert all(math.isnan(p.efficiency_low) and p.last_query is None for p in off)
    srv = scaling(build_settings("v6.0", "llama3.1-8b", Scenario.SERVER), spec, [8, 16],
                  requests=300)
    base, two = srv
    assert base.last_query is not None and two.last_query is not None
    # 600 s runs (the rules' minimum) at the predicted rates; llama3.1-8b's requests
    # live seconds, so the last query costs about L / (600 s + L) of the result: ~1%
    lq = base.last_query
    assert lq.run_s == pytest.approx(600.0)
    assert 0.95 < lq.expected < 1.0
    assert lq.expected == pytest.approx(600 / (600 + lq.mean_latency_s), rel=1e-3)
    for p in srv:
        assert p.efficiency_low <= p.efficiency <= p.efficiency_high
    # the base against itself: the spread of two independent draws, around 1
    assert base.efficiency_low < 1.0 < base.efficiency_high


def test_an_end_to_end_limit_is_judged_over_the_rules_minimum_run():
    # Qwen3-VL's limit is one end-to-end p99 (12 s Server); two request lives are two
    # limits, 24 s, so a probe at 10 queries/s would hold max(100, 10 x 24) = 240
    # requests; the p99 is LoadGen's over a run of at least mlperf.conf's 600 s, so the
    # probe spans 10 x 600 = 6,000 arrivals, 90% of them measured (the first 10% warm up)
    from tokenmark.mlperf.settings import LatencyLimits
    from tokenmark.sim.search import E2E_SPAN_S, replica_server_run

    assert E2E_SPAN_S == 600.0
    d = Deployment(find_accelerator("H200"), find_model("llama3.1-8b"), Precision.FP8,
                   replicas=1, efficiency=EFF, policy=ServingPolicy(max_num_seqs=64))
    inp = np.full(16, 200, dtype=np.int64)
    out = np.full(16, 20, dtype=np.int64)
    e2e = replica_server_run(d, inp, out, 10.0, LatencyLimits(e2e_ns=12_000_000_000),
                             requests=100)
    assert e2e.e2e_ns is not None and e2e.e2e_ns.size == 6000 - 600
    # TTFT/TPOT limits keep two lives: (2,000 ms + 100 ms x 20 tokens) x 2 = 8 s at
    # 10 queries/s is 80 arrivals, below the 100 asked for
    tok = replica_server_run(d, inp, out, 10.0,
                             LatencyLimits(ttft_ns=2_000_000_000, tpot_ns=100_000_000),
                             requests=100)
    assert tok.e2e_ns is not None and tok.e2e_ns.size == 100 - 10


def test_completed_share_by_hand():
    from tokenmark.sim.search import completed_share

    lat = np.array([100e9, 300e9])
    # T = max(900 s, 100 queries / 1 per s) = 900 s: (900/1000 + 900/1200) / 2
    assert completed_share(lat, 1.0, 900.0, 100) == pytest.approx(0.825)
    # at 0.05 queries/s the 100 queries take 2,000 s: (2000/2100 + 2000/2300) / 2
    assert completed_share(lat, 0.05, 900.0, 100) == pytest.approx(
        (2000 / 2100 + 2000 / 2300) / 2)
    # no latencies (a run that failed): nothing to take
    assert completed_share(None, 1.0, 900.0, 100) == 1.0


def test_a_long_answer_server_result_stays_below_its_offline_one():
    """Limits loose enough for the saturated rate: the offered Server rate is the
    deployment's Offline throughput, and LoadGen's figure is that times E[T / (T + L)]
    over the run's own latencies: with 4,000-token answers (minutes each, as
    DeepSeek-R1's) well below 1 in a 600 s run, and closer to 1 in a 2,400 s one."""
    from tokenmark.mlperf.settings import LatencyLimits
    from tokenmark.sim.plan import ClusterSpec
    from tokenmark.sim.predict import predict

    spec = ClusterSpec("H200", "llama3.1-8b", per_node=1, tp=1, efficiency=EFF)
    inputs, outputs = np.full(64, 500), np.full(64, 4000)
    loose = LatencyLimits(ttft_ns=600_000_000_000, tpot_ns=10_000_000_000)
    got = {}
    for span in (600.0, 2400.0):
        p = predict(spec, "Server", inputs, outputs, offline_eff=EFF, latency_eff=EFF,
                    limits=loose, requests=300, min_duration_s=span)
        assert p.binding == "Offline throughput (saturated)"
        assert p.run_s == span and p.latency_ns is not None
        lat_s = p.latency_ns / 1e9
        assert p.completed == pytest.approx(float(np.mean(span / (span + lat_s))))
        assert p.value == pytest.approx(p.offline_bound * p.completed)
        assert p.offered == pytest.approx(p.offline_bound)
        got[span] = p.completed
    # requests live about two minutes here (122 s mean): 0.83 of a 600 s run's offered
    # rate is reported, 0.95 of a 2,400 s run's
    assert got[600.0] < 0.9 < got[2400.0] < 1.0
