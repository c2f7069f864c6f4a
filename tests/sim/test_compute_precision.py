"""The precision a deployment's matmuls run at: gpt-oss-120b's MXFP4 experts are
multiplied with FP8 activations on an FP4 path (W4A8) and dequantised to BF16 without
one (W4A16), while NVFP4 checkpoints (DeepSeek-R1, Llama) run W4A4. Step compute times
checked against the accelerators' dense figures in accelerators.csv by hand."""

from __future__ import annotations

import pickle
from dataclasses import replace

import pytest

from tokenmark.perfmodel import Deployment, Efficiency
from tokenmark.perfmodel.cost import CostModel
from tokenmark.perfmodel.hardware import Precision, find_accelerator, find_model

OSS = find_model("gpt-oss-120b")
R1 = find_model("deepseek-r1")


@pytest.mark.parametrize(("acc", "oss", "r1"), [
    ("B300", Precision.FP8, Precision.FP4),
    ("GB300", Precision.FP8, Precision.FP4),
    ("MI355X", Precision.FP8, Precision.FP4),
    ("H200", Precision.BF16, Precision.FP8),  # no FP4 path: W4A16 for gpt-oss
])
def test_the_matmul_precision_of_fp4_weights(acc: str, oss: Precision, r1: Precision) -> None:
    a = find_accelerator(acc)
    assert Deployment(a, OSS, Precision.FP4).compute_dtype is oss
    assert Deployment(a, R1, Precision.FP4).compute_dtype is r1
    # wider weights are untouched by the FP4 rule
    assert Deployment(a, OSS, Precision.FP8).compute_dtype is Precision.FP8


@pytest.mark.parametrize(("acc", "ratio"), [
    ("B300", 13500 / 4500),  # FP4 and FP8 dense TFLOPS of accelerators.csv
    ("MI355X", 10000 / 5000),
])
def test_a_prefill_step_costs_the_fp8_rate(acc: str, ratio: float) -> None:
    """A 4096-token prefill chunk: compute at 100% efficiency is its FLOPs over the dense
    peak, so W4A8 takes FP4/FP8 peak times as long as W4A4 would."""
    a = find_accelerator(acc)
    oss = replace(OSS, dense_precision=None)  # every weight FP4: the activations' rule alone
    w4a8 = CostModel(Deployment(a, oss, Precision.FP4)).components(
        4096, 4096 * 4097 / 2, 0.0, 1, 0, 0.0)
    w4a4 = CostModel(Deployment(a, replace(oss, fp4_activations=None), Precision.FP4)
                     ).components(4096, 4096 * 4097 / 2, 0.0, 1, 0, 0.0)
    assert w4a8.compute0_ns / w4a4.compute0_ns == pytest.approx(ratio, rel=1e-12)
    assert w4a8.memory0_ns == pytest.approx(w4a4.memory0_ns, rel=1e-12)  # same bytes
    # by hand: FLOPs = 2 x body x tokens + 2 x vocab x hidden (the chunk's last token)
    # + attention pairs; at FP8 4500 TFLOPS on B300
    if acc == "B300":
        m = OSS
        flops = (2 * m.body_params * 4096 + 2 * m.head_params
                 + m.attention_flops_per_pair(decode=False) * 4096 * 4097 / 2)
        assert w4a8.compute0_ns == pytest.approx(flops / 4500e12 * 1e9, rel=1e-9)


def test_pickles_of_models_without_the_rule_are_unchanged() -> None:
    """Calibration caches key on pickled deployments: a model without fp4_activations
    pickles as its fields before the field existed, and both forms load back."""
    state = R1.__getstate__()
    assert len(state) == len(OSS.__getstate__()) - 2  # no fp4_activations, dense_precision
    assert pickle.loads(pickle.dumps(R1)) == R1
    assert pickle.loads(pickle.dumps(OSS)) == OSS


def test_gpt_oss_keeps_its_dense_weights_in_bf16() -> None:
    """gpt-oss's checkpoint quantises only the experts to MXFP4 (config.json
    modules_to_not_convert: attention, router, embeddings, head): a B300 deployment at
    FP4 reads those weights at 2 bytes and runs their matmuls at BF16 (2250 dense
    TFLOPS) while the experts run W4A8 at FP8 (4500). By hand from models.csv:
    116.83e9 total, 5.709e9 active (embedding and head counted), 128 experts of which 4
    a token."""
    a = find_accelerator("B300")
    d = Deployment(a, OSS, Precision.FP4)
    assert (d.dense_dtype, d.dense_compute_dtype) == (Precision.BF16, Precision.BF16)
    x = (116.83e9 - 5.709e9) / (128 - 4)  # one expert's parameters over the layers
    shared = 116.83e9 - 128 * x
    head = 201088 * 2880
    assert d.weight_bytes == pytest.approx(shared * 2 + 128 * x * 0.5, rel=1e-9)
    # one decode step of 64 sequences at no context, at 100% efficiency
    c = CostModel(d).components(0, 0.0, 0.0, 0, 64, 0.0)
    routed = 2 * 4 * x
    flops_fp8 = routed * 64
    flops_bf16 = (2 * (5.709e9 - 2 * head) - routed + 2 * head) * 64
    assert c.compute0_ns == pytest.approx(
        (flops_fp8 / 4500e12 + flops_bf16 / 2250e12) * 1e9, rel=1e-9)
    touched = 1 - (1 - 4 / 128) ** 64
    kv = 64 * OSS.kv_values_per_token() * d.kv_dtype.bytes  # the new tokens' writes
    assert c.memory0_ns == pytest.approx(
        (shared * 2 + touched * 128 * x * 0.5 + kv) / 8e12 * 1e9, rel=1e-9)
    # a model without the rule (NVFP4-style: everything FP4) reads a quarter as much
    plain = Deployment(a, replace(OSS, dense_precision=None), Precision.FP4)
    assert plain.dense_dtype is Precision.FP4
    assert plain.weight_bytes == pytest.approx(116.83e9 * 0.5, rel=1e-9)
    # FP8 or BF16 deployments are not widened further
    assert Deployment(a, OSS, Precision.BF16).dense_dtype is Precision.BF16


def test_an_accelerator_without_a_wider_figure_keeps_the_rest_precision() -> None:
    """An accelerator listing FP4 only: gpt-oss's BF16 weights and Qwen3-VL's BF16 encoder
    run at the FP4 figure there (the table has no other), and still read 2 bytes."""
    vr = replace(find_accelerator("VR200"), tflops={"fp4": 50000.0})
    d = Deployment(vr, OSS, Precision.FP4)
    assert d.dense_dtype is Precision.BF16
    assert d.dense_compute_dtype is Precision.FP4
    CostModel(d).components(128, 128 * 129 / 2, 0.0, 1, 8, 1000.0)  # no error
    qwen = find_model("qwen3-vl-235b-a22b")
    c = CostModel(Deployment(vr, qwen, Precision.FP4, tp=4, ep=4))
    assert c.cost(1000, 1000 * 1001 / 2, 0.0, 1, 0, 0.0, encoder_flops=1e12).compute_ns > 0


def test_vr200s_bf16_encoder_runs_at_its_bf16_figure() -> None:
    """VR200's BF16 figure (accelerators.csv: 8,333 dense TFLOPS, half its 16,667 FP8
    from NVIDIA's 1.2 EF FP8 per NVL72 rack) is what Qwen3-VL's BF16 vision tower runs
    at under FP4 weights, not the 50,000 FP4 figure: 1e15 encoder FLOPs on a tp 4
    replica at 100% efficiency take 1e15 / (4 x 8333e12) s."""
    vr = find_accelerator("VR200")
    assert vr.tflops_at(Precision.BF16) == 8333 and vr.tflops_at(Precision.FP8) == 16667
    qwen = find_model("qwen3-vl-235b-a22b")
    one = Efficiency(mfu=1.0, mbu=1.0, step_overhead_ns=0, seq_overhead_ns=0)
    c = CostModel(Deployment(vr, qwen, Precision.FP4, tp=4, ep=4, efficiency=one))
    args = (1000, 1000 * 1001 / 2, 0.0, 1, 0, 0.0)
    extra = c.cost(*args, encoder_flops=1e15).compute_ns - c.cost(*args).compute_ns
    assert extra == pytest.approx(1e15 / (4 * 8333e12) * 1e9, rel=1e-6)


def test_gpt_oss_step_from_its_config_shapes() -> None:
    """gpt-oss-120b's per-token matmul work, by hand from its config.json (36 layers,
    hidden 2880, 64 query heads and 8 KV heads of 64 dims, 128 experts of intermediate
    2880, 4 a token, vocab 201088), not from the model card's active count (which leaves
    the input embedding out): attention projections q 2880 x 4096, k and v 2880 x 512
    each, o 4096 x 2880, and the router 2880 x 128, per layer, run at BF16; 4 SwiGLU
    experts of 3 x 2880 x 2880 per layer run W4A8 at FP8. A 4096-token prefill chunk on
    B200 at 100% efficiency takes their FLOPs over 2250 (BF16) and 4500 (FP8) dense
    TFLOPS, plus the output head for the chunk's last token (BF16) and attention over
    the chunk's pairs (the full-attention half of the layers) at FP8. With the card's
    5.1e9 taken as including the embedding, the BF16 projections came out a third of
    their size and the step 21% short."""
    a = find_accelerator("B200")
    layers, h = 36, 2880
    attn = layers * (h * 4096 + 2 * h * 512 + 4096 * h)  # 0.955e9
    router = layers * h * 128
    experts = layers * 4 * 3 * h * h  # 3.58e9
    head = 201088 * h
    n = 4096
    pairs = n * (n + 1) / 2
    pair_flops = 4 * (layers // 2) * 64 * 64  # QK and AV over the full-attention layers
    by_hand = (2 * (attn + router) * n / 2250e12 + 2 * head / 2250e12
               + (2 * experts * n + pair_flops * pairs) / 4500e12) * 1e9
    c = CostModel(Deployment(a, OSS, Precision.FP4)).components(n, pairs, 0.0, 1, 0, 0.0)
    assert c.compute0_ns == pytest.approx(by_hand, rel=0.01)
    # the weights one accelerator reads: every expert (a 4096-token chunk touches all)
    # at 4.25 bits (MXFP4 with its scales, counted as 4 here) and the rest at BF16
    assert c.memory0_ns == pytest.approx(
        ((attn + router + 2 * head) * 2 + 128 * layers * 3 * h * h * 0.5
         + n * OSS.kv_values_per_token()) / 8e12 * 1e9, rel=0.01)


def test_int8_weights_run_int8_where_the_accelerator_has_an_int8_rate() -> None:
    """Arc Pro B60 lists 197 dense INT8 TOPS (160 XMX engines), twice its BF16 98.5:
    Llama-3.1-8B's INT8 rows run W8A8 there, so a 4096-token prefill chunk at 100%
    efficiency takes its FLOPs over 197e12, not over the BF16 figure; an accelerator
    without an INT8 figure still widens INT8 weights to its narrowest float path."""
    b60 = find_accelerator("Arc Pro B60")
    assert b60.tflops_at(Precision.INT8) == 197
    l8b = find_model("llama3.1-8b")
    d = Deployment(b60, l8b, Precision.INT8)
    assert d.compute_dtype is Precision.INT8
    n = 4096
    c = CostModel(d).components(n, n * (n + 1) / 2, 0.0, 1, 0, 0.0)
    flops = (2 * l8b.body_params * n + 2 * l8b.head_params
             + 4 * 32 * 32 * 128 * n * (n + 1) / 2)
    assert c.compute0_ns == pytest.approx(flops / 197e12 * 1e9, rel=1e-9)
    assert Deployment(find_accelerator("H200"), l8b, Precision.INT8).compute_dtype \
        is Precision.FP8
    # INT4 weights run W4A8 on that INT8 rate (Intel's v5.1 UINT4 rows and v6.0 INT8
    # rows on the same 8 x B60 system: 3,009 and 3,271 tokens/s on Llama-2-70B), and
    # widen to the narrowest float path where there is no INT8 rate (H200: FP8)
    d4 = Deployment(b60, l8b, Precision.INT4)
    assert d4.compute_dtype is Precision.INT8
    assert CostModel(d4).components(n, n * (n + 1) / 2, 0.0, 1, 0, 0.0).compute0_ns == \
        pytest.approx(flops / 197e12 * 1e9, rel=1e-9)
    assert Deployment(find_accelerator("H200"), l8b, Precision.INT4).compute_dtype \
        is Precision.FP8
    from tokenmark.sim.plan import ClusterSpec, plan_deployment
    notes = plan_deployment(ClusterSpec("Arc Pro B60", "llama3.1-8b", precision="int4"),
                            870.0, 128.0).notes
    assert any("integer matrix path (W4A8) computed at int8" in n for n in notes), notes
    notes = plan_deployment(ClusterSpec("H200", "llama3.1-8b", precision="int4"), 870.0,
                            128.0).notes
    assert any("weight-only quantisation computed at fp8" in n for n in notes), notes
    # gpt-oss's MXFP4 experts on B60 (no FP4 or FP8 path) still dequantise to BF16
    assert Deployment(b60, OSS, Precision.FP4).compute_dtype is Precision.BF16
    assert "int8" not in find_accelerator("B200").tflops  # no figure: no key
