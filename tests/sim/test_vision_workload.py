"""Vision-language prefill in the simulator: a Qwen3-VL request's image becomes prompt
tokens and vision-encoder work by the emulator's rule (perfmodel/vision.py), and the
step that starts its prefill pays for both; numbers computed by hand from the data
files (vision.csv, models.csv, accelerators.csv, workloads.csv)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tokenmark.perfmodel import (
    Deployment,
    Efficiency,
    Precision,
    ReplicaEngine,
    find_accelerator,
    find_model,
)
from tokenmark.perfmodel.outputs import OutputPlanner, output_model
from tokenmark.perfmodel.vision import vision_encoder
from tokenmark.records import Message, Sample
from tokenmark.sim.fit import predict_rate
from tokenmark.sim.predict import offline_trace
from tokenmark.sim.run import request_arrays
from tokenmark.sim.search import replica_offline_rate
from tokenmark.sim.workloads import image_arrays, image_load, synthetic_dataset
from tokenmark.workload.images import ImageSize, data_url, generate_png, sniff

QWEN = "qwen3-vl-235b-a22b"
# One 2048 x 2048 product image: a multiple of 32 on both sides and
# below max_pixels, so it stays; 16 x 16 patches: 128 x 128 = 16384; 2 x 2 merged:
# 4096 image tokens, plus <|vision_start|> and <|vision_end|>.
P = 16384
TOKENS = 4096 + 2
# The ViT (vision.csv): depth 27, hidden 1152, intermediate 4304, 4 mergers into the
# language model's 4096, temporal patch 2 of 16 x 16 pixels x 3 colours.
H, INTER, D = 1152, 4304, 27
EMBED = 2 * P * 3 * 2 * 16 * 16 * H
LINEAR = 2 * P * (4 * H * H + 2 * H * INTER)
ATTENTION = 4 * P * P * H
MERGE = 2 * (P / 4) * ((H * 4) ** 2 + H * 4 * 4096)
ENCODER = EMBED + D * (LINEAR + ATTENTION) + 4 * MERGE  # ~48.2 TFLOP


def test_an_image_is_tokens_and_encoder_work():
    enc = vision_encoder(find_model(QWEN))
    assert enc is not None
    assert enc.prompt_tokens(2048, 2048) == TOKENS
    assert enc.flops(enc.patches(2048, 2048)) == pytest.approx(ENCODER)
    assert 48e12 < ENCODER < 48.5e12
    assert image_load("llama3.1-8b") == (0, 0.0)  # a text-only benchmark


def test_the_image_sizes_follow_the_datasets_histogram():
    """workloads.csv's mix is the MLPerf Qwen3-VL notebook's visual-token histogram
    (47,572 samples read back, mean 1,279 image tokens): the mean of a run's images is
    that plus the 2 markers, and sample shares follow the bins."""
    tokens, flops = image_load(QWEN)
    assert tokens == pytest.approx(1279 + 2, abs=2)
    t, f = image_arrays(QWEN, 47572) or (None, None)
    assert t is not None and f is not None
    assert t.mean() == pytest.approx(tokens, rel=2e-3)
    assert f.mean() == pytest.approx(flops, rel=5e-3)
    # the first bin (0-250 tokens, 8,444 samples) is a 352 x 352 image: 11 x 11 tokens
    assert (t == 11 * 11 + 2).mean() == pytest.approx(8444 / 47572, abs=2e-3)
    # the 2048 x 2048 bin (4,000-4,250 tokens, 727 samples)
    assert (t == TOKENS).mean() == pytest.approx(727 / 47572, abs=1e-3)
    assert image_arrays("llama3.1-8b", 4) is None


def test_synthetic_samples_carry_their_images():
    ds = synthetic_dataset(QWEN, 64, seed=3)
    inp, out, enc = request_arrays(ds, QWEN)
    text = np.array([ds.sample(i).input_tokens for i in range(64)])
    t, f = image_arrays(QWEN, 64) or (None, None)
    assert t is not None and f is not None
    assert (inp == text + t).all()
    assert enc is not None and (enc == f).all()
    assert len(set(t.tolist())) > 5  # the samples' images differ in size
    ds8 = synthetic_dataset("llama3.1-8b", 16, seed=3)
    assert request_arrays(ds8, "llama3.1-8b")[2] is None


def test_the_prefill_step_pays_for_the_encoder():
    # size exponent 1: the language model (hidden 4096) reaches 0.5 x (4096 / 8192) =
    # 0.25 of peak, and so does the encoder (not 0.5 x 1152 / 8192 = 0.07 for its width)
    eff = Efficiency(mfu=0.5, mbu=0.8, step_overhead_ns=0, seq_overhead_ns=0,
                     size_exponent=1.0)
    gb300 = find_accelerator("GB300")  # 15000 dense FP4 TFLOPS
    m = find_model(QWEN)
    d = Deployment(gb300, m, Precision.FP4, tp=4, ep=4, efficiency=eff)
    n = 700 + TOKENS  # the text and the image, one chunk within the 8192-token budget
    e = ReplicaEngine(d)
    e.submit(0, n, 2, encoder_flops=ENCODER)
    plan = e.advance().plan
    # Qwen3-VL's language model (config.json): 22e9 active, vocab 151936, hidden 4096,
    # 94 layers, 64 heads of 128, 128 experts of which 8 a token
    head = 151936 * 4096
    body = 22e9 - 2 * head
    routed = 8 * (235e9 - 22e9) / 120
    imbalance = 1 + math.sqrt(2 * math.log(4) / (n * 8 / 4))  # ep 4 over 4 GPUs
    attn = 4 * 94 * 64 * 128
    flops = (2 * body + 2 * routed * (imbalance - 1)) * n + 2 * head + attn * n * (n + 1) / 2
    peak = 4 * 15000e12  # the replica's FP4 FLOP/s
    # the vision tower stays BF16 (vision.csv precision; the NVFP4 recipe ignores
    # visual.*): the encoder runs at GB300's 2500 dense BF16 TFLOPS
    peak_enc = 4 * 2500e12
    compute = flops / peak * 1e9 / 0.25 + ENCODER / peak_enc * 1e9 / 0.25
    assert plan.cost.compute_ns == pytest.approx(compute, rel=1e-6)
    # the encoder's share is counted as prefill compute
    assert plan.cost.prefill_flop_share == pytest.approx(1.0, abs=1e-3)
    # the same request without its image work: shorter by exactly the encoder's time
    e2 = ReplicaEngine(d)
    e2.submit(0, n, 2)
    assert e2.advance().plan.cost.compute_ns == pytest.approx(
        compute - ENCODER / peak_enc * 1e9 / 0.25, rel=1e-6)
    # at BF16 the encoder costs no more than the language model's precision would
    d16 = Deployment(gb300, m, Precision.BF16, tp=4, ep=4, efficiency=eff)
    e3 = ReplicaEngine(d16)
    e3.submit(0, n, 2, encoder_flops=ENCODER)
    e4 = ReplicaEngine(d16)
    e4.submit(0, n, 2)
    assert (e3.advance().plan.cost.compute_ns - e4.advance().plan.cost.compute_ns
            == pytest.approx(ENCODER / peak_enc * 1e9 / 0.25, rel=1e-6))


def test_the_offline_trace_and_the_engine_cost_the_encoder_alike():
    """One prediction path: the Offline trace calibration fits (recorded at 100%
    efficiency, timed under the parameters afterwards) and the engine that runs Server
    and Interactive (timed under them as it goes) give one Offline throughput for a
    vision-language deployment, also where the size exponent makes the encoder's own
    width's efficiency differ from the language model's."""
    eff = Efficiency(mfu=0.4, mbu=0.8, step_overhead_ns=1_000_000, seq_overhead_ns=2_000,
                     size_exponent=1.0)
    d = Deployment(find_accelerator("GB300"), find_model(QWEN), Precision.FP4, tp=4, ep=4,
                   efficiency=eff)
    rng = np.random.default_rng(3)
    inputs = rng.integers(800, 6000, size=64)
    outputs = rng.integers(20, 60, size=64)
    enc = rng.uniform(1e12, 60e12, size=64)
    trace = offline_trace(d, inputs, outputs, samples=True, encoder=enc)
    direct = replica_offline_rate(d, inputs, outputs, requests=int(trace.units), seed=7,
                                  encoder=enc)
    assert predict_rate(trace, eff) == pytest.approx(direct, rel=2e-3)


class _File:
    """A dataset file's samples (the Dataset protocol), as a loaded file gives them."""

    name = "file"
    fingerprint = "0"

    def __init__(self, samples: list[Sample]) -> None:
        self._s = samples

    def __len__(self) -> int:
        return len(self._s)

    def sample(self, index: int) -> Sample:
        return self._s[index]


def test_a_dataset_file_is_read_as_the_emulated_server_reads_it():
    png = generate_png(0, 0, ImageSize(512, 512))
    url = data_url(png, sniff(png))  # type: ignore[arg-type]
    chat = Sample(0, "p", 40, 500, messages=(Message("user", "describe", (url,)),),
                  images=1, expected_output_tokens=120)
    plain = Sample(1, "q", 30, 64)  # no reference answer: its output tokens, exactly
    inp, out, enc = request_arrays(_File([chat, plain]), QWEN)
    # 512 x 512: 32 x 32 patches of 16 pixels, 2 x 2 merged: 256 tokens and 2 markers
    assert inp.tolist() == [40 + 258, 30]
    # the reference answer (120) stops it before max_tokens (500), as the planner says
    assert out.tolist() == [120, 64]
    ref = OutputPlanner(output_model(QWEN)).plan("", 500, reference=120)
    assert (ref.total, ref.finish) == (120, "stop")
    h, p = 1152, 1024  # the encoder's FLOPs for 1024 patches, by the module's formula
    flops = (2 * p * 3 * 2 * 16 * 16 * h + D * (2 * p * (4 * h * h + 2 * h * INTER)
                                               + 4 * p * p * h)
             + 4 * 2 * (p / 4) * ((h * 4) ** 2 + h * 4 * 4096))
    assert enc is not None and enc.tolist() == pytest.approx([flops, 0.0])
    # a text-only file has no encoder work
    assert request_arrays(_File([plain]), "llama3.1-8b")[2] is None


def test_a_bad_image_size_in_workloads_csv_is_named() -> None:
    from tokenmark.errors import ConfigError
    from tokenmark.sim.workloads import _sizes

    assert _sizes("b", "640x480") == (((640, 480), 1.0),)
    assert _sizes("b", "64x64*3; 32x16*1") == (((64, 64), 3.0), ((32, 16), 1.0))
    for bad in ("640", "axb*2", "64x64*0", "0x64"):
        with pytest.raises(ConfigError, match="image_size"):
            _sizes("b", bad)


def test_attention_data_parallel_groups_encode_their_own_images():
    """Under attention data parallelism each request's image is encoded by the one group
    that serves it (vLLM: every data-parallel rank is its own engine; the ranks' passes
    align at every expert layer), so a step waits for the busiest group: one image alone
    on a dp 8 replica of B300 costs its FLOPs over one B300's 2250 dense BF16 TFLOPS,
    not over eight; several images take the larger of their mean share and the largest."""
    from tokenmark.perfmodel.cost import CostModel

    eff = Efficiency(mfu=0.5, mbu=0.8, step_overhead_ns=0, seq_overhead_ns=0)
    b300 = find_accelerator("B300")
    m = find_model(QWEN)
    dp8 = Deployment(b300, m, Precision.FP4, dp=8, ep=8, efficiency=eff)
    tp1 = Deployment(b300, m, Precision.FP4, efficiency=eff)
    args = (TOKENS, TOKENS * (TOKENS + 1) / 2, 0.0, 1, 0, 0.0)
    one_gpu = 2250e12 / 1e9 * 0.5  # FLOP/ns of one B300 at BF16, mfu 0.5

    def extra(d: Deployment, total: float, largest: float) -> float:
        c = CostModel(d)
        return c.cost(*args, total, largest).compute_ns - c.cost(*args).compute_ns

    # one image: on one accelerator's peak, in the dp 8 replica as on a tp 1 one
    assert extra(dp8, ENCODER, ENCODER) == pytest.approx(ENCODER / one_gpu, rel=1e-6)
    assert extra(tp1, ENCODER, ENCODER) == pytest.approx(ENCODER / one_gpu, rel=1e-6)
    # 16 equal images over 8 groups: two each, the mean share
    assert extra(dp8, 16 * ENCODER, ENCODER) == pytest.approx(2 * ENCODER / one_gpu, rel=1e-6)
    # a large image and small ones: the large one's group is the busiest
    assert extra(dp8, ENCODER + 7e12, ENCODER) == pytest.approx(ENCODER / one_gpu, rel=1e-6)
    # the engine passes the step's largest request: two requests admitted in one step
    e = ReplicaEngine(dp8)
    e.submit(0, 700 + TOKENS, 2, encoder_flops=ENCODER)
    e.submit(1, 700, 2, encoder_flops=1e12)
    with_images = e.advance().plan.cost.compute_ns
    e2 = ReplicaEngine(dp8)
    e2.submit(0, 700 + TOKENS, 2)
    e2.submit(1, 700, 2)
    assert with_images - e2.advance().plan.cost.compute_ns == pytest.approx(
        ENCODER / one_gpu, rel=1e-6)


def test_the_answers_follow_the_published_run():
    # NVIDIA's v6.1 VR200 NVL72 Offline run logged its 1,738,404 answers: 74,632,429
    # output tokens (mean 42.93), p1 29, median 42, p99 62, p99.9 67, at most 150
    # (max_new_tokens); workloads.csv holds that histogram at its bins' midpoints
    ds = synthetic_dataset(QWEN, 48289)
    out = np.array([ds.sample(i).output_tokens for i in range(len(ds))])
    assert out.mean() == pytest.approx(42.93, abs=0.3)
    assert np.percentile(out, 50) == 42
    assert 61 <= np.percentile(out, 99) <= 63
    assert out.max() <= 150
