"""Sweeps and scaling-efficiency runs under virtual time, against known capacities."""

from __future__ import annotations

import csv
import json

import pytest

from tests.scale.support import SERVICE_S, capacity, constant_settings, fixed_dataset, model
from tokenmark.adapters.inprocess import LatencyModel, LatencyModelSUT
from tokenmark.api.scale import scaling_run, sweep
from tokenmark.api.suts import replicated
from tokenmark.config.layering import build_settings
from tokenmark.errors import BadInputError
from tokenmark.mlperf.settings import Scenario
from tokenmark.scale.scaling import efficiency, t95
from tokenmark.scale.sweep import pareto_front, parse_points


def test_rate_sweep_throughput_goodput_and_pareto(tmp_path):
    res = sweep(constant_settings(duration_s=30), fixed_dataset(), model(8), tmp_path,
                rates=(4.0, 6.0, 10.0), virtual_time=True)
    rows = res.rows
    # below capacity (7.69/s): every request served at once, E2E exactly S
    for r, rate in zip(rows[:2], (4.0, 6.0), strict=True):
        assert r["requests_per_s"] == pytest.approx(rate, rel=0.03)
        assert r["e2e_p99_ms"] == pytest.approx(SERVICE_S * 1000)
        assert r["goodput_fraction"] == 1.0 and r["tokenmark_verdict"] == "VALID"
    # above it: throughput pinned at capacity, requests queue, goodput falls
    over = rows[2]
    assert over["requests_per_s"] == pytest.approx(capacity(8), rel=0.03)
    assert over["goodput_fraction"] < 0.5 and over["tokenmark_verdict"] == "INVALID"
    assert [r["pareto"] for r in rows] == [False, True, True]  # 6/s beats 4/s at equal E2E
    with (tmp_path / "index.csv").open() as f:
        table = list(csv.DictReader(f))
    assert [t["folder"] for t in table] == ["point-01-4qps", "point-02-6qps", "point-03-10qps"]
    assert all((tmp_path / t["folder"] / "results.json").is_file() for t in table)
    assert json.loads((tmp_path / "index.json").read_text())["points"][2]["pareto"] is True


def test_concurrency_sweep_matches_closed_loop_capacity(tmp_path):
    layered = build_settings("v6.0", "llama3.1-8b", Scenario.CLOSED_LOOP, overrides={
        "concurrency": 1, "min_duration_ms": 30_000, "ttft_latency_ms": 500,
        "performance_sample_count": 256, "total_sample_count": 256})
    res = sweep(layered, fixed_dataset(), model(4), tmp_path, concurrencies=(2, 4, 8),
                virtual_time=True)
    rps = [r["requests_per_s"] for r in res.rows]
    assert rps[0] == pytest.approx(2 / SERVICE_S, rel=0.03)
    assert rps[1] == pytest.approx(4 / SERVICE_S, rel=0.03)
    assert rps[2] == pytest.approx(4 / SERVICE_S, rel=0.03)  # 4 slots: 8 streams queue
    assert res.rows[2]["ttft_p99_ms"] == pytest.approx(50 + SERVICE_S * 1000, rel=0.02)


def test_sweep_refuses_mixed_points(tmp_path):
    with pytest.raises(BadInputError, match="not both"):
        sweep(constant_settings(), fixed_dataset(), model(8), tmp_path, rates=(1.0,),
              concurrencies=(2,))


def test_replicas_scale_linearly(tmp_path):
    def sut_for(n):
        return replicated(lambda c: LatencyModelSUT(c, model(8).model), n)

    res = scaling_run(constant_settings(), fixed_dataset(), sut_for, tmp_path,
                      replicas=(1, 2), start_qps=4.0, tolerance=0.02, virtual_time=True)
    one, two = res.points
    assert one.efficiency == 1.0
    assert one.peak_rates[0] == pytest.approx(capacity(8), rel=0.03)
    assert two.peak_rates[0] == pytest.approx(2 * capacity(8), rel=0.03)
    assert two.efficiency == pytest.approx(1.0, abs=0.03)
    assert two.efficiency_low <= two.efficiency <= two.efficiency_high
    assert two.efficiency_low <= 1.0 <= two.efficiency_high  # the truth is in the interval
    assert two.per_replica == pytest.approx(one.per_replica, rel=0.03)
    doc = json.loads((tmp_path / "index.json").read_text())
    assert [p["replicas"] for p in doc["points"]] == [1, 2]
    assert (tmp_path / "replicas-2" / "index.json").is_file()


def test_a_shared_bottleneck_halves_efficiency(tmp_path):
    # n replicas that split 8 slots between them: capacity never grows
    def sut_for(n):
        lm = LatencyModel(ttft_ns=50_000_000, tpot_ns=10_000_000, max_batch=8 // n)
        return replicated(lambda c: LatencyModelSUT(c, lm), n)

    res = scaling_run(constant_settings(), fixed_dataset(), sut_for, tmp_path,
                      replicas=(1, 2), start_qps=4.0, tolerance=0.02, virtual_time=True)
    two = res.points[1]
    assert two.efficiency == pytest.approx(0.5, abs=0.03)
    assert two.efficiency_low <= 0.5 <= two.efficiency_high


def test_interval_from_repeats_and_resolution():
    pts = efficiency([(1, [100.0, 104.0, 96.0], [1.0, 1.0, 1.0], 1.0),
                      (2, [180.0, 184.0, 176.0], [2.0, 2.0, 2.0], 1.0)])
    half1 = t95(2) * 4.0 / 3**0.5
    assert pts[0].low == pytest.approx(100 - half1) and pts[0].high == pytest.approx(100 + half1)
    assert pts[1].efficiency == pytest.approx(0.9)
    assert pts[1].efficiency_low == pytest.approx((180 - half1) / (2 * (100 + half1)))
    res = efficiency([(1, [100.0], [1.0], 1.05)])
    assert res[0].high == pytest.approx(105.0) and "resolution" in res[0].sources
    assert t95(1) == 12.706 and t95(100) == 1.96


def test_points_and_front_helpers():
    assert parse_points("1,4,2", "x") == (1.0, 2.0, 4.0)
    assert parse_points("2:32:5", "x") == pytest.approx((2, 4, 8, 16, 32))
    with pytest.raises(ValueError, match="LO:HI:STEPS"):
        parse_points("a,b", "--rates")
    assert pareto_front([(1, 1), (2, 1), (3, 5), (2, 6)]) == [False, True, True, False]
