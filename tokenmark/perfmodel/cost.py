"""The time of one engine step of one replica, and what it was spent on.

A step runs one decode token for every running sequence plus prefill chunks within a
token budget. Its time is

    max(compute, memory) + serial_fraction x min(compute, memory)
    + communication + overhead

per accelerator of the replica (all of them work in lock-step):

- compute = FLOPs / (tp x pp) / (dense peak at the precision x the efficiency's
  :meth:`~tokenmark.perfmodel.Efficiency.mfu_for` the model's width), FLOPs being
  ``2 x body parameters`` per token processed, ``2 x vocab x hidden`` per token that
  produces a logit (decode tokens and each prefill chunk's last), and attention
  (QK and AV over every (query, context) pair; see
  :meth:`~tokenmark.perfmodel.hardware.ModelArch.attention_flops_per_pair`);
- memory = (weights / tp + KV traffic / (tp x pp)) / (bandwidth x ``mbu``): every
  pipeline stage reads its weights once per microbatch and ``pp`` microbatches are in
  flight, so a step costs each accelerator ``weights / tp`` of reads; for
  mixture-of-experts models only the experts a step's tokens touch are read (uniform
  routing); KV traffic reads every context token once and writes the new ones;
- communication = tensor-parallel all-reduces (two per layer, one when experts are
  spread by expert parallelism, which uses an all-to-all instead), pipeline hand-offs
  and expert all-to-alls, over the scale-up link when the group fits one scale-up
  domain and over the scale-out network otherwise;
- overhead = ``step_overhead_ns`` + ``seq_overhead_ns`` x sequences in the step;
- a vision-language model's step that starts prefilling a request with images also runs
  the vision encoder on them: ``encoder_flops`` (:mod:`~tokenmark.perfmodel.vision`) at
  the efficiency of the encoder's width, counted as prefill compute.

:meth:`CostModel.components` returns the parameter-free parts (compute and memory time
at 100% efficiency, communication, sequence count), which is what calibration fits
``mfu``, ``mbu`` and the overheads against; :meth:`CostModel.cost` applies the
deployment's efficiency. Both take a step's aggregates only (token counts and sums of
context lengths), so a step costs O(1) whatever the batch size.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from tokenmark.perfmodel.deployment import Deployment
from tokenmark.perfmodel.vision import vision_encoder

__all__ = ["BREAKDOWN_KEYS", "CostModel", "StepComponents", "StepCost"]

#: The parts a step's time is split into (ns), in the order they are reported.
BREAKDOWN_KEYS = ("prefill_compute", "decode_compute", "weights_memory", "kv_memory",
                  "communication", "overhead")


class StepComponents(NamedTuple):
    """A step's parameter-free cost parts (ns at 100% compute and memory efficiency)."""

    compute0_ns: float
    memory0_ns: float
    comm_ns: float
    seqs: int
    prefill_flop_share: float
    kv_byte_share: float


@dataclass(frozen=True, slots=True)
class StepCost:
    total_ns: int
    compute_ns: int
    memory_ns: int
    comm_ns: int
    overhead_ns: int
    prefill_flop_share: float = 0.0  # of the step's FLOPs
    kv_byte_share: float = 0.0  # of the step's memory traffic

    serial_ns: int = 0  # the part of the shorter of compute and memory not overlapped

    @property
    def binding(self) -> str:
        return "compute" if self.compute_ns >= self.memory_ns else "memory"

    def breakdown(self) -> dict[str, float]:
        """The step's time split into :data:`BREAKDOWN_KEYS` (they sum to the total up to
        rounding). The larger of compute and memory is what the step waited for; it is
        attributed to prefill/decode compute by FLOPs or to weight/KV reads by bytes."""
        top = float(max(self.compute_ns, self.memory_ns))
        out = dict.fromkeys(BREAKDOWN_KEYS, 0.0)
        if self.compute_ns >= self.memory_ns:
            out["prefill_compute"] = top * self.prefill_flop_share
            out["decode_compute"] = top - out["prefill_compute"]
        else:
            out["kv_memory"] = top * self.kv_byte_share
            out["weights_memory"] = top - out["kv_memory"]
        if self.serial_ns:  # the unhidden part goes to the side that was shorter
            if self.compute_ns >= self.memory_ns:
                out["kv_memory"] += self.serial_ns * self.kv_byte_share
                out["weights_memory"] += self.serial_ns * (1.0 - self.kv_byte_share)
            else:
                out["prefill_compute"] += self.serial_ns * self.prefill_flop_share
                out["decode_compute"] += self.serial_ns * (1.0 - self.prefill_flop_share)
        out["communication"] = float(self.comm_ns)
        out["overhead"] = float(self.overhead_ns)
        return out


class CostModel:
    """Step times for one replica of a deployment."""

    def __init__(self, d: Deployment) -> None:
        self.d = d
        acc = d.accelerator
        m = d.model
        eff = d.efficiency
        topo = d.topo
        n = d.per_replica
        self._peak_per_ns = n * acc.tflops_at(d.precision) * 1e12 / 1e9  # FLOP/ns
        self._bw_per_ns = acc.hbm_tb_s * 1e12 / 1e9  # B/ns per accelerator
        self._wbytes = d.precision.bytes
        self._kv = d.kv_bytes_per_token
        self._n = n
        self._body2 = 2.0 * m.body_params
        self._head2 = 2.0 * m.head_params
        self._attn_p = m.attention_flops_per_pair(decode=False)
        self._attn_d = m.attention_flops_per_pair(decode=True)
        up = acc.scale_up_gb_s_bidir / 2  # GB/s one direction
        out = topo.scale_out_gb_s
        link = eff.link_efficiency
        tp_bw = (out if d.tp_spans_domains or up <= 0 else up) * link  # B/ns
        rep_bw = (out if d.replica_spans_domains or up <= 0 else up) * link
        self._tp_bw = max(tp_bw, 1e-9)
        self._rep_bw = max(rep_bw, 1e-9)
        moe_a2a = m.is_moe and d.ep > 1
        self._ar_per_layer = 1 if moe_a2a else 2
        self._moe_a2a = moe_a2a
        self._mfu = eff.mfu_for(m.hidden)
        enc = vision_encoder(m)
        self._mfu_enc = eff.mfu_for(enc.hidden) if enc is not None else self._mfu
        self._has_comm = d.tp > 1 or d.pp > 1 or moe_a2a

    def components(
        self,
        prefill_tokens: int,
        prefill_pairs: float,
        prefill_ctx: int,
        prefill_seqs: int,
        decode_seqs: int,
        decode_ctx: int,
    ) -> StepComponents:
        """Parameter-free parts of a step from its aggregates: prefill chunks totalling
        ``prefill_tokens`` over ``prefill_seqs`` sequences, with ``prefill_pairs`` =
        sum of n*c + n(n+1)/2 and ``prefill_ctx`` = sum of c (c: context before the
        chunk), and ``decode_seqs`` decode tokens over contexts summing to
        ``decode_ctx``."""
        d = self.d
        m = d.model
        tokens = prefill_tokens + decode_seqs
        if tokens <= 0:
            return StepComponents(0.0, 0.0, 0.0, 0, 0.0, 0.0)
        f_pre = (self._body2 * prefill_tokens + self._head2 * prefill_seqs
                 + self._attn_p * prefill_pairs)
        f_dec = self._body2 * decode_seqs + self._head2 * decode_seqs + self._attn_d * decode_ctx
        flops = f_pre + f_dec
        weights = m.weights_read(tokens) * self._wbytes / d.tp
        kv = self._kv * (decode_ctx + prefill_ctx + tokens) / self._n
        compute0 = flops / self._peak_per_ns
        memory0 = (weights + kv) / self._bw_per_ns
        comm = self._comm(tokens)
        return StepComponents(compute0, memory0, comm, prefill_seqs + decode_seqs,
                              f_pre / flops, kv / (weights + kv))

    def _comm(self, tokens: int) -> float:
        d = self.d
        m = d.model
        eff = d.efficiency
        comm = 0.0
        act = m.hidden * 2.0  # bf16 activations per token
        if d.tp > 1:
            per_op = tokens / d.pp * act
            ring = 2.0 * (d.tp - 1) / d.tp * per_op / self._tp_bw
            comm += m.layers * self._ar_per_layer * (ring + eff.allreduce_latency_ns)
        if d.pp > 1:
            comm += (d.pp - 1) * (tokens * act / self._rep_bw + eff.allreduce_latency_ns)
        if self._moe_a2a:
            frac = (d.ep - 1) / d.ep
            per_layer = 2.0 * tokens * m.experts_active * act * frac / self._n
            comm += m.layers * (per_layer / self._rep_bw + 2 * eff.allreduce_latency_ns)
        return comm

    def cost(
        self,
        prefill_tokens: int,
        prefill_pairs: float,
        prefill_ctx: int,
        prefill_seqs: int,
        decode_seqs: int,
        decode_ctx: int,
        encoder_flops: float = 0.0,
    ) -> StepCost:
        """The step's time under the deployment's efficiency (arguments as
        :meth:`components`; ``encoder_flops``: the vision encoder's work in this step)."""
        c = self.components(prefill_tokens, prefill_pairs, prefill_ctx, prefill_seqs,
                            decode_seqs, decode_ctx)
        eff = self.d.efficiency
        compute = c.compute0_ns / self._mfu
        share = c.prefill_flop_share
        if encoder_flops > 0:
            enc = encoder_flops / self._peak_per_ns / self._mfu_enc
            share = (compute * share + enc) / (compute + enc)
            compute += enc
        memory = c.memory0_ns / eff.mbu
        overhead = eff.step_overhead_ns + eff.seq_overhead_ns * c.seqs
        serial = eff.serial_fraction * min(compute, memory)
        total = max(compute, memory) + serial + c.comm_ns + overhead
        return StepCost(int(total), int(compute), int(memory), int(c.comm_ns), int(overhead),
                        share, c.kv_byte_share, int(serial))

    def decode_cost(self, decode_seqs: int, decode_ctx: int) -> StepCost:
        """:meth:`cost` of a step with no prefill (the common case, kept cheap)."""
        if decode_seqs <= 0:
            return self.cost(0, 0.0, 0, 0, 0, 0)
        d = self.d
        eff = d.efficiency
        flops = (self._body2 + self._head2) * decode_seqs + self._attn_d * decode_ctx
        m = d.model
        w_params = m.total_params if not m.is_moe else m.weights_read(decode_seqs)
        weights = w_params * self._wbytes / d.tp
        kv = self._kv * (decode_ctx + decode_seqs) / self._n
        compute = flops / self._peak_per_ns / self._mfu
        memory = (weights + kv) / self._bw_per_ns / eff.mbu
        comm = self._comm(decode_seqs) if self._has_comm else 0.0
        overhead = eff.step_overhead_ns + eff.seq_overhead_ns * decode_seqs
        top, low = (compute, memory) if compute >= memory else (memory, compute)
        serial = eff.serial_fraction * low
        return StepCost(int(top + serial + comm + overhead), int(compute), int(memory),
                        int(comm), int(overhead), 0.0, kv / (weights + kv), int(serial))

    def decode_coefficients(self) -> tuple[float, float, float, float, float, float]:
        """Coefficients of a decode-only step's time at this deployment's efficiency:
        compute = a x seqs + b x context sum; memory = w + c x (context sum + seqs)
        (``w`` is -1 for mixture-of-experts models, whose weight reads depend on the
        batch); overhead = o + q x seqs. For callers that cost many steps in a loop."""
        d = self.d
        eff = d.efficiency
        m = d.model
        a = (self._body2 + self._head2) / self._peak_per_ns / self._mfu
        b = self._attn_d / self._peak_per_ns / self._mfu
        w = -1.0 if m.is_moe else m.total_params * self._wbytes / d.tp / self._bw_per_ns / eff.mbu
        c = self._kv / self._n / self._bw_per_ns / eff.mbu
        return a, b, w, c, float(eff.step_overhead_ns), float(eff.seq_overhead_ns)

    @property
    def serial_fraction(self) -> float:
        """:attr:`Efficiency.serial_fraction` of the deployment (for loops that cost
        decode steps from :meth:`decode_coefficients`)."""
        return self.d.efficiency.serial_fraction

    def moe_weight_ns(self, tokens: int) -> float:
        """Weight-read time of a mixture-of-experts step over ``tokens`` tokens."""
        d = self.d
        return (d.model.weights_read(tokens) * self._wbytes / d.tp / self._bw_per_ns
                / d.efficiency.mbu)

    @property
    def has_comm(self) -> bool:
        return self._has_comm

    def comm_ns(self, tokens: int) -> float:
        return self._comm(tokens) if self._has_comm else 0.0

    def step(self, prefill: list[tuple[int, int]], decode_contexts: list[int]) -> StepCost:
        """Cost of a step with prefill chunks ``(tokens, context before)`` and one decode
        token for each running sequence whose context length is given."""
        p_tok = sum(n for n, _ in prefill)
        pairs = float(sum(n * c + n * (n + 1) / 2 for n, c in prefill))
        p_ctx = sum(c for _, c in prefill)
        return self.cost(p_tok, pairs, p_ctx, len(prefill), len(decode_contexts),
                         sum(decode_contexts))
