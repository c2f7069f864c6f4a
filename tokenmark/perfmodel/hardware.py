"""Accelerators and model architectures, read from the packaged data files.

``data/accelerators.csv`` gives each accelerator's peak dense TFLOPS per precision, HBM
(or GDDR/LPDDR) capacity and bandwidth, scale-up link bandwidth and architecture, with
its sources; ``data/models.csv`` gives each model's shape as its ``config.json`` states
it (layers, hidden size, heads, KV heads, experts), with its source. Nothing here is
fitted: the efficiency parameters live in :mod:`tokenmark.perfmodel.deployment`.

Counting conventions used by the cost model:

- parameters include both the input embedding and the (untied) output head, as the
  published totals do; every model in the table has untied embeddings, so the matmul
  work per token is ``2 x (active - vocab x hidden)`` FLOPs through the body plus
  ``2 x vocab x hidden`` for the output head of a token that produces a logit (a model
  card whose active count leaves the input embedding out - gpt-oss's 5.13B - has it
  added back in models.csv, or the body would lose a whole embedding's worth);
- a mixture-of-experts model's routed-expert size is derived from the two published
  totals (``total = shared + E x e`` and ``active = shared + k x e``), which matches the
  configs' ``3 x hidden x moe_intermediate x layers`` within 1% for every MoE row;
- DeepSeek's multi-head latent attention (MLA) caches ``kv_lora_rank + rope`` = 512 + 64
  values per token per layer; its attention FLOPs differ between prefill (per head:
  QK over 192 dims, AV over 128) and decode with absorbed weights (QK over 576, AV over
  512, the way SGLang/TRT-LLM/vLLM run MLA decode).
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, fields
from enum import StrEnum
from functools import cache
from importlib import resources
from typing import Any

from tokenmark.errors import ConfigError

__all__ = [
    "Accelerator",
    "Draft",
    "ModelArch",
    "Precision",
    "accelerators",
    "find_accelerator",
    "find_model",
    "models",
    "read_data_csv",
]


class Precision(StrEnum):
    """Weight (and arithmetic) precision. FP4 means NVFP4/MXFP4 block formats; INT8 and
    INT4 are integer weight formats, which accelerators without an integer tensor path
    in ``accelerators.csv`` run as weight-only quantisation (see
    :meth:`Accelerator.compute_precision`)."""

    BF16 = "bf16"
    FP8 = "fp8"
    FP4 = "fp4"
    INT8 = "int8"
    INT4 = "int4"

    @property
    def bytes(self) -> float:
        return {"bf16": 2.0, "fp8": 1.0, "fp4": 0.5, "int8": 1.0, "int4": 0.5}[self.value]

    @classmethod
    def parse(cls, text: str) -> Precision:
        key = text.strip().lower().replace("fp16", "bf16").replace("nvfp4", "fp4")
        key = key.replace("mxfp4", "fp4").replace("uint4", "int4")
        for p in cls:
            if p.value == key:
                return p
        raise ConfigError(f"unknown precision {text!r}; choose bf16, fp8, fp4, int8 or int4")


def _key(text: str) -> str:
    return "".join(ch for ch in text.lower() if ch.isalnum())


@dataclass(frozen=True, slots=True)
class Accelerator:
    name: str  # as in accelerators.csv, e.g. "H200 SXM"
    short: str  # e.g. "H200"
    vendor: str
    architecture: str  # e.g. "Hopper": the family calibration groups by
    memory_type: str
    hbm_gb: float
    hbm_tb_s: float
    tflops: dict[str, float]  # dense TFLOPS by precision; absent precisions are 0
    scale_up_gb_s_bidir: float  # per accelerator, both directions together
    tdp_w: float
    scale_up_domain: int = 8  # accelerators one scale-up link joins (72 for NVL72)

    def tflops_at(self, p: Precision) -> float:
        v = self.tflops.get(p.value)
        if not v:
            have = ", ".join(k for k, x in self.tflops.items() if x) or "none"
            raise ConfigError(
                f"{self.short} has no dense {p.value} figure (it has: {have}); choose one "
                "of those precisions"
            )
        return v

    def compute_precision(self, weights: Precision) -> Precision:
        """The precision matmuls over ``weights`` run at: the weight format itself where
        the accelerator computes it natively; INT4 weights on an accelerator with an
        INT8 rate at that rate (W4A8: the integer matrix engine takes INT8 operands,
        so 4-bit weights are unpacked to it, not widened to a float path); else the
        narrowest native float format no narrower than it (integer formats and, e.g.,
        FP4 weights on Hopper are weight-only quantisation: stored narrow, computed
        wider).

        The published results show the W4A8 path: Intel's 8 x Arc Pro B60 system ran
        Llama-2-70B at 3,009 tokens/s with UINT4 weights in v5.1 and at 3,271 with
        INT8 weights in v6.0 (Llama-3.1-8B: 6,472 and 6,762), about Intel's own
        "1.18x from software" on the same cards, where a BF16 path for the INT4 rows
        would have put the INT8 rows at twice their speed (the v6.0 step predicted
        Llama-3.1-8B 1.7-2.5x too high from the v5.1 rows read that way)."""
        if self.tflops.get(weights.value):
            return weights
        if weights is Precision.INT4 and self.tflops.get(Precision.INT8.value):
            return Precision.INT8
        for p in (Precision.FP4, Precision.FP8, Precision.BF16):
            if p.bytes >= weights.bytes and self.tflops.get(p.value):
                return p
        have = ", ".join(k for k, x in self.tflops.items() if x) or "none"
        raise ConfigError(f"{self.short} computes no format as wide as {weights.value} "
                          f"weights (it has: {have})")

    def wider_or(self, wide: Precision, fallback: Precision) -> Precision:
        """:meth:`compute_precision` of ``wide`` (a part of a model kept wider than the
        rest), or ``fallback`` (the rest's) where accelerators.csv gives this accelerator
        no figure that wide (VR200 lists FP4 only): the table has no other rate for it."""
        try:
            return self.compute_precision(wide)
        except ConfigError:
            return fallback

    @property
    def lowest_precision(self) -> Precision:
        """The narrowest precision the accelerator computes natively (what MLPerf
        submitters use when accuracy allows)."""
        for p in (Precision.FP4, Precision.FP8, Precision.BF16):
            if self.tflops.get(p.value):
                return p
        return Precision.BF16


@dataclass(frozen=True, slots=True)
class Draft:
    """A model's own draft for speculative decoding (``data/drafts.csv``): DeepSeek's
    multi-token-prediction (MTP) module. Each step the draft proposes ``tokens`` tokens
    one after another (``tokens`` passes of its ``layers`` layers and the output head),
    the target model verifies them with the sequence's own next token in one pass, and
    the drafted tokens are kept up to the first one rejected: with each drafted token
    accepted with probability ``acceptance`` given the ones before it, a step makes
    ``1 + p + p^2 + ... + p^tokens`` tokens per sequence on average. ``from_round``: the
    MLPerf round whose rules first allow it."""

    kind: str
    layers: int
    params: float
    tokens: int
    acceptance: float
    from_round: str

    def tokens_per_step(self, drafted: int | None = None) -> float:
        """Mean tokens a sequence makes per step with ``drafted`` (default: the
        draft's own count) tokens proposed."""
        n = self.tokens if drafted is None else drafted
        return float(sum(self.acceptance ** i for i in range(n + 1)))


#: ModelArch's fields added after its pickles were first keyed on (each None unless set).
_LATE_FIELDS = ("fp4_activations", "dense_precision")


def late_state(obj: Any, late: int) -> list[object]:
    """The pickled state of a slotted dataclass whose last ``late`` fields were added
    after its pickles were first keyed on: those left unset (None) at its end are
    left out, so it pickles as before they existed and the calibration caches keyed
    on pickled deployments keep their keys (:func:`set_late_state` reads it back)."""
    state = [getattr(obj, f.name) for f in fields(obj)]
    while len(state) > len(fields(obj)) - late and state[-1] is None:
        state.pop()
    return state


def set_late_state(obj: Any, state: list[object]) -> None:
    """Restore :func:`late_state`'s ``state``, the fields left out as None."""
    names = [f.name for f in fields(obj)]
    for name, value in zip(names, state, strict=False):
        object.__setattr__(obj, name, value)
    for name in names[len(state):]:
        object.__setattr__(obj, name, None)


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
    draft: Draft | None = None  # its own draft for speculative decoding (drafts.csv)
    #: The activation format its FP4 weights are multiplied with where the accelerator
    #: has an FP4 path (None: FP4 too, W4A4 as NVFP4 checkpoints run); see
    #: :attr:`~tokenmark.perfmodel.Deployment.compute_dtype`.
    fp4_activations: Precision | None = None
    #: The precision the weights outside the routed experts (attention, router,
    #: embeddings, output head) keep where the deployment's is narrower (None: the
    #: deployment's): gpt-oss's checkpoint quantises only its experts to MXFP4; see
    #: :attr:`~tokenmark.perfmodel.Deployment.dense_dtype`.
    dense_precision: Precision | None = None

    def __getstate__(self) -> list[object]:
        return late_state(self, len(_LATE_FIELDS))

    def __setstate__(self, state: list[object]) -> None:
        set_late_state(self, state)

    @property
    def is_moe(self) -> bool:
        return self.routed_experts > 0

    def kv_replication(self, tp: int) -> int:
        """Copies of each KV-cache entry among ``tp`` tensor-parallel accelerators:
        attention heads split across them, but a KV head cannot, so with fewer KV heads
        than accelerators each is kept on ``tp / kv_heads`` of them (vLLM and
        TensorRT-LLM replicate them so); MLA's compressed latent is shared by all heads,
        so every accelerator of the group keeps all of it (why DeepSeek deployments run
        attention data-parallel instead)."""
        if tp <= 1:
            return 1
        if self.mla:
            return tp
        return max(1, tp // max(1, min(tp, self.kv_heads)))

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
        """Parameters every token uses: attention, embeddings, dense layers and shared
        experts (all of a dense model)."""
        return self.total_params - self.routed_experts * self.expert_params

    @property
    def expert_total(self) -> float:
        """All routed experts' parameters (0 for a dense model)."""
        return self.routed_experts * self.expert_params

    @property
    def routed_active(self) -> float:
        """Routed-expert parameters one token uses (``k`` experts)."""
        return self.experts_active * self.expert_params

    @property
    def head_params(self) -> float:
        """The output head (vocab x hidden); the input embedding is the same size."""
        return float(self.vocab * self.hidden)

    @property
    def body_params(self) -> float:
        """Active parameters a token's matmuls use, without embedding and output head."""
        return self.active_params - 2 * self.head_params

    def touched_share(self, tokens: int | float) -> float:
        """The share of routed experts a step over ``tokens`` tokens reads (uniform
        routing: each expert is missed by a token with probability ``1 - k / E``)."""
        if not self.is_moe or tokens <= 0:
            return 0.0
        return 1.0 - (1.0 - self.experts_active / self.routed_experts) ** tokens

    def weights_read(self, tokens: int | float) -> float:
        """Parameters read in a step over ``tokens`` tokens (experts touched, uniform)."""
        if not self.is_moe:
            return self.total_params
        return self.shared_params + self.touched_share(tokens) * self.expert_total

    def attention_flops_per_pair(self, *, decode: bool = True) -> float:
        """FLOPs per (query token, context token) pair across layers: QK and AV."""
        if self.mla:
            per_head = 2 * (512 + 64) + 2 * 512 if decode else 2 * 192 + 2 * 128
            return float(self.layers * self.heads * per_head)
        pair = 4.0 * self.layers * self.heads * self.head_dim
        return pair / 2 if self.sliding_window_half else pair


@cache
def read_data_csv(name: str) -> tuple[dict[str, str], ...]:
    """The rows of one packaged data file (``tokenmark/data/<name>``)."""
    text = resources.files("tokenmark.data").joinpath(name).read_text(encoding="utf-8")
    return tuple(csv.DictReader(text.splitlines()))


def _f(v: str) -> float:
    return float(v) if v.strip() else 0.0


def _short(name: str) -> str:
    short = name.split(" (")[0].replace(" SXM", "")
    return "VR200" if short.startswith("Vera Rubin") else short


def _domain(text: str) -> int:
    """The scale-up domain a row's description names: ``NVL72`` or ``72 GPU NVLink
    domain`` give 72, ``HGX 8-GPU`` gives 8; a card with only PCIe or a 2-GPU bridge
    defaults to a node's 8 (its links within a node are what the bandwidth column
    gives)."""
    m = re.search(r"NVL(\d+)|(\d+)[- ]GPU NVLink domain", text)
    if m:
        return int(m.group(1) or m.group(2))
    return 8


def _rates(r: dict[str, str]) -> dict[str, float]:
    """A row's dense rates by precision. ``int8_dense_tops`` (the last column, filled
    only where the table has a figure: rows without it end before it) adds an integer
    path: INT8 weights then run INT8 matmuls (W8A8) at that rate, and INT4 weights
    W4A8, instead of being widened to a float format
    (:meth:`Accelerator.compute_precision`). The key is left out where there is no
    figure, so the other accelerators pickle as before (the calibration caches key on
    pickled deployments)."""
    out = {"bf16": _f(r["bf16_dense_tflops"]), "fp8": _f(r["fp8_dense_tflops"]),
           "fp4": _f(r["fp4_dense_tflops"])}
    int8 = _f(r.get("int8_dense_tops") or "")
    if int8:
        out["int8"] = int8
    return out


@cache
def accelerators() -> dict[str, Accelerator]:
    out: dict[str, Accelerator] = {}
    for r in read_data_csv("accelerators.csv"):
        name = r["accelerator"]
        short = _short(name)
        out[short] = Accelerator(
            name=name,
            short=short,
            vendor=r["vendor"],
            architecture=r["architecture"],
            memory_type=r["memory_type"],
            hbm_gb=_f(r["hbm_capacity_gb"]),
            hbm_tb_s=_f(r["hbm_bandwidth_tb_s"]),
            tflops=_rates(r),
            scale_up_gb_s_bidir=_f(r["scale_up_bw_gb_s_per_gpu_bidir"]),
            tdp_w=_f(r["tdp_w"]),
            scale_up_domain=_domain(r["context"] + " " + r["scale_up_interconnect"]),
        )
    return out


def find_accelerator(name: str) -> Accelerator:
    """An accelerator by its short name (``H200``), its row name (``H200 SXM``) or a
    spacing/case variant of either."""
    table = accelerators()
    k = _key(name)
    for short, acc in table.items():
        if k in (_key(short), _key(acc.name)) or _key(short) == k.removesuffix("sxm"):
            return acc
    raise ConfigError(
        f"unknown accelerator {name!r}; choose one of: {', '.join(table)}"
    )


@cache
def _drafts() -> dict[str, Draft]:
    return {r["model"]: Draft(kind=r["draft"], layers=int(r["draft_layers"]),
                              params=_f(r["draft_params_b"]) * 1e9,
                              tokens=int(r["draft_tokens"]), acceptance=_f(r["acceptance"]),
                              from_round=r["from_round"])
            for r in read_data_csv("drafts.csv")}


@cache
def models() -> dict[str, ModelArch]:
    out: dict[str, ModelArch] = {}
    drafts = _drafts()
    for r in read_data_csv("models.csv"):
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
            draft=drafts.get(r["model"]),
            fp4_activations=Precision.parse(r["fp4_activations"])
            if r.get("fp4_activations") else None,
            dense_precision=Precision.parse(r["dense_precision"])
            if r.get("dense_precision") else None,
        )
    return out


def find_model(name: str) -> ModelArch:
    """A model by its name in models.csv or by a benchmark name (``llama3.1-8b``; the
    LoadGen spelling ``llama3_1-8b`` and an ``-interactive`` suffix are accepted)."""
    k = _key(name).replace("interactive", "")
    for m in models().values():
        if k == _key(m.name) or any(k == _key(b) for b in m.benchmarks):
            return m
    choices = sorted({b for m in models().values() for b in m.benchmarks})
    raise ConfigError(f"unknown model {name!r}; choose a benchmark name: {', '.join(choices)}")
