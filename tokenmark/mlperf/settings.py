"""Requested settings -> effective settings, as LoadGen's ``TestSettings`` ->
``TestSettingsInternal``.

:class:`TestSettings` is flat and holds what was asked for, after the preset of the
round, the user's TOML file, an MLPerf ``user.conf`` and CLI flags were layered (see
:mod:`tokenmark.config`). :func:`effective` normalises it per scenario exactly as
LoadGen's ``TestSettingsInternal`` constructor does (samples per query, coalesced
Offline query, equal-issue padding of SingleStream, minimum sample count); both are
written to ``results.json`` and the MLPerf detail log.

Durations are integer nanoseconds unless a field name says ``_ms`` (LoadGen's unit
for durations in config files).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field, fields, replace
from enum import StrEnum

from tokenmark.errors import ConfigError

__all__ = [
    "MAX_PLANNED_QUERIES",
    "MAX_QPS",
    "MLPERF_SCENARIOS",
    "EffectiveSettings",
    "LatencyLimits",
    "Mode",
    "Scenario",
    "Seeds",
    "TestSettings",
    "derive_seed",
    "effective",
]


def derive_seed(base: int, name: str) -> int:
    """A 64-bit seed for the random stream called ``name``, derived from ``base``.

    tokenmark's own random choices (synthetic datasets, non-MLPerf arrival processes)
    each draw from a stream seeded as the first 8 bytes (big-endian) of
    ``sha256(f"tokenmark:{name}:{base}")``. The derivation is part of the results'
    reproducibility contract and must never change between versions.
    """
    digest = hashlib.sha256(f"tokenmark:{name}:{base}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


class Scenario(StrEnum):
    # MLPerf scenarios (LoadGen's names; Interactive is Server under tighter limits)
    OFFLINE = "Offline"
    SERVER = "Server"
    INTERACTIVE = "Interactive"
    SINGLE_STREAM = "SingleStream"
    MULTI_STREAM = "MultiStream"
    # tokenmark's own load patterns
    CONSTANT = "constant"
    POISSON = "poisson"
    GAMMA = "gamma"
    CLOSED_LOOP = "closed"
    TRACE = "trace"

    @property
    def is_mlperf(self) -> bool:
        return self in MLPERF_SCENARIOS

    @property
    def loadgen(self) -> Scenario:
        """The LoadGen ``TestScenario`` this runs as (Interactive runs as Server)."""
        return Scenario.SERVER if self is Scenario.INTERACTIVE else self

    @property
    def is_open_loop(self) -> bool:
        """Timed schedules judged by the send-lag rule."""
        return self in (
            Scenario.SERVER,
            Scenario.INTERACTIVE,
            Scenario.CONSTANT,
            Scenario.POISSON,
            Scenario.GAMMA,
            Scenario.TRACE,
        )

    @classmethod
    def parse(cls, text: str) -> Scenario:
        key = text.strip().lower().replace("-", "").replace("_", "")
        for s in cls:
            if s.value.lower() == key or s.name.lower().replace("_", "") == key:
                return s
        aliases = {"closedloop": cls.CLOSED_LOOP, "concurrency": cls.CLOSED_LOOP}
        if key in aliases:
            return aliases[key]
        names = ", ".join(s.value for s in cls)
        raise ConfigError(f"unknown scenario {text!r}; choose one of: {names}")


MLPERF_SCENARIOS = frozenset(
    {
        Scenario.OFFLINE,
        Scenario.SERVER,
        Scenario.INTERACTIVE,
        Scenario.SINGLE_STREAM,
        Scenario.MULTI_STREAM,
    }
)


class Mode(StrEnum):
    PERFORMANCE = "PerformanceOnly"
    ACCURACY = "AccuracyOnly"


@dataclass(frozen=True, slots=True)
class Seeds:
    """LoadGen's four seeds (unsigned 64-bit; ``std::mt19937`` keeps the low 32 bits)."""

    qsl: int
    sample_index: int
    schedule: int
    accuracy_log: int = 0


@dataclass(frozen=True, slots=True)
class LatencyLimits:
    """Per-request latency limits, each judged at ``percentile`` (0.99 = p99).

    ``None`` means no limit of that kind. MLPerf LLM benchmarks set TTFT and TPOT for
    Server/Interactive; qwen3-vl sets an end-to-end limit instead.
    """

    ttft_ns: int | None = None
    tpot_ns: int | None = None
    e2e_ns: int | None = None
    percentile: float = 0.99

    @property
    def any(self) -> bool:
        return self.ttft_ns is not None or self.tpot_ns is not None or self.e2e_ns is not None


@dataclass(frozen=True, slots=True)
class TestSettings:
    """What the user asked for (after layering). Field names follow LoadGen's."""

    __test__ = False  # not a pytest class

    round: str
    benchmark: str
    scenario: Scenario
    seeds: Seeds
    mode: Mode = Mode.PERFORMANCE
    # rates and expected latencies
    target_qps: float = 1.0  # Server, Interactive, constant, poisson, gamma
    offline_expected_qps: float = 1.0
    single_stream_expected_latency_ns: int = 1_000_000
    multi_stream_expected_latency_ns: int = 8_000_000
    multi_stream_samples_per_query: int = 8
    # run length
    min_duration_ms: int = 10_000
    max_duration_ms: int = 0
    min_query_count: int = 100
    max_query_count: int = 0
    # dataset
    performance_sample_count: int = 0  # 0: the dataset's size
    total_sample_count: int = 0  # 0: the dataset's size
    sample_concatenate_permutation: bool = False
    # latency rules
    use_token_latencies: bool = False
    limits: LatencyLimits = field(default_factory=LatencyLimits)
    target_latency_percentile: float = 0.99
    max_async_queries: int = 0
    # tokenmark's own patterns
    concurrency: int = 0  # closed loop: number of streams
    max_concurrency: int = 0  # cap on requests in flight for any schedule; 0: none
    burstiness: float = 1.0  # gamma shape; 1.0 is Poisson
    warmup_ms: int = 0
    cooldown_ms: int = 0
    # tokenmark's own rules
    send_lag_limit_ns: int | None = None  # None: max(2 ms, 1% of mean inter-arrival)
    error_rate_limit: float = 0.0
    # a label for runs that are knowingly not MLPerf-length ("demo")
    profile: str = ""
    # accuracy mode and LoadGen's audit settings (compliance tests set these through
    # audit.config; tokenmark.compliance.audit applies them as run modes)
    accuracy_sample_count: int = 0  # accuracy_sample_count_override; 0: the dataset's size
    accuracy_log_probability: float = 0.0
    accuracy_log_sampling_target: int = 0
    performance_issue_unique: bool = False
    performance_issue_same: bool = False
    performance_issue_same_index: int = 0

    def with_(self, **changes: object) -> TestSettings:
        return replace(self, **changes)  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class EffectiveSettings:
    """Settings normalised per scenario (LoadGen's ``TestSettingsInternal``)."""

    requested: TestSettings
    scenario: Scenario
    mode: Mode
    samples_per_query: int
    target_qps: float
    target_duration_ns: int
    min_duration_ns: int
    max_duration_ns: int
    min_query_count: int
    max_query_count: int
    min_sample_count: int
    performance_sample_count: int
    total_sample_count: int
    sample_concatenate_permutation: bool
    use_token_latencies: bool
    limits: LatencyLimits
    target_latency_percentile: float
    max_async_queries: int
    seeds: Seeds
    concurrency: int
    max_concurrency: int
    warmup_ns: int
    cooldown_ns: int
    #: Samples accuracy mode covers: ``[0, accuracy_sample_count)`` of the dataset.
    accuracy_sample_count: int = 0

    @property
    def is_mlperf(self) -> bool:
        return self.scenario.is_mlperf

    @property
    def mean_interarrival_ns(self) -> float:
        return 1e9 / self.target_qps if self.target_qps > 0 else math.inf

    @property
    def send_lag_limit_ns(self) -> int:
        lim = self.requested.send_lag_limit_ns
        if lim is not None:
            return lim
        return max(2_000_000, int(0.01 * self.mean_interarrival_ns))


def effective(requested: TestSettings, dataset_size: int) -> EffectiveSettings:
    """Normalise ``requested`` for a dataset of ``dataset_size`` samples.

    Raises :class:`ConfigError` for settings that cannot run (zero or negative rates,
    a minimum duration shorter than one query, ...).
    """
    r = requested
    s = r.scenario
    _check_requested(r, dataset_size)
    # The dataset is the QSL: its size is the total sample count LoadGen would be told.
    total = dataset_size
    perf_count = r.performance_sample_count or dataset_size
    if perf_count > total:
        raise ConfigError(
            f"performance_sample_count {perf_count} exceeds the dataset's {total} samples; "
            "use a dataset of at least that many samples, or lower it (e.g. --dataset-size "
            "sets both)"
        )

    samples_per_query = 1
    target_qps = r.target_qps
    min_query_count = r.min_query_count
    target_duration_ns = r.min_duration_ms * 1_000_000
    percentile = r.target_latency_percentile
    max_async = r.max_async_queries
    loadgen = s.loadgen

    if loadgen is Scenario.SINGLE_STREAM:
        target_qps = 1e9 / r.single_stream_expected_latency_ns
        max_async = 1
    elif loadgen is Scenario.MULTI_STREAM:
        target_qps = 1e9 / r.multi_stream_expected_latency_ns
        max_async = 1
        samples_per_query = r.multi_stream_samples_per_query
    elif loadgen is Scenario.OFFLINE:
        target_qps = r.offline_expected_qps
        max_async = 1
        # kSlack = 1.1 in LoadGen; uint64 truncation of the product.
        target_sample_count = int(1.1 * (target_duration_ns / 1e9) * target_qps)
        samples_per_query = max(min_query_count, target_sample_count)
        if r.performance_issue_unique:
            # TestSettingsInternal: an Offline "unique" query is the performance set once
            samples_per_query = perf_count
        min_query_count = 1
        target_duration_ns = 0

    if r.sample_concatenate_permutation and loadgen is Scenario.SINGLE_STREAM:
        # LoadGen pads by the QSL's own performance count (not the override); tokenmark's
        # QSL reports its whole dataset as loadable, as the MLPerf LLM harnesses do.
        expected = int(2.0 * (target_duration_ns / 1e9) * target_qps)
        min_query_count = max(min_query_count, expected)
        min_query_count += dataset_size - (min_query_count % dataset_size)

    planned = max(min_query_count * samples_per_query,
                  target_duration_ns / 1e9 * target_qps * samples_per_query)
    if planned > MAX_PLANNED_QUERIES:
        raise ConfigError(
            f"the run would plan {planned:,.0f} samples (rate x duration, or the minimum "
            f"count), more than tokenmark's limit of {MAX_PLANNED_QUERIES:,}; lower --qps, "
            "--min-duration or --min-queries")
    return EffectiveSettings(
        requested=r,
        scenario=s,
        mode=r.mode,
        samples_per_query=samples_per_query,
        target_qps=target_qps,
        target_duration_ns=target_duration_ns,
        min_duration_ns=r.min_duration_ms * 1_000_000,
        max_duration_ns=r.max_duration_ms * 1_000_000,
        min_query_count=min_query_count,
        max_query_count=r.max_query_count,
        min_sample_count=min_query_count * samples_per_query,
        performance_sample_count=perf_count,
        total_sample_count=total,
        sample_concatenate_permutation=r.sample_concatenate_permutation,
        use_token_latencies=r.use_token_latencies,
        limits=replace(r.limits, percentile=percentile),
        target_latency_percentile=percentile,
        max_async_queries=max_async,
        seeds=r.seeds,
        concurrency=r.concurrency,
        max_concurrency=r.max_concurrency,
        warmup_ns=r.warmup_ms * 1_000_000,
        cooldown_ns=r.cooldown_ms * 1_000_000,
        accuracy_sample_count=min(r.accuracy_sample_count or total, total),
    )


#: The highest rate a run may ask for: one query per nanosecond, the clock's resolution.
MAX_QPS = 1e9
#: The most queries a run may plan (its schedule is built before it starts).
MAX_PLANNED_QUERIES = 100_000_000


def _check_numbers(r: TestSettings) -> None:
    """Every number finite and within 64 bits (inf, nan or 1e308 from a flag or a file
    would overflow the schedule and the logs); rates at most :data:`MAX_QPS`."""
    items = [(f.name, getattr(r, f.name)) for f in fields(r)]
    items += [(f"limits.{f.name}", getattr(r.limits, f.name)) for f in fields(r.limits)]
    for name, value in items:
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{name} must be a finite number (got {value}); give a real "
                              "value")
        if abs(value) >= 2**63:
            raise ConfigError(f"{name} {value:g} is out of range (at most 2^63); give a "
                              "real value")
    for name in ("target_qps", "offline_expected_qps"):
        if getattr(r, name) > MAX_QPS:
            raise ConfigError(f"{name} {getattr(r, name):g} is above {MAX_QPS:g} queries/s "
                              "(one per nanosecond, the clock's resolution); lower --qps")


def _check_requested(r: TestSettings, dataset_size: int) -> None:
    s = r.scenario
    _check_numbers(r)
    if dataset_size <= 0:
        raise ConfigError("the dataset is empty; give a dataset with at least one sample")
    if s in (Scenario.SERVER, Scenario.INTERACTIVE, Scenario.CONSTANT, Scenario.POISSON,
             Scenario.GAMMA) and not r.target_qps > 0:
        raise ConfigError(
            f"target_qps must be > 0 for {s.value} (got {r.target_qps}); "
            "set a positive rate, e.g. --qps 10"
        )
    if s is Scenario.OFFLINE and not r.offline_expected_qps > 0:
        raise ConfigError(
            f"offline_expected_qps must be > 0 (got {r.offline_expected_qps}); "
            "set a positive expected rate, e.g. --qps 100"
        )
    if s is Scenario.SINGLE_STREAM and r.single_stream_expected_latency_ns <= 0:
        raise ConfigError("single_stream_expected_latency must be > 0")
    if s is Scenario.MULTI_STREAM and (
        r.multi_stream_expected_latency_ns <= 0 or r.multi_stream_samples_per_query <= 0
    ):
        raise ConfigError("multi_stream_expected_latency and samples_per_query must be > 0")
    if s is Scenario.CLOSED_LOOP and r.concurrency <= 0:
        raise ConfigError(
            f"closed-loop runs need a concurrency > 0 (got {r.concurrency}); e.g. --concurrency 8"
        )
    if s is Scenario.GAMMA and not r.burstiness > 0:
        raise ConfigError(f"burstiness must be > 0 (got {r.burstiness}); 1.0 is Poisson")
    for name in ("min_duration_ms", "max_duration_ms", "min_query_count", "max_query_count",
                 "warmup_ms", "cooldown_ms", "max_concurrency", "max_async_queries"):
        if getattr(r, name) < 0:
            raise ConfigError(f"{name} must be >= 0 (got {getattr(r, name)})")
    if r.max_duration_ms and r.max_duration_ms < r.min_duration_ms:
        raise ConfigError(
            f"max_duration ({r.max_duration_ms} ms) is shorter than min_duration "
            f"({r.min_duration_ms} ms); raise max_duration or lower min_duration"
        )
    if r.max_query_count and r.max_query_count < r.min_query_count and s is not Scenario.OFFLINE:
        raise ConfigError(
            f"max_query_count ({r.max_query_count}) is below min_query_count "
            f"({r.min_query_count}); raise max_query_count or lower min_query_count"
        )
    if s.is_open_loop and s is not Scenario.TRACE and r.min_duration_ms:
        period_ms = 1000.0 / r.target_qps
        if r.min_duration_ms < period_ms:
            raise ConfigError(
                f"min_duration ({r.min_duration_ms} ms) is shorter than one query at "
                f"{r.target_qps} queries/s ({period_ms:.1f} ms); raise the rate or the duration"
            )
    if not 0 < r.target_latency_percentile < 1:
        raise ConfigError(
            f"target_latency_percentile must be in (0, 1) (got {r.target_latency_percentile})"
        )
    if not 0 <= r.accuracy_log_probability <= 1:
        raise ConfigError(
            f"accuracy_log_probability must be in [0, 1] (got {r.accuracy_log_probability})"
        )
    if r.accuracy_log_sampling_target < 0 or r.accuracy_sample_count < 0:
        raise ConfigError("accuracy_log_sampling_target and accuracy_sample_count must be >= 0")
    if r.performance_issue_unique and r.performance_issue_same:
        raise ConfigError(
            "performance_issue_unique and performance_issue_same are both set; LoadGen "
            "refuses that combination (choose one)"
        )
    if r.performance_issue_same and not 0 <= r.performance_issue_same_index < dataset_size:
        raise ConfigError(
            f"performance_issue_same_index {r.performance_issue_same_index} is outside the "
            f"dataset of {dataset_size} samples"
        )
    if not 0 <= r.error_rate_limit <= 1:
        raise ConfigError(f"error_rate_limit must be in [0, 1] (got {r.error_rate_limit})")
    if s.is_mlperf and r.cooldown_ms:
        raise ConfigError(
            "cool-down windows apply to tokenmark's own patterns; MLPerf scenarios count "
            "every query (remove --cooldown or pick a pattern such as 'poisson')"
        )
