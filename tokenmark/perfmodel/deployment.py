"""A deployment: a model on accelerators, how it is split, how it is served, and how
efficiently the software runs it.

- :class:`Topology`: nodes x accelerators per node, the size of one scale-up domain
  (8 for an HGX board, 72 for an NVL72 rack) and the scale-out bandwidth per
  accelerator beyond it;
- parallelism on :class:`Deployment`: ``tp`` (tensor), ``dp`` (attention data
  parallelism inside a replica: ``dp`` groups of ``tp`` accelerators, each attending
  to its own sequences, stepping in lock-step through the shared experts), ``pp``
  (pipeline), ``ep`` (expert parallelism for mixture-of-experts models: the routed
  experts spread over ``ep`` accelerators of a stage, tokens sent to them by an
  all-to-all) and ``replicas`` (independent copies). One replica spans
  ``tp x dp x pp`` accelerators; its routed experts are split over all of a stage's
  ``tp x dp`` (by expert parallelism, and by tensor parallelism inside an expert where
  ``ep`` is smaller), its other weights (attention, embeddings, dense and shared
  layers) over the ``tp`` of each group, so they are held ``dp`` times;
- speculative decoding (``spec_tokens`` > 0): the model's own draft
  (:class:`~tokenmark.perfmodel.hardware.Draft`) proposes that many tokens per step;
- :class:`ServingPolicy`: continuous batching with a cap on sequences, a chunked
  prefill token budget per step, the memory fraction for weights and KV cache, how
  many steps an attention data-parallel replica holds new prefills back so its groups
  start them together, and
  prefill/decode disaggregation (``prefill_replicas`` of the replicas only prefill
  and hand the KV cache over to the others), and the beam width of beam search
  (GPT-J's MLPerf reference decodes 4 beams per request);
- :class:`Efficiency`: the few parameters the calibration fits per accelerator family
  and software stack (fractions of peak compute and bandwidth, fixed costs per step
  and per sequence); everything else comes from the data files.

:meth:`Deployment.check` turns every impossible combination into a
:class:`~tokenmark.errors.ConfigError` that names the numbers that do not fit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from tokenmark.errors import ConfigError
from tokenmark.perfmodel.hardware import (
    Accelerator,
    ModelArch,
    Precision,
    late_state,
    set_late_state,
)

__all__ = ["Deployment", "Efficiency", "ServingPolicy", "Topology"]

#: Below this many KV-cache tokens per replica a deployment is refused as not fitting.
MIN_KV_TOKENS = 1024
#: The hidden size at which ``Efficiency.mfu`` applies as given, and the cap on it.
REFERENCE_HIDDEN = 8192
MAX_MFU = 0.98


@dataclass(frozen=True, slots=True)
class Topology:
    """Where the accelerators are. ``scale_up`` 0 means one domain per node."""

    nodes: int = 1
    per_node: int = 8
    scale_up: int = 0
    scale_out_gb_s: float = 50.0  # per accelerator, one direction (400 Gb/s NIC)

    @property
    def total(self) -> int:
        return self.nodes * self.per_node

    @property
    def domain(self) -> int:
        """Accelerators in one scale-up (NVLink / xGMI) domain."""
        return self.scale_up or self.per_node

    def describe(self) -> str:
        dom = f", scale-up domain {self.domain}" if self.domain != self.per_node else ""
        return f"{self.nodes} node(s) x {self.per_node}{dom}"


@dataclass(frozen=True, slots=True)
class Efficiency:
    """The fitted parameters: fractions of peak achieved, and fixed costs.

    ``mfu``: fraction of dense peak FLOPS reached by matmul/attention work by a model of
    hidden size ``REFERENCE_HIDDEN`` (8192); a model of hidden size ``h`` reaches
    ``mfu x (h / 8192) ** size_exponent`` (capped at ``MAX_MFU``): the matmuls of smaller
    models run further below peak (smaller GEMM tiles, and per-layer work that does not
    shrink with the width), one exponent for all accelerators, fitted; ``mbu``:
    fraction of memory bandwidth reached when reading weights and KV cache;
    ``step_overhead_ns``: fixed cost of one engine step (scheduling, launches, sampling
    set-up); ``seq_overhead_ns``: cost per sequence in a step (sampling, detokenising,
    bookkeeping); ``link_efficiency`` and ``allreduce_latency_ns`` shape communication;
    ``serial_fraction``: the share of the shorter of a kernel's compute and memory times
    that is *not* hidden behind the longer one, so the linear layers take
    ``max(compute, weight reads) + serial_fraction x min(...)`` and attention the same
    over its KV traffic (:func:`~tokenmark.perfmodel.cost.kernel_time`): 0 is the
    roofline's perfect overlap, 1 none (their sum). Kernels overlap loads and math only
    partly, which costs most where the two are close: at the batch sizes latency limits
    force (decode near the ridge point), while the large batches of an Offline run keep
    the matmuls compute-bound and attention bound by its KV reads either way.

    ``fp4_mfu``: how much of ``mfu`` a deployment whose matmuls run at FP4 reaches of
    the FP4 peak (None: all of it, as at any other precision). A part's FP4 path is
    listed at twice its FP8 peak, but its FP4 kernels need not reach as much of it as
    its FP8 kernels reach of theirs: on CDNA 4, Llama-2-70B runs FP4 at 1.0-1.03x the
    throughput of FP8 (v6.0: 12,500 against 12,192 tokens/s an MI355X) where the peaks
    differ 2x. Calibration fits it only for an architecture whose rows hold both FP4
    and wider matmuls (:mod:`tokenmark.sim.calibration`).
    """

    mfu: float = 0.45
    mbu: float = 0.75
    step_overhead_ns: int = 1_500_000
    seq_overhead_ns: int = 0
    allreduce_latency_ns: int = 8_000
    link_efficiency: float = 0.7
    size_exponent: float = 0.0
    source: str = "default (not calibrated)"
    serial_fraction: float = 0.0
    fp4_mfu: float | None = None

    def __getstate__(self) -> list[object]:
        # unset (None), the field added last is left out: it pickles as before
        return late_state(self, 1)

    def __setstate__(self, state: list[object]) -> None:
        set_late_state(self, state)

    def mfu_for(self, hidden: int, fp4: bool = False) -> float:
        """The compute efficiency reached by a model of this hidden size, with its
        matmuls at FP4 when ``fp4`` (``mfu`` times ``fp4_mfu``)."""
        mfu = self.mfu * (self.fp4_mfu or 1.0) if fp4 else self.mfu
        scaled = mfu * float(hidden / REFERENCE_HIDDEN) ** self.size_exponent
        return float(min(max(MAX_MFU, mfu), scaled))

    def at_speed(self, speed: float, source: str | None = None) -> Efficiency:
        """These parameters for a model whose kernels run ``speed`` times as fast as
        the group's (its *level*, :mod:`tokenmark.sim.calibration`): ``mfu`` and ``mbu``
        times ``speed``, the step and per-sequence overheads divided by it, so every
        step's compute (below the cap of ``MAX_MFU``), memory, serial and overhead time
        is divided by ``speed``
        (communication, a property of the links, is not). ``speed`` 1 returns the
        parameters unchanged."""
        if speed == 1.0 and source is None:
            return self
        if not speed > 0:
            raise ValueError(f"a model's speed must be positive, not {speed}")
        return replace(self, mfu=self.mfu * speed, mbu=self.mbu * speed,
                       step_overhead_ns=round(self.step_overhead_ns / speed),
                       seq_overhead_ns=round(self.seq_overhead_ns / speed),
                       source=self.source if source is None else source)


#: TensorRT-LLM's attention-DP balancing (``attention_dp_config: enable_balance``,
#: ``timeout_iters`` 50): a new prefill waits up to this many steps for every
#: attention-DP group to have one (NVIDIA/TensorRT-LLM
#: docs/source/blogs/tech_blog/blog10_ADP_Balance_Strategy.md, measured on DeepSeek's
#: MLPerf-like 803 / 3,653-token requests: 1.33x the throughput of unbalanced
#: scheduling, at the cost of the time to first token; its DeepSeek-R1 attention-DP
#: serving configurations set ``enable_balance`` with ``timeout_iters`` 60).
ADP_BALANCE_STEPS = 50


@dataclass(frozen=True, slots=True)
class ServingPolicy:
    max_num_seqs: int = 256
    max_batched_tokens: int = 8192  # chunked-prefill token budget per step
    gpu_memory_utilization: float = 0.9
    prefill_replicas: int = 0  # >0: disaggregated, that many replicas only prefill
    beams: int = 1  # sequences decoded per request (beam search width; 1: greedy/sampling)
    #: Under attention data parallelism (``dp`` > 1): how many steps new prefills are
    #: held back until every group can start one together (0: none are, each request
    #: starts at once; None: not set, as 0). The planner sets :data:`ADP_BALANCE_STEPS`
    #: for every attention data-parallel layout.
    adp_balance_steps: int | None = None

    def __getstate__(self) -> list[object]:
        # unset (None), the field added last is left out: the policy pickles as before
        return late_state(self, 1)

    def __setstate__(self, state: list[object]) -> None:
        set_late_state(self, state)


@dataclass(frozen=True, slots=True)
class Deployment:
    accelerator: Accelerator
    model: ModelArch
    precision: Precision = Precision.BF16
    tp: int = 1  # tensor parallel, accelerators per pipeline stage
    replicas: int = 1  # data parallel
    efficiency: Efficiency = field(default_factory=Efficiency)
    policy: ServingPolicy = field(default_factory=ServingPolicy)
    pp: int = 1  # pipeline stages
    ep: int = 1  # expert parallel degree within a replica
    topology: Topology | None = None  # None: the replicas packed on 8-accelerator nodes
    kv_precision: Precision | None = None  # None: fp8 for fp8/fp4 weights, else bf16
    dp: int = 1  # attention data-parallel groups in a replica (MoE models)
    spec_tokens: int = 0  # tokens the model's draft proposes per step (0: none)

    @property
    def per_replica(self) -> int:
        return self.tp * self.dp * self.pp

    @property
    def compute_dtype(self) -> Precision:
        """The precision the matmuls run at (weight-only quantisation where the
        accelerator does not compute the weight format).

        A model whose FP4 weights are multiplied with wider activations
        (:attr:`~tokenmark.perfmodel.hardware.ModelArch.fp4_activations`: gpt-oss's
        MXFP4 experts, whose kernels are W4A8 with FP8 activations on an FP4 path and
        W4A16 without one) runs at that width where the accelerator has an FP4 path
        and at BF16 where it has none."""
        native = self.accelerator.compute_precision(self.precision)
        act = self.model.fp4_activations
        if act is None or self.precision is not Precision.FP4:
            return native
        if native is Precision.FP4:
            return act if self.accelerator.tflops.get(act.value) else native
        return Precision.BF16 if self.accelerator.tflops.get("bf16") else native

    @property
    def dense_dtype(self) -> Precision:
        """The precision of the weights outside the routed experts (attention, router,
        embeddings, output head) and of their matmuls: the model's
        :attr:`~tokenmark.perfmodel.hardware.ModelArch.dense_precision` where it is
        wider than the deployment's (gpt-oss's checkpoint keeps them in BF16 around its
        MXFP4 experts), else the deployment's own."""
        keep = self.model.dense_precision
        if keep is None or keep.bytes <= self.precision.bytes:
            return self.precision
        return keep

    @property
    def fp4_matmuls(self) -> bool:
        """Whether the matmuls run at FP4 (:attr:`compute_dtype`), so they reach the
        efficiency's ``mfu`` times its ``fp4_mfu``."""
        return self.compute_dtype is Precision.FP4

    @property
    def dense_compute_dtype(self) -> Precision:
        """The precision the matmuls over the weights outside the routed experts run at:
        :attr:`compute_dtype` unless those weights are kept wider (:attr:`dense_dtype`),
        then the accelerator's for that width (:meth:`Accelerator.wider_or`)."""
        keep = self.dense_dtype
        if keep is self.precision:
            return self.compute_dtype
        return self.accelerator.wider_or(keep, self.compute_dtype)

    @property
    def tokens_per_step(self) -> float:
        """Mean tokens a decoding sequence makes per step (1 without a draft)."""
        if self.spec_tokens and self.model.draft is not None:
            return self.model.draft.tokens_per_step(self.spec_tokens)
        return 1.0

    @property
    def kv_replication(self) -> int:
        return self.model.kv_replication(self.tp)

    @property
    def expert_slots(self) -> int:
        """Routed experts held by a stage: ``E`` when ``ep`` divides it, else
        ``ceil(E / ep)`` on each of the ``ep`` accelerators (the spare slots hold
        copies of the busiest experts, as expert-parallel load balancers place them:
        DeepSeek's 256 experts on 72 GPUs are 288 slots)."""
        e = self.model.routed_experts
        return -(-e // self.ep) * self.ep if self.ep > 1 else e

    @property
    def accelerators_total(self) -> int:
        return self.per_replica * self.replicas

    @property
    def topo(self) -> Topology:
        if self.topology is not None:
            return self.topology
        total = self.accelerators_total
        per = min(8, total) if total % min(8, total) == 0 else total
        return Topology(nodes=total // per, per_node=per, scale_up=0)

    @property
    def kv_dtype(self) -> Precision:
        if self.kv_precision is not None:
            return self.kv_precision
        return Precision.BF16 if self.precision is Precision.BF16 else Precision.FP8

    @property
    def label(self) -> str:
        bench = self.model.benchmarks[0] if self.model.benchmarks else self.model.name
        par = f"x{self.tp}" + (f" pp{self.pp}" if self.pp > 1 else "")
        par += f" dp{self.dp}" if self.dp > 1 else ""
        par += f" ep{self.ep}" if self.ep > 1 else ""
        par += f" spec{self.spec_tokens}" if self.spec_tokens else ""
        per = par + (f" x{self.replicas} replicas" if self.replicas > 1 else "")
        if self.disaggregated:
            p = self.policy.prefill_replicas
            per += f" ({p} prefill + {self.replicas - p} decode)"
        return f"emulated {self.accelerator.short} {per}, {bench}, {self.precision.value}"

    @property
    def weight_bytes(self) -> float:
        """Weights of one replica (all its accelerators together): the routed experts
        once, everything else once per attention group (at :attr:`dense_dtype`), and
        the draft's weights."""
        m = self.model
        experts = m.expert_params * self.expert_slots
        if self.spec_tokens and m.draft is not None:
            experts += m.draft.params
        return (m.shared_params * self.dp * self.dense_dtype.bytes
                + experts * self.precision.bytes)

    @property
    def kv_bytes_per_token(self) -> float:
        return self.model.kv_values_per_token() * self.kv_dtype.bytes

    @property
    def usable_bytes(self) -> float:
        """Memory of one replica that weights and KV cache may use."""
        return (self.per_replica * self.accelerator.hbm_gb * 1e9
                * self.policy.gpu_memory_utilization)

    @property
    def kv_capacity_tokens(self) -> int:
        """KV-cache tokens the replica holds (each kept ``kv_replication`` times)."""
        per = self.kv_bytes_per_token * self.kv_replication
        return int((self.usable_bytes - self.weight_bytes) // per)

    @property
    def tp_spans_domains(self) -> bool:
        """Whether one tensor-parallel group reaches past its scale-up domain."""
        return self.tp > self.topo.domain

    @property
    def replica_spans_domains(self) -> bool:
        return self.per_replica > self.topo.domain

    def single_replica(self) -> Deployment:
        """One replica of this deployment, still in its scale-up domain (so its
        collectives cost what they cost in the full cluster)."""
        topo = Topology(nodes=1, per_node=self.per_replica,
                        scale_up=min(self.topo.domain, self.per_replica),
                        scale_out_gb_s=self.topo.scale_out_gb_s)
        return replace(self, replicas=1, topology=topo,
                       policy=replace(self.policy, prefill_replicas=0))

    @property
    def disaggregated(self) -> bool:
        """Whether some replicas only prefill (:attr:`ServingPolicy.prefill_replicas`)."""
        return self.policy.prefill_replicas > 0

    def aggregated(self) -> Deployment:
        """The same replicas with every one prefilling and decoding."""
        if not self.disaggregated:
            return self
        return replace(self, policy=replace(self.policy, prefill_replicas=0))

    @property
    def units(self) -> int:
        """Identical serving units the replicas form: each replica, or with
        prefill/decode disaggregation the greatest common divisor of the prefill and
        decode pools (48 prefill and 24 decode replicas are 24 units of 2 + 1)."""
        p = self.policy.prefill_replicas
        return math.gcd(p, self.replicas - p) if p else self.replicas

    def serving_unit(self) -> Deployment:
        """One serving unit (:attr:`units`) in its scale-up domain: a single replica
        (:meth:`single_replica`), or with disaggregation the smallest group of prefill
        and decode replicas in the pools' proportion, whose KV hand-offs cross the
        scale-up link while the group fits one domain."""
        if not self.disaggregated:
            return self.single_replica()
        u = self.units
        n = self.replicas // u * self.per_replica
        topo = Topology(nodes=1, per_node=n, scale_up=min(self.topo.domain, n),
                        scale_out_gb_s=self.topo.scale_out_gb_s)
        return replace(self, replicas=self.replicas // u, topology=topo,
                       policy=replace(self.policy,
                                      prefill_replicas=self.policy.prefill_replicas // u))

    def check(self) -> None:
        """Raise ConfigError, with the numbers, if this deployment cannot run."""
        for name in ("tp", "pp", "ep", "dp", "replicas"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be at least 1 (got {getattr(self, name)})")
        _ = self.compute_dtype  # raises when the accelerator computes nothing wide enough
        m = self.model
        if self.dp > 1 and self.pp > 1:
            raise ConfigError(f"attention data parallelism (dp {self.dp}) with pipeline "
                              f"parallelism (pp {self.pp}) is not modelled; use one")
        if self.spec_tokens < 0:
            raise ConfigError(f"speculative tokens must be >= 0 (got {self.spec_tokens})")
        if self.spec_tokens and m.draft is None:
            raise ConfigError(f"{m.name} has no draft model for speculative decoding in "
                              "drafts.csv (use --spec-tokens 0)")
        if self.pp > m.layers:
            raise ConfigError(
                f"pipeline parallelism {self.pp} exceeds {m.name}'s {m.layers} layers"
            )
        if self.ep > 1:
            if not m.is_moe:
                raise ConfigError(
                    f"expert parallelism {self.ep} needs a mixture-of-experts model; "
                    f"{m.name} is dense (use --ep 1)"
                )
            stage = self.tp * self.dp
            if stage % self.ep:
                raise ConfigError(
                    f"expert parallelism {self.ep} does not divide the {stage} "
                    f"accelerators of a pipeline stage (tp {self.tp} x dp {self.dp})"
                )
            if self.ep > m.routed_experts:
                raise ConfigError(
                    f"expert parallelism {self.ep} exceeds {m.name}'s "
                    f"{m.routed_experts} experts"
                )
        topo = self.topology
        if topo is not None and topo.total != self.accelerators_total:
            raise ConfigError(
                f"{self.replicas} replicas x tp {self.tp} x dp {self.dp} x pp {self.pp} = "
                f"{self.accelerators_total} accelerators, but the topology has "
                f"{topo.total} ({topo.nodes} nodes x {topo.per_node})"
            )
        if self.policy.prefill_replicas and self.policy.prefill_replicas >= self.replicas:
            raise ConfigError(
                f"prefill/decode disaggregation needs at least one decode replica: "
                f"{self.policy.prefill_replicas} prefill replicas of {self.replicas}"
            )
        if self.kv_capacity_tokens < MIN_KV_TOKENS:
            weights = self.weight_bytes / 1e9
            usable = self.usable_bytes / 1e9
            per_acc = self.accelerator.hbm_gb * self.policy.gpu_memory_utilization
            kv_gb = MIN_KV_TOKENS * self.kv_bytes_per_token * self.kv_replication / 1e9
            need = math.ceil((weights + kv_gb) / per_acc)
            raise ConfigError(
                f"{m.name} at {self.precision.value} needs {weights:,.0f} GB of "
                f"weights; {self.per_replica} x {self.accelerator.short} give {usable:,.0f} "
                f"GB usable, leaving room for {max(0, self.kv_capacity_tokens):,} KV tokens; "
                f"use at least {need} accelerators per replica (--tp/--pp) or a smaller "
                "precision"
            )
