"""Bounded-memory accumulators behind the report's plots: time bins, latency histograms,
and CDF points.

- :class:`TimeBins`: named series over the run's time axis. Bins start 10 us wide;
  whenever an event falls past the last of :data:`MAX_TIME_BINS` bins, bins are merged
  in groups of ten (the width stays a power of ten), so any run length costs the same
  memory and every bin holds the exact sum (or max) of its events. For display,
  :func:`display_width_ns` picks a round width (1, 2 or 5 x 10^k) from the run's length
  that gives at most :data:`DISPLAY_TIME_BINS` bins (48 to 120), and :meth:`TimeBins.coarsen`
  merges the bins into it, still exactly (a round width is a multiple of a power of ten
  no larger than it).
- :class:`LogHistogram`: counts in :data:`BINS_PER_DECADE` log-spaced bins per decade
  from 1 us to about 3 hours (values below go to the first bin, above to the last), so
  a bin is 1.16% wide. It feeds every histogram, and the CDF of values too many to
  keep (ITL: one value per output token).
- :class:`Values`: one int64 value per request kept in memory up to a cap, for CDFs
  drawn from the exact sorted values; past the cap it says so and the CDF comes from
  the histogram instead.

The exact percentiles shown beside each plot always come from ``results.json``; these
structures only decide what is drawn.
"""

from __future__ import annotations

import math
from array import array

import numpy as np

__all__ = [
    "BINS_PER_DECADE",
    "DISPLAY_TIME_BINS",
    "MAX_TIME_BINS",
    "LogHistogram",
    "TimeBins",
    "Values",
    "cdf_from_sorted",
    "cdf_ranks",
    "display_width_ns",
]

MAX_TIME_BINS = 2400
#: Most bins drawn: the display width is the smallest round width giving at most this many.
DISPLAY_TIME_BINS = 120
FIRST_WIDTH_NS = 10_000
_MERGE = 10
BINS_PER_DECADE = 200
_LO_NS = 1_000.0  # 1 us
_DECADES = 10
_NBINS = BINS_PER_DECADE * _DECADES


class TimeBins:
    """Series of sums (``add``) or maxima (``peak``) per time bin; see the module doc."""

    def __init__(self, max_bins: int = MAX_TIME_BINS, first_width_ns: int = FIRST_WIDTH_NS):
        self.max_bins = max_bins
        self.width_ns = first_width_ns
        self.sums: dict[str, np.ndarray] = {}
        self.peaks: dict[str, np.ndarray] = {}
        self.used = 0  # bins that hold anything (last index + 1)

    def _fit(self, t_ns: np.ndarray) -> np.ndarray:
        """Bin indices of ``t_ns`` (negative times count from 0), widening as needed."""
        if t_ns.size == 0:
            return t_ns
        top = int(t_ns.max())
        while top // self.width_ns >= self.max_bins:
            self._merge(_MERGE)
        idx: np.ndarray = np.maximum(t_ns, 0) // self.width_ns
        self.used = max(self.used, int(idx.max()) + 1)
        return idx

    def _merge(self, group: int) -> None:
        """Merge bins in groups of ``group`` (sums added, peaks maxed): exact."""
        self.width_ns *= group
        pad = -self.max_bins % group
        for d, op in ((self.sums, np.add), (self.peaks, np.maximum)):
            for k, v in d.items():
                merged = op.reduce(np.concatenate([v, np.zeros(pad, dtype=v.dtype)])
                                   .reshape(-1, group), axis=1)
                d[k] = np.concatenate([merged, np.zeros(self.max_bins - merged.size,
                                                        dtype=v.dtype)])
        self.used = -(-self.used // group)

    def _series(self, d: dict[str, np.ndarray], name: str) -> np.ndarray:
        s = d.get(name)
        if s is None:
            s = d[name] = np.zeros(self.max_bins, dtype=np.float64)
        return s

    def add(self, name: str, t_ns: np.ndarray, weights: np.ndarray | None = None) -> None:
        """Add ``weights`` (1 each if ``None``) at times ``t_ns`` to series ``name``."""
        idx = self._fit(np.asarray(t_ns, dtype=np.int64))
        s = self._series(self.sums, name)
        if idx.size:
            s += np.bincount(idx, weights=weights, minlength=self.max_bins)[: self.max_bins]

    def peak(self, name: str, t_ns: np.ndarray, values: np.ndarray) -> None:
        idx = self._fit(np.asarray(t_ns, dtype=np.int64))
        s = self._series(self.peaks, name)
        if idx.size:
            np.maximum.at(s, idx, np.asarray(values, dtype=np.float64))

    def coarsen(self, max_bins: int = DISPLAY_TIME_BINS) -> int:
        """Merge the bins into the round width of :func:`display_width_ns` (at most
        ``max_bins`` bins hold data); returns the width in ns."""
        width = display_width_ns(self.used * self.width_ns, max_bins, self.width_ns)
        if width > self.width_ns:
            self._merge(width // self.width_ns)
        return self.width_ns

    def sum_series(self, name: str) -> np.ndarray:
        return self._series(self.sums, name)[: self.used].copy()

    def peak_series(self, name: str) -> np.ndarray:
        return self._series(self.peaks, name)[: self.used].copy()

    def starts_s(self) -> np.ndarray:
        return np.arange(self.used, dtype=np.float64) * (self.width_ns / 1e9)


def display_width_ns(span_ns: int, max_bins: int = DISPLAY_TIME_BINS,
                     min_width_ns: int = 1) -> int:
    """The smallest round bin width (1, 2 or 5 x 10^k ns, and at least ``min_width_ns``)
    that covers ``span_ns`` in at most ``max_bins`` bins; a width ``min_width_ns`` that
    is a power of ten divides it."""
    width = max(1, min_width_ns)
    for k in range(20):
        for m in (1, 2, 5):
            w: int = m * 10**k
            if w >= width and w * max_bins >= span_ns:
                return w
    return width


def _bin_of(v: np.ndarray) -> np.ndarray:
    x = np.maximum(np.asarray(v, dtype=np.float64), _LO_NS)
    b = np.floor(np.log10(x / _LO_NS) * BINS_PER_DECADE).astype(np.int64)
    out: np.ndarray = np.clip(b, 0, _NBINS - 1)
    return out


def _edge_ns(i: np.ndarray | int) -> np.ndarray:
    out: np.ndarray = _LO_NS * np.power(10.0, np.asarray(i, dtype=np.float64) / BINS_PER_DECADE)
    return out


class LogHistogram:
    """Counts of int64 ns values in log-spaced bins (see the module docstring)."""

    def __init__(self) -> None:
        self.counts = np.zeros(_NBINS, dtype=np.int64)
        self.n = 0

    def add(self, values: np.ndarray, weights: np.ndarray | None = None) -> None:
        if values.size == 0:
            return
        w = None if weights is None else np.asarray(weights, dtype=np.int64)
        self.counts += np.bincount(_bin_of(values), weights=w,
                                   minlength=_NBINS).astype(np.int64)[:_NBINS]
        self.n += int(values.size if w is None else w.sum())

    def display(self, max_bins: int = 60) -> tuple[list[float], list[int]]:
        """At most ``max_bins`` display bins over the occupied range: (edges in ns,
        counts); ``len(edges) == len(counts) + 1``. Fine bins are merged whole, so each
        display count is exact for its edges."""
        nz = np.flatnonzero(self.counts)
        if nz.size == 0:
            return [], []
        lo, hi = int(nz[0]), int(nz[-1]) + 1
        group = max(1, math.ceil((hi - lo) / max_bins))
        edges = list(range(lo, hi, group)) + [hi]
        counts = [int(self.counts[a:b].sum()) for a, b in zip(edges, edges[1:], strict=False)]
        return [float(x) for x in _edge_ns(np.array(edges))], counts

    def cdf(self, max_points: int = 400) -> tuple[list[float], list[float]]:
        """CDF points (upper bin edge in ns, fraction at or below); tail bins are kept."""
        nz = np.flatnonzero(self.counts)
        if nz.size == 0 or self.n == 0:
            return [], []
        cum = np.cumsum(self.counts[nz]) / self.n
        keep = nz
        if nz.size > max_points:
            step = math.ceil(nz.size / max_points)
            pick = set(range(0, nz.size, step)) | {nz.size - 1}
            pick |= set(np.flatnonzero(cum >= 0.99).tolist())  # keep the tail whole
            sel = np.array(sorted(pick))
            keep, cum = nz[sel], cum[sel]
        return [float(x) for x in _edge_ns(keep + 1)], [float(c) for c in cum]


class Values:
    """int64 values kept up to ``cap`` (then :attr:`overflowed` and dropped)."""

    def __init__(self, cap: int = 4_000_000) -> None:
        self.cap = cap
        self.buf = array("q")
        self.overflowed = False

    def extend(self, values: np.ndarray) -> None:
        if self.overflowed:
            return
        if len(self.buf) + values.size > self.cap:
            self.overflowed = True
            self.buf = array("q")
            return
        self.buf.frombytes(np.ascontiguousarray(values, dtype=np.int64).tobytes())

    def sorted(self) -> np.ndarray:
        return np.sort(np.frombuffer(self.buf, dtype=np.int64))


def cdf_ranks(n: int, max_points: int = 500) -> np.ndarray:
    """Fractions at which to sample a CDF of ``n`` values: evenly spaced, plus a tail
    grid ``1 - 10**-k`` so p99, p99.9 and beyond stay visible when downsampled."""
    if n <= max_points:
        return (np.arange(n, dtype=np.float64) + 1) / n
    even = np.linspace(0.0, 1.0, max_points - 100)
    tail = 1.0 - np.power(10.0, -np.linspace(1.0, math.log10(n), 100))
    return np.unique(np.concatenate([even, tail]))


def cdf_from_sorted(arr: np.ndarray, max_points: int = 500) -> tuple[list[float], list[float]]:
    """CDF points of sorted values with LoadGen's rank ``sorted[floor(n*q)]``."""
    n = int(arr.size)
    if n == 0:
        return [], []
    qs = cdf_ranks(n, max_points)
    idx = np.minimum((n * qs).astype(np.int64), n - 1)
    if n <= max_points:
        idx = np.arange(n)
    return [float(x) for x in arr[idx]], [float(q) for q in qs]
