"""The performance model against numbers computed by hand from the data files."""

from __future__ import annotations

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
    find_accelerator,
    find_model,
)

H200 = find_accelerator("H200")
L8B = find_model("llama3.1-8b")


def test_data_files_load_with_aliases():
    assert find_accelerator("h200 sxm") is H200 and H200.hbm_tb_s == 4.8
    assert find_accelerator("MI355X").tflops["fp8"] == 5000
    assert find_model("Llama-3.1-8B") is L8B and L8B.layers == 32
    with pytest.raises(ConfigError, match="unknown accelerator 'H9000'"):
        find_accelerator("H9000")
    with pytest.raises(ConfigError, match="unknown model"):
        find_model("llama9")


def test_kv_cache_sizes():
    d = Deployment(H200, L8B)
    assert d.kv_bytes_per_token == 32 * 2 * 8 * 128 * 2  # GQA, bf16
    assert d.kv_capacity_tokens == int((141e9 * 0.9 - 8.03e9 * 2) // (32 * 2 * 8 * 128 * 2))
    r1 = find_model("deepseek-r1")
    assert r1.mla and r1.kv_values_per_token() == 61 * (512 + 64)


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
    flops = 2 * 8.03e9 * 64 + 4 * 32 * 32 * 128 * 64 * 1000
    assert cost.compute_ns == int(flops / (989e12 * 0.5) * 1e9)
    assert cost.binding == "memory"
    assert cost.total_ns == int(cost.memory_ns + 1_000_000 + (bytes_ / (4.8e12 * 0.8) * 1e9
                                                             - cost.memory_ns))
    big = CostModel(Deployment(H200, L8B, efficiency=eff)).step([(8192, 0)], [])
    assert big.binding == "compute"


def test_tensor_parallel_adds_communication():
    l70 = find_model("llama2-70b-99")
    one = CostModel(Deployment(H200, l70, Precision.FP8, tp=2)).step([], [500] * 32)
    assert one.comm_ns > 0
    single = CostModel(Deployment(H200, L8B)).step([], [500] * 32)
    assert single.comm_ns == 0


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


def test_deployments_that_cannot_run():
    with pytest.raises(ConfigError, match=r"needs 138 GB of weights; 1 x H200"):
        ReplicaEngine(Deployment(H200, find_model("llama2-70b-99"), Precision.BF16))
    with pytest.raises(ConfigError, match="H100 has no dense fp4"):
        Deployment(find_accelerator("H100"), L8B, Precision.FP4).check()
    label = Deployment(H200, L8B).label
    assert label == "emulated H200 x1, llama3.1-8b, bf16"
