"""Schedules: every query's sample and send time, decided before anything is sent.

MLPerf scenarios are generated exactly as LoadGen generates them (loadable set from the
QSL seed, sample order from the sample-index seed, Poisson arrivals from the schedule
seed; :mod:`tokenmark.mlperf.lgrandom`). tokenmark's own patterns (constant, poisson, gamma,
closed loop, timed traces) draw from documented streams of their own
(:func:`tokenmark.mlperf.settings.derive_seed`), in whole shuffles of the dataset as LoadGen's
equal-issue mode does.

Two kinds of schedule exist:

- **timed** (Server, Interactive, Offline, constant, poisson, gamma, trace): each sample
  has an absolute offset from the run's start; the runner sends at that time (or as soon
  after as a concurrency cap allows);
- **closed** (SingleStream, MultiStream, closed loop): ``streams`` independent streams,
  each sending its next query when its previous one completes, until the stop rule holds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from enum import StrEnum

import numpy as np

from tokenmark.errors import ConfigError
from tokenmark.mlperf import lgrandom
from tokenmark.mlperf.settings import EffectiveSettings, Mode, Scenario, derive_seed

__all__ = ["LengthNote", "PermutationStream", "Schedule", "ScheduleKind", "build_schedule",
           "length_note", "timed_trace"]


class ScheduleKind(StrEnum):
    TIMED = "timed"
    CLOSED = "closed"


class PermutationStream:
    """An endless sample order made of whole shuffles of ``range(n)``.

    Block *b* is ``default_rng(derive_seed(seed, f"{name}/{b}")).permutation(n)``, so
    position *i* is reproducible without generating the ones before it.
    """

    def __init__(self, n: int, seed: int, name: str) -> None:
        self._n = n
        self._seed = seed
        self._name = name
        self._block = -1
        self._perm: np.ndarray = np.empty(0, dtype=np.int64)

    def _block_perm(self, b: int) -> np.ndarray:
        if b != self._block:
            rng = np.random.default_rng(derive_seed(self._seed, f"{self._name}/{b}"))
            self._perm = rng.permutation(self._n).astype(np.int64)
            self._block = b
        return self._perm

    @property
    def period(self) -> int:
        """Samples in one shuffle: positions ``0 .. period-1`` hold each sample once."""
        return self._n

    def __getitem__(self, i: int) -> int:
        b, r = divmod(i, self._n)
        return int(self._block_perm(b)[r])

    def take(self, count: int) -> np.ndarray:
        """Positions ``0 .. count-1``, a block at a time."""
        out = np.empty(count, dtype=np.int64)
        i = 0
        while i < count:
            b, r = divmod(i, self._n)
            k = min(count - i, self._n - r)
            out[i:i + k] = self._block_perm(b)[r:r + k]
            i += k
        return out


@dataclass(frozen=True, slots=True)
class Schedule:
    """The precomputed plan of a run.

    For timed schedules ``sample_index[i]``, ``query_id[i]`` and ``scheduled_ns[i]`` give
    the i-th sample to send. For closed schedules the same arrays give the order of
    samples (grouped into queries of ``samples_per_query``); ``scheduled_ns`` there holds
    the timestamps LoadGen generated (it ignores them when issuing), and ``endless`` says
    the order continues past the arrays (own closed loops, via ``order``).
    """

    kind: ScheduleKind
    scenario: Scenario
    sample_index: np.ndarray
    query_id: np.ndarray
    scheduled_ns: np.ndarray
    samples_per_query: int = 1
    streams: int = 1
    # closed-loop stop rule (LoadGen's "ending naturally")
    min_queries: int = 0
    min_duration_ns: int = 0
    max_queries: int = 0
    max_duration_ns: int = 0
    # facts LoadGen logs
    loaded_set: tuple[int, ...] = ()
    generated_query_count: int = 0
    generated_query_duration_ns: int = 0
    # phases of tokenmark's own patterns, as offsets from the start
    warmup_end_ns: int = 0
    cooldown_start_ns: int = -1  # -1: no cool-down window
    order: PermutationStream | None = field(default=None, compare=False)

    def __len__(self) -> int:
        return int(self.sample_index.shape[0])

    @property
    def query_count(self) -> int:
        return int(self.query_id[-1]) + 1 if len(self) else 0

    @property
    def endless(self) -> bool:
        return self.order is not None

    def closed_sample(self, i: int) -> int:
        """The dataset index of the i-th sample sent by a closed schedule."""
        if i < len(self):
            return int(self.sample_index[i])
        if self.order is None:
            raise IndexError(i)
        return self.order[i]


def build_schedule(eff: EffectiveSettings, dataset_size: int) -> Schedule:
    """The schedule for ``eff`` over a dataset of ``dataset_size`` samples."""
    s = eff.scenario
    if s.is_mlperf:
        return _mlperf_schedule(eff, dataset_size)
    if s is Scenario.CLOSED_LOOP:
        return _closed_loop(eff)
    if s is Scenario.TRACE:
        raise ConfigError("a trace schedule needs a trace file (--trace FILE)")
    return _own_timed(eff)


def _mlperf_schedule(eff: EffectiveSettings, dataset_size: int) -> Schedule:
    """LoadGen's queries for ``eff``: one loaded set in performance mode, all in accuracy.

    Accuracy mode issues every loadable set of the accuracy sample count in turn, as
    LoadGen does (``RunAccuracyMode``): each set's queries are generated afresh (the
    sample-index stream restarts per set) and LoadGen's sequence ids run on across sets,
    so here the sets' queries are concatenated, query ids continuing. Their times are
    shifted by the preceding sets' generated durations (LoadGen waits for a set to finish
    before it issues the next; accuracy mode has no timing result, so only the order
    matters). ``loaded_set`` and the ``generated_*`` facts are the first set's, what the
    detail log reports once. The ``performance_issue_*`` audit settings (compliance runs)
    reach :func:`~tokenmark.mlperf.lgrandom.generate_queries` unchanged.
    """
    loadgen = eff.scenario.loadgen
    r = eff.requested
    capped = eff if dataset_size >= eff.total_sample_count else _replace_total(eff, dataset_size)
    pairs = lgrandom.loadable_sets_for(
        capped, accuracy_sample_count=eff.accuracy_sample_count or eff.total_sample_count)
    samples: list[np.ndarray] = []
    qids: list[np.ndarray] = []
    times: list[np.ndarray] = []
    first: lgrandom.GeneratedQueries | None = None
    q_base = 0
    t_base = 0
    for loaded, end in pairs:
        gen = lgrandom.generate_queries(
            eff, loaded, end,
            performance_issue_unique=r.performance_issue_unique,
            performance_issue_same=r.performance_issue_same,
            performance_issue_same_index=r.performance_issue_same_index,
        )
        if first is None:
            first = gen
        sizes = np.asarray(gen.query_sizes, dtype=np.int64)
        qid = np.repeat(np.arange(sizes.shape[0], dtype=np.int64), sizes)
        samples.append(np.asarray(gen.sample_index, dtype=np.int64))
        qids.append(qid + q_base)
        if loadgen is Scenario.OFFLINE:
            times.append(np.zeros(qid.shape[0], dtype=np.int64))
        else:
            times.append(np.asarray(gen.scheduled_ns, dtype=np.int64)[qid] + t_base)
        q_base += int(sizes.shape[0])
        t_base += int(gen.generated_query_duration_ns)
    assert first is not None  # loadable_sets_for gives at least one set
    query_count = q_base
    common = dict(
        scenario=eff.scenario,
        sample_index=np.concatenate(samples),
        query_id=np.concatenate(qids),
        scheduled_ns=np.concatenate(times),
        samples_per_query=first.samples_per_query,
        loaded_set=tuple(first.loaded_set),
        generated_query_count=first.generated_query_count,
        generated_query_duration_ns=int(first.generated_query_duration_ns),
        max_queries=eff.max_query_count,
        max_duration_ns=eff.max_duration_ns,
    )
    if loadgen in (Scenario.SINGLE_STREAM, Scenario.MULTI_STREAM):
        stop_queries = eff.min_query_count
        stop_duration = eff.target_duration_ns
        if eff.mode is Mode.ACCURACY:
            stop_queries, stop_duration = query_count, 0
        return Schedule(
            kind=ScheduleKind.CLOSED,
            streams=1,
            min_queries=stop_queries,
            min_duration_ns=stop_duration,
            **common,  # type: ignore[arg-type]
        )
    return Schedule(kind=ScheduleKind.TIMED, **common)  # type: ignore[arg-type]


def _replace_total(eff: EffectiveSettings, dataset_size: int) -> EffectiveSettings:
    """``eff`` over a dataset smaller than its sample counts say (capped, as before)."""
    return replace(eff, total_sample_count=dataset_size,
                   performance_sample_count=min(eff.performance_sample_count, dataset_size))


def _own_timed(eff: EffectiveSettings) -> Schedule:
    s = eff.scenario
    qps = eff.target_qps
    duration = eff.min_duration_ns
    # Enough queries to cover the duration and the minimum count; the draw below
    # stops at the first offset >= duration once the count is met (as LoadGen's Server).
    n_hint = max(eff.min_query_count, math.ceil(duration * qps / 1e9) + 1)
    rng = np.random.default_rng(derive_seed(eff.seeds.schedule, f"schedule/{s.value}"))
    offsets = _arrivals(
        s, qps, eff.requested.burstiness, rng, n_hint, duration, eff.min_query_count
    )
    n = offsets.shape[0]
    order = PermutationStream(
        eff.performance_sample_count, eff.seeds.sample_index, f"order/{s.value}"
    )
    last = int(offsets[-1]) if n else 0
    cooldown = last - eff.cooldown_ns if eff.cooldown_ns else -1
    return Schedule(
        kind=ScheduleKind.TIMED,
        scenario=s,
        sample_index=order.take(n),
        query_id=np.arange(n, dtype=np.int64),
        scheduled_ns=offsets,
        generated_query_count=n,
        generated_query_duration_ns=last,
        max_queries=eff.max_query_count,
        max_duration_ns=eff.max_duration_ns,
        warmup_end_ns=eff.warmup_ns,
        cooldown_start_ns=cooldown,
    )


def _arrivals(
    s: Scenario,
    qps: float,
    burstiness: float,
    rng: np.random.Generator,
    n_hint: int,
    duration_ns: int,
    min_count: int,
) -> np.ndarray:
    """Offsets (ns) of arrivals until one lands at or after ``duration_ns`` and at least
    ``min_count`` exist. The first arrival is at 0, as in LoadGen."""
    chunks: list[np.ndarray] = []
    next_t = 0.0  # float ns of the next arrival (random patterns)
    total = 0
    while True:
        k = max(n_hint - total, 1024)
        idx = np.arange(total, total + k, dtype=np.int64)
        if s is Scenario.CONSTANT:
            offs = np.floor(idx * (1e9 / qps))
        else:
            if s is Scenario.POISSON:
                gaps = rng.exponential(1e9 / qps, size=k)
            else:  # gamma: shape = burstiness, mean 1/qps, CV = 1/sqrt(shape)
                gaps = rng.gamma(burstiness, 1e9 / (qps * burstiness), size=k)
            cum = next_t + np.concatenate(([0.0], np.cumsum(gaps[:-1])))
            next_t = float(cum[-1] + gaps[-1])
            offs = np.floor(cum)
        offs_i = offs.astype(np.int64)
        # LoadGen's rule: stop after the first query at or past the duration, once the
        # minimum count is reached.
        done = np.nonzero((offs_i >= duration_ns) & (idx + 1 >= min_count))[0]
        if done.size:
            chunks.append(offs_i[: done[0] + 1])
            break
        chunks.append(offs_i)
        total += k
    return np.concatenate(chunks)


def _closed_loop(eff: EffectiveSettings) -> Schedule:
    order = PermutationStream(
        eff.performance_sample_count, eff.seeds.sample_index, "order/closed"
    )
    empty = np.empty(0, dtype=np.int64)
    return Schedule(
        kind=ScheduleKind.CLOSED,
        scenario=eff.scenario,
        sample_index=empty,
        query_id=empty,
        scheduled_ns=empty,
        streams=eff.concurrency,
        min_queries=eff.min_query_count,
        min_duration_ns=eff.min_duration_ns,
        max_queries=eff.max_query_count,
        max_duration_ns=eff.max_duration_ns,
        warmup_end_ns=eff.warmup_ns,
        order=order,
    )


def timed_trace(
    eff: EffectiveSettings, offsets_ns: np.ndarray, sample_index: np.ndarray
) -> Schedule:
    """A timed schedule whose offsets come from a trace (already scaled by any speed-up)."""
    offsets = np.asarray(offsets_ns, dtype=np.int64)
    if offsets.size == 0:
        raise ConfigError("the trace has no requests; give a trace with at least one line")
    if np.any(np.diff(offsets) < 0):
        raise ConfigError("trace timestamps must not go backwards; sort the trace by time")
    offsets = offsets - offsets[0]
    n = offsets.shape[0]
    last = int(offsets[-1])
    return Schedule(
        kind=ScheduleKind.TIMED,
        scenario=Scenario.TRACE,
        sample_index=np.asarray(sample_index, dtype=np.int64),
        query_id=np.arange(n, dtype=np.int64),
        scheduled_ns=offsets,
        generated_query_count=n,
        generated_query_duration_ns=last,
        warmup_end_ns=eff.warmup_ns,
        cooldown_start_ns=last - eff.cooldown_ns if eff.cooldown_ns else -1,
    )


#: A run is "much longer than asked" when LoadGen's plan exceeds the asked length by this
#: factor and by :data:`LONGER_MIN_S` seconds.
LONGER_FACTOR = 1.5
LONGER_MIN_S = 10.0


@dataclass(frozen=True, slots=True)
class LengthNote:
    """What LoadGen's rules make of an MLPerf run's asked length (see :func:`length_note`)."""

    asked_queries: int
    asked_s: float
    planned_queries: int
    planned_samples: int
    planned_s: float
    loaded_set: int

    def message(self) -> str:
        return (f"LoadGen's rules make this run {self.planned_queries:,} queries "
                f"({self.planned_samples:,} samples), about {_span(self.planned_s)} at the "
                f"target rate, against the {self.asked_queries:,} queries and "
                f"{_span(self.asked_s)} asked: in equal-issue mode it rounds the count up "
                f"to whole passes over the loaded sample set ({self.loaded_set:,} samples). "
                "Fewer samples (--dataset-size) or a higher --qps shorten it.")


def _span(seconds: float) -> str:
    s = int(round(seconds))
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    return f"{h} h {m} min" if h else f"{m} min {sec} s" if m else f"{sec} s"


def length_note(eff: EffectiveSettings, schedule: Schedule) -> LengthNote | None:
    """A note when LoadGen's rules make a timed MLPerf performance run (Server,
    Interactive, Offline) much longer than asked (:data:`LONGER_FACTOR`, and at least
    :data:`LONGER_MIN_S` more), else ``None``.

    Asked: the minimum duration, or the minimum query (Offline: sample) count at the
    target (Offline: expected) rate if longer.
    Planned: the schedule's last send (Server, Interactive) or its samples at the
    expected rate (Offline, whose queries all go at once). Closed scenarios (SingleStream,
    MultiStream) stop at the asked minimums whatever the schedule holds, so get no note.
    """
    s = eff.scenario
    if not s.is_mlperf or schedule.kind is not ScheduleKind.TIMED or eff.mode is Mode.ACCURACY \
            or eff.target_qps <= 0:
        return None
    r = eff.requested
    asked_queries = r.min_query_count
    asked_s = max(r.min_duration_ms / 1e3, asked_queries / eff.target_qps)
    samples = len(schedule)
    if s.loadgen is Scenario.OFFLINE:
        planned_s = samples / eff.target_qps
    else:
        planned_s = schedule.generated_query_duration_ns / 1e9
    if planned_s < LONGER_FACTOR * asked_s or planned_s < asked_s + LONGER_MIN_S:
        return None
    return LengthNote(asked_queries=asked_queries, asked_s=asked_s,
                      planned_queries=schedule.query_count, planned_samples=samples,
                      planned_s=planned_s, loaded_set=len(schedule.loaded_set))
