"""The highest Server query rate a deployment sustains within latency limits.

MLPerf's Server result is the throughput at the highest Poisson arrival rate whose
p99 TTFT and p99 TPOT (or p99 end-to-end latency) stay within the benchmark's limits;
submitters find it by trying rates. :func:`max_server_rate` does the same in virtual
time, by bisection on the rate (in log space) between a rate that passes and one that
does not. The upper bracket is the replica's saturated rate
(:func:`replica_saturated_rate`): a Poisson stream at or above the rate a full replica
completes requests cannot be held for a whole run, and a simulated run short enough to
be affordable would not always show it (the batch grows for minutes before the queue
does).

Because the replicas are identical and the router is round-robin, one replica sees
every R-th arrival of the whole Poisson stream (an Erlang-R renewal process), so
simulating one replica with exactly those arrivals predicts every replica's latency;
the cluster's rate is R times the replica's. A prefill/decode-disaggregated deployment
is simulated the same way by its serving unit
(:meth:`~tokenmark.perfmodel.Deployment.serving_unit`: the smallest group of prefill and
decode replicas in the pools' proportion, e.g. 2 + 1 of 48 + 24), its prompts
prefilled by the unit's prefill replicas, its KV caches sent over the scale-up link to
its decode replicas (:meth:`~tokenmark.sim.cluster.Cluster.kv_transfer_ns`), round robin
inside each pool. The first ``warmup_fraction`` of the requests (an empty system answers
faster) are left out of the percentiles.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from tokenmark.metrics.definitions import e2e_ns, tpot_ns, ttft_ns
from tokenmark.mlperf.scenarios import Schedule, ScheduleKind
from tokenmark.mlperf.settings import LatencyLimits, Scenario
from tokenmark.perfmodel import Deployment
from tokenmark.sim.cluster import Cluster
from tokenmark.sim.driver import simulate

#: A server run spans at least this many request lives (see :func:`replica_server_run`).
MIN_LIFETIMES = 2.0
#: Under an end-to-end limit a server run spans at least this many seconds of arrivals:
#: mlperf.conf's Server ``min_duration`` (600,000 ms for every benchmark; the Qwen3-VL
#: reference: "Testing duration >= 10 minutes"), over which LoadGen takes the p99.
E2E_SPAN_S = 600.0
MAX_REQUESTS = 20000

__all__ = ["ServerPoint", "completed_share", "last_query_factors", "loadgen_run_seconds",
           "max_server_rate", "replica_offline_rate", "replica_saturated_rate",
           "replica_server_run"]


@dataclass(frozen=True)
class ServerPoint:
    """One replica's run at a cluster-wide rate ``qps``."""

    qps: float
    ttft_p99_ns: int
    tpot_p99_ns: int
    e2e_p99_ns: int
    tokens_per_request: float
    passed: bool
    #: the largest p99 / limit over the limits (1 at the limit; inf when a request
    #: could never fit the KV cache)
    ratio: float = 0.0
    #: the measured requests' end-to-end latencies (ns, issue order): what LoadGen's
    #: Server result depends on through its last-issued query (:mod:`tokenmark.sim.scaling`)
    e2e_ns: np.ndarray | None = field(default=None, compare=False, repr=False)


def _p99(values: np.ndarray) -> int:
    if values.size == 0:
        return 0
    return int(np.sort(values)[int(values.size * 0.99)])


def loadgen_run_seconds(qps: float, min_duration_s: float, min_queries: int) -> float:
    """The issue span of a LoadGen Server run at ``qps``: it issues queries until both its
    minimum duration and its minimum query count are reached."""
    if qps <= 0:
        raise ValueError("a Server run needs a positive rate")
    return max(min_duration_s, min_queries / qps)


def last_query_factors(e2e_ns: np.ndarray, run_s: float) -> np.ndarray:
    """``T / (T + L)`` for each latency ``L`` (ns) of a run's sample, ascending: the share
    of the offered rate LoadGen reports when that request is the last one issued."""
    if run_s <= 0:
        raise ValueError("the run's issue span must be positive")
    lat = np.sort(np.asarray(e2e_ns, dtype=np.float64))[::-1] / 1e9
    return run_s / (run_s + lat)


def completed_share(e2e_ns: np.ndarray | None, qps: float, min_duration_s: float,
                    min_queries: int) -> float:
    """The share of the offered rate LoadGen reports for a Server or Interactive run at
    ``qps`` (cluster-wide, queries per second) whose requests take ``e2e_ns``: its
    completed rate is its ``n`` queries over the issue span ``T`` plus the latency ``L``
    of the last one issued, a draw from the run's latencies, so the expected share is
    ``E[T / (T + L)]`` (:mod:`tokenmark.sim.scaling`'s module docstring); 1 without
    latencies."""
    if e2e_ns is None or e2e_ns.size == 0 or qps <= 0:
        return 1.0
    return float(np.mean(last_query_factors(e2e_ns, loadgen_run_seconds(
        qps, min_duration_s, min_queries))))


def replica_server_run(
    d: Deployment,
    inputs: np.ndarray,
    outputs: np.ndarray,
    qps: float,
    limits: LatencyLimits,
    *,
    requests: int = 3000,
    warmup_fraction: float = 0.1,
    seed: int = 0,
    min_lifetimes: float = MIN_LIFETIMES,
    encoder: np.ndarray | None = None,
) -> ServerPoint:
    """One replica of ``d`` serving its round-robin share of a Poisson stream at a
    cluster-wide ``qps``; ``inputs``/``outputs`` are the dataset's lengths, drawn
    uniformly with replacement (seeded).

    A run shorter than a request's life never reaches the load it is offered (with
    DeepSeek-R1's ~3,700-token answers a request lives minutes): the replica gets at
    least ``requests`` and enough to span ``min_lifetimes`` times the longest life the
    limits allow a mean request (TPOT limit x mean output, or the end-to-end limit),
    capped at ``MAX_REQUESTS``. Under an end-to-end limit (Qwen3-VL: 12 s Server,
    1.5 s Interactive) two lives are two limits (24 s, 3 s), where a TTFT limit gets
    17-60 of its limits; the p99 of a whole request's latency near saturation is set by
    the queue's excursions, which so short a run rarely meets, so such a run spans the
    rules' ``E2E_SPAN_S`` (600 s) of arrivals: 8 x B200 Qwen3-VL Server's highest
    passing rate falls ~4%, 4 x GB300's ~5.5%."""
    rng = np.random.default_rng(seed)
    reps = d.units
    life_ns = 0.0
    span_ns = 0.0
    if limits.tpot_ns is not None:
        life_ns = limits.tpot_ns * float(outputs.mean()) + (limits.ttft_ns or 0)
        span_ns = min_lifetimes * life_ns
    elif limits.e2e_ns is not None:
        life_ns = float(limits.e2e_ns)
        span_ns = max(min_lifetimes * life_ns, E2E_SPAN_S * 1e9)
    span_requests = int(qps / reps * span_ns / 1e9)
    requests = max(requests, min(MAX_REQUESTS, span_requests))
    gaps = rng.exponential(1e9 / qps, size=requests * reps)
    times = np.floor(np.cumsum(gaps)[reps - 1::reps]).astype(np.int64)
    times -= times[0]
    idx = np.asarray(rng.integers(0, inputs.shape[0], size=int(times.shape[0])), dtype=np.int64)
    n = times.shape[0]
    sched = Schedule(kind=ScheduleKind.TIMED, scenario=Scenario.SERVER,
                     sample_index=idx, query_id=np.arange(n, dtype=np.int64),
                     scheduled_ns=times)
    one = Cluster(d.serving_unit())
    r = simulate(sched, inputs, outputs, one, encoder_by_sample=encoder)
    keep = np.arange(n) >= int(n * warmup_fraction)
    keep &= ~r.rejected
    e2e = e2e_ns(r.scheduled, r.done)[keep]
    ttft = ttft_ns(r.scheduled, r.first, r.done)[keep]
    tpot = tpot_ns(e2e, ttft, r.output_tokens[keep])
    pt = _p99(ttft)
    pp = _p99(tpot)
    pe = _p99(e2e)
    ok = not r.rejected.any()
    ratio = 0.0 if ok else math.inf
    for got, limit in ((pt, limits.ttft_ns), (pp, limits.tpot_ns), (pe, limits.e2e_ns)):
        if limit is not None:
            ok &= got <= limit
            ratio = max(ratio, got / limit)
    return ServerPoint(qps, pt, pp, pe, float(r.output_tokens.mean()), bool(ok), ratio, e2e)


def replica_offline_rate(d: Deployment, inputs: np.ndarray, outputs: np.ndarray,
                         requests: int = 2000, seed: int = 0,
                         encoder: np.ndarray | None = None) -> float:
    """Requests per second one replica completes when all ``requests`` arrive at once."""
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, inputs.shape[0], size=requests).astype(np.int64)
    zeros = np.zeros(requests, dtype=np.int64)
    sched = Schedule(kind=ScheduleKind.TIMED, scenario=Scenario.OFFLINE, sample_index=idx,
                     query_id=zeros, scheduled_ns=zeros)
    r = simulate(sched, inputs, outputs, Cluster(d.single_replica()), encoder_by_sample=encoder)
    return requests / (r.end_ns / 1e9) if r.end_ns > 0 else 0.0


def replica_saturated_rate(d: Deployment, inputs: np.ndarray, outputs: np.ndarray,
                           requests: int = 4000, seed: int = 0,
                           encoder: np.ndarray | None = None) -> float:
    """Requests per second one replica completes while it is saturated (a queue waiting
    behind a full batch): the decode tokens per second of the steps in the middle 60%
    of an Offline run, which leaves out the ramp (prompts only) and the drain (the
    longest answers alone), over the decode tokens a request needs. No arrival rate
    above it can be sustained, however the latencies look in a short run: the batch
    (and with it TPOT) would grow until the queue does.

    A disaggregated deployment's unit completes requests at the rate of its slower
    pool (the prefill replicas' prompts per second or the decode replicas' answers):
    the requests its unit completes in the middle 60% of the same Offline run, shared
    over the unit's replicas."""
    if d.disaggregated:
        return _unit_saturated_rate(d, inputs, outputs, requests, seed, encoder)
    rng = np.random.default_rng(seed)
    n = max(requests, 4 * d.policy.max_num_seqs)
    idx = rng.integers(0, inputs.shape[0], size=n).astype(np.int64)
    zeros = np.zeros(n, dtype=np.int64)
    sched = Schedule(kind=ScheduleKind.TIMED, scenario=Scenario.OFFLINE, sample_index=idx,
                     query_id=zeros, scheduled_ns=zeros)
    cluster = Cluster(d.single_replica())
    simulate(sched, inputs, outputs, cluster, encoder_by_sample=encoder)
    st = cluster.engines[0].stats
    step_ns = np.asarray(st.step_ns, dtype=np.float64)
    decodes = np.asarray(st.step_decodes, dtype=np.float64)
    ends = np.cumsum(step_ns)
    if ends.size == 0 or ends[-1] <= 0:
        return 0.0
    mid = (ends > 0.2 * ends[-1]) & (ends <= 0.8 * ends[-1])
    per_request = d.policy.beams * max(float(np.mean(outputs[idx])) - 1.0, 1.0)
    busy = float(step_ns[mid].sum())
    return float(decodes[mid].sum()) / per_request / (busy / 1e9) if busy > 0 else 0.0


def _unit_saturated_rate(d: Deployment, inputs: np.ndarray, outputs: np.ndarray,
                         requests: int, seed: int, encoder: np.ndarray | None) -> float:
    """:func:`replica_saturated_rate` of a disaggregated deployment (its docstring)."""
    unit = d.serving_unit()
    decoders = unit.replicas - unit.policy.prefill_replicas
    # four times what the decode pool holds at once (its sequence cap, or the KV cache
    # at the workload's mean length), so the pool runs full through the middle 60%
    mean_len = float(inputs.mean()) + d.policy.beams * float(outputs.mean())
    held = min(d.policy.max_num_seqs, max(1, int(d.kv_capacity_tokens / mean_len)))
    n = max(requests, 4 * held * decoders)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, inputs.shape[0], size=n).astype(np.int64)
    zeros = np.zeros(n, dtype=np.int64)
    sched = Schedule(kind=ScheduleKind.TIMED, scenario=Scenario.OFFLINE, sample_index=idx,
                     query_id=zeros, scheduled_ns=zeros)
    r = simulate(sched, inputs, outputs, Cluster(unit), encoder_by_sample=encoder)
    if r.end_ns <= 0:
        return 0.0
    lo, hi = 0.2 * r.end_ns, 0.8 * r.end_ns
    done = int(((r.done > lo) & (r.done <= hi) & ~r.rejected).sum())
    return done / ((hi - lo) / 1e9) / unit.replicas


def max_server_rate(
    d: Deployment,
    inputs: np.ndarray,
    outputs: np.ndarray,
    limits: LatencyLimits,
    *,
    requests: int = 3000,
    rel_tol: float = 0.01,
    seed: int = 0,
    encoder: np.ndarray | None = None,
    saturated: float | None = None,
) -> ServerPoint:
    """The highest cluster-wide rate that passes ``limits``; a point with ``passed``
    False when even a trickle fails. ``saturated``: the cluster's saturated rate
    (:func:`replica_saturated_rate` times the replicas) when already known.

    The search brackets the answer between a passing rate and a failing one (the
    saturated rate fails by construction; the first rate tried is 90% of it, where
    many answers lie, then an eighth of that, and of that) and narrows it in log space,
    each new rate placed where the line through the bracket's ``log(p99 / limit)`` crosses zero
    (regula falsi with the Illinois rule, which halves the value kept at an end that
    survives twice), kept within the bracket's middle 80% so it always shrinks, and by
    bisection while an end's value is unknown or infinite: about half the probes of
    plain bisection to the same tolerance. A deployment that fails at 0.9 / 64 of its
    saturated rate fails at any rate."""
    hi = saturated if saturated is not None else (
        replica_saturated_rate(d, inputs, outputs, seed=seed, encoder=encoder) * d.replicas)
    if hi <= 0:
        return ServerPoint(0.0, 0, 0, 0, 0.0, False)

    def probe(q: float) -> ServerPoint:
        return replica_server_run(d, inputs, outputs, q, limits, requests=requests, seed=seed,
                                  encoder=encoder)

    def g(p: ServerPoint) -> float:
        return math.log(p.ratio) if 0 < p.ratio < math.inf else (
            -math.inf if p.ratio == 0 else math.inf)

    q = hi * 0.9  # many answers sit just below saturation: try there first
    best = probe(q)
    g_hi = math.inf
    if not best.passed:
        hi, g_hi = q, g(best)
        q = hi / 8
        best = probe(q)
        if not best.passed:
            hi, g_hi = q, g(best)
            q = hi / 8
            best = probe(q)
            if not best.passed:
                return best
    lo, g_lo = q, g(best)
    kept = ""  # which end survived the last step
    while math.log(hi / lo) > rel_tol:
        span = math.log(hi / lo)
        x = 0.5
        if math.isfinite(g_lo) and math.isfinite(g_hi) and g_hi > g_lo:
            x = min(0.9, max(0.1, -g_lo / (g_hi - g_lo)))
        mid = lo * math.exp(x * span)
        p = probe(mid)
        if p.passed:
            lo, g_lo, best = mid, g(p), p
            if kept == "hi" and math.isfinite(g_hi):
                g_hi /= 2  # Illinois: the failing end survived twice
            kept = "hi"
        else:
            hi, g_hi = mid, g(p)
            if kept == "lo" and math.isfinite(g_lo):
                g_lo /= 2
            kept = "lo"
    return best
