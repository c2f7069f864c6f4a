"""Cheap running figures for a live progress display: recent latency percentiles and
whether early stopping is satisfied yet.

The load generator measures its own send lag, so whatever watches a run must cost it
almost nothing. :class:`LiveLatency` is a record consumer (``Runner(consumers=[...])``)
whose :meth:`~LiveLatency.add` does a handful of integer operations per record and
never allocates: recent TTFT, TPOT and end-to-end latencies go into fixed-size rings
(the last :data:`DEFAULT_WINDOW` answered requests), and the counts of requests over
each latency limit are kept since the start. :meth:`~LiveLatency.snapshot`, called a
few times a second, takes the percentile of each ring (one ``numpy.partition`` of a few
thousand values) and evaluates LoadGen's early-stopping bound from the counts.

What is exact and what is not, as the display must say:

- the over-limit counts and the answered count are exact (measured-window records
  only, each latency as :mod:`tokenmark.metrics.definitions` defines it);
- the percentiles are *approximate*: LoadGen's ``sorted[floor(n*p)]`` over the recent
  window, not over the run (the results file has the exact figures);
- early stopping (Server, Interactive) compares the queries issued so far with
  ``h_min(t) + t`` for the current over-limit count ``t`` of each limited latency, the
  test LoadGen applies at the end (:func:`tokenmark.mlperf.earlystop.server_early_stopping`);
  SingleStream and MultiStream need ``h_min(1) + 1`` queries; Offline and tokenmark's
  own patterns have no early stopping (``None``).
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass

import numpy as np

from tokenmark.metrics.definitions import tpot_one, ttft_one
from tokenmark.mlperf.earlystop import MinPassingQueriesFinder
from tokenmark.mlperf.settings import EffectiveSettings, LatencyLimits, Scenario
from tokenmark.records import Phase, RequestRecord

__all__ = ["DEFAULT_WINDOW", "EarlyStatus", "LiveLatency", "LiveSnapshot"]

#: Answered requests each ring holds: enough for a stable p99 (about 20 values above
#: it), small enough that a partition costs tens of microseconds.
DEFAULT_WINDOW = 2048


@dataclass(frozen=True, slots=True)
class EarlyStatus:
    """Early stopping so far: ``satisfied`` once ``issued >= needed``."""

    satisfied: bool
    issued: int
    needed: int
    over: dict[str, int]  # over-limit counts per latency (``ttft``, ``tpot``, ``e2e``)


@dataclass(frozen=True, slots=True)
class LiveSnapshot:
    """The figures of one refresh. Percentiles are ns over the recent window (or
    ``None`` before any answer); ``window`` says how many answers they cover."""

    percentile: float
    window: int
    ttft_ns: int | None
    tpot_ns: int | None
    e2e_ns: int | None
    answered: int
    over: dict[str, int]
    limits: LatencyLimits
    early: EarlyStatus | None


class _Ring:
    """The last ``size`` values of a stream; ``array`` item stores are cheap."""

    __slots__ = ("buf", "n", "pos", "size")

    def __init__(self, size: int) -> None:
        self.size = size
        self.buf = array("q", bytes(8 * size))
        self.n = 0
        self.pos = 0

    def push(self, v: int) -> None:
        self.buf[self.pos] = v
        self.pos = (self.pos + 1) % self.size
        if self.n < self.size:
            self.n += 1

    def percentile(self, p: float) -> int | None:
        if self.n == 0:
            return None
        vals = np.frombuffer(self.buf, dtype=np.int64)[: self.n].copy()
        k = min(self.n - 1, int(self.n * p))
        return int(np.partition(vals, k)[k])


class LiveLatency:
    """A record consumer keeping the live figures of one run (see the module docstring).

    ``eff`` gives the limits, their percentile and the scenario (which early-stopping
    test applies). Records outside the measured window (warm-up, cool-down) and failed
    ones are ignored, as the summary ignores them.
    """

    def __init__(self, eff: EffectiveSettings, window: int = DEFAULT_WINDOW) -> None:
        self.limits = eff.limits
        self.percentile = eff.target_latency_percentile
        self.scenario = eff.scenario
        self.tokens = eff.use_token_latencies
        self._ttft = _Ring(window)
        self._tpot = _Ring(window)
        self._e2e = _Ring(window)
        self.answered = 0
        self.over = {"ttft": 0, "tpot": 0, "e2e": 0}
        self._lim_ttft = eff.limits.ttft_ns
        self._lim_tpot = eff.limits.tpot_ns
        self._lim_e2e = eff.limits.e2e_ns
        self._h_cache: dict[int, int] = {}

    def add(self, r: RequestRecord) -> None:
        """Take one finished record (constant time, no allocation)."""
        if r.error is not None or r.done_ns < 0 or r.phase is not Phase.MEASURE:
            return
        e2e = r.done_ns - r.scheduled_ns
        ttft = ttft_one(r.scheduled_ns, r.first_token_ns, r.done_ns)
        tpot = tpot_one(e2e, ttft, r.output_tokens)
        self.answered += 1
        self._ttft.push(ttft)
        self._tpot.push(tpot)
        self._e2e.push(e2e)
        if self._lim_ttft is not None and ttft > self._lim_ttft:
            self.over["ttft"] += 1
        if self._lim_tpot is not None and tpot > self._lim_tpot:
            self.over["tpot"] += 1
        if self._lim_e2e is not None and e2e > self._lim_e2e:
            self.over["e2e"] += 1

    def _h_min(self, t: int) -> int:
        h = self._h_cache.get(t)
        if h is None:
            # A fresh finder per count, as LoadGen makes one per evaluation.
            h = self._h_cache[t] = MinPassingQueriesFinder()(t, self.percentile)
        return h

    def early(self, queries_issued: int) -> EarlyStatus | None:
        """Early stopping from the counts so far (``None`` where it does not apply)."""
        lg = self.scenario.loadgen
        if not self.scenario.is_mlperf or lg is Scenario.OFFLINE:
            return None
        if lg is Scenario.SERVER:
            if self.tokens:
                keys = [k for k, lim in (("ttft", self._lim_ttft), ("tpot", self._lim_tpot))
                        if lim is not None]
            else:
                keys = ["e2e"] if self._lim_e2e is not None else []
            over = {k: self.over[k] for k in keys}
            needed = max((self._h_min(t) + t for t in over.values()), default=0)
        else:  # SingleStream / MultiStream: enough queries for one discarded outlier
            over = {}
            needed = self._h_min(1) + 1
        return EarlyStatus(queries_issued >= needed, queries_issued, needed, over)

    def snapshot(self, queries_issued: int) -> LiveSnapshot:
        """The figures now; ``queries_issued`` comes from the runner's live counters."""
        p = self.percentile
        return LiveSnapshot(
            percentile=p,
            window=self._ttft.n,
            ttft_ns=self._ttft.percentile(p),
            tpot_ns=self._tpot.percentile(p) if self.tokens else None,
            e2e_ns=self._e2e.percentile(p),
            answered=self.answered,
            over=dict(self.over),
            limits=self.limits,
            early=self.early(queries_issued),
        )
