"""LoadGen's early-stopping criterion, reproduced to the integer.

Each query is a Bernoulli trial: under or over the latency limit. With ``t`` queries
over the limit, a run of ``h + t`` queries shows, with confidence ``c = 0.99``, that the
true percentile ``p`` is within the limit once ``h >= h_min(t)``, the smallest ``h`` with
``BetaRegularized(p, h, t + 1) < 1 - c`` (digest §3.1).

The numbers must be LoadGen's, not merely close: the same series for the regularised
incomplete beta function (a 2F1 series to tolerance 2**-33), the same binary search with
the same bracketing from a per-call cache, and glibc's ``lgamma``/``log``/``exp`` (Python's
``math.lgamma`` is its own approximation, so glibc's is called through ctypes when it is
available). The classic check values follow: 459 queries at p99 with no misses, 662 for
MultiStream (p99, t = 1), 64 for SingleStream (p90, t = 1).
"""

from __future__ import annotations

import bisect
import ctypes
import ctypes.util
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import numpy as np

__all__ = [
    "CONFIDENCE",
    "TOLERANCE",
    "EarlyStoppingResult",
    "MinPassingQueriesFinder",
    "server_early_stopping",
    "stream_early_stopping",
]

#: Latencies in ns: a sequence or a numpy int64 array.
Latencies: TypeAlias = Sequence[int] | np.ndarray[Any, Any]

CONFIDENCE = 0.99
TOLERANCE = 0.0


def _libm_lgamma() -> Callable[[float], float]:
    name = ctypes.util.find_library("m")
    if name:
        try:
            libm = ctypes.CDLL(name)
            fn = libm.lgamma
            fn.restype = ctypes.c_double
            fn.argtypes = [ctypes.c_double]

            def lgamma(x: float) -> float:
                return float(fn(x))

            return lgamma
        except (OSError, AttributeError):  # pragma: no cover - non-glibc platforms
            pass
    return math.lgamma  # pragma: no cover


_lgamma = _libm_lgamma()


def _lbeta(x: int, y: int) -> float:
    return _lgamma(x) + _lgamma(y) - _lgamma(x + y)


def _hypergeometric_2f1_a1(b: int, c: int, x: float) -> float:
    tolerance = 1.0 / (1 << 33)
    term = 1.0
    result = 1.0
    i = 0
    while abs(term) > tolerance:
        term *= (b + i) * x / (c + i)
        result += term
        i += 1
    return result


def _beta_regularized(x: float, a: int, b: int) -> float:
    return (
        math.exp(a * math.log(x) + (b - 1) * math.log(1 - x) - _lbeta(a, b))
        / a
        * _hypergeometric_2f1_a1(1 - b, 1 + a, x / (x - 1))
    )


def _odds(h: int, t: int, p: float, d: float) -> float:
    """Probability of at most ``t`` over-latency queries among ``h + t``."""
    return _beta_regularized(p - d, h, 1 + t)


def _find_min_passing(min_h: int, max_h: int, t: int, p: float, d: float, c: float) -> int:
    count = max_h - min_h
    while count > 0:
        step = count // 2
        h = min_h + step
        if _odds(h, t, p, d) < 1 - c:
            count = step
        else:
            min_h = h + 1
            count -= step + 1
    return min_h


def _trunc(x: float) -> int:
    """C++ double -> int64_t conversion (toward zero)."""
    return int(x)


class MinPassingQueriesFinder:
    """``h_min(t)`` with LoadGen's cache, whose contents bracket later searches.

    LoadGen makes a fresh finder for every early-stopping evaluation; so does tokenmark
    (the bracketing, and therefore in rare cases the answer, depends on the history).
    """

    def __init__(self) -> None:
        self._caches: dict[tuple[float, float, float], tuple[list[int], dict[int, int]]] = {}

    def __call__(self, t: int, p: float, d: float = TOLERANCE, c: float = CONFIDENCE) -> int:
        keys, cache = self._caches.setdefault((p, d, c), ([], {}))
        if t in cache:
            return cache[t]
        pos = bisect.bisect_left(keys, t)  # first key >= t (std::map::lower_bound)
        x0, y0 = -1, 0
        x1, y1 = 0, _trunc(math.ceil(math.log(1 - c) / math.log(p - d)))
        if pos > 0:
            x1 = keys[pos - 1]
            y1 = cache[x1]
        if pos > 1:
            x0 = keys[pos - 2]
            y0 = cache[x0]
        min_slope = (p - d) / (1 - p + d)
        max_slope = float((y1 - y0) * (x1 - x0))
        min_h = _trunc((t - x1) * min_slope + y1)
        max_h = _trunc((t - x1) * max_slope + y1 + 1)
        h = _find_min_passing(min_h, max_h, t, p, d, c)
        cache[t] = h
        keys.insert(pos, t)
        return h


def _pct_text(p: float) -> str:
    return f"{p * 100:.1f}"


@dataclass(frozen=True, slots=True)
class EarlyStoppingResult:
    """The outcome of one early-stopping evaluation, with LoadGen's summary text."""

    passed: bool
    text: str  # exactly the lines LoadGen prints under "Early Stopping Result:"
    queries_needed: int  # total queries that would satisfy the criterion (>= issued if passed)
    estimate_ns: int | None = None  # SingleStream/MultiStream percentile estimate
    estimate_p99_ns: int | None = None  # SingleStream's p99 estimate (for MultiStream inference)


def server_early_stopping(
    latencies_ns: Latencies, queries_issued: int, limit_ns: int, percentile: float
) -> EarlyStoppingResult:
    """Server/Interactive: enough queries for the count ``t`` of latencies over the limit."""
    t = int(np.count_nonzero(np.asarray(latencies_ns, dtype=np.int64) > limit_ns))
    h = MinPassingQueriesFinder()(t, percentile)
    if queries_issued >= h + t:
        return EarlyStoppingResult(True, " * Run successful.", h + t)
    text = (
        " * Run unsuccessful.\n * Processed "
        f"{queries_issued} queries.\n * Would need to run at least "
        f"{h + t - queries_issued} more queries,\n with the run being successful if every "
        "additional\n query were under latency."
    )
    return EarlyStoppingResult(False, text, h + t)


def _largest_t(find: MinPassingQueriesFinder, queries: int, p: float) -> int:
    t = 1
    for i in range(2, queries + 1):
        if queries < find(i, p) + i:
            t = i - 1
            break
    return t


def stream_early_stopping(
    sorted_latencies_ns: Latencies,
    queries_issued: int,
    percentile: float,
    *,
    single_stream: bool,
) -> EarlyStoppingResult:
    """SingleStream/MultiStream: the percentile estimate after discarding ``t - 1`` of the
    worst queries, where ``t`` is the largest count the run's length supports.

    ``sorted_latencies_ns`` are sample latencies for SingleStream and query latencies for
    MultiStream, ascending.
    """
    find = MinPassingQueriesFinder()
    h_min = find(1, percentile)
    if queries_issued < h_min + 1:
        text = (
            f" * Only processed {queries_issued} queries.\n * Need to process at least "
            f"{h_min + 1} queries for early stopping."
        )
        return EarlyStoppingResult(False, text, h_min + 1)
    t = _largest_t(find, queries_issued, percentile)
    n = len(sorted_latencies_ns)
    if n == 0:
        return EarlyStoppingResult(False, " * No latencies recorded.", h_min + 1)
    # LoadGen always has one latency per query; with failed samples there are fewer, and
    # the estimate is taken from what exists (the run is INVALID for the failures anyway).
    estimate = int(sorted_latencies_ns[min(queries_issued - t, n - 1)])
    text = (
        f" * Processed at least {h_min + 1} queries ({queries_issued}).\n"
        f" * Would discard {t - 1} highest latency queries.\n"
        f" * Early stopping {_pct_text(percentile)}th percentile estimate: {estimate}"
    )
    estimate_p99: int | None = None
    if single_stream:
        ms_p = 0.99
        h99 = find(1, ms_p)
        if queries_issued < h99 + 1:
            text += (
                f"\n * Not enough queries processed for {_pct_text(ms_p)}th percentile\n"
                " early stopping estimate (would need to process at\n least "
                f"{h99 + 1} total queries)."
            )
        else:
            t99 = _largest_t(find, queries_issued, ms_p)
            estimate_p99 = int(sorted_latencies_ns[min(queries_issued - t99, n - 1)])
            text += f"\n * Early stopping {_pct_text(ms_p)}th percentile estimate: {estimate_p99}"
    return EarlyStoppingResult(True, text, h_min + 1, estimate, estimate_p99)
