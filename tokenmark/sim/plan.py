"""From what the user names (accelerator, count, topology, model, precision,
parallelism, serving policy) to a checked :class:`~tokenmark.perfmodel.Deployment`.

What is left unsaid is decided as MLPerf submitters decide it, by documented rules:

- **precision**: the narrowest the accelerator computes natively (FP4 on Blackwell and
  CDNA 4, FP8 on Hopper, Ada and CDNA 3, else BF16), as the closed-division
  submissions do for every benchmark whose accuracy target allows it;
- **tensor parallelism**: the smallest power of two (up to the scale-up domain) whose
  replica holds the weights and KV cache for ``TARGET_BATCH`` sequences of the
  workload's mean length, so the batch can grow large enough for throughput; if none
  does, the largest that fits at all;
- **replicas** (data parallelism): every accelerator is used, so ``count / (tp x
  pp)`` must be a whole number;
- **max_num_seqs**: 1024 (TensorRT-LLM's and vLLM's large-batch settings in MLPerf
  configurations run 512-2048), the KV cache limiting it further where it is smaller.

Every rule's outcome is recorded in :attr:`Plan.notes` and written with the results.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from tokenmark.errors import ConfigError
from tokenmark.perfmodel import (
    Accelerator,
    Deployment,
    Efficiency,
    ModelArch,
    Precision,
    ServingPolicy,
    Topology,
    find_accelerator,
    find_model,
)
from tokenmark.sim.params import efficiency_for
from tokenmark.sim.workloads import workload

__all__ = ["TARGET_BATCH", "ClusterSpec", "Plan", "plan_deployment"]

#: Sequences a replica should be able to hold at once when its TP is chosen.
TARGET_BATCH = 256
DEFAULT_MAX_NUM_SEQS = 1024


@dataclass(frozen=True)
class ClusterSpec:
    """What the user asked to simulate; ``None`` means "decide by the rules"."""

    accelerator: str
    model: str
    nodes: int = 1
    per_node: int = 8
    scale_up: int = 0  # 0: the accelerator's own domain (72 on NVL72 parts), capped
    scale_out_gb_s: float = 50.0
    precision: str | None = None
    tp: int | None = None
    pp: int = 1
    ep: int = 1
    max_num_seqs: int | None = None
    max_batched_tokens: int = 8192
    gpu_memory_utilization: float = 0.9
    prefill_replicas: int = 0
    beams: int | None = None  # None: the benchmark's (workloads.csv), else 1
    stack: str | None = None
    software_round: str | None = None  # calibrated parameters of that round (None: newest)
    scenario: str | None = None  # Server/Interactive take their own calibrated row if any
    efficiency: Efficiency | None = None  # explicit override of the calibrated row

    @property
    def count(self) -> int:
        return self.nodes * self.per_node


@dataclass(frozen=True)
class Plan:
    deployment: Deployment
    notes: tuple[str, ...] = field(default=())


def _topology(spec: ClusterSpec, acc: Accelerator) -> Topology:
    if spec.nodes < 1 or spec.per_node < 1:
        raise ConfigError(
            f"a cluster needs at least one node of one accelerator (got {spec.nodes} "
            f"nodes x {spec.per_node})"
        )
    domain = spec.scale_up or min(max(acc.scale_up_domain, spec.per_node), spec.count)
    return Topology(nodes=spec.nodes, per_node=spec.per_node, scale_up=domain,
                    scale_out_gb_s=spec.scale_out_gb_s)


def _precision(spec: ClusterSpec, acc: Accelerator, notes: list[str]) -> Precision:
    if spec.precision:
        p = Precision.parse(spec.precision)
        acc.tflops_at(p)
        return p
    p = acc.lowest_precision
    notes.append(f"precision {p.value}: the narrowest {acc.short} computes natively")
    return p


def _choose_tp(base: Deployment, spec: ClusterSpec, mean_len: float, topo: Topology,
               notes: list[str]) -> int:
    cands = [t for t in (1, 2, 4, 8, 16, 32, 64, 72) if t <= topo.domain
             and spec.count % (t * spec.pp) == 0]
    fitting = []
    for t in cands:
        d = replace(base, tp=t, replicas=spec.count // (t * spec.pp), topology=topo)
        if d.kv_capacity_tokens >= 1024:
            fitting.append((t, d.kv_capacity_tokens))
    if not fitting:
        return max(cands) if cands else 1  # check() will explain why nothing fits
    for t, kv in fitting:
        if kv >= TARGET_BATCH * mean_len:
            notes.append(f"tp {t}: the smallest whose replica holds {TARGET_BATCH} sequences "
                         f"of ~{mean_len:,.0f} tokens ({kv:,} KV tokens)")
            return t
    t, kv = fitting[-1]
    notes.append(f"tp {t}: no tp holds {TARGET_BATCH} sequences of ~{mean_len:,.0f} tokens; "
                 f"the largest that fits ({kv:,} KV tokens)")
    return t


def _beams(model: str) -> int:
    try:
        return workload(model).beams
    except ConfigError:
        return 1


def plan_deployment(spec: ClusterSpec, mean_input: float, mean_output: float) -> Plan:
    """The deployment for ``spec`` with a workload of those mean lengths. Raises
    :class:`~tokenmark.errors.ConfigError` naming the numbers that do not fit."""
    acc = find_accelerator(spec.accelerator)
    model: ModelArch = find_model(spec.model)
    notes: list[str] = []
    topo = _topology(spec, acc)
    precision = _precision(spec, acc, notes)
    eff = spec.efficiency or efficiency_for(acc, spec.stack, spec.software_round,
                                            spec.scenario)
    notes.append(f"efficiency: {eff.source}")
    beams = spec.beams or _beams(spec.model)
    if beams > 1:
        notes.append(f"beam search: {beams} sequences per request (the benchmark's reference)")
    policy = ServingPolicy(
        max_num_seqs=spec.max_num_seqs or DEFAULT_MAX_NUM_SEQS,
        max_batched_tokens=spec.max_batched_tokens,
        gpu_memory_utilization=spec.gpu_memory_utilization,
        prefill_replicas=spec.prefill_replicas,
        beams=beams,
    )
    base = Deployment(acc, model, precision, tp=1, replicas=1, efficiency=eff, policy=policy,
                      pp=spec.pp, ep=spec.ep)
    tp = spec.tp or _choose_tp(base, spec, mean_input + beams * mean_output, topo, notes)
    per = tp * spec.pp
    if per < 1 or spec.count % per:
        raise ConfigError(
            f"tp {tp} x pp {spec.pp} = {per} accelerators per replica does not divide the "
            f"{spec.count} accelerators ({spec.nodes} nodes x {spec.per_node}); choose tp "
            f"and pp whose product divides {spec.count}"
        )
    d = replace(base, tp=tp, replicas=spec.count // per, topology=topo)
    d.check()
    return Plan(d, tuple(notes))
