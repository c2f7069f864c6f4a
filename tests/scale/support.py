"""A workload whose capacity is known exactly: fixed output length, fixed delays.

With every request 100 output tokens, TTFT 50 ms and TPOT 10 ms, a request holds one of
``max_batch`` slots for exactly S = 50 + 99 * 10 = 1040 ms, so the latency model serves
at most ``max_batch / S`` requests/s. With constant arrivals (the 'constant' pattern) it
is a D/D/c queue: below capacity nobody waits; above it the k-th request waits
``k * (1/cap - 1/r)``, so over a run of T seconds the p99 request (k = 0.99 r T) waits
``0.99 T (r/cap - 1)``, and the TTFT limit L holds while that wait stays within
L - 50 ms: the highest VALID rate is ``cap * (1 + (L - 50 ms) / (0.99 T))``.
"""

from __future__ import annotations

from tokenmark.adapters.inprocess import LatencyModel
from tokenmark.api.run import SutSpec
from tokenmark.config.layering import build_settings
from tokenmark.dataset import LengthDistribution, SyntheticDataset
from tokenmark.mlperf.settings import Scenario

SERVICE_S = 0.050 + 99 * 0.010


def capacity(max_batch: int) -> float:
    return max_batch / SERVICE_S


def threshold(max_batch: int, limit_s: float, duration_s: float) -> float:
    return capacity(max_batch) * (1 + (limit_s - 0.050) / (0.99 * duration_s))


def constant_settings(ttft_ms: float = 500, duration_s: float = 60, **kw):
    over = {"ttft_latency_ms": ttft_ms, "min_duration_ms": int(duration_s * 1000),
            "target_qps": 2.0, "performance_sample_count": 256, "total_sample_count": 256,
            **kw}
    return build_settings("v6.0", "llama3.1-8b", Scenario.CONSTANT, overrides=over)


def fixed_dataset() -> SyntheticDataset:
    return SyntheticDataset(256, LengthDistribution.parse("200"),
                            LengthDistribution.parse("100"), seed=0, max_output_tokens=128)


def model(max_batch: int = 8) -> SutSpec:
    return SutSpec(model=LatencyModel(ttft_ns=50_000_000, tpot_ns=10_000_000,
                                      max_batch=max_batch))
