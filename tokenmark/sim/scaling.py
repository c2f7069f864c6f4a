"""Predicted throughput and scaling efficiency across cluster sizes.

For each total accelerator count the sweep builds the cluster with the same
accelerator, model, precision and policy (nodes = count / accelerators per node; the
scale-up domain is the accelerator's own, e.g. 72 on an NVL72 rack, capped at the
count) and predicts it through the one prediction path
(:func:`~tokenmark.sim.predict.predict`): the planner's candidates for that size
(tensor, attention-data and expert parallelism, speculative decoding, replicas) each in
its place in the topology, the best kept; Offline from the candidate's Offline run,
Server and Interactive from the highest Poisson rate within the limits, never above
the same deployment's Offline throughput.

Scaling efficiency is ``(T_N / N) / (T_base / base)`` with the smallest size as the
base, the figure ``tokenmark scaling`` computes for published results. It comes out of
the model, not from a formula: it falls below 1 where a size cannot hold the layout a
smaller one chose (a replica or an expert-parallel group that has to reach past its
scale-up domain pays scale-out bandwidth for its collectives and all-to-alls, an
expert-parallel group's busiest accelerator waits longer), and above 1 where a larger
size opens a better layout (wide expert parallelism over a whole NVL72 rack). Identical
replicas that each fit a domain scale linearly: a round-robin router gives each 1/R of
the load and they share nothing (each sees every R-th arrival of the one Poisson stream,
exactly what :func:`~tokenmark.sim.search.replica_server_run` simulates; the p99 over
all requests is then every replica's p99).

**LoadGen's last-query term** (Server and Interactive). LoadGen reports a Server result
as ``(n - 1) / t_done`` samples per second (and tokens over the same time), where
``t_done`` is when the *last-issued* query completed (``results.cc``:
``qps_as_completed = (sample_count - 1) / pr.final_query_all_samples_done_time``): the
issue span ``T`` plus that one query's latency ``L``. The result is the offered rate
times ``T / (T + L)``, and ``L`` is a single draw from the run's latency distribution.
For DeepSeek-R1, whose answers run to 20,000 tokens, ``L`` ranges from seconds to about
twenty minutes against runs of 10-40 minutes, so the published Server figure carries a
lottery of its own. NVIDIA's v6.1 GB300 DeepSeek-R1 Server runs show it (their
``mlperf_log_summary.txt``): 72 GPUs scheduled 165.21 and completed 156.23 samples/s
(``T`` 1,434 s, last query 83 s), 288 GPUs scheduled 639.93 and completed 530.42
(``T`` 1,481 s, last query 306 s): the published Server scaling 0.849 is 0.968 (the
offered rates) x 0.877 (the two last queries). Every prediction is the expected
figure (:func:`~tokenmark.sim.predict.predict`: the offered rate times ``E[T / (T + L)]``
over its latencies, for runs as long as the settings' minimum duration and query count
make them, :func:`loadgen_run_seconds`), so the sweep's efficiency is the expected one,
and each Server or Interactive point carries the 5th-95th percentile of its efficiency
over independent last queries of its run and the base's (``efficiency_low`` /
``efficiency_high``; :func:`last_query`: the prediction's own latencies).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from tokenmark.config.layering import LayeredSettings
from tokenmark.dataset import Dataset
from tokenmark.mlperf.settings import Scenario
from tokenmark.sim.plan import ClusterSpec
from tokenmark.sim.predict import Prediction, calibrated, offline_trace, predict
from tokenmark.sim.run import request_arrays
from tokenmark.sim.search import last_query_factors, loadgen_run_seconds

__all__ = ["BAND", "LastQuery", "ScalingPoint", "last_query", "last_query_factors",
           "loadgen_run_seconds", "ratio_quantiles", "scaling_sweep"]

#: The spread reported for a latency scenario's scaling efficiency: 5th and 95th percentile.
BAND = (0.05, 0.95)
#: Quantiles each run's last-query distribution is reduced to before forming ratios.
_GRID = 400


def ratio_quantiles(num: np.ndarray, den: np.ndarray, qs: tuple[float, ...],
                    at: float | None = None) -> tuple[float, ...]:
    """Quantiles ``qs`` of ``X / Y`` for independent ``X`` drawn from ``num`` and ``Y`` from
    ``den`` (each reduced to ``_GRID`` quantiles); with ``at``, also the share of ratios at
    or below it, appended."""
    if num.size == 0 or den.size == 0:
        raise ValueError("both samples need at least one value")
    g = (np.arange(_GRID) + 0.5) / _GRID
    # the empirical distributions' own quantiles ("inverted_cdf"), not interpolated
    a = np.quantile(num, g, method="inverted_cdf")
    b = np.quantile(den, g, method="inverted_cdf")
    r = (a[:, None] / b[None, :]).ravel()
    out = tuple(float(np.quantile(r, q, method="inverted_cdf")) for q in qs)
    return out + ((float(np.mean(r <= at)),) if at is not None else ())


@dataclass(frozen=True)
class LastQuery:
    """LoadGen's last-query term of one predicted Server run (module docstring)."""

    qps: float  # the offered (predicted) rate, queries per second
    run_s: float  # the issue span T
    latency_ns: np.ndarray = field(compare=False, repr=False)  # the run's e2e latencies

    @property
    def factors(self) -> np.ndarray:
        """``T / (T + L)`` over the latencies, ascending."""
        return last_query_factors(self.latency_ns, self.run_s)

    @property
    def expected(self) -> float:
        """The mean share of the offered rate LoadGen reports, ``E[T / (T + L)]``."""
        return float(np.mean(self.factors))

    @property
    def mean_latency_s(self) -> float:
        return float(np.mean(self.latency_ns)) / 1e9

    def over(self, run_s: float) -> LastQuery:
        """The same latencies in a run of another issue span."""
        return replace(self, run_s=run_s)


def last_query(p: Prediction) -> LastQuery:
    """The last-query term of a Server or Interactive prediction ``p``: the latencies of
    its searched rate (:class:`~tokenmark.sim.predict.Prediction`), over the issue span
    its run's LoadGen settings give it at the predicted rate."""
    if math.isnan(p.qps) or p.qps <= 0:
        raise ValueError("a last query needs a Server or Interactive prediction that passes")
    lat = p.latency_ns if p.latency_ns is not None and p.latency_ns.size else np.zeros(
        1, np.int64)
    return LastQuery(p.qps, p.run_s, lat)


@dataclass(frozen=True)
class ScalingPoint:
    accelerators: int
    nodes: int
    scale_up_domain: int
    tp: int
    pp: int
    ep: int
    replicas: int
    tokens_per_second: float
    per_accelerator: float
    efficiency: float  # vs the smallest size
    binding_limit: str
    communication_share: float  # of the replica's step time (Offline)
    note: str = ""
    dp: int = 1
    spec_tokens: int = 0
    deployment: str = ""
    #: Server/Interactive: the efficiency's 5th-95th percentile over LoadGen's last
    #: queries of this run and the base's (module docstring); NaN for Offline
    efficiency_low: float = math.nan
    efficiency_high: float = math.nan
    last_query: LastQuery | None = None
    prefill_replicas: int = 0  # of ``replicas``, those that only prefill (disaggregated)


def scaling_sweep(
    layered: LayeredSettings,
    spec: ClusterSpec,
    sizes: list[int],
    dataset: Dataset,
    *,
    requests: int = 1500,
) -> list[ScalingPoint]:
    """The predicted throughput of ``spec`` at each accelerator count in ``sizes``."""
    if not sizes or any(n < 1 for n in sizes):
        raise ValueError("sizes must be positive accelerator counts")
    inp, out, enc = request_arrays(dataset, spec.model)
    scenario = layered.settings.scenario
    name = "Offline" if scenario is Scenario.OFFLINE else (
        "Interactive" if scenario is Scenario.INTERACTIVE else "Server")
    limits = layered.settings.limits if name != "Offline" else None
    off_eff, lat_eff = calibrated(spec, name)
    st = layered.settings
    rows = []
    for n in sorted(set(sizes)):
        per_node = min(spec.per_node, n)
        if n % per_node:
            per_node = n
        s = replace(spec, nodes=n // per_node, per_node=per_node)
        p = predict(s, name, inp, out, offline_eff=off_eff, latency_eff=lat_eff,
                    limits=limits, requests=requests, encoder=enc,
                    min_duration_s=st.min_duration_ms / 1000, min_queries=st.min_query_count)
        d = p.plan.deployment
        comm = offline_trace(d, inp, out, encoder=enc).comm_share(off_eff)
        lq = last_query(p) if limits is not None and p.value > 0 else None
        rows.append((n, per_node, p, comm, lq))
    base_n, _, base, _, base_lq = rows[0]
    points = []
    for n, per_node, p, comm, lq in rows:
        d = p.plan.deployment
        tps = p.value
        eff = (tps / n) / (base.value / base_n) if base.value > 0 else 0.0
        lo = hi = math.nan
        if lq is not None and base_lq is not None:
            # the offered rates' ratio times independent draws of the two last queries
            offered = (p.offered / n) / (base.offered / base_n)
            q_lo, q_hi = ratio_quantiles(lq.factors, base_lq.factors, BAND)
            lo, hi = offered * q_lo, offered * q_hi
        points.append(ScalingPoint(
            accelerators=n, nodes=n // per_node, scale_up_domain=d.topo.domain, tp=d.tp,
            pp=d.pp, ep=d.ep, replicas=d.replicas, tokens_per_second=tps,
            per_accelerator=tps / n, efficiency=eff,
            binding_limit=p.binding, communication_share=comm,
            note="replica spans scale-up domains" if d.replica_spans_domains else "",
            dp=d.dp, spec_tokens=d.spec_tokens, deployment=d.label,
            efficiency_low=lo, efficiency_high=hi, last_query=lq,
            prefill_replicas=d.policy.prefill_replicas))
    return points
