"""Sweeps: one full run per load point, and the throughput-latency trade-off across them.

A point is a rate (queries/s of an open-loop schedule) or a concurrency (streams of a
closed loop). :func:`point_row` reduces a run to the figures a sweep compares —
throughput (requests/s, output tokens/s, LoadGen's tokens/s), latency percentiles
(TTFT, TPOT, E2E at p50/p99 and at the limits' percentile), goodput (requests within
every limit, per second and as a fraction) and both verdicts — and
:func:`pareto_front` marks the points no other point beats on both throughput (higher
is better) and latency (lower is better).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tokenmark.metrics.stats import Distribution
from tokenmark.metrics.summary import Summary
from tokenmark.mlperf.rules import Verdicts
from tokenmark.mlperf.settings import EffectiveSettings

__all__ = ["SWEEP_COLUMNS", "pareto_front", "parse_points", "point_row"]

#: Columns of a sweep's index.csv, in order.
SWEEP_COLUMNS = (
    "point", "kind", "value", "folder", "tokenmark_verdict", "mlperf_verdict",
    "requests_per_s", "output_tokens_per_s", "loadgen_tokens_per_s",
    "ttft_p50_ms", "ttft_p99_ms", "tpot_p50_ms", "tpot_p99_ms", "e2e_p50_ms", "e2e_p99_ms",
    "goodput_requests_per_s", "goodput_fraction", "completed", "failed", "pareto",
)


def parse_points(text: str, what: str) -> tuple[float, ...]:
    """'1,2,4' or 'LO:HI:STEPS' (geometric) into a sorted tuple of positive numbers."""
    text = text.strip()
    try:
        if text.count(":") == 2:
            lo_s, hi_s, n_s = text.split(":")
            lo, hi, n = float(lo_s), float(hi_s), int(n_s)
            if not (0 < lo < hi) or n < 2:
                raise ValueError
            ratio = (hi / lo) ** (1 / (n - 1))
            pts = tuple(lo * ratio**i for i in range(n))
        else:
            pts = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise ValueError(f"bad {what} {text!r}; give a list such as 1,2,4 or LO:HI:STEPS "
                         "such as 2:32:5") from None
    if not pts or any(not p > 0 for p in pts):
        raise ValueError(f"bad {what} {text!r}; every point must be > 0")
    return tuple(sorted(set(pts)))


def _ms(d: Distribution, p: float) -> float | None:
    return d.percentiles[p] / 1e6 if d.count and p in d.percentiles else None


def point_row(index: int, kind: str, value: float, folder: str, eff: EffectiveSettings,
              summary: Summary, verdicts: Verdicts) -> dict[str, Any]:
    s = summary
    return {
        "point": index,
        "kind": kind,
        "value": value,
        "folder": folder,
        "tokenmark_verdict": verdicts.tokenmark.validity.value,
        "mlperf_verdict": verdicts.mlperf.validity.value,
        "requests_per_s": s.requests_per_second,
        "output_tokens_per_s": s.output_tokens_per_second,
        "loadgen_tokens_per_s": s.tokens_per_second,
        "ttft_p50_ms": _ms(s.ttft, 0.5),
        "ttft_p99_ms": _ms(s.ttft, 0.99),
        "tpot_p50_ms": _ms(s.tpot, 0.5),
        "tpot_p99_ms": _ms(s.tpot, 0.99),
        "e2e_p50_ms": _ms(s.latency, 0.5),
        "e2e_p99_ms": _ms(s.latency, 0.99),
        "goodput_requests_per_s": s.goodput_requests_per_second,
        "goodput_fraction": s.goodput_fraction,
        "completed": s.completed,
        "failed": s.failed,
        "pareto": False,
    }


def pareto_front(points: Sequence[tuple[float, float]]) -> list[bool]:
    """For each (throughput, latency), whether no other point is at least as good on
    both and strictly better on one (higher throughput, lower latency)."""
    out = []
    for i, (t, lat) in enumerate(points):
        dominated = any(
            t2 >= t and l2 <= lat and (t2 > t or l2 < lat)
            for j, (t2, l2) in enumerate(points) if j != i
        )
        out.append(not dominated)
    return out
