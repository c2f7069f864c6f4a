"""Schedules: exact counts, determinism under a seed, and the arrival statistics."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenmark.errors import ConfigError
from tokenmark.mlperf.scenarios import ScheduleKind, build_schedule, timed_trace
from tokenmark.mlperf.settings import Scenario, Seeds, TestSettings, effective

SEEDS = Seeds(qsl=11, sample_index=12, schedule=13)


def own(scenario: Scenario, **kw) -> TestSettings:
    base = dict(
        round="v6.0", benchmark="llama3.1-8b", scenario=scenario, seeds=SEEDS,
        target_qps=100.0, min_duration_ms=60_000, min_query_count=1,
    )
    base.update(kw)
    return TestSettings(**base)


def gaps_of(sched) -> np.ndarray:
    return np.diff(sched.scheduled_ns).astype(np.float64) / 1e9


def test_poisson_mean_cv_and_dispersion():
    sched = build_schedule(effective(own(Scenario.POISSON), 500), 500)
    g = gaps_of(sched)
    assert sched.kind is ScheduleKind.TIMED
    # 6000 arrivals expected; mean gap 10 ms within 3 standard errors
    assert abs(g.mean() - 0.01) < 3 * 0.01 / np.sqrt(g.size)
    cv = g.std() / g.mean()
    assert 0.95 < cv < 1.05
    # counts in 1 s windows: Poisson dispersion index near 1
    counts = np.bincount((sched.scheduled_ns // 1_000_000_000).astype(int))[:-1]
    assert 0.7 < counts.var() / counts.mean() < 1.3
    # Kolmogorov-Smirnov distance to the exponential distribution
    x = np.sort(g)
    cdf = 1 - np.exp(-x / 0.01)
    ks = np.max(np.abs(cdf - np.arange(1, x.size + 1) / x.size))
    assert ks < 1.63 / np.sqrt(x.size)  # 99% critical value


def test_last_arrival_is_first_at_or_past_duration():
    sched = build_schedule(effective(own(Scenario.POISSON), 500), 500)
    t = sched.scheduled_ns
    assert t[0] == 0
    assert t[-1] >= 60 * 10**9 and t[-2] < 60 * 10**9


def test_constant_rate_is_exact():
    sched = build_schedule(effective(own(Scenario.CONSTANT, target_qps=3.0,
                                         min_duration_ms=2000), 10), 10)
    assert sched.scheduled_ns.tolist() == [0, 333333333, 666666666, 1000000000,
                                           1333333333, 1666666666, 2000000000]


def test_gamma_burstiness_sets_cv():
    for shape in (0.25, 4.0):
        sched = build_schedule(effective(own(Scenario.GAMMA, burstiness=shape), 100), 100)
        g = gaps_of(sched)
        assert abs(g.std() / g.mean() - 1 / np.sqrt(shape)) < 0.08
        assert abs(g.mean() - 0.01) < 0.0006


def test_determinism_and_seed_dependence():
    a = build_schedule(effective(own(Scenario.POISSON), 50), 50)
    b = build_schedule(effective(own(Scenario.POISSON), 50), 50)
    assert np.array_equal(a.scheduled_ns, b.scheduled_ns)
    assert np.array_equal(a.sample_index, b.sample_index)
    c = build_schedule(effective(own(Scenario.POISSON, seeds=Seeds(1, 2, 3)), 50), 50)
    assert not np.array_equal(a.scheduled_ns, c.scheduled_ns)


def test_sample_order_is_whole_shuffles():
    sched = build_schedule(effective(own(Scenario.POISSON), 37), 37)
    order = sched.sample_index
    for k in range(order.size // 37):
        assert sorted(order[k * 37:(k + 1) * 37].tolist()) == list(range(37))


def test_warmup_and_cooldown_phases():
    eff = effective(own(Scenario.CONSTANT, target_qps=10, min_duration_ms=10_000,
                        warmup_ms=2000, cooldown_ms=1000), 5)
    sched = build_schedule(eff, 5)
    assert sched.warmup_end_ns == 2_000_000_000
    assert sched.cooldown_start_ns == sched.scheduled_ns[-1] - 1_000_000_000


def test_closed_loop_is_endless_and_reproducible():
    eff = effective(own(Scenario.CLOSED_LOOP, concurrency=4), 20)
    s = build_schedule(eff, 20)
    assert s.kind is ScheduleKind.CLOSED and s.streams == 4 and s.endless
    first = [s.closed_sample(i) for i in range(100)]
    assert sorted(first[:20]) == list(range(20))
    again = build_schedule(eff, 20)
    assert [again.closed_sample(i) for i in range(100)] == first


def test_mlperf_server_equal_issue_pads_to_whole_dataset(demo_server):
    eff = effective(demo_server.settings, 256)
    s = build_schedule(eff, 256)
    assert len(s) % 256 == 0
    for k in range(len(s) // 256):
        assert sorted(s.sample_index[k * 256:(k + 1) * 256].tolist()) == list(range(256))
    assert s.scheduled_ns[-1] >= eff.min_duration_ns


def test_offline_is_one_query_at_zero():
    eff = effective(own(Scenario.OFFLINE, offline_expected_qps=10, min_duration_ms=1000,
                        min_query_count=24, sample_concatenate_permutation=True), 24)
    s = build_schedule(eff, 24)
    assert np.all(s.scheduled_ns == 0) and np.all(s.query_id == 0)
    assert len(s) == 24  # max(24, 1.1 * 1 s * 10) = 24, a whole multiple of the set


def test_trace_offsets_and_errors():
    eff = effective(own(Scenario.TRACE), 4)
    s = timed_trace(eff, np.array([5, 7, 7, 20]), np.array([0, 1, 2, 3]))
    assert s.scheduled_ns.tolist() == [0, 2, 2, 15]
    with pytest.raises(ConfigError, match="backwards"):
        timed_trace(eff, np.array([5, 3]), np.array([0, 1]))


@given(qps=st.floats(0.5, 500), duration_ms=st.integers(10, 20_000),
       min_count=st.integers(1, 300), kind=st.sampled_from(
           [Scenario.POISSON, Scenario.CONSTANT, Scenario.GAMMA]))
@settings(max_examples=60, deadline=None)
def test_stop_rule_counts_and_determinism(qps, duration_ms, min_count, kind):
    if duration_ms < 1000 / qps:
        duration_ms = int(1000 / qps) + 1
    eff = effective(own(kind, target_qps=qps, min_duration_ms=duration_ms,
                        min_query_count=min_count), 10)
    s = build_schedule(eff, 10)
    t = s.scheduled_ns
    assert t[0] == 0 and np.all(np.diff(t) >= 0)
    assert len(s) >= min_count
    # stops at the first query at or past the duration once the minimum count is met
    assert t[-1] >= duration_ms * 1_000_000 or len(s) == min_count
    if len(s) > min_count:
        assert t[-2] < duration_ms * 1_000_000
    again = build_schedule(eff, 10)
    assert np.array_equal(again.scheduled_ns, t)
