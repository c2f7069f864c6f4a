"""Predicted throughput and scaling efficiency across cluster sizes.

For each total accelerator count the sweep builds the cluster with the same
accelerator, model, precision and policy (nodes = count / accelerators per node; the
scale-up domain is the accelerator's own, e.g. 72 on an NVL72 rack, capped at the
count), plans tensor parallelism for that size unless it was given, and predicts the
throughput of one replica *in its place in the topology* (a replica reaching past its
scale-up domain pays scale-out bandwidth for its collectives):

- **Offline**: a simulated Offline run of one replica with ``requests_per_replica``
  requests, long enough for a steady batch (tokens over the run's time);
- **Server / Interactive**: the highest Poisson rate within the preset's p99 limits
  (:func:`~tokenmark.sim.search.max_server_rate`) times the tokens per request, never
  above the same deployment's Offline throughput (in the published results a system's
  Server result is at most its Offline result for 96% of systems with both).

Data-parallel replicas share nothing but the router, so the cluster's throughput is
the replica's times the replica count; whole clusters are simulated by ``tokenmark
simulate`` itself, where finite runs add the straggler effect of LoadGen's Offline
formula (tokens over the *last* completion). Scaling efficiency is
``(T_N / N) / (T_base / base)`` with the smallest size as the base, the figure
``tokenmark scaling`` computes for published results: it moves when the plan changes
with the size (tensor parallelism, a replica crossing scale-up domains) or when a size
leaves accelerators idle (never: a size that does not hold whole replicas is refused).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from tokenmark.config.layering import LayeredSettings
from tokenmark.dataset import Dataset
from tokenmark.perfmodel import BREAKDOWN_KEYS, Deployment
from tokenmark.scenarios import Schedule, ScheduleKind
from tokenmark.settings import Scenario
from tokenmark.sim.cluster import Cluster
from tokenmark.sim.driver import simulate
from tokenmark.sim.plan import ClusterSpec, plan_deployment
from tokenmark.sim.run import dataset_lengths
from tokenmark.sim.search import max_server_rate

__all__ = ["ScalingPoint", "replica_offline", "scaling_sweep"]


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


def replica_offline(d: Deployment, inputs: np.ndarray, outputs: np.ndarray,
                    requests: int, seed: int = 0) -> tuple[float, float, str]:
    """One replica's Offline tokens/s, its communication share and its binding limit."""
    rng = np.random.default_rng(seed)
    idx = np.asarray(rng.integers(0, inputs.shape[0], size=requests), dtype=np.int64)
    zeros = np.zeros(requests, dtype=np.int64)
    sched = Schedule(kind=ScheduleKind.TIMED, scenario=Scenario.OFFLINE, sample_index=idx,
                     query_id=zeros, scheduled_ns=zeros)
    cluster = Cluster(d.single_replica())
    r = simulate(sched, inputs, outputs, cluster)
    st = cluster.engines[0].stats
    total = sum(st.breakdown_ns[k] for k in BREAKDOWN_KEYS) or 1.0
    limits = st.limited_steps
    binding = max(limits, key=lambda k: limits[k]) if limits else "arrival rate"
    tps = float(r.output_tokens.sum()) / (r.end_ns / 1e9) if r.end_ns else 0.0
    return tps, st.breakdown_ns["communication"] / total, binding


def scaling_sweep(
    layered: LayeredSettings,
    spec: ClusterSpec,
    sizes: list[int],
    dataset: Dataset,
    *,
    requests_per_replica: int = 3000,
) -> list[ScalingPoint]:
    """The predicted throughput of ``spec`` at each accelerator count in ``sizes``."""
    if not sizes or any(n < 1 for n in sizes):
        raise ValueError("sizes must be positive accelerator counts")
    inp, out = dataset_lengths(dataset)
    scenario = layered.settings.scenario.loadgen
    rows: list[tuple[int, int, Deployment, float, str, float]] = []
    for n in sorted(set(sizes)):
        per_node = min(spec.per_node, n)
        if n % per_node:
            per_node = n
        plan = plan_deployment(replace(spec, nodes=n // per_node, per_node=per_node),
                               float(inp.mean()), float(out.mean()))
        d = plan.deployment
        if scenario is Scenario.OFFLINE:
            tps, comm, binding = replica_offline(d, inp, out, requests_per_replica)
        else:
            best = max_server_rate(d, inp, out, layered.settings.limits)
            tps = best.qps / d.replicas * best.tokens_per_request if best.passed else 0.0
            binding = "latency limits" if best.passed else "fails the limits at any rate"
            # never above what the same replica does Offline
            offline, _, _ = replica_offline(d, inp, out, requests_per_replica)
            if tps > offline:
                tps, binding = offline, "Offline throughput (saturated)"
            comm = 0.0
        rows.append((n, per_node, d, tps * d.replicas, binding, comm))
    base_n, _, _, base_t, _, _ = rows[0]
    points = []
    for n, per_node, d, tps, binding, comm in rows:
        points.append(ScalingPoint(
            accelerators=n, nodes=n // per_node, scale_up_domain=d.topo.domain, tp=d.tp,
            pp=d.pp, ep=d.ep, replicas=d.replicas, tokens_per_second=tps,
            per_accelerator=tps / n,
            efficiency=(tps / n) / (base_t / base_n) if base_t > 0 else 0.0,
            binding_limit=binding, communication_share=comm,
            note="replica spans scale-up domains" if d.replica_spans_domains else ""))
    return points
