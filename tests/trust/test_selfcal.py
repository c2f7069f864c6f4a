"""Client self-calibration: a real measurement against the built-in server, the cache,
and the share check (refuse, or warn with the override)."""

from __future__ import annotations

import pytest

from tokenmark.api import trust as trust_api
from tokenmark.config.layering import build_settings
from tokenmark.dataset import LengthDistribution, SyntheticDataset
from tokenmark.errors import ConfigError
from tokenmark.mlperf.scenarios import build_schedule
from tokenmark.mlperf.settings import Scenario, effective
from tokenmark.trust import selfcal


def test_measure_and_cache(isolated):
    cap, was_cached = trust_api.calibrate_client(duration_s=0.6, concurrency=4, output_tokens=16)
    assert not was_cached and cap.completed > 10 and cap.failed == 0
    # every completed answer carried exactly 16 tokens
    assert cap.tokens_per_s == pytest.approx(cap.requests_per_s * 16, rel=0.01)
    again, was_cached = trust_api.calibrate_client(duration_s=0.6, concurrency=4, output_tokens=16)
    assert was_cached and again == cap
    assert (isolated / "cache" / selfcal.CACHE_FILE).is_file()


def plan(qps: float):
    layered = build_settings("v6.0", "llama3.1-8b", Scenario.CONSTANT, overrides={
        "target_qps": qps, "min_duration_ms": 10_000, "min_query_count": 1})
    ds = SyntheticDataset(64, LengthDistribution.parse("32"), LengthDistribution.parse("50"),
                          max_output_tokens=50)
    eff = effective(layered.settings, len(ds))
    return eff, build_schedule(eff, len(ds)), ds


CAP = selfcal.Capacity(requests_per_s=200.0, tokens_per_s=20_000.0, concurrency=32,
                       duration_s=3.0, output_tokens=64, workers=0, completed=600, failed=0,
                       measured_utc="2026-12-03T00:00:00+00:00", key="k")


def test_share_check():
    eff, sched, ds = plan(50)  # 50 requests/s x 50 tokens: 25% and 12.5% of CAP
    j = selfcal.judge(eff, sched, ds, CAP, max_share=0.5)
    assert j.share == pytest.approx(0.25, rel=0.01) and not j.refused
    eff, sched, ds = plan(150)  # 75% of the request capacity
    with pytest.raises(ConfigError, match="75% of what this client sustains.*"
                       "--allow-client-overload"):
        selfcal.judge(eff, sched, ds, CAP, max_share=0.5)
    j = selfcal.judge(eff, sched, ds, CAP, max_share=0.5, allow=True)
    assert j.refused and j.overridden and j.share == pytest.approx(0.75, rel=0.01)
