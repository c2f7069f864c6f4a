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
the load and they share nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from tokenmark.config.layering import LayeredSettings
from tokenmark.dataset import Dataset
from tokenmark.mlperf.settings import Scenario
from tokenmark.sim.plan import ClusterSpec
from tokenmark.sim.predict import calibrated, offline_trace, predict
from tokenmark.sim.run import request_arrays

__all__ = ["ScalingPoint", "scaling_sweep"]


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
    rows = []
    for n in sorted(set(sizes)):
        per_node = min(spec.per_node, n)
        if n % per_node:
            per_node = n
        s = replace(spec, nodes=n // per_node, per_node=per_node)
        p = predict(s, name, inp, out, offline_eff=off_eff, latency_eff=lat_eff,
                    limits=limits, requests=requests, encoder=enc)
        d = p.plan.deployment
        comm = offline_trace(d, inp, out, encoder=enc).comm_share(off_eff)
        rows.append((n, per_node, p, comm))
    base_n, _, base, _ = rows[0]
    points = []
    for n, per_node, p, comm in rows:
        d = p.plan.deployment
        tps = p.value
        points.append(ScalingPoint(
            accelerators=n, nodes=n // per_node, scale_up_domain=d.topo.domain, tp=d.tp,
            pp=d.pp, ep=d.ep, replicas=d.replicas, tokens_per_second=tps,
            per_accelerator=tps / n,
            efficiency=(tps / n) / (base.value / base_n) if base.value > 0 else 0.0,
            binding_limit=p.binding, communication_share=comm,
            note="replica spans scale-up domains" if d.replica_spans_domains else "",
            dp=d.dp, spec_tokens=d.spec_tokens, deployment=d.label))
    return points
