"""tokenmark's own audits, beyond MLPerf's (labelled ``tokenmark`` in every report).

**No response caching** (:func:`caching_audit`). MLPerf allows a KV cache within a
request but forbids caching across queries (rules §2.3; TEST04 checked it for older
benchmarks, LLMs have no such test). The audit asks each of ``n`` samples twice in a
row, the second time after the first answer is complete, and compares the two end-to-end
times: a server that serves repeats from a response cache answers them in a fraction of
the time. It fails when the median ratio ``repeat / first`` is below ``max_speedup``'s
inverse (default: repeats more than 2x faster), or when any repeat is answered at least
10x faster; the output is compared too (a repeat must equal the first answer under
greedy decoding). Prefix caching, which keeps prefill work but still decodes every
token, passes: decoding dominates the time of an answer of tens of tokens.

**Streamed equals non-streamed** (:func:`stream_equivalence_audit`). The same samples
through a streaming and a non-streaming SUT (two clients of one server, or one engine
asked both ways) must give the same output (token ids where both report them, else
text) and the same token count: a server whose streamed answers differ from its plain
ones benchmarks one thing and returns another.

Both drive SUTs through the :class:`~tokenmark.sut.SystemUnderTest` contract on the
real clock, one request at a time.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from tokenmark.dataset import Dataset
from tokenmark.records import ErrorClass, Query, ResponseDetails, TokenSource
from tokenmark.sut import SystemUnderTest

__all__ = ["Answer", "AuditResult", "ask", "caching_audit", "stream_equivalence_audit"]

LABEL = "tokenmark audit (not an MLPerf compliance test)"


@dataclass
class Answer:
    """One request's outcome as the probe saw it."""

    e2e_ns: int = -1
    ttft_ns: int = -1
    tokens: int = 0
    token_ids: tuple[int, ...] | None = None
    text: str | None = None
    error: str = ""
    #: what the SUT reported of the answer (:class:`~tokenmark.sut.DetailsHandle`):
    #: why it ended ("" when not reported) and the tokens counted from its stream
    finish_reason: str = ""
    stream_tokens: int = -1


class _Probe:
    """A minimal :class:`~tokenmark.sut.ResponseHandle` that keeps the output."""

    def __init__(self, t0: int) -> None:
        self.t0 = t0
        self.answer = Answer()
        self.done = asyncio.get_running_loop().create_future()

    def sent(self, t_ns: int | None = None) -> None:
        return None

    def token(self, n: int = 1, t_ns: int | None = None) -> None:
        if self.answer.ttft_ns < 0:
            self.answer.ttft_ns = time.perf_counter_ns() - self.t0

    def details(self, d: ResponseDetails) -> None:
        if d.finish_reason:
            self.answer.finish_reason = d.finish_reason
        if d.stream_tokens >= 0:
            self.answer.stream_tokens = d.stream_tokens

    def complete(self, output_tokens: int | None = None,
                 source: TokenSource = TokenSource.SUT, *, t_ns: int | None = None,
                 input_tokens: int | None = None, alt_output_tokens: int = -1,
                 cached_input_tokens: int = -1, token_ids: Sequence[int] | None = None,
                 text: str | None = None, endpoint: str = "") -> None:
        a = self.answer
        a.e2e_ns = time.perf_counter_ns() - self.t0
        a.tokens = output_tokens or 0
        a.token_ids = tuple(token_ids) if token_ids is not None else None
        a.text = text
        if not self.done.done():
            self.done.set_result(None)

    def fail(self, error: ErrorClass, detail: str = "", *, t_ns: int | None = None,
             endpoint: str = "") -> None:
        self.answer.error = f"{error.value}: {detail}"
        if not self.done.done():
            self.done.set_result(None)


async def ask(sut: SystemUnderTest, dataset: Dataset, index: int, seq: int,
              timeout_s: float = 120.0) -> Answer:
    """One request for sample ``index``, awaited (a timeout is an error answer)."""
    probe = _Probe(time.perf_counter_ns())
    sut.issue(Query(seq=seq, query_id=seq, sample=dataset.sample(index), scheduled_ns=0),
              probe)
    try:
        await asyncio.wait_for(probe.done, timeout_s)
    except TimeoutError:
        probe.answer.error = f"no answer in {timeout_s:g} s"
    return probe.answer


@dataclass
class AuditResult:
    name: str
    passed: bool
    observed: str
    detail: list[str] = field(default_factory=list)
    label: str = LABEL

    def to_json(self) -> dict[str, object]:
        return {"audit": self.name, "passed": self.passed, "observed": self.observed,
                "detail": self.detail, "label": self.label}


def _same(a: Answer, b: Answer) -> bool:
    if a.token_ids is not None and b.token_ids is not None:
        return a.token_ids == b.token_ids
    return a.text == b.text and a.tokens == b.tokens


async def caching_audit(sut: SystemUnderTest, dataset: Dataset, indices: Sequence[int], *,
                        max_speedup: float = 2.0) -> AuditResult:
    """Each sample twice in a row; fail if repeats come back much faster (see module)."""
    ratios: list[float] = []
    detail: list[str] = []
    seq = 0
    for idx in indices:
        first = await ask(sut, dataset, idx, seq)
        again = await ask(sut, dataset, idx, seq + 1)
        seq += 2
        if first.error or again.error:
            detail.append(f"sample {idx}: failed ({first.error or again.error})")
            continue
        ratios.append(again.e2e_ns / max(first.e2e_ns, 1))
        if not _same(first, again):
            detail.append(f"sample {idx}: the repeat answered differently")
    if not ratios:
        return AuditResult("no_response_caching", False, "no sample answered", detail)
    med = statistics.median(ratios)
    fast = sum(1 for r in ratios if r < 0.1)
    passed = med >= 1.0 / max_speedup and fast == 0
    observed = (f"median repeat/first end-to-end time {med:.3f} over {len(ratios)} samples "
                f"(fail below {1.0 / max_speedup:.3f}); {fast} repeats over 10x faster")
    return AuditResult("no_response_caching", passed, observed, detail)


async def stream_equivalence_audit(streamed: SystemUnderTest, plain: SystemUnderTest,
                                   dataset: Dataset, indices: Sequence[int]) -> AuditResult:
    """The same samples streamed and not: outputs and counts must be equal."""
    detail: list[str] = []
    seq = 0
    compared = 0
    for idx in indices:
        a = await ask(streamed, dataset, idx, seq)
        b = await ask(plain, dataset, idx, seq + 1)
        seq += 2
        if a.error or b.error:
            detail.append(f"sample {idx}: failed ({a.error or b.error})")
            continue
        compared += 1
        if not _same(a, b) or a.tokens != b.tokens:
            detail.append(f"sample {idx}: streamed {a.tokens} tokens {a.text!r:.60} vs "
                          f"plain {b.tokens} tokens {b.text!r:.60}")
    passed = compared == len(indices) and not detail
    observed = f"{compared - len([d for d in detail if 'failed' not in d])} of " \
               f"{len(indices)} samples equal streamed and not streamed"
    return AuditResult("stream_equivalence", passed, observed, detail)
