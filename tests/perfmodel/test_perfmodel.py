"""The performance model against numbers computed by hand from the data files and the
models' config.json figures."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tokenmark.errors import ConfigError
from tokenmark.perfmodel import (
    CostModel,
    Deployment,
    Efficiency,
    EventKind,
    Precision,
    ReplicaEngine,
    ServingPolicy,
    Topology,
    find_accelerator,
    find_model,
)

H200 = find_accelerator("H200")
L8B = find_model("llama3.1-8b")
# Llama-3.1-8B config.json: untied embeddings of 128256 x 4096
HEAD = 128256 * 4096
BODY = 8.03e9 - 2 * HEAD


def test_data_files_load_with_aliases():
    assert find_accelerator("h200 sxm") is H200 and H200.hbm_tb_s == 4.8
    assert find_accelerator("MI355X").tflops["fp8"] == 5000
    assert find_model("Llama-3.1-8B") is L8B and L8B.layers == 32
    assert find_model("llama3_1-8b") is L8B  # LoadGen's spelling
    assert find_model("llama2-70b-interactive-99") is find_model("llama2-70b-99")
    with pytest.raises(ConfigError, match="unknown accelerator 'H9000'"):
        find_accelerator("H9000")
    with pytest.raises(ConfigError, match="unknown model"):
        find_model("llama9")
    assert Precision.parse("NVFP4") is Precision.FP4
    with pytest.raises(ConfigError, match="unknown precision"):
        Precision.parse("int3")


def test_accelerators_added_for_the_published_results():
    l40s = find_accelerator("L40S")
    assert (l40s.hbm_gb, l40s.hbm_tb_s, l40s.tflops["fp8"]) == (48, 0.864, 733)
    assert find_accelerator("H100 NVL").hbm_gb == 94
    assert find_accelerator("GH200 144GB").hbm_tb_s == 4.9
    assert find_accelerator("Arc Pro B60").tflops["fp8"] == 0  # no FP8 tensor path
    assert find_accelerator("GB300").scale_up_domain == 72  # NVL72
    assert find_accelerator("H100").scale_up_domain == 8
    assert find_accelerator("B200").lowest_precision is Precision.FP4
    assert find_accelerator("H100").lowest_precision is Precision.FP8


@pytest.mark.parametrize(("bench", "hidden", "moe_inter", "moe_layers"), [
    ("mixtral-8x7b", 4096, 14336, 32),  # 8 experts in all 32 layers
    ("deepseek-r1", 7168, 2048, 58),  # first_k_dense_replace 3 of 61 layers
    ("qwen3-vl-235b-a22b", 4096, 1536, 94),
    ("gpt-oss-120b", 2880, 2880, 36),
])
def test_expert_size_derived_from_totals_matches_config(bench, hidden, moe_inter, moe_layers):
    # one routed expert over all MoE layers: gate, up and down projections
    from_config = 3 * hidden * moe_inter * moe_layers
    assert find_model(bench).expert_params == pytest.approx(from_config, rel=0.01)


def test_kv_cache_sizes():
    d = Deployment(H200, L8B)
    assert d.kv_bytes_per_token == 32 * 2 * 8 * 128 * 2  # GQA, bf16
    assert d.kv_capacity_tokens == int((141e9 * 0.9 - 8.03e9 * 2) // (32 * 2 * 8 * 128 * 2))
    r1 = find_model("deepseek-r1")
    assert r1.mla and r1.kv_values_per_token() == 61 * (512 + 64)
    # FP8 weights keep an FP8 KV cache by default
    assert Deployment(H200, L8B, Precision.FP8).kv_bytes_per_token == 32 * 2 * 8 * 128


def test_moe_weights_read_grow_with_batch():
    mix = find_model("mixtral-8x7b")
    # one token touches k experts: exactly the active parameters
    assert mix.weights_read(1) == pytest.approx(mix.active_params)
    assert mix.weights_read(10_000) == pytest.approx(mix.total_params, rel=1e-6)
    assert mix.weights_read(1) < mix.weights_read(4) < mix.weights_read(64)


def test_decode_step_is_memory_bound_with_hand_computed_time():
    eff = Efficiency(mfu=0.5, mbu=0.8, step_overhead_ns=1_000_000)
    cost = CostModel(Deployment(H200, L8B, efficiency=eff)).step([], [1000] * 64)
    kv = 32 * 2 * 8 * 128 * 2
    bytes_ = 8.03e9 * 2 + kv * 64 * 1000 + kv * 64
    assert cost.memory_ns == int(bytes_ / (4.8e12 * 0.8) * 1e9)
    # body and output head for each of the 64 tokens, plus QK and AV over 1000 tokens
    flops = 2 * (BODY + HEAD) * 64 + 4 * 32 * 32 * 128 * 64 * 1000
    assert cost.compute_ns == int(flops / (989e12 * 0.5) * 1e9)
    assert cost.binding == "memory"
    assert cost.total_ns == int(bytes_ / (4.8e12 * 0.8) * 1e9 + 1_000_000)
    split = cost.breakdown()
    assert split["prefill_compute"] == split["decode_compute"] == 0
    assert sum(split.values()) == pytest.approx(cost.total_ns, abs=2)
    big = CostModel(Deployment(H200, L8B, efficiency=eff)).step([(8192, 0)], [])
    assert big.binding == "compute" and big.breakdown()["prefill_compute"] > 0


def test_serial_fraction_adds_the_unhidden_share_of_the_shorter_side():
    base = Efficiency(mfu=0.5, mbu=0.8, step_overhead_ns=1_000_000)
    half = replace(base, serial_fraction=0.5)
    overlapped = CostModel(Deployment(H200, L8B, efficiency=base)).step([], [1000] * 64)
    cost = CostModel(Deployment(H200, L8B, efficiency=half)).step([], [1000] * 64)
    # same compute and memory times as the hand-computed decode step above; the step
    # waits for memory plus half the (shorter) compute time
    assert (cost.compute_ns, cost.memory_ns) == (overlapped.compute_ns, overlapped.memory_ns)
    kv = 32 * 2 * 8 * 128 * 2
    memory = (8.03e9 * 2 + kv * 64 * 1000 + kv * 64) / (4.8e12 * 0.8) * 1e9
    compute = (2 * (BODY + HEAD) * 64 + 4 * 32 * 32 * 128 * 64 * 1000) / (989e12 * 0.5) * 1e9
    assert cost.total_ns == int(memory + 0.5 * compute + 1_000_000)
    assert sum(cost.breakdown().values()) == pytest.approx(cost.total_ns, abs=3)
    assert cost.breakdown()["decode_compute"] == pytest.approx(0.5 * compute, abs=2)
    # 1: no overlap at all, the two times add up
    none = replace(base, serial_fraction=1.0)
    both = CostModel(Deployment(H200, L8B, efficiency=none)).step([], [1000] * 64)
    assert both.total_ns == int(memory + compute + 1_000_000)
    assert CostModel(Deployment(H200, L8B, efficiency=none)).decode_cost(64, 64_000) == both


def test_linear_layers_and_attention_each_take_their_own_roofline():
    # Llama-2-70B at FP8 on one H200 (KV cache FP8), 512 sequences decoding over 500
    # tokens of context each: the matmuls are compute-bound, attention is bound by its
    # KV-cache reads, and the two run one after the other in every layer, so the step
    # takes the sum of the two bounds (the roofline of the totals would hide the KV
    # reads behind the matmuls' compute)
    l70 = find_model("llama2-70b-99")
    eff = Efficiency(mfu=0.7, mbu=0.8, step_overhead_ns=1_000_000)
    cost = CostModel(Deployment(H200, l70, Precision.FP8, efficiency=eff)).step(
        [], [500] * 512)
    head = 32000 * 8192
    body = 69.0e9 - 2 * head
    peak = 1979e12 * 0.7  # FP8 dense
    bw = 4.8e12 * 0.8
    linear = 2 * (body + head) * 512 / peak * 1e9  # 61.5 ms
    weights = 69.0e9 / bw * 1e9  # 18.0 ms
    attn = 4 * 80 * 64 * 128 * 512 * 500 / peak * 1e9  # 7.7 ms
    kv = 80 * 2 * 8 * 128 * (512 * 500 + 512) / bw * 1e9  # 11.0 ms
    assert (linear > weights, kv > attn) == (True, True)
    assert cost.compute_ns == int(linear + attn)
    assert cost.memory_ns == int(weights + kv)
    assert cost.total_ns == pytest.approx(linear + kv + 1_000_000, abs=2)
    assert cost.binding == "compute"
    split = cost.breakdown()
    assert sum(split.values()) == pytest.approx(cost.total_ns, abs=3)
    # the KV reads not hidden behind attention's compute are memory time
    assert split["kv_memory"] + split["weights_memory"] == pytest.approx(kv - attn, abs=3)
    # the engine costs the same step the same way, and its fast decode loop the next
    # (prompts prefilled elsewhere: they arrive with 500 tokens of context)
    eng = ReplicaEngine(Deployment(H200, l70, Precision.FP8, efficiency=eff,
                                   policy=ServingPolicy(max_num_seqs=1024)))
    for i in range(512):
        eng.submit(i, 499, 10, prefilled=True)
    assert eng.advance().plan.cost == cost
    before = eng.stats.busy_ns
    eng.run_decode(0, 1)  # one step, every context one token longer
    step = eng.stats.busy_ns - before
    kv2 = 80 * 2 * 8 * 128 * (512 * 501 + 512) / bw * 1e9
    assert step == pytest.approx(linear + kv2 + 1_000_000, abs=2)


def test_prefill_chunk_flops_by_hand():
    eff = Efficiency(mfu=1.0, mbu=1.0, step_overhead_ns=0)
    cost = CostModel(Deployment(H200, L8B, efficiency=eff)).step([(100, 50)], [])
    # 100 new tokens after 50 cached: pairs = 100*50 + 100*101/2; one logit
    pairs = 100 * 50 + 100 * 101 / 2
    flops = 2 * BODY * 100 + 2 * HEAD + 4 * 32 * 32 * 128 * pairs
    assert cost.compute_ns == int(flops / 989e12 * 1e9)


def test_tensor_parallel_all_reduce_by_hand():
    l70 = find_model("llama2-70b-99")
    eff = Efficiency(link_efficiency=0.5, allreduce_latency_ns=10_000)
    d = Deployment(H200, l70, Precision.FP8, tp=2, efficiency=eff)
    cost = CostModel(d).step([], [500] * 32)
    # 2 all-reduces per layer of 32 tokens x 8192 bf16 values; ring: 2(n-1)/n of the
    # bytes over one direction of the 900 GB/s NVLink at 50%
    per_op = 2 * (2 - 1) / 2 * 32 * 8192 * 2 / (450 * 0.5)
    assert cost.comm_ns == int(80 * 2 * (per_op + 10_000))
    assert CostModel(Deployment(H200, L8B)).step([], [500] * 32).comm_ns == 0
    # a tensor-parallel group wider than its scale-up domain pays the scale-out network
    wide = Deployment(H200, l70, Precision.FP8, tp=16, efficiency=eff,
                      topology=Topology(nodes=2, per_node=8, scale_out_gb_s=50))
    assert wide.tp_spans_domains
    per_op_out = 2 * 15 / 16 * 32 * 8192 * 2 / (50 * 0.5)
    assert CostModel(wide).step([], [500] * 32).comm_ns == int(80 * 2 * (per_op_out + 10_000))


def test_a_model_level_divides_every_step_time_but_communication():
    # the hand-computed decode step above, for a model whose kernels run 1.25x as fast
    # as its group's (its level): compute, memory and the step overhead over 1.25
    eff = Efficiency(mfu=0.5, mbu=0.8, step_overhead_ns=1_000_000, seq_overhead_ns=4_000)
    fast = eff.at_speed(1.25)
    cost = CostModel(Deployment(H200, L8B, efficiency=fast)).step([], [1000] * 64)
    kv = 32 * 2 * 8 * 128 * 2
    memory = (8.03e9 * 2 + kv * 64 * 1000 + kv * 64) / (4.8e12 * 0.8 * 1.25) * 1e9
    compute = (2 * (BODY + HEAD) * 64 + 4 * 32 * 32 * 128 * 64 * 1000) / (989e12 * 0.5 * 1.25) * 1e9
    assert cost.memory_ns == int(memory)
    assert cost.compute_ns == int(compute)
    assert cost.overhead_ns == int((1_000_000 + 4_000 * 64) / 1.25)
    assert cost.total_ns == int(memory + (1_000_000 + 4_000 * 64) / 1.25)
    # the all-reduces of the tensor-parallel test below are the links' time: unchanged
    l70 = find_model("llama2-70b-99")
    links = Efficiency(link_efficiency=0.5, allreduce_latency_ns=10_000)
    per_op = 2 * (2 - 1) / 2 * 32 * 8192 * 2 / (450 * 0.5)
    for speed in (0.5, 2.0):
        d = Deployment(H200, l70, Precision.FP8, tp=2, efficiency=links.at_speed(speed))
        assert CostModel(d).step([], [500] * 32).comm_ns == int(80 * 2 * (per_op + 10_000))
    # the cap on compute efficiency still holds; speed 1 is the group's parameters
    assert Efficiency(mfu=0.6, size_exponent=1.0).at_speed(1.5).mfu_for(16384) == 0.98
    assert eff.at_speed(1.0) is eff
    with pytest.raises(ValueError, match="positive"):
        eff.at_speed(0.0)


def test_size_exponent_scales_compute_efficiency():
    eff = Efficiency(mfu=0.6, size_exponent=1.0)
    assert eff.mfu_for(8192) == pytest.approx(0.6)
    assert eff.mfu_for(4096) == pytest.approx(0.3)
    assert eff.mfu_for(16384) == pytest.approx(0.98)  # capped


def test_engine_token_events_and_lifecycle():
    e = ReplicaEngine(Deployment(H200, L8B))
    e.submit(1, prompt_tokens=100, output_tokens=3)
    kinds = []
    while e.has_work:
        plan, events = e.step()
        kinds.append([ev.kind for ev in events])
    assert kinds == [[EventKind.FIRST], [EventKind.TOKEN], [EventKind.TOKEN, EventKind.DONE]]
    assert e.tokens_out == 3 and e.kv_usage == 0


def test_chunked_prefill_budget_and_batch_caps():
    pol = ServingPolicy(max_num_seqs=2, max_batched_tokens=64)
    e = ReplicaEngine(Deployment(H200, L8B, policy=pol))
    e.submit(1, 100, 2)
    e.submit(2, 10, 2)
    e.submit(3, 10, 2)
    plan, events = e.step()
    assert plan.prefill_tokens == 64 and events == []  # request 1 gets the whole budget
    assert plan.limited_by == "budget"
    plan, events = e.step()  # 36 more for request 1, then request 2 (10 tokens)
    assert plan.prefill_tokens == 46 and plan.limited_by == "max_num_seqs"
    assert {ev.rid for ev in events} == {1, 2}


def test_kv_capacity_limits_admission_and_rejects_impossible_requests():
    d = Deployment(H200, L8B)
    cap = d.kv_capacity_tokens
    e = ReplicaEngine(d)
    e.submit(1, cap - 10, 5)
    e.submit(2, 100, 5)
    e.submit(3, cap + 1, 1)
    plan, _ = e.step()
    assert plan.limited_by == "kv" and e.num_waiting == 2
    seen = []
    while e.has_work:
        _, events = e.step()
        seen += [(ev.rid, ev.kind) for ev in events]
    assert (3, EventKind.REJECTED) in seen  # larger than the whole cache: can never run
    assert (2, EventKind.DONE) in seen and (1, EventKind.DONE) in seen
    # request 2 waited for request 1's KV to be freed
    assert seen.index((1, EventKind.DONE)) < seen.index((2, EventKind.FIRST))


def _drain(e: ReplicaEngine) -> list[tuple[int, int, str]]:
    """(time, rid, kind) of every first token and completion, stepping with advance."""
    t = 0
    out = []
    while e.has_work:
        o = e.advance()
        t += o.plan.cost.total_ns
        out += [(t, r, "first") for r in o.first] + [(t, r, "done") for r in o.done]
    return out


@pytest.mark.parametrize("serial", [0.0, 0.7])
def test_run_decode_equals_stepping_one_step_at_a_time(serial):
    def loaded() -> ReplicaEngine:
        e = ReplicaEngine(Deployment(H200, L8B, Precision.FP8,
                                     efficiency=Efficiency(serial_fraction=serial)))
        for i in range(40):
            e.submit(i, 200 + 13 * i, 5 + 7 * i)
        while not e.decode_only:  # admit and prefill everything
            e.advance()
        return e

    a, b = loaded(), loaded()
    slow = [(t, r) for t, r, k in _drain(a) if k == "done"]
    t_end, fast = b.run_decode(0, 1 << 62)
    assert fast == slow and not b.has_work
    assert a.stats.busy_ns == b.stats.busy_ns and a.stats.steps == b.stats.steps
    assert a.stats.decode_tokens == b.stats.decode_tokens
    for k, v in a.stats.breakdown_ns.items():
        # the stepped path rounds each part to whole ns: at most 2 ns a step apart
        assert b.stats.breakdown_ns[k] == pytest.approx(v, abs=2 * a.stats.steps)
    # a horizon stops it before the first step that would start at or after it
    c = loaded()
    before = c.steps
    first_step = c.cost.decode_cost(c._n_dec, c._ctx).total_ns
    end, _ = c.run_decode(0, first_step)
    assert end == first_step and c.steps == before + 1


def test_beam_search_reserves_and_decodes_every_beam():
    pol = ServingPolicy(beams=4)
    d = Deployment(H200, L8B, policy=pol)
    e = ReplicaEngine(d)
    e.submit(1, 100, 3)
    o = e.advance()
    assert o.first == [1] and e._reserved == 100 + 4 * 3
    o = e.advance()
    assert o.plan.decode_tokens == 4 and o.plan.batch == 4
    o = e.advance()
    assert o.done == [1] and e._reserved == 0 and e.tokens_out == 1 + 4 + 4


def test_disaggregated_engines_split_prefill_and_decode():
    d = Deployment(H200, L8B)
    pre = ReplicaEngine(d, prefill_only=True)
    pre.submit(1, 500, 4)
    o = pre.advance()
    assert o.first == [1] and o.done == [1] and pre._reserved == 0
    dec = ReplicaEngine(d)
    dec.submit(1, 500, 4, prefilled=True)
    decodes = []
    while dec.has_work:
        o = dec.advance()
        decodes.append(o.plan.decode_tokens)
        assert o.plan.prefill_tokens == 0 and o.first == []
    assert decodes == [1, 1, 1] and o.done == [1]  # tokens 2..4; the first came with prefill


def test_deployments_that_cannot_run():
    with pytest.raises(ConfigError, match=r"needs 138 GB of weights; 1 x H200"):
        ReplicaEngine(Deployment(H200, find_model("llama2-70b-99"), Precision.BF16))
    # FP4 weights on Hopper (gpt-oss-120b's MXFP4 on H200) are weight-only: FP8 matmuls
    assert Deployment(find_accelerator("H100"), L8B, Precision.FP4).compute_dtype is Precision.FP8
    assert Deployment(H200, L8B, Precision.INT8).compute_dtype is Precision.FP8
    assert Deployment(find_accelerator("Arc Pro B60"), L8B,
                      Precision.INT8).compute_dtype is Precision.INT8  # its XMX INT8 rate
    fp4_only = replace(find_accelerator("VR200"), tflops={"fp4": 50000.0})
    with pytest.raises(ConfigError, match="VR200 computes no format as wide as bf16"):
        Deployment(fp4_only, L8B, Precision.BF16).check()
    with pytest.raises(ConfigError, match="expert parallelism 2 needs a mixture-of-experts"):
        Deployment(H200, L8B, ep=2, tp=2).check()
    mix = find_model("mixtral-8x7b")
    with pytest.raises(ConfigError,
                       match="expert parallelism 3 does not divide the 4 accelerators of a"):
        Deployment(H200, mix, tp=4, ep=3).check()
    with pytest.raises(ConfigError, match="pipeline parallelism 40 exceeds"):
        Deployment(H200, L8B, pp=40).check()
    with pytest.raises(ConfigError, match=r"2 replicas x tp 2 x dp 1 x pp 1 = 4 accelerators, but "
                                          r"the topology has 8 \(1 nodes x 8\)"):
        Deployment(H200, L8B, tp=2, replicas=2, topology=Topology(1, 8)).check()
    with pytest.raises(ConfigError, match="needs at least one decode replica"):
        replace(Deployment(H200, L8B, replicas=2),
                policy=ServingPolicy(prefill_replicas=2)).check()
    label = Deployment(H200, L8B).label
    assert label == "emulated H200 x1, llama3.1-8b, bf16"
