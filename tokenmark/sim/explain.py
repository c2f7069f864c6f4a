"""Why a simulated run came out as it did: each prediction explains itself.

From the engines' accumulated step statistics and the per-request columns:

- **time per step**, summed over all replicas and split into prefill compute, decode
  compute, weight reads, KV-cache reads/writes, communication and fixed overhead
  (the larger of compute and memory is what a step waited for; see
  :class:`~tokenmark.perfmodel.StepCost`), plus the share of steps that were
  compute- or memory-bound;
- **queueing**: time from a request's arrival (its send) to the start of the step that
  admitted it, i.e. how long it waited for a batch slot (mean, p50, p99);
- **batch sizes reached**: the largest batch and the time-weighted mean batch;
- **the binding limit**: what stopped admission in the steps after which requests
  were still waiting (KV capacity, the sequence cap, the prefill token budget), or
  "arrival rate" when requests rarely waited (the replicas kept up with the load); a
  run that failed its latency limits names them instead (:func:`with_verdict`): the
  replicas kept up, but not fast enough;
- **inter-token latency**: one gap per decoded token equal to the step that made it,
  so the distribution is the step times weighted by their decode counts, exact
  without per-token timestamps (:class:`WeightedColumn`); with speculative decoding a
  step makes several tokens per sequence, and each gap is the step's time over them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tokenmark.metrics.definitions import ttft_ns
from tokenmark.metrics.stats import (
    LOADGEN_PERCENTILES,
    Column,
    Distribution,
    loadgen_index,
    quantile_interval,
)
from tokenmark.perfmodel import BREAKDOWN_KEYS, ReplicaEngine

__all__ = ["WeightedColumn", "explain", "itl_column", "with_verdict"]


class WeightedColumn(Column):
    """A read-only column of ``values[i]`` repeated ``weights[i]`` times, with exact
    LoadGen order statistics computed from the weights (never materialised)."""

    def __init__(self, values: np.ndarray, weights: np.ndarray) -> None:
        super().__init__()
        keep = weights > 0
        order = np.argsort(values[keep], kind="stable")
        self._v = values[keep][order].astype(np.int64)
        self._w = weights[keep][order].astype(np.int64)
        self._cum = np.cumsum(self._w)

    def __len__(self) -> int:
        return int(self._cum[-1]) if self._cum.size else 0

    def _at(self, rank: int) -> int:
        return int(self._v[int(np.searchsorted(self._cum, rank, side="right"))])

    def distribution(
        self, percentiles: Sequence[float] = LOADGEN_PERCENTILES, extra: Sequence[float] = ()
    ) -> Distribution:
        n = len(self)
        if n == 0:
            return Distribution.empty()
        ps = tuple(dict.fromkeys((*percentiles, *extra)))
        v = self._v.astype(np.float64)
        w = self._w.astype(np.float64)
        total = int((self._v * self._w).sum())
        mean = total / n
        var = max(0.0, float((w * (v - mean) ** 2).sum()) / n)
        values = {p: self._at(loadgen_index(n, p)) for p in ps}
        intervals = {p: (self._at(a), self._at(b))
                     for p in ps for a, b in [quantile_interval(n, p)]}
        trunc = total // n
        return Distribution(n, int(self._v[0]), int(self._v[-1]), mean, trunc,
                            float(np.sqrt(var)), values, intervals)


def itl_column(engines: Sequence[ReplicaEngine]) -> WeightedColumn:
    """Every decoded token's gap (its step's time), from all engines."""
    if not engines:
        return WeightedColumn(np.empty(0, np.int64), np.empty(0, np.int64))
    # with speculative decoding a step makes several tokens per sequence: each token's
    # gap is taken as the step's time over them (the mean a streaming client sees)
    vals = np.concatenate([
        np.frombuffer(e.stats.step_ns, dtype=np.int64) if e.stats.tokens_per_step == 1.0
        else (np.frombuffer(e.stats.step_ns, dtype=np.int64)
              / e.stats.tokens_per_step).astype(np.int64)
        for e in engines])
    wts = np.concatenate([np.frombuffer(e.stats.step_decodes, dtype=np.int64)
                          for e in engines])
    return WeightedColumn(vals, wts)


def _binding(limited: dict[str, int], waiting_steps: int, steps: int) -> tuple[str, str]:
    if steps == 0:
        return "none", "no steps ran"
    share = waiting_steps / steps
    if share < 0.05 or not limited:
        return ("arrival rate",
                f"requests were waiting after only {share:.1%} of steps: the replicas "
                "kept up with the load")
    top = max(limited, key=lambda k: limited[k])
    why = {
        "kv": "the KV cache was full (admission reserves prompt + output)",
        "max_num_seqs": "the cap on running sequences (max_num_seqs) was reached",
        "budget": "the chunked-prefill token budget per step was spent",
        "balance": ("new prefills were held back so the attention data-parallel groups "
                    "start them together"),
        "other": "admission stopped for another reason",
    }[top]
    return top, (f"requests were waiting after {share:.1%} of steps; in "
                 f"{limited[top] / waiting_steps:.0%} of those, {why}")


def _ms_stats(values: np.ndarray) -> dict[str, float]:
    if values.size == 0:
        return {"mean": 0.0, "p50": 0.0, "p99": 0.0}
    srt = np.sort(values)
    return {"mean": round(float(srt.mean()) / 1e6, 6),
            "p50": round(float(srt[loadgen_index(srt.size, 0.5)]) / 1e6, 6),
            "p99": round(float(srt[loadgen_index(srt.size, 0.99)]) / 1e6, 6)}


def explain(
    engines: Sequence[ReplicaEngine],
    first: np.ndarray,
    scheduled: np.ndarray,
    issued: np.ndarray,
    admitted: np.ndarray,
    ok: np.ndarray,
    done: np.ndarray | None = None,
) -> dict[str, object]:
    """The explanation of a simulated run as JSON-ready data (times in ms); ``ok`` the
    answered requests, ``done`` their completion times (TTFT as
    :mod:`tokenmark.metrics.definitions` defines it)."""
    busy = sum(e.stats.busy_ns for e in engines)
    steps = sum(e.stats.steps for e in engines)
    parts = dict.fromkeys(BREAKDOWN_KEYS, 0.0)
    for e in engines:
        for k, v in e.stats.breakdown_ns.items():
            parts[k] += v
    total = sum(parts.values()) or 1.0
    limited: dict[str, int] = {}
    for e in engines:
        for k, v in e.stats.limited_steps.items():
            limited[k] = limited.get(k, 0) + v
    waiting = sum(e.stats.waiting_steps for e in engines)
    limit, limit_why = _binding(limited, waiting, steps)
    compute_ns = sum(e.stats.compute_bound_ns for e in engines)
    if done is None:  # no completion times: only requests with a first token are timed
        ttft = ttft_ns(scheduled, first, first)[ok & (first >= 0)]
    else:
        ttft = ttft_ns(scheduled, first, done)[ok]
    queue = (admitted - issued)[ok & (admitted >= 0)]
    batch_ns = sum(e.stats.batch_ns for e in engines)
    return {
        "steps": steps,
        "busy_s": round(busy / 1e9, 6),
        "mean_step_ms": round(busy / steps / 1e6, 6) if steps else 0.0,
        "step_time_split": {k: round(v / total, 6) for k, v in parts.items()},
        "step_time_ms_per_step": {k: round(v / steps / 1e6, 6) if steps else 0.0
                                  for k, v in parts.items()},
        "compute_bound_share": round(compute_ns / busy, 6) if busy else 0.0,
        "batch": {
            "max": max((e.stats.max_batch for e in engines), default=0),
            "time_weighted_mean": round(batch_ns / busy, 3) if busy else 0.0,
        },
        "queueing_ms": _ms_stats(queue),
        "time_to_first_token_ms": _ms_stats(ttft),
        "binding_limit": limit,
        "binding_limit_reason": limit_why,
        "limited_steps": dict(sorted(limited.items())),
        "kv_peak_fraction": round(max((e.stats.kv_peak_tokens / e.capacity
                                        for e in engines), default=0.0), 6),
        "tokens": {
            "prefill": sum(e.stats.prefill_tokens for e in engines),
            "decode": sum(e.stats.decode_tokens for e in engines),
        },
    }


def with_verdict(why: dict[str, object], failed: Sequence[tuple[str, str, str]]
                 ) -> dict[str, object]:
    """``why`` with the binding limit set to the latency limits when the run failed them:
    ``failed`` holds the MLPerf verdict's failed findings as (rule, observed,
    required); the latency rule is ``perf_constraints`` (early stopping can also fail
    for want of queries, which the replicas are not to blame for)."""
    lat = [f for f in failed if f[0] == "perf_constraints"]
    if not lat:
        return why
    rule, observed, required = lat[0]
    before = f"{why['binding_limit']} ({why['binding_limit_reason']})"
    batch = why.get("batch")
    mean = batch.get("time_weighted_mean") if isinstance(batch, dict) else "?"
    return {**why, "binding_limit": "latency limits",
            "binding_limit_reason": (f"{rule} failed: {observed} (required {required}); the "
                                     f"steps took {why['mean_step_ms']} ms on average at a "
                                     f"time-weighted batch of {mean}, while admission was "
                                     f"limited by: {before}")}
