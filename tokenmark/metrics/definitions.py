"""One definition of each per-request latency; every figure tokenmark shows uses these.

Times are integer ns from the run's start; a time that never happened is -1
(:mod:`tokenmark.records`). For a request that was answered (no error, a completion
time):

- **E2E** = done - *scheduled* time (LoadGen's latency: a late send is charged to it);
- **TTFT** = first token - scheduled; a request answered without a streamed token (a
  non-streamed answer) got all its tokens at completion, so its TTFT is its E2E;
- **TPOT** = (E2E - TTFT) / (n - 1) for ``n`` output tokens, LoadGen's per-sample
  formula exactly: C++ integer division (truncation toward zero), and a count of 1 or
  less recorded as 0 tokens, so a 1-token answer's TPOT is -(E2E - TTFT);
- **ITL** = each gap between successive streamed chunks, spread evenly over the later
  chunk's ``k`` tokens: ``k - 1`` gaps of ``gap // k`` and one of the remainder (they
  add up to the gap);
- **send lag** = issued - scheduled, for requests that were sent.

Each comes in an array form (numpy: summaries, reports, the simulator, comparisons) and a
scalar form for consumers that see one record at a time on the run's event loop (the
live view, find-peak's stop rule, the per-endpoint table), where a numpy call per record
would cost more than the formula. Both forms compute the same integers; a property test
(``tests/metrics/test_metric_definitions.py``) holds them equal, and the summary, report,
live view, endpoint table, reproduce and simulator all call this module.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from typing import Protocol

import numpy as np

__all__ = [
    "answered",
    "e2e_ns",
    "itl_split",
    "send_lag_ns",
    "spread_itl",
    "tpot_ns",
    "tpot_one",
    "ttft_ns",
    "ttft_one",
]


def answered(error_free: np.ndarray, done: np.ndarray) -> np.ndarray:
    """Requests that were answered: no error and a completion time."""
    return np.asarray(error_free & (done >= 0), dtype=bool)


def e2e_ns(scheduled: np.ndarray, done: np.ndarray) -> np.ndarray:
    """End-to-end latency from the scheduled time."""
    return np.asarray(done - scheduled, dtype=np.int64)


def ttft_ns(scheduled: np.ndarray, first: np.ndarray, done: np.ndarray) -> np.ndarray:
    """Time to first token from the scheduled time; E2E where no token streamed."""
    return np.asarray(np.where(first >= 0, first, done) - scheduled, dtype=np.int64)


def tpot_ns(e2e: np.ndarray, ttft: np.ndarray, output_tokens: np.ndarray) -> np.ndarray:
    """LoadGen's per-sample TPOT: C++ integer division, counts <= 1 recorded as 0."""
    den = np.where(output_tokens <= 1, 0, output_tokens) - 1
    num = e2e - ttft
    q = np.abs(num) // np.abs(den)
    return np.asarray(np.where((num >= 0) == (den > 0), q, -q), dtype=np.int64)


def send_lag_ns(scheduled: np.ndarray, issued: np.ndarray) -> np.ndarray:
    """Send lag of each request; meaningful where ``issued >= 0`` (the caller selects)."""
    return np.asarray(issued - scheduled, dtype=np.int64)


def ttft_one(scheduled: int, first: int, done: int) -> int:
    """:func:`ttft_ns` of one request."""
    return (first if first >= 0 else done) - scheduled


def tpot_one(e2e: int, ttft: int, output_tokens: int) -> int:
    """:func:`tpot_ns` of one request."""
    den = (output_tokens if output_tokens > 1 else 0) - 1
    num = e2e - ttft
    q = abs(num) // abs(den)
    return q if (num >= 0) == (den > 0) else -q


class _IntSink(Protocol):
    def append(self, v: int, /) -> None: ...

    def extend(self, vs: list[int], /) -> None: ...


def spread_itl(out: _IntSink | array[int], times: Sequence[int], tokens: Sequence[int]) -> None:
    """Append one streamed request's inter-token latencies (chunk arrival ``times`` and
    the ``tokens`` each carried; a chunk of ``k`` tokens gives ``k`` gaps)."""
    prev = times[0]
    for t, k in zip(times[1:], tokens[1:], strict=True):
        gap = t - prev
        prev = t
        if k <= 1:
            out.append(gap)
        else:
            base = gap // k
            out.extend([base] * (k - 1))
            out.append(gap - base * (k - 1))


def itl_split(gaps: np.ndarray, tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`spread_itl` over arrays of chunk gaps and the later chunks' token counts:
    ``(base, repeats, last)``, each gap giving ``repeats`` values of ``base`` and one
    of ``last`` (a chunk of one token or none: no repeat, ``last`` is the gap)."""
    k = np.maximum(tokens, 1)
    base = gaps // k
    repeats = k - 1
    return base, repeats, gaps - base * repeats
