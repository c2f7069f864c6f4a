"""Mixture-of-experts, speculative decoding and network mechanisms of the performance
model against step times computed by hand from the data files (accelerators.csv,
models.csv, drafts.csv) and the models' config.json figures. Every number below is
derived in the comments; the model's code is not used to make the expected values."""

from __future__ import annotations

import math

import pytest

from tokenmark.perfmodel import (
    CostModel,
    Deployment,
    Efficiency,
    Precision,
    ReplicaEngine,
    ServingPolicy,
    Topology,
    find_accelerator,
    find_model,
)

B200 = find_accelerator("B200")  # 180 GB, 8.0 TB/s, 9000 dense FP4 TFLOPS, 1800 GB/s NVLink
GB300 = find_accelerator("GB300")  # NVL72: 72-GPU NVLink domain
R1 = find_model("deepseek-r1")
EFF = Efficiency(mfu=0.5, mbu=0.8, step_overhead_ns=0, seq_overhead_ns=0,
                 allreduce_latency_ns=8_000, link_efficiency=0.7)

# DeepSeek-R1 (config.json): 671e9 total, 37e9 active, 256 routed experts, 8 per token,
# 61 layers, hidden 7168, 128 heads, vocab 129280; MLA caches 512 + 64 values per layer.
EXPERT = (671e9 - 37e9) / (256 - 8)  # one routed expert over its layers: 2.5565e9
SHARED = 671e9 - 256 * EXPERT  # attention, embeddings, dense layers, shared expert
HEAD = 129280 * 7168
BODY = 37e9 - 2 * HEAD
ROUTED = 8 * EXPERT
KV_FP8 = 61 * (512 + 64) * 1  # bytes per token at FP8: 35,136
ATTN_DECODE = 61 * 128 * (2 * (512 + 64) + 2 * 512)  # FLOPs per (query, context) pair


def test_expert_split_and_mla_kv_copies():
    assert R1.expert_params == pytest.approx(EXPERT)
    assert R1.shared_params == pytest.approx(SHARED)
    # MLA's latent cannot be split by heads: every tensor-parallel GPU keeps all of it
    assert R1.kv_replication(8) == 8 and R1.kv_replication(1) == 1
    # Qwen3-VL has 4 KV heads: on 8 GPUs each KV head is kept twice
    assert find_model("qwen3-vl-235b-a22b").kv_replication(8) == 2
    assert find_model("llama3.1-8b").kv_replication(8) == 1  # 8 KV heads, one each
    tp8 = Deployment(B200, R1, Precision.FP4, tp=8, ep=8)
    dp8 = Deployment(B200, R1, Precision.FP4, tp=1, dp=8, ep=8)
    usable = 8 * 180e9 * 0.9
    # tp 8: one copy of the non-expert weights, each KV entry on all 8 GPUs
    assert tp8.weight_bytes == pytest.approx((SHARED + 256 * EXPERT) * 0.5)
    assert tp8.kv_capacity_tokens == int((usable - tp8.weight_bytes) // (KV_FP8 * 8))
    # dp 8: each GPU holds the non-expert weights, KV entries held once
    assert dp8.weight_bytes == pytest.approx((8 * SHARED + 256 * EXPERT) * 0.5)
    assert dp8.kv_capacity_tokens == int((usable - dp8.weight_bytes) // KV_FP8)
    assert dp8.kv_capacity_tokens > 7 * tp8.kv_capacity_tokens


def test_wide_expert_parallelism_holds_spare_expert_slots():
    # 256 experts on 72 GPUs: ceil(256 / 72) = 4 slots each, 288 in all (the layout of
    # TensorRT-LLM's expert-parallel load balancer)
    d = Deployment(GB300, R1, Precision.FP4, tp=1, dp=72, ep=72)
    assert d.expert_slots == 288
    assert d.weight_bytes == pytest.approx((72 * SHARED + 288 * EXPERT) * 0.5)


def _decode(n: int, ctx: float, d: Deployment) -> tuple[float, float, float]:
    """compute, memory and communication (ns at EFF) of a decode step, by hand, for a
    tp 1, dp g, ep g deployment of DeepSeek-R1 at FP4 on one scale-up domain of
    ``domain`` GPUs (the rest reached over the 50 GB/s scale-out network)."""
    g = d.dp
    tokens = n * (1 + d.spec_tokens)
    mean = tokens * 8 / g  # expert assignments per GPU
    imbalance = 1 + math.sqrt(2 * math.log(g) / mean)
    flops = (2 * BODY + 2 * ROUTED * (imbalance - 1) + 2 * HEAD) * tokens
    flops += ATTN_DECODE * ctx * (1 + d.spec_tokens)
    touched = 1 - (1 - 8 / 256) ** tokens
    weights = SHARED * 0.5 + 256 * EXPERT * 0.5 * touched / g  # per GPU
    kv = KV_FP8 * (ctx + tokens) / g
    peak = g * d.accelerator.tflops["fp4"] * 1e12  # FLOP/s of the replica
    compute = flops / peak * 1e9 / EFF.mfu
    memory = (weights + kv) / (d.accelerator.hbm_tb_s * 1e12) * 1e9 / EFF.mbu
    sent = 2 * tokens / g * 8 * 7168 * 2 * (g - 1) / g  # dispatch + combine, bytes
    out = (g - min(g, d.topo.domain)) / (g - 1)
    up = d.accelerator.scale_up_gb_s_bidir / 2 * 0.7  # B/ns
    # + TensorRT-LLM's measured dispatch + combine latency, 19 + 32 us a layer
    comm = 61 * (max(sent * (1 - out) / up, sent * out / (50 * 0.7)) + 51_000)
    return compute, memory, comm


@pytest.mark.parametrize("n, ctx", [(8, 8 * 1500), (256, 256 * 3000), (2048, 2048 * 900)])
def test_attention_data_parallel_expert_parallel_decode_step(n, ctx):
    d = Deployment(B200, R1, Precision.FP4, tp=1, dp=8, ep=8, efficiency=EFF,
                   topology=Topology(1, 8))
    c = CostModel(d).decode_cost(n, ctx)
    compute, memory, comm = _decode(n, ctx, d)
    assert c.compute_ns == pytest.approx(compute, abs=1)
    assert c.memory_ns == pytest.approx(memory, abs=1)
    assert c.comm_ns == pytest.approx(comm, abs=1)
    assert c.total_ns == pytest.approx(max(compute, memory) + comm, abs=2)


def test_per_sequence_overhead_is_the_busiest_attention_groups():
    # under attention data parallelism each of the dp ranks schedules and samples its own
    # sequences at the same time: 800 sequences on dp 8 cost 100 sequences' overhead, 801
    # the busiest rank's 101; a tensor-parallel replica (dp 1) pays for all of them
    eff = Efficiency(mfu=0.5, mbu=0.8, step_overhead_ns=1_000_000, seq_overhead_ns=2_000)
    dp8 = Deployment(B200, R1, Precision.FP4, tp=1, dp=8, ep=8, efficiency=eff,
                     topology=Topology(1, 8))
    tp8 = Deployment(B200, R1, Precision.FP4, tp=8, ep=8, efficiency=eff,
                     topology=Topology(1, 8))
    assert CostModel(dp8).decode_cost(800, 800 * 1000).overhead_ns == 1_000_000 + 2_000 * 100
    assert CostModel(dp8).decode_cost(801, 801 * 1000).overhead_ns == 1_000_000 + 2_000 * 101
    assert CostModel(tp8).decode_cost(800, 800 * 1000).overhead_ns == 1_000_000 + 2_000 * 800
    # a step with prefill chunks counts them as sequences too: 3 chunks + 13 decodes on dp 8
    c = CostModel(dp8).cost(300, 300 * 301 / 2, 0, 3, 13, 13 * 500)
    assert c.overhead_ns == 1_000_000 + 2_000 * 2
    # the engine's back-to-back decode loop charges the same (run_decode)
    e = ReplicaEngine(dp8)
    for i in range(801):
        e.submit(i, 100, 3 + i % 40)
    while not e.decode_only:
        e.advance()
    before = e.stats.breakdown_ns["overhead"]
    steps = e.stats.steps
    e.run_decode(0, 10**18)
    batches = e.stats.step_decodes[steps:]  # the sequences each decode step ran
    assert len(batches) > 10 and max(batches) > 100
    want = sum(1_000_000 + 2_000 * -(-n // 8) for n in batches)
    assert e.stats.breakdown_ns["overhead"] - before == pytest.approx(want)


def test_the_all_to_all_pays_scale_out_bandwidth_past_the_domain():
    # 16 GPUs in one expert-parallel group: inside a 72-GPU NVLink rack every token goes
    # over NVLink; across two 8-GPU HGX nodes 8 of the 15 other GPUs are over the network
    nvl = Deployment(GB300, R1, Precision.FP4, tp=1, dp=16, ep=16, efficiency=EFF,
                     topology=Topology(4, 4, scale_up=72))
    hgx = Deployment(B200, R1, Precision.FP4, tp=1, dp=16, ep=16, efficiency=EFF,
                     topology=Topology(2, 8, scale_up=8, scale_out_gb_s=50.0))
    n, ctx = 512, 512 * 2000
    sent = 2 * n / 16 * 8 * 7168 * 2 * 15 / 16
    up = 1800 / 2 * 0.7
    assert CostModel(nvl).decode_cost(n, ctx).comm_ns == pytest.approx(
        61 * (sent / up + 51_000), abs=1)
    assert CostModel(hgx).decode_cost(n, ctx).comm_ns == pytest.approx(
        61 * (max(sent * 7 / 15 / up, sent * 8 / 15 / 35.0) + 51_000), abs=1)
    _, _, comm = _decode(n, ctx, hgx)
    assert CostModel(hgx).decode_cost(n, ctx).comm_ns == pytest.approx(comm, abs=1)
    # the network's 35 B/ns against NVLink's 630 (the per-layer latencies are the same):
    # 155.9 against 61.9 us a layer, 2.5x longer all-to-alls, and the step waits for them
    assert CostModel(hgx).decode_cost(n, ctx).comm_ns > 2.4 * CostModel(nvl).decode_cost(
        n, ctx).comm_ns


def test_speculative_decoding_step_and_tokens_per_step():
    # MTP drafts 3 tokens; each accepted with 0.85 given the ones before: a step makes
    # 1 + 0.85 + 0.85^2 + 0.85^3 = 3.191625 tokens per sequence on average
    d = Deployment(B200, R1, Precision.FP4, tp=1, dp=8, ep=8, efficiency=EFF,
                   topology=Topology(1, 8), spec_tokens=3)
    assert d.tokens_per_step == pytest.approx(1 + 0.85 + 0.85 ** 2 + 0.85 ** 3)
    # the draft's 14e9 parameters are held too
    assert d.weight_bytes == pytest.approx((8 * SHARED + 256 * EXPERT + 14e9) * 0.5)
    n, ctx = 64, 64 * 2000
    c = CostModel(d).decode_cost(n, ctx)
    compute, memory, comm = _decode(n, ctx, d)  # 4 tokens per sequence through the model
    # plus 3 draft passes over 64 sequences: 1/61 of the body per token (the MTP layer)
    # and the output head; its weights read as 1/61 of the model's at 64 tokens plus the
    # head; its all-to-all 1/61 of the model's at 64 tokens
    imb = 1 + math.sqrt(2 * math.log(8) / (64 * 8 / 8))
    f_draft = (1 / 61 * (2 * BODY + 2 * ROUTED * (imb - 1)) + 2 * HEAD) * 64
    touched = 1 - (1 - 8 / 256) ** 64
    w_draft = 1 / 61 * (SHARED * 0.5 + 256 * EXPERT * 0.5 * touched / 8) + HEAD * 0.5
    compute += 3 * f_draft / (8 * 9000e12) * 1e9 / EFF.mfu
    memory += 3 * w_draft / 8e12 * 1e9 / EFF.mbu
    sent = 2 * 64 / 8 * 8 * 7168 * 2 * 7 / 8
    comm += 3 / 61 * 61 * (sent / (900 * 0.7) + 51_000)
    assert c.compute_ns == pytest.approx(compute, abs=2)
    assert c.memory_ns == pytest.approx(memory, abs=2)
    assert c.comm_ns == pytest.approx(comm, abs=2)


def test_speculative_decoding_finishes_a_request_in_fewer_steps():
    d = Deployment(B200, R1, Precision.FP4, tp=1, dp=8, ep=8, efficiency=EFF,
                   spec_tokens=3, policy=ServingPolicy(max_num_seqs=64))
    e = ReplicaEngine(d)
    e.submit(0, 100, 101)  # 100 tokens after the first: ceil(100 / 3.1916) = 32 steps
    o = e.advance()
    assert o.first == [0] and o.done == []
    steps = 0
    while e.has_work:
        o = e.advance()
        steps += 1
    assert steps == 32 and o.done == [0]
    assert e.tokens_out == 101


def test_run_decode_equals_stepping_for_moe_with_speculative_decoding():
    d = Deployment(GB300, R1, Precision.FP4, tp=1, dp=8, ep=8, efficiency=EFF,
                   spec_tokens=3, policy=ServingPolicy(max_num_seqs=512))
    reqs = [(100 + 37 * i % 900, 50 + 13 * i % 400) for i in range(200)]

    def fresh() -> ReplicaEngine:
        e = ReplicaEngine(d)
        for i, (a, b) in enumerate(reqs):
            e.submit(i, a, b)
        while not e.decode_only:  # prefill everything first
            e.advance()
        return e

    a = fresh()
    t_a, done_a = 0, []
    while a.has_work:
        o = a.advance()
        t_a += o.plan.cost.total_ns
        done_a += [(t_a, r) for r in o.done]
    b = fresh()
    t_b, done_b = b.run_decode(0, 1 << 62)
    assert t_b == t_a and done_b == done_a
    assert b.tokens_out == a.tokens_out
    assert b.stats.busy_ns == a.stats.busy_ns - sum(
        a.stats.step_ns[: len(a.stats.step_ns) - len(b.stats.step_ns)])


def test_expert_imbalance_fades_as_the_step_grows():
    d = Deployment(GB300, R1, Precision.FP4, tp=1, dp=72, ep=72, efficiency=EFF)
    cm = CostModel(d)
    # 2160 tokens: 2160 x 8 / 72 = 240 assignments per GPU on average; the busiest of 72
    # has about 240 + sqrt(2 ln 72 x 240) = 240 + 45.3: a factor 1.189
    assert cm.imbalance(2160) == pytest.approx(1 + math.sqrt(2 * math.log(72) / 240))
    assert cm.imbalance(72 * 8192) < 1.02
    assert CostModel(Deployment(B200, R1, Precision.FP4, tp=8, ep=1)).imbalance(10) == 1.0


ATTN_PREFILL = 61 * 128 * (2 * 192 + 2 * 128)  # FLOPs per (query, context) pair, unabsorbed


def test_a_prefill_under_attention_data_parallelism_costs_every_group_its_chunk():
    # dp 8: 64 decoding sequences over 64 x 2000 context tokens, and two new prompts of
    # 900 and 300 tokens, each on one attention group. Every group runs as many tokens as
    # the busiest (the MoE all-to-all is padded to it, TensorRT-LLM's "DP-padded MoE
    # workload"), which holds the 900-token prompt: the step runs 8 x 900 = 7200 prefill
    # tokens' linear layers and 8 x (900 x 901 / 2) pairs of attention, where the two
    # prompts alone are 1200 tokens and 405,450 + 45,150 pairs
    d = Deployment(B200, R1, Precision.FP4, tp=1, dp=8, ep=8, efficiency=EFF,
                   topology=Topology(1, 8))
    n, ctx = 64, 64 * 2000
    c = CostModel(d).step([(900, 0), (300, 0)], [2000] * n)
    run = 7200 + n
    imbalance = 1 + math.sqrt(2 * math.log(8) / (run * 8 / 8))
    linear = (2 * BODY + 2 * ROUTED * (imbalance - 1)) * run + 2 * HEAD * (n + 2)
    attn = ATTN_PREFILL * 8 * (900 * 901 / 2) + ATTN_DECODE * ctx
    peak = 8 * 9000e12
    touched = 1 - (1 - 8 / 256) ** (1200 + n)  # the weights the real tokens touch
    weights = SHARED * 0.5 + 256 * EXPERT * 0.5 * touched / 8
    kv = KV_FP8 * (ctx + 1200 + n) / 8  # context read, the new tokens written
    bw = 8.0e12
    sent = 2 * run / 8 * 8 * 7168 * 2 * 7 / 8
    comm = 61 * (sent / (1800 / 2 * 0.7) + 51_000)
    lin_ns, att_ns = linear / peak * 1e9 / 0.5, attn / peak * 1e9 / 0.5
    w_ns, kv_ns = weights / bw * 1e9 / 0.8, kv / bw * 1e9 / 0.8
    assert c.compute_ns == pytest.approx(lin_ns + att_ns, abs=1)
    assert c.memory_ns == pytest.approx(w_ns + kv_ns, abs=1)
    assert c.comm_ns == pytest.approx(comm, abs=1)
    assert c.total_ns == pytest.approx(max(lin_ns, w_ns) + max(att_ns, kv_ns) + comm, abs=3)
    # many prompts, more than one a group: the busiest holds at least its share, so the
    # step runs the prompts' own tokens (here 16 x 500 = 8000 > 8 x 500)
    many = CostModel(d).step([(500, 0)] * 16, [2000] * n)
    sixteen = CostModel(d).cost(8000, 16 * 500 * 501 / 2, 0, 16, n, ctx)
    assert many.compute_ns == sixteen.compute_ns
    # a tensor-parallel replica (dp 1) spreads every prompt over all its GPUs
    tp8 = Deployment(B200, R1, Precision.FP4, tp=8, ep=8, efficiency=EFF,
                     topology=Topology(1, 8))
    cm = CostModel(tp8)
    assert cm.step([(900, 0)], [2000] * n).compute_ns == cm.cost(
        900, 900 * 901 / 2, 0, 1, n, ctx).compute_ns


def _engine(balance: int | None, dp: int = 4) -> ReplicaEngine:
    d = Deployment(B200, R1, Precision.FP4, tp=1, dp=dp, ep=dp, efficiency=EFF,
                   topology=Topology(1, 8 if dp == 8 else dp),
                   policy=ServingPolicy(max_num_seqs=64, max_batched_tokens=8192,
                                        adp_balance_steps=balance))
    e = ReplicaEngine(d)
    for i in range(4):  # four long answers keep the replica decoding
        e.submit(i, 100, 1000)
    while not e.decode_only:
        e.advance()
    return e


def test_balanced_attention_groups_start_their_prefills_together():
    # with balancing (TensorRT-LLM's attention_dp_config enable_balance, timeout_iters) a
    # request that arrives while the replica decodes waits until every one of the dp 4
    # groups can start one, or until the hold has lasted its steps
    e = _engine(balance=5)
    for i in (10, 11, 12):
        e.submit(i, 200, 10)
    held = [e.advance() for _ in range(3)]
    assert all(o.plan.prefill_tokens == 0 and o.plan.limited_by == "balance" for o in held)
    e.submit(13, 200, 10)  # the fourth: one for each group, all four start at once
    o = e.advance()
    assert o.plan.prefill_tokens == 800 and len(o.admitted) == 4
    # the hold ends after its steps: three requests start on the sixth step
    e = _engine(balance=5)
    for i in (10, 11, 12):
        e.submit(i, 200, 10)
    steps = [e.advance() for _ in range(6)]
    assert [o.plan.prefill_tokens for o in steps] == [0, 0, 0, 0, 0, 600]
    # without balancing (0, and unset) each request starts on the step it arrives
    for balance in (0, None):
        e = _engine(balance=balance)
        e.submit(10, 200, 10)
        assert e.advance().plan.prefill_tokens == 200
