"""From what the user names (accelerator, count, topology, model, precision,
parallelism, serving policy) to checked :class:`~tokenmark.perfmodel.Deployment`
candidates, searched the same way by every prediction (:mod:`tokenmark.sim.predict`):
``tokenmark simulate``, ``simulate --scaling``, calibration and its forward evaluation.

What is left unsaid is decided as MLPerf submitters decide it, by documented rules,
and where they tune per scenario, by trying the candidates and keeping the best:

- **precision**: the one given (or the published row's ``weight_data_types``), else the
  narrowest the accelerator computes natively (FP4 on Blackwell, Rubin and CDNA 4, FP8
  on Hopper, Ada and CDNA 3, else BF16), as the closed-division submissions do for
  every benchmark whose accuracy target allows it; a format the accelerator does not
  compute is weight-only quantisation (:attr:`~tokenmark.perfmodel.Deployment.compute_dtype`);
- **tensor parallelism** of a dense model: the smallest power of two (up to the
  scale-up domain) whose replica holds the weights and KV cache for ``TARGET_BATCH``
  sequences of the workload's mean length, so the batch can grow large enough for
  throughput (if none does, the largest that fits at all); the candidates are that
  and twice it, where it fits the scale-up domain (latency limits reward wider
  replicas), and half it where that replica still holds ``NARROW_BATCH`` sequences
  (less or no all-reduce traffic: on PCIe-only cards the all-reduce cannot overlap
  compute and can cost a third or more of a step, so a submitter measuring both keeps
  the narrower one where it is faster; Intel's Arc Pro B60 gpt-oss-120b notes measure
  the TP all-reduce at 42% of a step over PCIe, with oneCCL giving no overlap, and
  try the narrower TP as their first lever);
- a **mixture-of-experts** model has three layouts, each a candidate where it fits:
  (a) a tensor-parallel group as above with its experts spread over the same
  accelerators by expert parallelism (``ep = tp``); (b) attention data parallelism
  over a node's ``g = min(8, domain)`` accelerators (``tp 1, dp g, ep g``): every
  accelerator attends to its own sequences and holds the non-expert weights, the
  experts spread over the group; (c) "wide" expert parallelism over a whole scale-up
  domain larger than a node (``dp = ep =`` the NVL72 rack's 72); in the latency
  scenarios (Server, Interactive) also (d) **tensor-parallel replicas of 4 and 8**
  with the experts spread over them (``tp = ep`` = 4, 8) where the weights and KV fit
  and they are not (a) already: a latency lever, as wider dense replicas are
  (NVIDIA's v6.1 Qwen3-VL Interactive recipe on a 4-GPU node runs one TP4 worker,
  ``mlcommons/inference_results_v6.1``
  ``closed/NVIDIA/configs/qwen3_vl_235b_a22b/B300-SXM-270GBx8/VLLM/Interactive/README.md``);
- **prefill/decode disaggregation**, in the latency scenarios and where the scale-up
  domain is larger than a node (NVL72-class, so a prompt's KV cache reaches its
  decode replica over the scale-up link): every layout above whose serving unit fits
  one domain, its replicas split into a prefill and a decode pool in the proportions
  :data:`PD_SPLITS` (1:3, 1:2, 1:1, 2:1 replicas, a prefill share of the
  accelerators of 1/4, 1/3, 1/2, 2/3) where the split divides the replicas. Prefill
  replicas only prefill (and run the vision encoder), decode replicas only decode, so
  no prompt's prefill shares a step with decoding; the KV hand-off costs
  :meth:`~tokenmark.sim.cluster.Cluster.kv_transfer_ns`. Both pools use the same
  layout (NVIDIA's v6.1 NVL72 Qwen3-VL Interactive runs: GB300 22 prefill workers at
  TP2 and 28 decode at TP1, a prefill share of 61%; VR200 48 prefill and 24 decode at
  TP1, 2/3; ``closed/NVIDIA/configs/qwen3_vl_235b_a22b/{GB300-NVL72_GB300-288GB,
  VR200-NVL72_VR200-288GB}_aarch64x72/VLLM/Interactive/README.md``). Not offered when
  ``--prefill-replicas`` or the parallelism is given, nor in Offline (no latency
  limit to meet: the same replicas aggregated are the Offline bound);
- **speculative decoding** with the model's own draft (DeepSeek-R1's MTP head,
  ``drafts.csv``), from the round whose rules allow it and in Interactive only (the
  closed division allows no draft in Offline or Server): each layout with and without it;
- **replicas**: every accelerator is used, so ``count / (tp x dp x pp)`` must be a
  whole number;
- **max_num_seqs**: 1024 per attention group (TensorRT-LLM's and vLLM's large-batch
  settings in MLPerf configurations run 512-2048), the KV cache limiting it further,
  and the chunked-prefill budget per group; both scale with ``dp``;
- **attention-DP balancing**: an attention data-parallel replica holds new prefills
  back up to :data:`~tokenmark.perfmodel.deployment.ADP_BALANCE_STEPS` steps so its
  groups start them together (TensorRT-LLM's ``attention_dp_config: enable_balance``,
  which its DeepSeek-R1 attention-DP serving configurations set, ``timeout_iters``
  50-60), in every scenario: a prompt started alone costs every group its tokens
  (:meth:`~tokenmark.perfmodel.cost.CostModel.padded_prefill`).

Every rule's outcome is recorded in :attr:`Plan.notes` and written with the results;
:func:`candidates` returns every layout that fits, :func:`plan_deployment` the first
(the rules' choice without a search).
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
from tokenmark.perfmodel.deployment import ADP_BALANCE_STEPS
from tokenmark.sim.params import efficiency_for, round_key
from tokenmark.sim.workloads import workload

__all__ = ["MOE_LATENCY_TP", "NARROW_BATCH", "PD_SPLITS", "TARGET_BATCH", "ClusterSpec", "Plan",
           "candidates", "disaggregated", "plan_deployment", "round_key"]

#: Sequences a replica should be able to hold at once when its TP is chosen.
TARGET_BATCH = 256
#: Sequences a replica half as wide as the rules' must hold to be tried as well: a
#: narrower replica runs with less (or no) tensor-parallel communication, which on
#: cards without a GPU link (PCIe only) can outweigh its smaller batch.
NARROW_BATCH = TARGET_BATCH // 2
DEFAULT_MAX_NUM_SEQS = 1024
#: Accelerators in one node-sized attention data-parallel group (an HGX board's 8).
NODE_GROUP = 8
#: Tensor-parallel replica widths a mixture-of-experts model also tries in the latency
#: scenarios (experts spread over them, ``ep = tp``).
MOE_LATENCY_TP = (4, 8)
#: Prefill : decode replicas of a disaggregated serving unit (prefill share of the
#: accelerators 1/4, 1/3, 1/2, 2/3).
PD_SPLITS = ((1, 3), (1, 2), (1, 1), (2, 1))
#: The scenarios with latency limits, where wider replicas and disaggregation are tried.
LATENCY_SCENARIOS = frozenset({"Server", "Interactive"})


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
    ep: int | None = None  # None: the layout's (1 for dense models)
    dp: int | None = None  # None: the layout's (1 for dense models)
    spec_tokens: int | None = None  # None: searched where the round allows the draft
    max_num_seqs: int | None = None
    max_batched_tokens: int = 8192
    gpu_memory_utilization: float = 0.9
    prefill_replicas: int = 0
    beams: int | None = None  # None: the benchmark's (workloads.csv), else 1
    stack: str | None = None
    software_round: str | None = None  # calibrated parameters of that round (None: newest)
    scenario: str | None = None  # Server/Interactive take their own calibrated row if any
    efficiency: Efficiency | None = None  # explicit override of the calibrated row
    #: the MLPerf round whose rules apply (drafts allowed from their ``from_round``);
    #: None: every technique the model has
    rules_round: str | None = None

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
        c = acc.compute_precision(p)
        if c is not p:
            how = ("its integer matrix path (W4A8)" if c is Precision.INT8
                   else "weight-only quantisation")
            notes.append(f"precision {p.value}: {acc.short} has no {p.value} matmuls, so "
                         f"{how} computed at {c.value}")
        return p
    p = acc.lowest_precision
    notes.append(f"precision {p.value}: the narrowest {acc.short} computes natively")
    return p


def _choose_tp(base: Deployment, spec: ClusterSpec, mean_len: float, topo: Topology,
               notes: list[str], ep_follows: bool) -> int:
    """The rules' tensor parallelism (module docstring); ``ep_follows``: experts spread
    over the same accelerators (``ep = tp``)."""
    cands = [t for t in (1, 2, 4, 8, 16, 32, 64, 72) if t <= topo.domain
             and spec.count % (t * spec.pp) == 0]
    fitting = []
    for t in cands:
        ep = t if ep_follows and base.model.is_moe else base.ep
        d = replace(base, tp=t, ep=ep, replicas=spec.count // (t * spec.pp), topology=topo)
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


def _base(spec: ClusterSpec, notes: list[str]) -> tuple[Deployment, Topology]:
    acc = find_accelerator(spec.accelerator)
    model: ModelArch = find_model(spec.model)
    topo = _topology(spec, acc)
    precision = _precision(spec, acc, notes)
    eff = spec.efficiency or efficiency_for(acc, spec.stack, spec.software_round,
                                            spec.scenario, model=model.name)
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
                      pp=spec.pp, ep=spec.ep or 1, dp=spec.dp or 1)
    return base, topo


def _sized(base: Deployment, spec: ClusterSpec, topo: Topology, tp: int, dp: int,
           ep: int, spec_tokens: int) -> Deployment:
    """A layout with its replicas, topology and per-group policy, checked; attention
    data-parallel groups balance their prefills
    (:data:`~tokenmark.perfmodel.deployment.ADP_BALANCE_STEPS`)."""
    per = tp * dp * spec.pp
    if per < 1 or spec.count % per:
        raise ConfigError(
            f"tp {tp} x dp {dp} x pp {spec.pp} = {per} accelerators per replica does not "
            f"divide the {spec.count} accelerators ({spec.nodes} nodes x {spec.per_node}); "
            f"choose parallelism whose product divides {spec.count}"
        )
    pol = base.policy
    if dp > 1:
        pol = replace(pol, max_num_seqs=pol.max_num_seqs * dp,
                      max_batched_tokens=pol.max_batched_tokens * dp,
                      adp_balance_steps=ADP_BALANCE_STEPS)
    d = replace(base, tp=tp, dp=dp, ep=ep, replicas=spec.count // per, topology=topo,
                policy=pol, spec_tokens=spec_tokens)
    d.check()
    return d


#: The scenarios whose rules allow speculative decoding: MLPerf's closed division allows
#: it only in DeepSeek-R1 Interactive (EAGLE-style with the R1 MTP head) and
#: GPT-OSS-120B Interactive (EAGLE3), never Offline or Server (the rules' required
#: generation parameters; /work/shared/mlperf/digest.md section 2.3).
DRAFT_SCENARIOS = frozenset({"Interactive"})


def _draft_tokens(spec: ClusterSpec, model: ModelArch, scenario: str | None
                  ) -> tuple[int, ...]:
    """The speculative-decoding settings to try: none, and the model's own draft where
    the rules allow it (from its round, in :data:`DRAFT_SCENARIOS`; ``scenario`` None:
    any)."""
    if spec.spec_tokens is not None:
        return (spec.spec_tokens,)
    draft = model.draft
    if draft is None or (spec.rules_round is not None
                         and round_key(spec.rules_round) < round_key(draft.from_round)):
        return (0,)
    if scenario is not None and scenario not in DRAFT_SCENARIOS:
        return (0,)
    return (0, draft.tokens)


def candidates(spec: ClusterSpec, mean_input: float, mean_output: float,
               scenario: str | None = None) -> list[Plan]:
    """Every layout the rules allow for ``spec`` that fits (module docstring) in
    ``scenario`` (default ``spec.scenario``; None: every technique), the rules' own
    choice first. Raises :class:`~tokenmark.errors.ConfigError` naming the numbers
    when none does."""
    scenario = scenario or spec.scenario
    notes: list[str] = []
    base, topo = _base(spec, notes)
    m = base.model
    mean_len = mean_input + base.policy.beams * mean_output
    fixed = spec.tp is not None or spec.dp is not None or spec.ep is not None
    layouts: list[tuple[int, int, int, str]] = []  # (tp, dp, ep, why)
    why_tp: list[str] = []  # the tp rule's outcome, a note of the layouts it made
    if fixed or not m.is_moe:
        tp = spec.tp or _choose_tp(base, spec, mean_len, topo, why_tp, ep_follows=False)
        layouts.append((tp, spec.dp or 1, spec.ep or 1, "; ".join(why_tp)))
        t2 = tp * 2
        if (not fixed and t2 <= topo.domain and spec.count % (t2 * spec.pp) == 0):
            layouts.append((t2, 1, 1, f"tp {t2}: twice the rules' tp (latency limits "
                            "reward wider replicas)"))
        half = tp // 2
        if not fixed and tp % 2 == 0:  # tp >= 2, so half >= 1
            narrow = replace(base, tp=half, replicas=spec.count // (half * spec.pp),
                             topology=topo)
            kv = narrow.kv_capacity_tokens
            if kv >= NARROW_BATCH * mean_len:
                layouts.append((half, 1, 1, f"tp {half}: half the rules' tp, holding "
                                f"{kv / mean_len:,.0f} sequences (at least {NARROW_BATCH}) "
                                "with less tensor-parallel communication"))
    else:
        tp = _choose_tp(base, spec, mean_len, topo, why_tp, ep_follows=True)
        layouts.append((tp, 1, tp, "; ".join([*why_tp, f"experts spread over the tp {tp} "
                                              f"group (ep {tp})"])))
        g = min(NODE_GROUP, topo.domain, spec.count)
        if spec.pp == 1 and g > 1 and spec.count % g == 0:
            layouts.append((1, g, g, f"attention data-parallel over {g} (dp {g}, ep {g})"))
        w = topo.domain
        if spec.pp == 1 and w > NODE_GROUP and spec.count % w == 0:
            layouts.append((1, w, w, f"wide expert parallelism over the {w}-accelerator "
                            f"scale-up domain (dp {w}, ep {w})"))
        if scenario is None or scenario in LATENCY_SCENARIOS:
            for t in MOE_LATENCY_TP:
                if (t != tp and t <= topo.domain and spec.count % (t * spec.pp) == 0
                        and t <= m.routed_experts):
                    layouts.append((t, 1, t, f"tp {t} with the experts over it (ep {t}): "
                                    "a wider replica for the latency limits"))
    plans: list[Plan] = []
    first_error: ConfigError | None = None
    for tp, dp, ep, why in layouts:
        for s in _draft_tokens(spec, m, scenario):
            try:
                d = _sized(base, spec, topo, tp, dp, ep, s)
            except ConfigError as e:
                first_error = first_error or e
                continue
            extra = [why] if why else []
            if s:
                draft = m.draft
                assert draft is not None
                extra.append(f"speculative decoding: {draft.kind} drafts {s} tokens a step, "
                             f"{d.tokens_per_step:.2f} kept on average")
            plans.append(Plan(d, tuple(notes + extra)))
    if not plans:
        assert first_error is not None
        raise first_error
    if (not fixed and not spec.prefill_replicas and topo.domain > NODE_GROUP
            and (scenario is None or scenario in LATENCY_SCENARIOS)):
        plans += [q for p in plans for q in disaggregated(p)]
    return plans


def disaggregated(plan: Plan) -> list[Plan]:
    """``plan``'s replicas split into prefill and decode pools in each proportion of
    :data:`PD_SPLITS` that divides them and whose serving unit fits one scale-up
    domain (module docstring)."""
    d = plan.deployment
    out = []
    for pre, dec in PD_SPLITS:
        k = pre + dec
        if d.replicas % k or k * d.per_replica > d.topo.domain:
            continue
        n_pre = d.replicas // k * pre
        pd = replace(d, policy=replace(d.policy, prefill_replicas=n_pre))
        try:
            pd.check()
        except ConfigError:
            continue
        share = pre / k
        out.append(Plan(pd, (*plan.notes, f"prefill/decode disaggregated: {n_pre} prefill "
                                          f"and {d.replicas - n_pre} decode replicas "
                                          f"(prefill share {share:.0%})")))
    return out


def widened(plan: Plan, spec: ClusterSpec) -> list[Plan]:
    """Wider tensor-parallel replicas of a dense ``plan`` (two, four... times its tp,
    up to the scale-up domain, dividing the accelerators), for a latency scenario whose
    candidates fail its limits at any rate: a replica's step time falls with its tp, and
    submitters meet Interactive limits with wider replicas than Offline's. Empty for a
    mixture-of-experts plan (its candidates already reach the whole domain) or one
    whose layout was given."""
    d = plan.deployment
    if d.model.is_moe or spec.tp is not None or spec.dp is not None or spec.ep is not None:
        return []
    out = []
    t = d.tp * 2
    while t <= d.topo.domain and spec.count % (t * d.pp) == 0:
        try:
            w = _sized(d, spec, d.topo, t, 1, 1, d.spec_tokens)
        except ConfigError:
            break
        out.append(Plan(w, (*plan.notes, f"tp {t}: widened, no narrower replica meets "
                                          "the latency limits at any rate")))
        t *= 2
    return out


def plan_deployment(spec: ClusterSpec, mean_input: float, mean_output: float) -> Plan:
    """The rules' deployment for ``spec`` (the first of :func:`candidates`)."""
    return candidates(spec, mean_input, mean_output)[0]
