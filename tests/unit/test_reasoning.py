"""Reasoning models: reasoning tokens counted apart, time to first answer token beside
TTFT, through the runner's handle and the summary."""

from __future__ import annotations

import pytest

from tokenmark.api.run import run_benchmark
from tokenmark.clock import FakeClock
from tokenmark.config.layering import build_settings
from tokenmark.dataset import LengthDistribution, SyntheticDataset
from tokenmark.metrics.summary import Accumulator, summarize
from tokenmark.mlperf.settings import Scenario, effective
from tokenmark.records import Query, RequestRecord
from tokenmark.sut import ReasoningHandle, ResponseHandle

MS = 1_000_000


class ReasoningSUT:
    """Streams 3 reasoning chunks then answer chunks; every 4th request only reasons;
    odd requests report usage's reasoning count (4, where 3 were streamed)."""

    name = "reasoning"

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock

    def describe(self):
        return {"kind": "test"}

    async def start(self):
        pass

    async def flush(self):
        pass

    async def stop(self):
        pass

    def issue(self, q: Query, h: ResponseHandle) -> None:
        assert isinstance(h, ReasoningHandle)
        t0 = self.clock.now_ns()
        for k in range(3):
            self.clock.call_at(t0 + (10 + k) * MS, lambda: h.reasoning(1))
        answer = q.seq % 4 != 3
        if answer:
            for k in range(2):
                self.clock.call_at(t0 + (50 + k) * MS, lambda: h.token(1))

        def done() -> None:
            if q.seq % 2:
                h.reasoning_usage(4)
            h.complete(None if q.seq % 2 == 0 else 6)

        self.clock.call_at(t0 + 60 * MS, done)


def test_reasoning_is_counted_apart_and_ttfat_reported(tmp_path):
    layered = build_settings("v6.0", "llama3.1-8b", Scenario.CONSTANT,
                             overrides={"target_qps": 10, "min_duration_ms": 1000})
    ds = SyntheticDataset(8, LengthDistribution.parse("8"), LengthDistribution.parse("5"))
    res = run_benchmark(layered, ds, ReasoningSUT, tmp_path, virtual_time=True)
    s = res.summary
    n = s.sample_count
    assert n >= 8 and s.reasoning_requests == n
    assert set(s.ttft.percentiles.values()) == {10 * MS}  # the first token of either kind
    assert s.ttfat is not None and set(s.ttfat.percentiles.values()) == {50 * MS}
    # even seq: streamed sum 3 (output from chunks); odd seq: usage says 4 of 6
    seqs = range(n)
    want_reason = sum(3 if q % 2 == 0 else 4 for q in seqs)
    assert s.reasoning_tokens == want_reason
    assert s.answer_tokens == s.output_tokens - want_reason
    assert s.no_answer_requests == sum(1 for q in seqs if q % 4 == 3)


def test_runs_without_reasoning_report_none():
    layered = build_settings("v6.0", "llama3.1-8b", Scenario.CONSTANT,
                             overrides={"target_qps": 10, "min_duration_ms": 1000})
    eff = effective(layered.settings, 4)
    acc = Accumulator()
    for i in range(3):
        r = RequestRecord(i, i, i, 0, issued_ns=0, first_token_ns=5, done_ns=9,
                          output_tokens=4, first_answer_ns=5)
        acc.add(r)
    s = summarize(acc.finish(3), eff)
    assert s.ttfat is None and s.reasoning_tokens == 0 and s.answer_tokens == 12
    assert RequestRecord(0, 0, 0, 0, output_tokens=7, reasoning_tokens=5).answer_tokens == 2


@pytest.mark.parametrize("usage", [None, 9])
def test_the_handle_keeps_answer_and_reasoning_apart(usage):
    from tokenmark.loadgen.runner import _Pending

    class FakeRun:
        clock = FakeClock()
        t0 = 0
        done = []

        def _finish(self, p, ids, text):
            self.done.append(p.rec)

    run = FakeRun()
    p = _Pending(run, RequestRecord(0, 0, 0, 0))  # type: ignore[arg-type]
    p.reasoning(2, t_ns=5)
    p.reasoning(1, t_ns=6)
    p.token(1, t_ns=6)  # the same read carried the first answer token: one chunk
    p.token(1, t_ns=8)
    if usage is not None:
        p.reasoning_usage(usage)
    p.complete(12, t_ns=9)
    rec = run.done[0]
    assert (rec.first_token_ns, rec.first_answer_ns) == (5, 6)
    assert rec.reasoning_tokens == (3 if usage is None else usage)
    assert (rec.chunk_ns, rec.chunk_tokens) == ([5, 6, 8], [2, 2, 1])
