"""The time of one engine step of one replica, and what it was spent on.

A step runs one decode token for every running sequence plus prefill chunks within a
token budget. In every layer its linear layers (the matmuls over the weights) and its
attention (over the KV cache) are separate kernels that run one after the other, each
bound by its own roofline, so its time is

    max(linear, weights) + serial_fraction x min(linear, weights)
    + max(attention, kv) + serial_fraction x min(attention, kv)
    + communication + overhead

per accelerator of the replica (all of them work in lock-step; :func:`kernel_time`),
where ``linear`` and ``attention`` are the compute times of the matmuls and of QK/AV,
``weights`` and ``kv`` the times to read the weights and to read and write the KV cache.
At the batches of an Offline run the matmuls are compute-bound while attention stays
bound by its KV reads (every sequence reads its own context), so the KV traffic is
not hidden behind the matmuls' compute, as one roofline over the step's totals assumed
(per-operator rooflines: Yuan et al. 2024, "LLM Inference Unveiled: Survey and Roofline
Model Insights", arXiv:2402.16363; decode attention memory-bound at every batch size:
Agrawal et al. 2024, Sarathi-Serve, OSDI). ``compute`` and ``memory`` below are the
totals of the two kernels' sides:

- compute = FLOPs / (tp x dp x pp) / (dense peak at the deployment's compute precision
  x the efficiency's :meth:`~tokenmark.perfmodel.Efficiency.mfu_for` the model's
  width and, at FP4, its ``fp4_mfu``), FLOPs being ``2 x body parameters`` per token
  processed (for a mixture-of-experts model the routed experts' share scaled by
  :meth:`CostModel.imbalance`, the busiest accelerator's excess under expert
  parallelism), ``2 x vocab x hidden`` per token that produces a logit (decode tokens
  and each prefill chunk's last), and attention (QK and AV over every (query, context)
  pair; see :meth:`~tokenmark.perfmodel.hardware.ModelArch.attention_flops_per_pair`);
- a model whose weights outside the routed experts stay wider than the deployment's
  precision (:attr:`~tokenmark.perfmodel.Deployment.dense_dtype`: gpt-oss keeps
  attention, router, embeddings and head in BF16 around its MXFP4 experts) reads them
  at that width and runs their FLOPs at that width's peak;
- memory = (weights read + KV traffic) / (bandwidth x ``mbu``) per accelerator: every
  pipeline stage reads its weights once per microbatch and ``pp`` microbatches are in
  flight, so a step costs each accelerator its group's share (``/ tp``) of the
  non-expert weights and its share (``/ (tp x dp)``) of the routed experts the step's
  tokens touch (uniform routing); KV traffic reads every context token once and writes
  the new ones, each copy counted (a KV head shared by several tensor-parallel
  accelerators, and MLA's latent, are read by each of them:
  :meth:`~tokenmark.perfmodel.hardware.ModelArch.kv_replication`);
- communication = tensor-parallel all-reduces of each attention group's tokens (two per
  layer, one when experts are spread by expert parallelism, which uses an all-to-all
  instead) over the scale-up link when the group fits one scale-up domain and over the
  scale-out network otherwise; pipeline hand-offs; and the experts' all-to-all
  (dispatch and combine of ``k`` copies of each token's activations), whose traffic to
  accelerators outside the sender's scale-up domain goes over the scale-out network
  while the rest goes over the scale-up link, plus a fixed ``A2A_LATENCY_NS`` a layer
  (the two kernels' barriers and launch, measured on TensorRT-LLM's all-to-all);
- overhead = ``step_overhead_ns`` + ``seq_overhead_ns`` x the sequences of the busiest
  attention group (``ceil(sequences / dp)``): under attention data parallelism every
  rank is its own engine that schedules, samples and detokenises its own sequences
  (TensorRT-LLM's ``enable_attention_dp``: each rank keeps its own batch; vLLM's
  data-parallel deployment: one engine core per rank), so those per-sequence costs run
  side by side on the ``dp`` ranks, not one after another (charged over the whole
  replica, 73,728 sequences of a dp72 DeepSeek-R1 rack cost 144 ms a step at 1.95 us
  each, about twice the step's kernels);
- under attention data parallelism (``dp`` > 1) a prompt's prefill chunk runs on the
  one group that serves its request, and every group waits for the busiest: each
  group's tokens are padded to the busiest group's for the experts' all-to-all and
  grouped GEMMs (TensorRT-LLM's scheduler: "a few ranks' large prefill chunks [set]
  the DP-padded MoE workload for every rank", ``tensorrt_llm/_torch/pyexecutor/
  py_executor.py``; "the iteration time is dominated by the slowest rank", its ADP
  Balance blog), so a step's prefill costs the replica ``max(tokens, dp x largest
  chunk)`` tokens of linear layers and all-to-all and ``max(pairs, dp x the largest
  chunk's pairs)`` of attention (:meth:`CostModel.padded_prefill`); the weights the
  prompts touch and their KV writes stay their own. A decode step is balanced
  (``ceil(sequences / dp)`` a group, as the per-sequence overhead below). Prompts
  started together, one a group, cost what they compute; one prompt alone costs
  ``dp`` times its tokens: on a dp72 DeepSeek-R1 rack a 900-token prompt beside 135
  decodes a group runs the step's linear layers over 72 x 1,035 tokens instead of
  72 x 135 + 900. A replica therefore holds new prefills back until every group can
  start one (:attr:`~tokenmark.perfmodel.ServingPolicy.adp_balance_steps`,
  :mod:`~tokenmark.perfmodel.engine`);
- a vision-language model's step that starts prefilling a request with images also runs
  the vision encoder on them: ``encoder_flops`` (:mod:`~tokenmark.perfmodel.vision`) at
  the peak of its own precision where that is wider than the language model's
  (vision.csv ``precision``: BF16, as the quantisation recipes leave the vision tower)
  and at the language model's compute efficiency (``mfu_for`` the model's width, not the
  encoder's: its matmuls run over thousands of patches an image, as large as a prefill
  chunk's, and the Offline trace that calibration fits costs them so - one rule for
  both paths), counted as prefill compute. Under attention data parallelism (``dp`` > 1)
  each request's images are encoded by the one attention group that serves it (every
  data-parallel rank is its own engine with its own requests, and the ranks' forward
  passes are aligned at every expert layer: vLLM's data-parallel deployment docs), so
  the step waits for the busiest group: its encoder work is at least the largest
  request's and at least the mean share, ``max(total / dp, largest)`` on one group,
  i.e. ``max(total, dp x largest)`` over the replica's peak.

With speculative decoding (``spec_tokens`` = s) each decoding sequence runs ``1 + s``
tokens through the model (compute, all-to-all and expert touches for all of them; its
context is read once) after ``s`` draft passes, each costing the draft's layers'
share of the model's per-token work and weight reads plus the output head; the engine
then advances the sequence by the draft's mean tokens per step.

:meth:`CostModel.components` returns the parameter-free parts (compute and memory time
at 100% efficiency, communication, sequence count), which is what calibration fits
``mfu``, ``mbu`` and the overheads against; :meth:`CostModel.cost` applies the
deployment's efficiency. Both take a step's aggregates only (token counts and sums of
context lengths), so a step costs O(1) whatever the batch size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

from tokenmark.perfmodel.deployment import Deployment
from tokenmark.perfmodel.vision import vision_encoder

__all__ = ["A2A_LATENCY_NS", "BREAKDOWN_KEYS", "CostModel", "StepComponents", "StepCost",
           "kernel_time"]

#: The parts a step's time is split into (ns), in the order they are reported.
BREAKDOWN_KEYS = ("prefill_compute", "decode_compute", "weights_memory", "kv_memory",
                  "communication", "overhead")


#: An expert-parallel layer's dispatch and combine cost this long besides their bytes:
#: TensorRT-LLM's NVLinkOneSided all-to-all on GB200 NVL72 (DeepSeek-V3's hidden size,
#: top-8 of 256 experts, ep 8 to 64) takes 17.6-21.1 us to dispatch and 30.8-36.4 us to
#: combine a batch of 1-32 tokens a rank, flat until the bytes take over (two barriers
#: across the group and the kernels' launch; NVIDIA/TensorRT-LLM tech blog 18,
#: "Optimizing MoE Communication with One-Sided AlltoAll Over NVLink", docs/source/
#: blogs/tech_blog/): 19 + 32 us, where two all-reduce latencies (16 us) stood before.
A2A_LATENCY_NS = 51_000


def kernel_time(linear: float, weights: float, attn: float, kv: float,
                serial: float = 0.0) -> float:
    """The kernels' time of a step (ns): the linear layers (matmuls over the weights:
    ``linear`` compute, ``weights`` read) and attention (``attn`` compute, ``kv`` the KV
    cache read and written) run one after the other in every layer, each bound by its
    own roofline, ``max(compute, memory) + serial x min(compute, memory)``."""
    if linear >= weights:
        t = linear + serial * weights
    else:
        t = weights + serial * linear
    if attn >= kv:
        return t + attn + serial * kv
    return t + kv + serial * attn


class StepComponents(NamedTuple):
    """A step's parameter-free cost parts (ns at 100% compute and memory efficiency)."""

    compute0_ns: float
    memory0_ns: float
    comm_ns: float
    seqs: int
    prefill_flop_share: float
    kv_byte_share: float
    attn0_ns: float = 0.0  # of compute0_ns: attention's (QK and AV over the context)
    kv0_ns: float = 0.0  # of memory0_ns: the KV cache's reads and writes


@dataclass(frozen=True, slots=True)
class StepCost:
    total_ns: int
    compute_ns: int
    memory_ns: int
    comm_ns: int
    overhead_ns: int
    prefill_flop_share: float = 0.0  # of the step's FLOPs
    kv_byte_share: float = 0.0  # of the step's memory traffic

    serial_ns: int = 0  # kernel time beyond max(compute, memory): not overlapped
    attn_flop_share: float = 0.0  # of the step's compute time: attention's

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
        self._peak_per_ns = n * acc.tflops_at(d.compute_dtype) * 1e12 / 1e9  # FLOP/ns
        self._bw_per_ns = acc.hbm_tb_s * 1e12 / 1e9  # B/ns per accelerator
        self._wbytes = d.precision.bytes
        # KV bytes per token of context, each copy counted (see ModelArch.kv_replication)
        self._kv = d.kv_bytes_per_token * d.kv_replication
        self._n = n
        # FLOPs over weights kept wider than the experts (Deployment.dense_dtype) run at
        # that width's peak: counted here as FLOPs at the deployment's peak, scaled by
        # the ratio of the two peaks
        wide = acc.tflops_at(d.compute_dtype) / acc.tflops_at(d.dense_compute_dtype)
        self._routed2 = 2.0 * m.routed_active  # of _body2: the routed experts' share
        self._body2 = self._routed2 + (2.0 * m.body_params - self._routed2) * wide
        self._head2 = 2.0 * m.head_params * wide
        self._head_bytes = m.head_params * d.dense_dtype.bytes
        self._attn_p = m.attention_flops_per_pair(decode=False)
        self._attn_d = m.attention_flops_per_pair(decode=True)
        # weight bytes one accelerator reads per step: the non-expert weights of its
        # group's share (over tp) and its share of the routed experts touched
        self._w_shared = m.shared_params * d.dense_dtype.bytes / d.tp
        self._w_experts = m.expert_total * self._wbytes / (d.tp * d.dp)
        up = acc.scale_up_gb_s_bidir / 2  # GB/s one direction
        out = topo.scale_out_gb_s
        link = eff.link_efficiency
        self._up_bw = max((up if up > 0 else out) * link, 1e-9)  # B/ns
        self._out_bw = max(out * link, 1e-9)
        tp_bw = (out if d.tp_spans_domains or up <= 0 else up) * link
        rep_bw = (out if d.replica_spans_domains or up <= 0 else up) * link
        self._tp_bw = max(tp_bw, 1e-9)
        self._rep_bw = max(rep_bw, 1e-9)
        moe_a2a = m.is_moe and d.ep > 1
        self._ar_per_layer = 1 if moe_a2a else 2
        self._moe_a2a = moe_a2a
        # the all-to-all's destinations outside the sender's scale-up domain
        dom = min(d.ep, topo.domain)
        self._a2a_out = (d.ep - dom) / (d.ep - 1) if d.ep > 1 else 0.0
        self._ln_ep = math.log(d.ep) if d.ep > 1 else 0.0
        self._mfu = eff.mfu_for(m.hidden, fp4=d.fp4_matmuls)
        enc = vision_encoder(m)
        # the vision encoder runs at its own precision where that is wider (BF16: the
        # quantisation recipes leave it unquantised)
        self._peak_enc_per_ns = self._peak_per_ns
        if enc is not None and enc.precision is not None and (
                enc.precision.bytes > d.compute_dtype.bytes):
            self._peak_enc_per_ns = n * acc.tflops_at(
                acc.wider_or(enc.precision, d.compute_dtype)) * 1e12 / 1e9
        self._has_comm = d.tp > 1 or d.pp > 1 or moe_a2a
        # speculative decoding: each decoding sequence runs 1 + s tokens through the
        # model, after s passes of the draft (its layers' share of the body, and the
        # output head) at one token per sequence
        self._verify = 1 + d.spec_tokens
        self._spec = d.spec_tokens
        draft = m.draft
        frac = draft.layers / m.layers if (draft is not None and d.spec_tokens) else 0.0
        self._draft_frac = frac
        self.linear_decode = not m.is_moe and not d.spec_tokens
        # decode steps: per-context-token compute and KV read at the efficiency
        self._ctx_compute = self._attn_d * self._verify / self._peak_per_ns / self._mfu
        self._ctx_kv = self._kv / self._n / self._bw_per_ns / eff.mbu
        self._by_seqs: dict[int, tuple[float, float, float, float]] = {}

    def imbalance(self, tokens: float) -> float:
        """How much longer the busiest accelerator's routed-expert work takes than the
        mean under expert parallelism: each of a step's ``tokens x k`` expert
        assignments lands on one of ``ep`` accelerators uniformly, so the busiest holds
        about ``mean + sqrt(2 ln(ep) x mean)`` (the expected maximum of ``ep`` nearly
        normal counts), a factor ``1 + sqrt(2 ln(ep) / mean)`` that fades as the step
        grows; capped at ``ep`` (everything on one)."""
        if not self._moe_a2a or tokens <= 0:
            return 1.0
        mean = tokens * self.d.model.experts_active / self.d.ep
        return min(float(self.d.ep), 1.0 + math.sqrt(2.0 * self._ln_ep / mean))

    def group_seqs(self, seqs: int) -> int:
        """The sequences of a step's busiest attention group (``ceil(seqs / dp)``), which
        the per-sequence overhead is charged for (module docstring)."""
        dp = self.d.dp
        return seqs if dp <= 1 else -(-seqs // dp)

    def padded_prefill(self, tokens: int, pairs: float, largest: int,
                       largest_pairs: float) -> tuple[float, float]:
        """The prefill tokens and (query, context) pairs a step costs the replica: as
        given without attention data parallelism; under it (``dp`` > 1) every group
        runs as many tokens as the busiest one, whose prefill is at least its share
        (``tokens / dp``) and at least the largest chunk (a new request goes to one
        group), so ``max(tokens, dp x largest)`` and likewise for the pairs."""
        dp = self.d.dp
        if dp <= 1 or tokens <= 0:
            return float(tokens), pairs
        return max(float(tokens), dp * float(largest)), max(pairs, dp * largest_pairs)

    def _weights(self, tokens: float) -> float:
        """Weight bytes one accelerator reads in a step over ``tokens`` tokens."""
        return self._w_shared + self._w_experts * self.d.model.touched_share(tokens)

    def components(
        self,
        prefill_tokens: int,
        prefill_pairs: float,
        prefill_ctx: float,
        prefill_seqs: int,
        decode_seqs: int,
        decode_ctx: float,
        prefill_largest: int = 0,
        prefill_largest_pairs: float = 0.0,
    ) -> StepComponents:
        """Parameter-free parts of a step from its aggregates: prefill chunks totalling
        ``prefill_tokens`` over ``prefill_seqs`` sequences, with ``prefill_pairs`` =
        sum of n*c + n(n+1)/2 and ``prefill_ctx`` = sum of c (c: context before the
        chunk), and ``decode_seqs`` decoding sequences over contexts summing to
        ``decode_ctx`` (each running ``1 + spec_tokens`` tokens through the model).
        ``prefill_largest`` and ``prefill_largest_pairs``: the largest chunk's tokens and
        pairs, which under attention data parallelism one group runs while the others
        wait (:meth:`padded_prefill`)."""
        v = self._verify
        t_dec = decode_seqs * v
        tokens = prefill_tokens + t_dec
        if tokens <= 0:
            return StepComponents(0.0, 0.0, 0.0, 0, 0.0, 0.0)
        p_run, pairs_run = self.padded_prefill(prefill_tokens, prefill_pairs,
                                               prefill_largest, prefill_largest_pairs)
        run = p_run + t_dec  # the tokens the linear layers and the all-to-all process
        body = self._body2 + self._routed2 * (self.imbalance(run) - 1.0)
        f_pre = body * p_run + self._head2 * prefill_seqs + self._attn_p * pairs_run
        f_dec = (body + self._head2) * t_dec + self._attn_d * decode_ctx * v
        weights = self._weights(tokens)
        comm = self._comm(run)
        if self._spec and decode_seqs:
            f_draft, w_draft, c_draft = self._draft_pass(decode_seqs)
            f_dec += self._spec * f_draft
            weights += self._spec * w_draft
            comm += self._spec * c_draft
        flops = f_pre + f_dec
        kv = self._kv * (decode_ctx + prefill_ctx + tokens) / self._n
        compute0 = flops / self._peak_per_ns
        memory0 = (weights + kv) / self._bw_per_ns
        attn = (self._attn_p * pairs_run + self._attn_d * decode_ctx * v) / self._peak_per_ns
        return StepComponents(compute0, memory0, comm, self.group_seqs(prefill_seqs + decode_seqs),
                              f_pre / flops, kv / (weights + kv), attn,
                              kv / self._bw_per_ns)

    def _draft_pass(self, seqs: int) -> tuple[float, float, float]:
        """One draft pass over ``seqs`` sequences: FLOPs, weight bytes per accelerator
        and communication, as the draft's layers' share of the model's and one use of
        the output head (the draft shares the target's embedding and head)."""
        f = self._draft_frac
        body = self._body2 + self._routed2 * (self.imbalance(seqs) - 1.0)
        flops = (f * body + self._head2) * seqs
        weights = f * self._weights(seqs) + self._head_bytes / self.d.tp
        return flops, weights, f * self._comm(seqs)

    def _comm(self, tokens: float) -> float:
        d = self.d
        m = d.model
        eff = d.efficiency
        comm = 0.0
        act = m.hidden * 2.0  # bf16 activations per token
        if d.tp > 1:  # each attention group all-reduces its own tokens
            per_op = tokens / d.dp / d.pp * act
            ring = 2.0 * (d.tp - 1) / d.tp * per_op / self._tp_bw
            comm += m.layers * self._ar_per_layer * (ring + eff.allreduce_latency_ns)
        if d.pp > 1:
            comm += (d.pp - 1) * (tokens * act / self._rep_bw + eff.allreduce_latency_ns)
        if self._moe_a2a:
            # dispatch and combine: each accelerator of the stage sends its share of the
            # tokens to their k experts, (ep - 1) / ep of them elsewhere; the share
            # beyond its scale-up domain goes over the scale-out network at the same time
            frac = (d.ep - 1) / d.ep
            sent = 2.0 * tokens / (d.tp * d.dp) * m.experts_active * act * frac
            out = self._a2a_out
            t = max(sent * (1.0 - out) / self._up_bw, sent * out / self._out_bw)
            comm += m.layers * (t + A2A_LATENCY_NS)
        return comm

    def cost(
        self,
        prefill_tokens: int,
        prefill_pairs: float,
        prefill_ctx: float,
        prefill_seqs: int,
        decode_seqs: int,
        decode_ctx: float,
        encoder_flops: float = 0.0,
        encoder_max_flops: float = 0.0,
        prefill_largest: int = 0,
        prefill_largest_pairs: float = 0.0,
    ) -> StepCost:
        """The step's time under the deployment's efficiency (arguments as
        :meth:`components`; ``encoder_flops``: the vision encoder's work in this step,
        ``encoder_max_flops`` the largest request's part of it, which one attention
        data-parallel group encodes alone: module docstring)."""
        c = self.components(prefill_tokens, prefill_pairs, prefill_ctx, prefill_seqs,
                            decode_seqs, decode_ctx, prefill_largest, prefill_largest_pairs)
        eff = self.d.efficiency
        compute = c.compute0_ns / self._mfu
        attn = c.attn0_ns / self._mfu
        share = c.prefill_flop_share
        if encoder_flops > 0:
            work = max(encoder_flops, self.d.dp * encoder_max_flops)
            enc = work / self._peak_enc_per_ns / self._mfu
            share = (compute * share + enc) / (compute + enc)
            compute += enc
        memory = c.memory0_ns / eff.mbu
        kv = c.kv0_ns / eff.mbu
        overhead = eff.step_overhead_ns + eff.seq_overhead_ns * c.seqs
        kernels = kernel_time(compute - attn, memory - kv, attn, kv, eff.serial_fraction)
        total = kernels + c.comm_ns + overhead
        return StepCost(int(total), int(compute), int(memory), int(c.comm_ns), int(overhead),
                        share, c.kv_byte_share, int(kernels - max(compute, memory)),
                        attn / compute if compute > 0 else 0.0)

    def decode_cost(self, decode_seqs: int, decode_ctx: float) -> StepCost:
        """:meth:`cost` of a step with no prefill (the common case)."""
        return self.cost(0, 0.0, 0, 0, decode_seqs, decode_ctx)

    def decode_parts(self, seqs: int, ctx: float
                     ) -> tuple[float, float, float, float, float]:
        """A decode-only step's linear-layer compute, attention compute, weight-read,
        KV-read and communication times (ns, at the deployment's efficiency), for loops
        that cost many steps (:func:`kernel_time` combines them): equal to
        :meth:`components` under the efficiency, with the parts that depend only on the
        batch size kept per size."""
        got = self._by_seqs.get(seqs)
        if got is None:
            c = self.components(0, 0.0, 0, 0, seqs, 0.0)
            eff = self.d.efficiency
            weights = (c.memory0_ns - c.kv0_ns) / eff.mbu
            kv_fixed = c.kv0_ns / eff.mbu  # the new tokens' writes
            got = (c.compute0_ns / self._mfu, weights, kv_fixed, c.comm_ns)
            if len(self._by_seqs) < 65536:
                self._by_seqs[seqs] = got
        compute, weights, kv_fixed, comm = got
        return (compute, self._ctx_compute * ctx, weights, kv_fixed + self._ctx_kv * ctx,
                comm)

    def decode_coefficients(self) -> tuple[float, float, float, float, float, float]:
        """Coefficients of a decode-only step's time at this deployment's efficiency,
        for a dense model without speculative decoding (:attr:`linear_decode`):
        linear layers' compute = a x seqs, attention's b x context sum; weight reads w,
        KV reads and writes c x (context sum + seqs) (:func:`kernel_time` combines
        them); overhead = o + q x seqs. For callers that cost many steps in a loop."""
        d = self.d
        eff = d.efficiency
        a = (self._body2 + self._head2) / self._peak_per_ns / self._mfu
        b = self._attn_d / self._peak_per_ns / self._mfu
        w = self._w_shared / self._bw_per_ns / eff.mbu
        c = self._kv / self._n / self._bw_per_ns / eff.mbu
        return a, b, w, c, float(eff.step_overhead_ns), float(eff.seq_overhead_ns)

    @property
    def serial_fraction(self) -> float:
        """:attr:`Efficiency.serial_fraction` of the deployment (for loops that cost
        decode steps from :meth:`decode_coefficients`)."""
        return self.d.efficiency.serial_fraction

    @property
    def has_comm(self) -> bool:
        return self._has_comm

    def comm_ns(self, tokens: int) -> float:
        return self._comm(tokens) if self._has_comm else 0.0

    def step(self, prefill: list[tuple[int, int]], decode_contexts: list[int]) -> StepCost:
        """Cost of a step with prefill chunks ``(tokens, context before)`` and one decode
        token for each running sequence whose context length is given."""
        p_tok = sum(n for n, _ in prefill)
        each = [n * c + n * (n + 1) / 2 for n, c in prefill]
        p_ctx = sum(c for _, c in prefill)
        return self.cost(p_tok, float(sum(each)), p_ctx, len(prefill), len(decode_contexts),
                         sum(decode_contexts), prefill_largest=max((n for n, _ in prefill),
                                                                   default=0),
                         prefill_largest_pairs=max(each, default=0.0))
