"""The emulator's timing follows its model, on a fake clock (no sleeping).

Ground truth is computed here by hand from the data sheet (H200: 989 dense bf16 TFLOPS,
4.8 TB/s; Llama-3.1-8B: 8.03 B parameters, 32 layers, 8 KV heads of 128, vocabulary
128256, hidden 4096) and the deployment's efficiency parameters, not by the cost model's
code; the batched cases are checked against :class:`~tokenmark.perfmodel.CostModel` for
the steps the batch must have made.
"""

from __future__ import annotations

import asyncio
from array import array
from dataclasses import replace

import pytest

from tokenmark.api.run import SutSpec, run_benchmark
from tokenmark.clock import FakeClock, run_virtual
from tokenmark.config.layering import build_settings
from tokenmark.dataset import LengthDistribution, SyntheticDataset
from tokenmark.engines.emulated import Emulator, EmulatorSpec
from tokenmark.errors import ConfigError
from tokenmark.mlperf.settings import Scenario
from tokenmark.output.records import read_records
from tokenmark.perfmodel import CostModel

# the data sheet (accelerators.csv, models.csv)
H200_BF16_FLOPS = 989e12
H200_BYTES_S = 4.8e12
PARAMS = 8.03e9
LAYERS, KV_HEADS, HEAD_DIM, HEADS, HIDDEN, VOCAB = 32, 8, 128, 32, 4096, 128256
KV_BYTES_PER_TOKEN = 2 * LAYERS * KV_HEADS * HEAD_DIM * 2  # K and V, bf16


class Log:
    """A listener that keeps what happened, when."""

    def __init__(self) -> None:
        self.first = -1
        self.tokens: list[int] = []
        self.done = -1
        self.later: list[int] | None = None
        self.rejected = ""

    def on_first(self, t_ns: int) -> None:
        self.first = t_ns

    def on_tokens(self, n: int, t_ns: int) -> None:
        if self.first < 0:  # a streaming emulator reports the first token here too
            self.first = t_ns
            n -= 1
        self.tokens.extend([t_ns] * n)

    def on_done(self, t_ns: int, later: array[int] | None) -> None:
        self.done = t_ns
        self.later = None if later is None else list(later)

    def on_rejected(self, t_ns: int, reason: str) -> None:
        self.rejected = reason


def run_requests(spec: EmulatorSpec, reqs: list[tuple[int, int, int]], *,
                 stream: bool = True) -> tuple[list[Log], Emulator]:
    """Submit ``(at_ns, prompt, output)`` requests on a fake clock; run to the end."""
    clock = FakeClock()
    d = spec.deployment()
    logs = [Log() for _ in reqs]

    async def main() -> Emulator:
        em = Emulator(d, clock, stream=stream)
        groups: dict[int, list[tuple[int, int, Log]]] = {}
        for (at, p, n), log in zip(reqs, logs, strict=True):
            groups.setdefault(at, []).append((p, n, log))
        for at, group in groups.items():  # one callback per time: arrival order kept
            clock.call_at(at, lambda g=group: [em.submit(p, n, log) for p, n, log in g])
        while any(log.done < 0 and not log.rejected for log in logs):
            await asyncio.sleep(0.05)
        return em

    return logs, run_virtual(main(), clock)


def by_hand(prompt: int, decode_ctx: int, spec: EmulatorSpec) -> tuple[float, float]:
    """One request alone: its prefill step and a decode step at ``decode_ctx`` context."""
    eff = spec.deployment().efficiency
    mfu = min(0.98, eff.mfu * (HIDDEN / 8192) ** eff.size_exponent)
    body = PARAMS - 2 * VOCAB * HIDDEN
    attn_pair = 4 * LAYERS * HEADS * HEAD_DIM
    # prefill: every prompt token through the body, one logit, causal attention pairs
    flops = 2 * body * prompt + 2 * VOCAB * HIDDEN + attn_pair * prompt * (prompt + 1) / 2
    compute = flops / H200_BF16_FLOPS / mfu * 1e9
    memory = (PARAMS * 2 + KV_BYTES_PER_TOKEN * prompt) / H200_BYTES_S / eff.mbu * 1e9
    overhead = eff.step_overhead_ns + eff.seq_overhead_ns
    # the un-overlapped share of the shorter side (Efficiency.serial_fraction)
    prefill = max(compute, memory) + eff.serial_fraction * min(compute, memory) + overhead
    # decode: weights read once, the context's KV read and one token's written
    d_flops = 2 * (body + VOCAB * HIDDEN) + attn_pair * decode_ctx
    d_compute = d_flops / H200_BF16_FLOPS / mfu * 1e9
    d_memory = (PARAMS * 2 + KV_BYTES_PER_TOKEN * (decode_ctx + 1)) / H200_BYTES_S / eff.mbu * 1e9
    decode = max(d_compute, d_memory) + eff.serial_fraction * min(d_compute, d_memory)
    return prefill, decode + overhead


def test_one_request_alone_matches_the_data_sheet():
    spec = EmulatorSpec(accelerator="H200", model="llama3.1-8b", precision="bf16")
    prompt, out = 1000, 6
    (log,), _ = run_requests(spec, [(0, prompt, out)])
    prefill, _ = by_hand(prompt, prompt + 1, spec)
    assert log.first == pytest.approx(prefill, rel=1e-6, abs=2)
    assert len(log.tokens) == out - 1 and log.done == log.tokens[-1]
    t = log.first
    for k, tk in enumerate(log.tokens):  # the k-th decode step reads prompt + 1 + k
        step = by_hand(prompt, prompt + 1 + k, spec)[1]
        assert tk - t == pytest.approx(step, rel=1e-6, abs=2)
        t = tk
    # decode alone is memory-bound: 16 GB of weights at 4.8 TB/s x mbu, plus overhead
    gap = log.tokens[1] - log.tokens[0]
    eff = spec.deployment().efficiency
    assert gap > 16.06e9 / 4.8e12 / eff.mbu * 1e9


def test_a_batch_shares_steps_and_queues_behind_max_num_seqs():
    spec = EmulatorSpec(max_num_seqs=2)
    d = spec.deployment()
    cm = CostModel(d)
    logs, em = run_requests(spec, [(0, 200, 4), (0, 300, 4), (0, 100, 3)])
    a, b, c = logs
    # a and b are prefilled together in the first step; c waits for a free sequence
    first = cm.step([(200, 0), (300, 0)], []).total_ns
    assert a.first == b.first == pytest.approx(first, abs=2)
    # then both decode together: contexts 201 and 301, 202 and 302, 203 and 303
    t = first
    for k in range(3):
        t += cm.step([], [201 + k, 301 + k]).total_ns
        assert a.tokens[k] == b.tokens[k] == pytest.approx(t, abs=4)
    assert c.first > a.done  # admitted only when a and b left
    assert c.first == pytest.approx(a.done + cm.step([(100, 0)], []).total_ns, abs=8)
    assert em.finished == 3 and em.generation_tokens == 4 + 4 + 3
    assert em.prompt_tokens == 600


def test_kv_capacity_limits_the_batch_and_oversized_requests_are_refused():
    spec = EmulatorSpec()
    d = spec.deployment()
    cap = d.kv_capacity_tokens
    half = cap // 2 + 1  # two of these do not fit at once
    logs, _ = run_requests(spec, [(0, half - 10, 10), (0, half - 10, 10), (0, cap, 10)])
    a, b, big = logs
    assert big.rejected and big.done < 0
    assert b.first > a.done  # b waited for a's KV cache to be freed


def test_without_streaming_the_later_token_times_arrive_at_the_end():
    spec = EmulatorSpec()
    reqs = [(0, 500, 7), (3_000_000, 400, 5)]
    streamed, _ = run_requests(spec, reqs, stream=True)
    batched, _ = run_requests(spec, reqs, stream=False)
    for s, b in zip(streamed, batched, strict=True):
        assert b.first == s.first and b.done == s.done and b.later == s.tokens


def test_the_virtual_time_run_reports_the_models_tpot(tmp_path):
    """The in-process SUT (--virtual-time) on the runner: one query at a time, so each
    request decodes alone and its TPOT is the model's decode step."""
    spec = EmulatorSpec()
    layered = build_settings("v6.0", "llama3.1-8b", Scenario.CLOSED_LOOP, overrides={
        "concurrency": 1, "min_query_count": 4, "max_query_count": 4,
        "min_duration_ms": 0})
    ds = SyntheticDataset(4, LengthDistribution.parse("512"), LengthDistribution.parse("9"))
    res = run_benchmark(layered, ds, SutSpec(kind="emulated", emulator=spec), tmp_path,
                        virtual_time=True)
    assert res.document["run"]["sut"]["profile"] == "emulated H200 x1, llama3.1-8b, bf16"
    recs = list(read_records(tmp_path / "records.jsonl"))
    assert len(recs) == 4 and all(r.ok and r.output_tokens == 9 for r in recs)
    prefill, _ = by_hand(512, 513, spec)
    steps = [by_hand(512, 513 + k, spec)[1] for k in range(8)]
    for r in recs:
        assert r.first_token_ns - r.issued_ns == pytest.approx(prefill, abs=2)
        gaps = [b - a for a, b in zip(r.chunk_ns, r.chunk_ns[1:], strict=False)]
        assert gaps == pytest.approx(steps, abs=2)


def test_automatic_sizes_and_errors_with_numbers():
    assert EmulatorSpec(model="llama2-70b-99").label() == "emulated H200 x2, llama2-70b-99, bf16"
    assert EmulatorSpec(model="deepseek-r1").label().endswith("x8, deepseek-r1, fp8")
    assert EmulatorSpec(accelerators=8, tp=2).deployment().replicas == 4
    two = EmulatorSpec(replicas=2)
    assert two.label() == "emulated H200 x1 x2 replicas, llama3.1-8b, bf16"
    with pytest.raises(ConfigError, match=r"needs 138 GB of weights; 1 x H200 give 127 GB"):
        EmulatorSpec(model="llama2-70b-99", tp=1, precision="bf16").deployment()
    with pytest.raises(ConfigError, match="unknown accelerator 'H900'"):
        EmulatorSpec(accelerator="H900").deployment()
    with pytest.raises(ConfigError, match="does not divide"):
        replace(two, accelerators=3).deployment()


def test_replicas_take_requests_round_robin():
    spec = EmulatorSpec(replicas=2)
    logs, em = run_requests(spec, [(0, 300, 3), (0, 300, 3)])
    alone, _ = run_requests(EmulatorSpec(), [(0, 300, 3)])
    # each replica serves one request alone: both finish when one alone would
    assert logs[0].done == logs[1].done == alone[0].done
    assert em.steps == 2 * 3
