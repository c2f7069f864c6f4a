"""Scaling efficiency of one workload over 1, 2, 4, ... replicas, with an interval.

For each replica count ``N`` the scaling run finds the peak (the highest VALID rate at
the fixed latency limits) and confirms it; ``T(N)`` is the confirming run's throughput.
Efficiency is ``T(N) / (N * T(1))`` (1.0 = perfectly linear), as "99% scaling
efficiency at 288 GPUs" is read.

The interval says how far each figure can be trusted, from two sources:

- **search resolution**: the peak lies between the highest rate that passed (``lo``)
  and the lowest that failed (``hi``); an open-loop run's throughput is proportional
  to its rate below saturation, so ``T`` could be up to ``hi / lo`` times higher;
- **repeats**: with ``R >= 2`` repeats per point, a Student-t 95% interval of the mean.

Both are combined into bounds ``[T_low, T_high]`` per point, and the efficiency's
interval is the conservative ratio ``[T_low(N) / (N T_high(1)), T_high(N) /
(N T_low(1))]``; the document says which sources contributed.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["ScalingPoint", "efficiency", "t95", "throughput_bounds"]

# Two-sided 95% Student-t quantiles for 1..30 degrees of freedom.
_T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201,
        2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074,
        2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def t95(df: int) -> float:
    """The two-sided 95% Student-t quantile (1.96 beyond 30 degrees of freedom)."""
    if df < 1:
        raise ValueError("degrees of freedom must be >= 1")
    return _T95[df - 1] if df <= len(_T95) else 1.96


@dataclass(frozen=True)
class ScalingPoint:
    replicas: int
    throughput: float  # mean over repeats of the confirming runs' tokens/s
    low: float
    high: float
    per_replica: float
    efficiency: float
    efficiency_low: float
    efficiency_high: float
    peak_rates: tuple[float, ...]  # the confirmed rate of each repeat
    sources: str  # which uncertainties the interval holds


def throughput_bounds(values: Sequence[float], resolution: float) -> tuple[float, float, float,
                                                                           str]:
    """(mean, low, high, sources) for one point's repeats; ``resolution`` is the largest
    ``hi / lo`` of its searches (``inf`` when no rate failed)."""
    if not values:
        raise ValueError("no throughput values")
    mean = statistics.fmean(values)
    low = high = mean
    sources = []
    if len(values) >= 2:
        half = t95(len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))
        low, high = mean - half, mean + half
        sources.append(f"t 95% over {len(values)} repeats")
    if resolution > 1.0:
        high *= resolution
        sources.append(f"search resolution x{resolution:.3f}" if math.isfinite(resolution)
                       else "no failing rate found (upper bound open)")
    return mean, max(0.0, low), high, "; ".join(sources) or "exact"


def efficiency(points: Sequence[tuple[int, Sequence[float], Sequence[float], float]]
               ) -> list[ScalingPoint]:
    """``points``: (replicas, throughputs per repeat, peak rates, resolution), the
    smallest replica count first (it is the base, usually 1)."""
    if not points:
        return []
    base_n, base_vals, _, base_res = points[0]
    b_mean, b_low, b_high, _ = throughput_bounds(base_vals, base_res)
    out = []
    for n, vals, rates, res in points:
        mean, low, high, sources = throughput_bounds(vals, res)
        scale = n / base_n
        eff = mean / (scale * b_mean) if b_mean > 0 else 0.0
        e_low = low / (scale * b_high) if math.isfinite(b_high) and b_high > 0 else 0.0
        e_high = high / (scale * b_low) if b_low > 0 else math.inf
        out.append(ScalingPoint(n, mean, low, high, mean / n if n else 0.0, eff,
                                e_low, e_high, tuple(rates), sources))
    return out
