"""The performance model of an LLM serving replica: one module, no I/O, shared by the
emulated server (real time) and the simulator (virtual time).

A *deployment* is a model (architecture from ``data/models.csv``) on ``tp`` accelerators
(figures from ``data/accelerators.csv``) per replica, at a precision, with a serving
policy (continuous batching, chunked prefill, a cap on sequences, KV-cache capacity).

Each engine step runs the decode of every running sequence (one token each) plus
prefill chunks within a token budget. Its time is

    max(compute, memory) + communication + overhead

- compute = FLOPs / (tp x dense TFLOPS at the precision x ``mfu``), with FLOPs =
  2 x active parameters per token plus attention (4 x layers x heads x head_dim per
  token per context token);
- memory = bytes read / (tp x HBM bandwidth x ``mbu``): the weights once per step (for
  mixture-of-experts models, the shared weights plus the experts a batch of that size is
  expected to touch under uniform routing) plus every running sequence's KV cache;
- communication (tp > 1) = two ring all-reduces of the step's activations per layer over
  the scale-up link, plus a fixed latency per all-reduce;
- overhead = a fixed cost per step (scheduling, launches).

Admission reserves each request's whole KV (prompt + output) up front, so there is no
preemption: the KV capacity (``gpu_memory_utilization`` x HBM - weights) limits the batch.
``mfu``, ``mbu`` and the overheads are the few efficiency parameters the simulator's
calibration fits; every step's time comes with its breakdown and binding limit, so each
prediction explains itself.
"""

from __future__ import annotations

import csv
import math
from collections import deque
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cache
from importlib import resources

from tokenmark.errors import ConfigError

__all__ = [
    "Accelerator",
    "CostModel",
    "Deployment",
    "Efficiency",
    "Event",
    "EventKind",
    "ModelArch",
    "Precision",
    "ReplicaEngine",
    "ServingPolicy",
    "StepCost",
    "StepPlan",
    "accelerators",
    "find_accelerator",
    "find_model",
    "models",
]


class Precision(StrEnum):
    BF16 = "bf16"
    FP8 = "fp8"
    FP4 = "fp4"

    @property
    def bytes(self) -> float:
        return {"bf16": 2.0, "fp8": 1.0, "fp4": 0.5}[self.value]


def _key(text: str) -> str:
    return "".join(ch for ch in text.lower() if ch.isalnum())


@dataclass(frozen=True, slots=True)
class Accelerator:
    name: str  # as in accelerators.csv, e.g. "H200 SXM"
    short: str  # e.g. "H200"
    vendor: str
    hbm_gb: float
    hbm_tb_s: float
    tflops: dict[str, float]  # dense TFLOPS by precision; absent precisions are missing
    scale_up_gb_s_bidir: float
    tdp_w: float

    def tflops_at(self, p: Precision) -> float:
        v = self.tflops.get(p.value)
        if not v:
            have = ", ".join(k for k, x in self.tflops.items() if x) or "none"
            raise ConfigError(
                f"{self.short} has no dense {p.value} figure (it has: {have}); choose one "
                "of those precisions"
            )
        return v


@dataclass(frozen=True, slots=True)
class ModelArch:
    name: str  # e.g. "Llama-3.1-8B"
    benchmarks: tuple[str, ...]
    total_params: float  # parameters
    active_params: float
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    routed_experts: int
    experts_active: int
    vocab: int
    max_context: int
    mla: bool = False  # DeepSeek's multi-head latent attention (compressed KV)
    sliding_window_half: bool = False  # gpt-oss: half the layers attend to 128 tokens

    @property
    def is_moe(self) -> bool:
        return self.routed_experts > 0

    def kv_values_per_token(self) -> float:
        """KV-cache values stored per token (all layers)."""
        if self.mla:
            return self.layers * (512 + 64)
        full = 2 * self.layers * self.kv_heads * self.head_dim
        return full / 2 if self.sliding_window_half else full

    @property
    def expert_params(self) -> float:
        """Parameters of one routed expert summed over layers: total = shared + E*x and
        active = shared + k*x give x = (total - active) / (E - k)."""
        if not self.is_moe:
            return 0.0
        return (self.total_params - self.active_params) / (
            self.routed_experts - self.experts_active
        )

    @property
    def shared_params(self) -> float:
        return self.total_params - self.routed_experts * self.expert_params

    def weights_read(self, tokens: int) -> float:
        """Parameters read in a step over ``tokens`` tokens (experts touched, uniform)."""
        if not self.is_moe or tokens <= 0:
            return self.total_params if not self.is_moe else self.shared_params
        e, k = self.routed_experts, self.experts_active
        touched = e * (1.0 - (1.0 - k / e) ** tokens)
        return self.shared_params + touched * self.expert_params

    def attention_flops_per_pair(self) -> float:
        """FLOPs per (query token, context token) pair across layers: QK and AV."""
        dim = (self.head_dim if not self.mla else 192)
        return 4.0 * self.layers * self.heads * dim


@cache
def _read_csv(name: str) -> tuple[dict[str, str], ...]:
    text = resources.files("tokenmark.data").joinpath(name).read_text(encoding="utf-8")
    return tuple(csv.DictReader(text.splitlines()))


def _f(v: str) -> float:
    return float(v) if v.strip() else 0.0


@cache
def accelerators() -> dict[str, Accelerator]:
    out: dict[str, Accelerator] = {}
    for r in _read_csv("accelerators.csv"):
        name = r["accelerator"]
        short = name.split(" (")[0].replace(" SXM", "")
        if short.startswith("Vera Rubin"):
            short = "VR200"
        out[short] = Accelerator(
            name=name,
            short=short,
            vendor=r["vendor"],
            hbm_gb=_f(r["hbm_capacity_gb"]),
            hbm_tb_s=_f(r["hbm_bandwidth_tb_s"]),
            tflops={
                "bf16": _f(r["bf16_dense_tflops"]),
                "fp8": _f(r["fp8_dense_tflops"]),
                "fp4": _f(r["fp4_dense_tflops"]),
            },
            scale_up_gb_s_bidir=_f(r["scale_up_bw_gb_s_per_gpu_bidir"]),
            tdp_w=_f(r["tdp_w"]),
        )
    return out


def find_accelerator(name: str) -> Accelerator:
    table = accelerators()
    k = _key(name)
    for short, acc in table.items():
        if k in (_key(short), _key(acc.name)) or _key(short) == k.removesuffix("sxm"):
            return acc
    raise ConfigError(
        f"unknown accelerator {name!r}; choose one of: {', '.join(table)}"
    )


@cache
def models() -> dict[str, ModelArch]:
    out: dict[str, ModelArch] = {}
    for r in _read_csv("models.csv"):
        note = (r["kv_cache_note"] + " " + r["notes"]).lower()
        heads = int(r["attention_heads"])
        out[r["model"]] = ModelArch(
            name=r["model"],
            benchmarks=tuple(b for b in r["benchmark_names"].split(";") if b),
            total_params=_f(r["total_params_b"]) * 1e9,
            active_params=_f(r["active_params_b"]) * 1e9,
            layers=int(r["layers"]),
            hidden=int(r["hidden"]),
            heads=heads,
            kv_heads=int(_f(r["kv_heads"]) or heads),
            head_dim=int(_f(r["head_dim"]) or int(r["hidden"]) // heads),
            routed_experts=int(_f(r["routed_experts"])),
            experts_active=int(_f(r["experts_active"])),
            vocab=int(r["vocab"]),
            max_context=int(r["max_context"]),
            mla="mla" in note,
            sliding_window_half="sliding" in note,
        )
    return out


def find_model(name: str) -> ModelArch:
    """A model by its name in models.csv or by a benchmark name (``llama3.1-8b``)."""
    k = _key(name)
    for m in models().values():
        if k == _key(m.name) or any(k == _key(b) for b in m.benchmarks):
            return m
    choices = sorted({b for m in models().values() for b in m.benchmarks})
    raise ConfigError(f"unknown model {name!r}; choose a benchmark name: {', '.join(choices)}")


@dataclass(frozen=True, slots=True)
class Efficiency:
    """The fitted parameters: fractions of peak achieved, and fixed costs."""

    mfu: float = 0.45  # fraction of dense peak FLOPS achieved by compute-bound work
    mbu: float = 0.75  # fraction of HBM bandwidth achieved by memory-bound work
    step_overhead_ns: int = 1_500_000
    allreduce_latency_ns: int = 8_000


@dataclass(frozen=True, slots=True)
class ServingPolicy:
    max_num_seqs: int = 256
    max_batched_tokens: int = 8192  # chunked-prefill token budget per step
    gpu_memory_utilization: float = 0.9


@dataclass(frozen=True, slots=True)
class Deployment:
    accelerator: Accelerator
    model: ModelArch
    precision: Precision = Precision.BF16
    tp: int = 1  # accelerators per replica (tensor parallel)
    replicas: int = 1
    efficiency: Efficiency = field(default_factory=Efficiency)
    policy: ServingPolicy = field(default_factory=ServingPolicy)

    @property
    def label(self) -> str:
        bench = self.model.benchmarks[0] if self.model.benchmarks else self.model.name
        per = f"x{self.tp}" + (f" x{self.replicas} replicas" if self.replicas > 1 else "")
        return f"emulated {self.accelerator.short} {per}, {bench}, {self.precision.value}"

    @property
    def weight_bytes(self) -> float:
        return self.model.total_params * self.precision.bytes

    @property
    def kv_bytes_per_token(self) -> float:
        return self.model.kv_values_per_token() * self.precision.bytes

    @property
    def kv_capacity_tokens(self) -> int:
        usable = self.tp * self.accelerator.hbm_gb * 1e9 * self.policy.gpu_memory_utilization
        return int((usable - self.weight_bytes) // self.kv_bytes_per_token)

    def check(self) -> None:
        """Raise ConfigError, with the numbers, if this deployment cannot run."""
        if self.tp < 1 or self.replicas < 1:
            raise ConfigError("tensor parallelism and replicas must be at least 1")
        self.accelerator.tflops_at(self.precision)
        usable = self.tp * self.accelerator.hbm_gb * self.policy.gpu_memory_utilization
        weights = self.weight_bytes / 1e9
        if self.kv_capacity_tokens < 1024:
            need = math.ceil(weights / (self.accelerator.hbm_gb * self.policy
                                        .gpu_memory_utilization * 0.9))
            raise ConfigError(
                f"{self.model.name} at {self.precision.value} needs {weights:,.0f} GB of "
                f"weights; {self.tp} x {self.accelerator.short} give {usable:,.0f} GB usable, "
                f"leaving room for {max(0, self.kv_capacity_tokens):,} KV tokens; use at least "
                f"{need} accelerators per replica (--tp) or a smaller precision"
            )


@dataclass(frozen=True, slots=True)
class StepCost:
    total_ns: int
    compute_ns: int
    memory_ns: int
    comm_ns: int
    overhead_ns: int

    @property
    def binding(self) -> str:
        return "compute" if self.compute_ns >= self.memory_ns else "memory"


class CostModel:
    """Step times for one replica of a deployment."""

    def __init__(self, d: Deployment) -> None:
        self.d = d
        acc = d.accelerator
        eff = d.efficiency
        self._flops_per_ns = d.tp * acc.tflops_at(d.precision) * 1e12 * eff.mfu / 1e9
        self._bytes_per_ns = d.tp * acc.hbm_tb_s * 1e12 * eff.mbu / 1e9
        self._link_bytes_per_ns = acc.scale_up_gb_s_bidir / 2 * 1e9 / 1e9  # one direction
        self._attn = d.model.attention_flops_per_pair()
        self._kv = d.kv_bytes_per_token

    def step(self, prefill: list[tuple[int, int]], decode_contexts: list[int]) -> StepCost:
        """Cost of a step with prefill chunks ``(tokens, context before)`` and one decode
        token for each running sequence whose context length is given."""
        d = self.d
        m = d.model
        n_prefill = sum(n for n, _ in prefill)
        n_tokens = n_prefill + len(decode_contexts)
        flops = 2.0 * m.active_params * n_tokens
        flops += self._attn * sum(n * c + n * (n + 1) / 2 for n, c in prefill)
        flops += self._attn * float(sum(decode_contexts))
        kv_read = self._kv * (sum(decode_contexts) + sum(c for _, c in prefill))
        kv_write = self._kv * n_tokens
        bytes_ = m.weights_read(n_tokens) * d.precision.bytes + kv_read + kv_write
        compute = flops / self._flops_per_ns
        memory = bytes_ / self._bytes_per_ns
        comm = 0.0
        if d.tp > 1 and n_tokens:
            act = n_tokens * m.hidden * 2.0  # bf16 activations
            ring = 2.0 * (d.tp - 1) / d.tp * act / self._link_bytes_per_ns
            comm = m.layers * 2 * (ring + d.efficiency.allreduce_latency_ns)
        overhead = d.efficiency.step_overhead_ns
        total = max(compute, memory) + comm + overhead
        return StepCost(int(total), int(compute), int(memory), int(comm), overhead)


class EventKind(StrEnum):
    FIRST = "first"  # the first output token
    TOKEN = "token"  # a later output token
    DONE = "done"  # the request finished (after its last token)
    REJECTED = "rejected"  # it can never fit in the KV cache


@dataclass(frozen=True, slots=True)
class Event:
    rid: int
    kind: EventKind


@dataclass(slots=True)
class _Req:
    rid: int
    prompt: int
    output: int
    prefilled: int = 0
    generated: int = 0

    @property
    def context(self) -> int:
        return self.prompt + self.generated


@dataclass(frozen=True, slots=True)
class StepPlan:
    cost: StepCost
    batch: int  # sequences in the step
    prefill_tokens: int
    decode_tokens: int
    waiting: int  # requests still queued after admission
    kv_used_tokens: int
    limited_by: str  # what stopped admission this step: "", "kv", "max_num_seqs", "budget"


class ReplicaEngine:
    """Continuous batching for one replica, advanced one step at a time by its caller."""

    def __init__(self, d: Deployment) -> None:
        d.check()
        self.d = d
        self.cost = CostModel(d)
        self.capacity = d.kv_capacity_tokens
        self._waiting: deque[_Req] = deque()
        self._running: list[_Req] = []
        self._reserved = 0
        self.steps = 0
        self.tokens_out = 0
        self.prompt_tokens_in = 0

    # -- state read by /metrics ---------------------------------------------------------
    @property
    def num_running(self) -> int:
        return len(self._running)

    @property
    def num_waiting(self) -> int:
        return len(self._waiting)

    @property
    def kv_usage(self) -> float:
        return self._reserved / self.capacity if self.capacity else 0.0

    @property
    def has_work(self) -> bool:
        return bool(self._waiting or self._running)

    def submit(self, rid: int, prompt_tokens: int, output_tokens: int) -> None:
        self._waiting.append(_Req(rid, max(1, prompt_tokens), max(1, output_tokens)))

    def step(self) -> tuple[StepPlan, list[Event]]:
        """Plan and execute the next step; the caller waits ``plan.cost.total_ns`` and then
        delivers the events (they happen at the step's end)."""
        pol = self.d.policy
        events: list[Event] = []
        decode = [r for r in self._running if r.prefilled == r.prompt]
        budget = pol.max_batched_tokens - len(decode)
        chunks: list[tuple[_Req, int]] = []
        for r in self._running:  # unfinished prefills continue first
            if r.prefilled < r.prompt and budget > 0:
                n = min(r.prompt - r.prefilled, budget)
                chunks.append((r, n))
                budget -= n
        limited = ""
        while self._waiting:
            r = self._waiting[0]
            need = r.prompt + r.output
            if need > self.capacity:
                self._waiting.popleft()
                events.append(Event(r.rid, EventKind.REJECTED))
                continue
            if len(self._running) >= pol.max_num_seqs:
                limited = "max_num_seqs"
                break
            if self._reserved + need > self.capacity:
                limited = "kv"
                break
            if budget <= 0:
                limited = "budget"
                break
            self._waiting.popleft()
            self._running.append(r)
            self._reserved += need
            n = min(r.prompt, budget)
            chunks.append((r, n))
            budget -= n
        cost = self.cost.step([(n, r.prefilled) for r, n in chunks],
                              [r.context for r in decode])
        # apply the step
        for r, n in chunks:
            r.prefilled += n
            self.prompt_tokens_in += n
            if r.prefilled == r.prompt:
                r.generated = 1
                events.append(Event(r.rid, EventKind.FIRST))
        for r in decode:
            r.generated += 1
            events.append(Event(r.rid, EventKind.TOKEN))
        finished = [r for r in self._running if r.prefilled == r.prompt
                    and r.generated >= r.output]
        for r in finished:
            events.append(Event(r.rid, EventKind.DONE))
            self._reserved -= r.prompt + r.output
        if finished:
            done = {r.rid for r in finished}
            self._running = [r for r in self._running if r.rid not in done]
        n_first = sum(1 for e in events if e.kind is EventKind.FIRST)
        self.tokens_out += len(decode) + n_first
        self.steps += 1
        plan = StepPlan(
            cost=cost,
            batch=len(decode) + len(chunks),
            prefill_tokens=sum(n for _, n in chunks),
            decode_tokens=len(decode),
            waiting=len(self._waiting),
            kv_used_tokens=self._reserved,
            limited_by=limited,
        )
        return plan, events
