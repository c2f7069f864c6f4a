"""Order statistics with LoadGen's definition, exact at any size.

LoadGen's percentile is ``sorted[floor(n * p)]`` (no interpolation), with ``n * p``
computed in double precision; the mean is the integer sum divided by the count,
truncated. :class:`Column` holds int64 values in memory up to ``cap`` and spills the rest
to a temporary file; percentiles stay exact beyond that (a narrowing histogram search
over the spilled chunks), so a run of millions of requests with 128 tokens each keeps
bounded memory without approximating anything.
"""

from __future__ import annotations

import math
import tempfile
from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "LOADGEN_PERCENTILES",
    "Column",
    "Distribution",
    "loadgen_index",
    "quantile_interval",
]

#: The percentile table LoadGen logs for every latency.
LOADGEN_PERCENTILES: tuple[float, ...] = (0.50, 0.90, 0.95, 0.97, 0.99, 0.999)

#: Values a :class:`Column` keeps in memory before it spills (128 MiB of int64).
DEFAULT_CAP = 16 * 1024 * 1024


def loadgen_index(n: int, p: float) -> int:
    """LoadGen's percentile index: ``size_t(n * p)``."""
    return int(n * p)


def quantile_interval(n: int, p: float, confidence: float = 0.95) -> tuple[int, int]:
    """Ranks ``(lo, hi)`` (0-based) bracketing the true p-quantile with ~``confidence``.

    The distribution-free interval from order statistics, with the normal approximation
    to the binomial (continuity-corrected); clipped to ``[0, n-1]``. Reported beside
    each percentile as its confidence bounds and labelled as an approximation.
    """
    if n <= 0:
        return (0, 0)
    z = {0.90: 1.6449, 0.95: 1.96, 0.99: 2.5758}.get(confidence, 1.96)
    mean = n * p
    sd = math.sqrt(n * p * (1 - p))
    lo = math.floor(mean - z * sd - 0.5)
    hi = math.ceil(mean + z * sd + 0.5)
    return (max(0, min(n - 1, lo)), max(0, min(n - 1, hi)))


class Column:
    """An append-only int64 column with exact order statistics at any length."""

    def __init__(self, cap: int = DEFAULT_CAP) -> None:
        self._cap = cap
        self._buf = array("q")
        self._spill: tempfile._TemporaryFileWrapper[bytes] | None = None
        self._spilled = 0
        self._sum = 0
        self._sumsq = 0.0
        self._min: int | None = None
        self._max: int | None = None

    def __len__(self) -> int:
        return self._spilled + len(self._buf)

    @property
    def spilled(self) -> bool:
        return self._spilled > 0

    def append(self, v: int) -> None:
        self._buf.append(v)
        if len(self._buf) >= self._cap:
            self._flush()

    def extend(self, values: Iterable[int]) -> None:
        """Append ``values``; spills at the same points as one append each would."""
        self._buf.extend(values)
        while len(self._buf) >= self._cap:
            rest = self._buf[self._cap:]
            del self._buf[self._cap:]
            self._flush()
            self._buf = rest

    def _stats_of(self, arr: np.ndarray) -> None:
        if arr.size == 0:
            return
        self._sum += int(arr.sum(dtype=np.int64))
        self._sumsq += float(np.square(arr.astype(np.float64)).sum())
        lo, hi = int(arr.min()), int(arr.max())
        self._min = lo if self._min is None else min(self._min, lo)
        self._max = hi if self._max is None else max(self._max, hi)

    def _flush(self) -> None:
        arr = np.frombuffer(self._buf, dtype=np.int64)
        self._stats_of(arr)
        if self._spill is None:
            self._spill = tempfile.NamedTemporaryFile(prefix="tokenmark-col-", delete=True)
        self._spill.write(arr.tobytes())
        self._spilled += arr.size
        self._buf = array("q")

    def _chunks(self) -> Iterator[np.ndarray]:
        if self._spill is not None:
            self._spill.flush()
            size = self._spilled * 8
            step = self._cap * 8
            with open(self._spill.name, "rb") as f:
                for off in range(0, size, step):
                    f.seek(off)
                    yield np.frombuffer(f.read(min(step, size - off)), dtype=np.int64)
        if len(self._buf):
            yield np.frombuffer(self._buf, dtype=np.int64)

    def to_numpy(self) -> np.ndarray:
        """All values (only sensible when they fit in memory)."""
        parts = list(self._chunks())
        if not parts:
            return np.empty(0, dtype=np.int64)
        return np.concatenate(parts) if len(parts) > 1 else parts[0].copy()

    def distribution(
        self, percentiles: Sequence[float] = LOADGEN_PERCENTILES, extra: Sequence[float] = ()
    ) -> Distribution:
        n = len(self)
        if n == 0:
            return Distribution.empty()
        ps = tuple(dict.fromkeys((*percentiles, *extra)))
        if not self.spilled:
            arr = np.sort(np.frombuffer(self._buf, dtype=np.int64))
            return Distribution.from_sorted(arr, ps)
        # Spilled: global moments from running totals, quantiles by exact selection.
        tail = np.frombuffer(self._buf, dtype=np.int64)
        total = self._sum + int(tail.sum(dtype=np.int64))
        sumsq = self._sumsq + float(np.square(tail.astype(np.float64)).sum())
        lo = min(self._min or 0, int(tail.min()) if tail.size else self._min or 0)
        hi = max(self._max or 0, int(tail.max()) if tail.size else self._max or 0)
        values = {p: self._select(loadgen_index(n, p), lo, hi) for p in ps}
        mean = total / n
        var = max(0.0, sumsq / n - mean * mean)
        ci = {p: (self._select(a, lo, hi), self._select(b, lo, hi))
              for p in ps for a, b in [quantile_interval(n, p)]}
        return Distribution(n, lo, hi, mean, _loadgen_mean(total, n), math.sqrt(var), values, ci)

    def _select(self, k: int, lo: int, hi: int) -> int:
        """The k-th smallest value (0-based), by narrowing histograms over the chunks."""
        while True:
            if lo == hi:
                return lo
            bins = 65536
            width = max(1, math.ceil((hi - lo + 1) / bins))
            counts = np.zeros(bins + 1, dtype=np.int64)
            for c in self._chunks():
                m = c[(c >= lo) & (c <= hi)]
                counts += np.bincount((m - lo) // width, minlength=bins + 1)[: bins + 1]
            cum = np.cumsum(counts)
            b = int(np.searchsorted(cum, k, side="right"))
            before = int(cum[b - 1]) if b > 0 else 0
            new_lo = lo + b * width
            new_hi = min(hi, new_lo + width - 1)
            k -= before
            if int(counts[b]) <= self._cap:
                parts = [c[(c >= new_lo) & (c <= new_hi)] for c in self._chunks()]
                inside = np.sort(np.concatenate(parts))
                return int(inside[k])
            lo, hi = new_lo, new_hi

    def close(self) -> None:
        if self._spill is not None:
            self._spill.close()
            self._spill = None


_U64 = 1 << 64


def _loadgen_mean(total: int, n: int) -> int:
    """LoadGen's mean of an int64 column: ``int64 sum / size_t count`` in C++, which
    converts a negative sum to unsigned (``sum + 2**64``) before dividing, the quotient
    stored back in an int64. Sums of latencies are never negative; a TPOT column's can
    be: LoadGen records a 1-token sample's count as 0, so its TPOT is negative."""
    q = (total % _U64) // n
    return q - _U64 if q >= 1 << 63 else q


@dataclass(frozen=True, slots=True)
class Distribution:
    """Summary of one latency (or any int64) column.

    ``percentiles`` maps p (e.g. 0.99) to LoadGen's ``sorted[floor(n*p)]``;
    ``intervals`` gives each percentile's ~95% confidence bounds (values at the
    order-statistic ranks of :func:`quantile_interval`).
    """

    count: int
    min: int
    max: int
    mean: float
    mean_trunc: int  # LoadGen's integer mean (see _loadgen_mean)
    stdev: float
    percentiles: dict[float, int] = field(default_factory=dict)
    intervals: dict[float, tuple[int, int]] = field(default_factory=dict)

    @classmethod
    def empty(cls) -> Distribution:
        return cls(0, 0, 0, 0.0, 0, 0.0, {}, {})

    @classmethod
    def from_sorted(cls, arr: np.ndarray, percentiles: Sequence[float]) -> Distribution:
        n = int(arr.shape[0])
        if n == 0:
            return cls.empty()
        total = int(arr.sum(dtype=np.int64))
        mean = total / n
        stdev = float(arr.std()) if n > 1 else 0.0
        values = {p: int(arr[loadgen_index(n, p)]) for p in percentiles}
        intervals = {}
        for p in percentiles:
            a, b = quantile_interval(n, p)
            intervals[p] = (int(arr[a]), int(arr[b]))
        return cls(n, int(arr[0]), int(arr[-1]), mean, _loadgen_mean(total, n), stdev, values,
                   intervals)

    @classmethod
    def of(cls, values: Iterable[int] | np.ndarray,
           percentiles: Sequence[float] = LOADGEN_PERCENTILES) -> Distribution:
        arr = np.sort(np.fromiter(values, dtype=np.int64)
                      if not isinstance(values, np.ndarray) else values.astype(np.int64))
        return cls.from_sorted(arr, tuple(dict.fromkeys(percentiles)))

    def p(self, q: float) -> int:
        return self.percentiles[q]

    def to_json(self, scale: float = 1.0) -> dict[str, object]:
        """JSON form; ``scale`` converts ns to a display unit (1e-6 for ms)."""

        def conv(v: float) -> float:
            return round(v * scale, 6) if scale != 1.0 else v

        return {
            "count": self.count,
            "min": conv(self.min),
            "max": conv(self.max),
            "mean": conv(self.mean),
            "stdev": conv(self.stdev),
            "percentiles": {f"{p * 100:g}": conv(v) for p, v in self.percentiles.items()},
            "intervals95": {
                f"{p * 100:g}": [conv(a), conv(b)] for p, (a, b) in self.intervals.items()
            },
        }
