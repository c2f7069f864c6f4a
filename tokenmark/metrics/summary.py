"""From records to a :class:`Summary`, with LoadGen's definitions (digest §1.5, §2.1).

The :class:`Accumulator` takes every finished record as it arrives and keeps only the
columns the metrics need (a few int64 values per request, ITL values in a spillable
:class:`~tokenmark.metrics.stats.Column`), so memory stays bounded for millions of
requests. :func:`summarize` interprets those columns under the effective settings:

- latency (E2E), TTFT, TPOT, ITL and send lag per request as
  :mod:`tokenmark.metrics.definitions` defines them (from the *scheduled* time; TPOT
  with LoadGen's integer formula and its count-of-one quirk);
- Offline: samples/s = n / max latency, tokens/s = tokens / max latency;
- Server/Interactive: samples/s = (n - 1) / completion time of the last-issued query,
  tokens/s = tokens / that same time (no -1);
- SingleStream: QPS with LoadGen overhead = (n - 1) / issue time of the last query;
- MultiStream: query latency = the slowest of its samples.

tokenmark's own figures sit beside LoadGen's and never replace them: ITL (each gap
between streamed chunks spread evenly over the chunk's tokens), send lag, output and
input tokens/s over the measured window, and goodput (requests meeting every
per-request limit).

Reasoning models (records with ``reasoning_tokens >= 0``): the time to first answer
token (TTFAT = first answer chunk - scheduled; TTFT stays the first token of either
kind, as MLPerf measures it), reasoning and answer token totals, and how many requests
reasoned but never answered (cut off by ``max_tokens``). Without reasoning records
these figures are ``None`` / 0 and the answer tokens are all output tokens.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from tokenmark.metrics.columns import COLUMNS, ColumnPacker, RecordColumns
from tokenmark.metrics.definitions import e2e_ns, send_lag_ns, tpot_ns, ttft_ns
from tokenmark.metrics.stats import LOADGEN_PERCENTILES, Column, Distribution
from tokenmark.mlperf.settings import EffectiveSettings, LatencyLimits, Scenario
from tokenmark.records import RequestRecord

__all__ = ["Accumulator", "RunData", "Summary", "summarize"]

@dataclass
class RunData:
    """Columns of a finished run (one entry per record, in completion order)."""

    seq: np.ndarray
    query_id: np.ndarray
    scheduled: np.ndarray
    issued: np.ndarray
    first: np.ndarray
    done: np.ndarray
    output_tokens: np.ndarray
    input_tokens: np.ndarray
    ok: np.ndarray  # bool
    measured: np.ndarray  # bool: in the measurement window
    itl: Column
    errors: Counter[str]
    token_disagreements: int
    scheduled_total: int  # samples the schedule holds (or issued, for closed loops)
    interrupted: bool = False
    interrupt_reason: str = ""
    first_answer: np.ndarray | None = None  # -1 where no answer token came
    reasoning_tokens: np.ndarray | None = None  # -1 where none was reported


class Accumulator:
    """Keeps, per record, the few numbers the metrics need (the columns of
    :data:`~tokenmark.metrics.columns.COLUMNS`, packed by a
    :class:`~tokenmark.metrics.columns.ColumnPacker`) and the ITL values in a spillable
    :class:`~tokenmark.metrics.stats.Column`."""

    def __init__(self, itl_cap: int | None = None) -> None:
        self._itl = Column() if itl_cap is None else Column(cap=itl_cap)
        self._packer = ColumnPacker(itl=self._itl)
        self._batches: list[np.ndarray] = []
        #: Take one finished record (a record consumer).
        self.add: Callable[[RequestRecord], None] = self._packer.add

    def add_columns(self, cols: RecordColumns) -> None:
        """``add`` for every record of a packed batch, in order (same result)."""
        self._pending()
        if len(cols):
            self._batches.append(cols.data)
        if cols.itl.size:
            self._itl.extend(cols.itl.tolist())

    def _pending(self) -> None:
        if len(self._packer):
            self._batches.append(self._packer.take().data)

    def _data(self) -> np.ndarray:
        self._pending()
        if not self._batches:
            return np.zeros((len(COLUMNS), 0), dtype=np.int64)
        if len(self._batches) > 1:
            self._batches = [np.concatenate(self._batches, axis=1)]
        return self._batches[0]

    def _col(self, name: str) -> np.ndarray:
        column: np.ndarray = self._data()[COLUMNS.index(name)]
        return column

    @property
    def completed(self) -> int:
        return int(self._col("ok").sum())

    @property
    def failed(self) -> int:
        return int(self._data().shape[1]) - self.completed

    @property
    def output_tokens(self) -> int:
        ok = self._col("ok").astype(bool)
        return int(self._col("output_tokens")[ok].sum())

    def finish(
        self, scheduled_total: int, *, interrupted: bool = False, reason: str = ""
    ) -> RunData:
        data = self._data()
        c = {name: data[i].copy() for i, name in enumerate(COLUMNS)}
        ok = c["ok"].astype(bool)
        errors: Counter[str] = Counter()
        for index in c["error"][~ok].tolist():
            errors[RecordColumns.error_key_of(index)] += 1
        alt, out = c["alt_output_tokens"], c["output_tokens"]
        return RunData(
            seq=c["seq"],
            query_id=c["query_id"],
            scheduled=c["scheduled"],
            issued=c["issued"],
            first=c["first"],
            done=c["done"],
            output_tokens=out,
            input_tokens=c["input_tokens"],
            ok=ok,
            measured=c["measured"].astype(bool),
            itl=self._itl,
            errors=errors,
            token_disagreements=int(((alt >= 0) & (alt != out)).sum()),
            scheduled_total=scheduled_total,
            interrupted=interrupted,
            interrupt_reason=reason,
            first_answer=c["first_answer"],
            reasoning_tokens=c["reasoning_tokens"],
        )


@dataclass(frozen=True)
class Summary:
    """A run interpreted under its effective settings (LoadGen's ``PerformanceSummary``)."""

    scenario: Scenario
    # counts (samples unless said otherwise)
    scheduled: int
    issued: int
    queries_issued: int
    completed: int
    failed: int
    errors: dict[str, int]
    measured: int
    interrupted: bool
    interrupt_reason: str
    # LoadGen's run facts, ns from the start
    sample_count: int
    token_count: int
    max_latency_ns: int
    final_query_scheduled_ns: int
    final_query_issued_ns: int
    final_query_done_ns: int
    # distributions, ns
    latency: Distribution
    ttft: Distribution
    tpot: Distribution
    itl: Distribution
    query_latency: Distribution
    send_lag: Distribution
    # LoadGen's throughput figures
    samples_per_second: float
    tokens_per_second: float | None
    scheduled_samples_per_second: float | None
    # tokenmark's own figures
    window_ns: int
    input_tokens: int
    output_tokens: int
    requests_per_second: float
    output_tokens_per_second: float
    input_tokens_per_second: float
    goodput_requests_per_second: float | None
    goodput_fraction: float | None
    token_disagreements: int
    # samples LoadGen logs an error for when token latencies are used (n_tokens 0 or 1)
    zero_token_samples: int
    one_token_samples: int
    # raw sorted latency arrays the early-stopping rules need
    sorted_latency: np.ndarray = field(repr=False, compare=False)
    sorted_ttft: np.ndarray = field(repr=False, compare=False)
    sorted_tpot: np.ndarray = field(repr=False, compare=False)
    sorted_query_latency: np.ndarray = field(repr=False, compare=False)
    # reasoning models (see the module docstring); None / 0 without reasoning records
    ttfat: Distribution | None = None
    reasoning_requests: int = 0  # measured, completed, with reasoning tokens > 0
    reasoning_tokens: int = 0
    answer_tokens: int = 0
    no_answer_requests: int = 0  # reasoned, completed, but no answer token arrived


def summarize(data: RunData, eff: EffectiveSettings) -> Summary:
    loadgen = eff.scenario.loadgen
    meas = data.measured
    okm = data.ok & meas
    sched = data.scheduled[okm]
    first = data.first[okm]
    done = data.done[okm]
    n_tok = data.output_tokens[okm]
    e2e = e2e_ns(sched, done)
    ttft = ttft_ns(sched, first, done)
    tpot = tpot_ns(e2e, ttft, n_tok)
    n = int(e2e.shape[0])

    issued_mask = data.issued >= 0
    issued_meas = issued_mask & meas
    queries_issued = int(np.unique(data.query_id[issued_meas]).shape[0]) if issued_meas.any() else 0

    # The last-issued query: its scheduled/issued times and the completion of all its samples.
    final_sched = final_issued = final_done = 0
    if issued_meas.any():
        iq = data.query_id[issued_meas]
        last_q = int(iq.max())
        qmask = (data.query_id == last_q) & meas
        final_sched = int(data.scheduled[qmask].min())
        final_issued = int(data.issued[qmask & issued_mask].min())
        dq = data.done[qmask & data.ok]
        final_done = int(dq.max()) if dq.size else 0

    sorted_lat = np.sort(e2e)
    sorted_ttft = np.sort(ttft)
    sorted_tpot = np.sort(tpot)
    latency = Distribution.from_sorted(sorted_lat, _pcts(eff))
    ttft_d = Distribution.from_sorted(sorted_ttft, _pcts(eff))
    tpot_d = Distribution.from_sorted(sorted_tpot, _pcts(eff))

    q_sorted = np.empty(0, dtype=np.int64)
    if loadgen is Scenario.MULTI_STREAM and n:
        qids = data.query_id[okm]
        order = np.argsort(qids, kind="stable")
        qs, starts = np.unique(qids[order], return_index=True)
        qlat = np.maximum.reduceat(done[order], starts) - np.minimum.reduceat(sched[order], starts)
        q_sorted = np.sort(qlat.astype(np.int64))
    query_d = Distribution.from_sorted(q_sorted, _pcts(eff))

    lag = send_lag_ns(data.scheduled, data.issued)[issued_meas]
    send_lag = Distribution.of(lag)

    token_count = int(np.where(n_tok <= 1, 0, n_tok).sum()) if eff.use_token_latencies else 0
    max_latency = int(sorted_lat[-1]) if n else 0
    sps, tps, scheduled_sps = _loadgen_throughput(
        loadgen, n, token_count, max_latency, final_sched, final_issued, final_done, eff
    )

    out_tokens = int(n_tok.sum())
    in_tokens = int(data.input_tokens[okm].sum())
    window = int(done.max() - data.scheduled[meas].min()) if n else 0
    per_s = 1e9 / window if window > 0 else 0.0
    good_rps, good_frac = _goodput(eff.limits, e2e, ttft, tpot, int(meas.sum()), per_s)
    reasoning = _reasoning(data, okm, sched, eff)

    return Summary(
        scenario=eff.scenario,
        scheduled=data.scheduled_total,
        issued=int(issued_mask.sum()),
        queries_issued=queries_issued,
        completed=int(data.ok.sum()),
        failed=int((~data.ok).sum()),
        errors=dict(sorted(data.errors.items())),
        measured=int(meas.sum()),
        interrupted=data.interrupted,
        interrupt_reason=data.interrupt_reason,
        sample_count=n,
        token_count=token_count,
        max_latency_ns=max_latency,
        final_query_scheduled_ns=final_sched,
        final_query_issued_ns=final_issued,
        final_query_done_ns=final_done,
        latency=latency,
        ttft=ttft_d,
        tpot=tpot_d,
        itl=data.itl.distribution(),
        query_latency=query_d,
        send_lag=send_lag,
        samples_per_second=sps,
        tokens_per_second=tps,
        scheduled_samples_per_second=scheduled_sps,
        window_ns=window,
        input_tokens=in_tokens,
        output_tokens=out_tokens,
        requests_per_second=n * per_s,
        output_tokens_per_second=out_tokens * per_s,
        input_tokens_per_second=in_tokens * per_s,
        goodput_requests_per_second=good_rps,
        goodput_fraction=good_frac,
        token_disagreements=data.token_disagreements,
        zero_token_samples=int((n_tok <= 0).sum()) if eff.use_token_latencies else 0,
        one_token_samples=int((n_tok == 1).sum()) if eff.use_token_latencies else 0,
        sorted_latency=sorted_lat,
        sorted_ttft=sorted_ttft,
        sorted_tpot=sorted_tpot,
        sorted_query_latency=q_sorted,
        ttfat=reasoning.ttfat,
        reasoning_requests=reasoning.requests,
        reasoning_tokens=reasoning.tokens,
        answer_tokens=out_tokens - reasoning.tokens,
        no_answer_requests=reasoning.no_answer,
    )


class _Reasoning(NamedTuple):
    ttfat: Distribution | None = None
    requests: int = 0
    tokens: int = 0
    no_answer: int = 0


def _reasoning(data: RunData, okm: np.ndarray, sched: np.ndarray,
               eff: EffectiveSettings) -> _Reasoning:
    """TTFAT and the reasoning-token total over measured, completed records."""
    if data.reasoning_tokens is None or data.first_answer is None:
        return _Reasoning()
    reason = data.reasoning_tokens[okm]
    reported = reason >= 0
    if not reported.any():
        return _Reasoning()
    first = data.first_answer[okm]
    answered = reported & (first >= 0)
    ttfat = np.sort((first - sched)[answered])
    return _Reasoning(Distribution.from_sorted(ttfat, _pcts(eff)), int((reason > 0).sum()),
                      int(reason[reported].sum()), int((reported & (first < 0)).sum()))


def _pcts(eff: EffectiveSettings) -> tuple[float, ...]:
    return tuple(dict.fromkeys((*LOADGEN_PERCENTILES, eff.target_latency_percentile)))


def _loadgen_throughput(
    loadgen: Scenario,
    n: int,
    tokens: int,
    max_latency: int,
    final_sched: int,
    final_issued: int,
    final_done: int,
    eff: EffectiveSettings,
) -> tuple[float, float | None, float | None]:
    def per(count: float, ns: int) -> float:
        return count / (ns / 1e9) if ns > 0 else 0.0

    tps: float | None = None
    scheduled: float | None = None
    if loadgen is Scenario.OFFLINE:
        sps = per(n, max_latency)
        if eff.use_token_latencies:
            tps = per(tokens, max_latency)
    elif loadgen is Scenario.SERVER or not eff.scenario.is_mlperf:
        sps = per(n - 1, final_done)
        scheduled = per(n - 1, final_sched)
        if eff.use_token_latencies:
            tps = per(tokens, final_done)
    else:  # SingleStream / MultiStream: QPS with LoadGen overhead
        sps = per(n - 1, final_issued)
        if eff.use_token_latencies:
            tps = per(tokens, final_issued)
    return sps, tps, scheduled


def _goodput(
    limits: LatencyLimits,
    e2e: np.ndarray,
    ttft: np.ndarray,
    tpot: np.ndarray,
    measured: int,
    per_s: float,
) -> tuple[float | None, float | None]:
    if not limits.any or measured == 0:
        return None, None
    good = np.ones(e2e.shape[0], dtype=bool)
    if limits.ttft_ns is not None:
        good &= ttft <= limits.ttft_ns
    if limits.tpot_ns is not None:
        good &= tpot <= limits.tpot_ns
    if limits.e2e_ns is not None:
        good &= e2e <= limits.e2e_ns
    g = int(good.sum())
    return g * per_s, g / measured
