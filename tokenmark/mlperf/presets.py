"""MLPerf round presets: what each round's LLM benchmarks require, as packaged data.

Each MLPerf Inference round has one TOML file in ``tokenmark/mlperf/presets/`` (``v5.1.toml``,
``v6.0.toml``, ...), written from MLCommons' executed files (LoadGen's ``mlperf.conf`` and the
submission checker's ``constants.py``) with every value's source cited in a comment. This
module loads and validates those files and answers three questions:

* which benchmarks a round has, under the checker's names, and which LoadGen config names
  (``llama3_1-8b``, ``llama2-70b-interactive``) map to them (:func:`resolve`);
* what a benchmark requires: dataset, output lengths, scenarios per category, latency
  limits, accuracy targets, compliance tests (:class:`BenchmarkPreset`);
* the :class:`~tokenmark.mlperf.settings.TestSettings` an MLPerf run of a benchmark and scenario
  starts from, before any user override (:func:`mlperf_settings`).

Contracts:

* Every file is schema-checked on load: a missing or unknown key, a value of the wrong type
  or an inconsistency (a scenario without limits, an alias that names no scenario the
  benchmark has, ...) raises :class:`~tokenmark.errors.ConfigError` naming the file and the
  key. A malformed preset never loads.
* Every bad name (round, benchmark, scenario) raises :class:`~tokenmark.errors.ConfigError`
  with one line that says what is wrong and what to choose instead.
* Latency limits are integer nanoseconds in Python (milliseconds in the files, as in
  ``mlperf.conf``); percentiles are fractions (0.99 = p99).
* Loaded presets are immutable (frozen dataclasses over read-only mappings) and cached, so
  every caller sees the same objects.

This is a domain module: it imports only the standard library and the foundation layer.
"""

from __future__ import annotations

import functools
import re
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Final, TypeVar, cast

from tokenmark.errors import ConfigError
from tokenmark.mlperf.settings import LatencyLimits, Scenario, Seeds, TestSettings

__all__ = [
    "CATEGORIES",
    "COMPLIANCE_TESTS",
    "REFERENCE_KEYS",
    "AccuracyTarget",
    "BenchmarkPreset",
    "CategoryScenarios",
    "RoundPreset",
    "ScenarioDefaults",
    "ScenarioPreset",
    "find_benchmark",
    "latest_round",
    "load_round",
    "load_round_file",
    "mlperf_settings",
    "resolve",
    "rounds",
]

SCHEMA_VERSION: Final = 1
CATEGORIES: Final = ("datacenter", "edge")
"""System categories the presets model (the checker's combined ``datacenter,edge`` list is not)."""
COMPLIANCE_TESTS: Final = frozenset({"TEST01", "TEST04", "TEST06", "TEST07", "TEST09"})
ROUND_STATUSES: Final = frozenset({"published", "in progress"})
ANY_SCENARIO: Final = "any"
"""Alias value meaning "this name implies no scenario" (a plain LoadGen model key)."""

_MS_TO_NS: Final = 1_000_000
_U64_LIMIT: Final = 1 << 64
_ROUND_RE: Final = re.compile(r"v?(\d+)\.(\d+)")
_PRESET_PACKAGE: Final = "tokenmark.mlperf"
_PRESET_DIR: Final = "presets"
# Scenarios with their own row of LoadGen defaults; Interactive runs as Server.
_LOADGEN_SCENARIOS: Final = (
    Scenario.OFFLINE,
    Scenario.SERVER,
    Scenario.SINGLE_STREAM,
    Scenario.MULTI_STREAM,
)
_MLPERF_ORDER: Final = (
    Scenario.OFFLINE,
    Scenario.SERVER,
    Scenario.INTERACTIVE,
    Scenario.SINGLE_STREAM,
    Scenario.MULTI_STREAM,
)


# --------------------------------------------------------------------------------------------
# Data types
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ScenarioDefaults:
    """A round's defaults for one LoadGen scenario (``*.<Scenario>.*`` in ``mlperf.conf``).

    ``expected_latency_ns`` is the SingleStream/MultiStream ``target_latency`` placeholder that
    ``mlperf.conf`` sets for ``user.conf`` to override; ``None`` where it sets none.
    """

    scenario: Scenario
    min_duration_ms: int
    min_query_count: int
    percentile: float
    samples_per_query: int = 1
    expected_latency_ns: int | None = None


@dataclass(frozen=True, slots=True)
class ScenarioPreset:
    """How one benchmark runs in one scenario of a round.

    ``loadgen_model`` is the ``mlperf.conf`` model key the scenario runs under (Interactive
    runs as LoadGen Server under its own key, e.g. ``llama2-70b-interactive``).
    ``limits`` holds the latency limits in ns and the percentile they are judged at (for
    Offline and SingleStream: no limits, only the percentile LoadGen reports at).
    ``samples_per_query`` is what is requested (8 in MultiStream, 1 elsewhere; LoadGen
    computes the Offline query size at run time). The dataset fields repeat the benchmark's
    unless the scenario uses another data set (qwen3-vl's 8000-sample Interactive set in
    v6.1). ``result_key`` is the detail-log key the checker reports and ``unit`` its label.
    """

    scenario: Scenario
    loadgen_model: str
    limits: LatencyLimits
    min_duration_ms: int
    min_query_count: int
    samples_per_query: int
    dataset: str
    dataset_size: int
    performance_sample_count: int
    accuracy_sample_count: int
    result_key: str
    unit: str

    @property
    def loadgen_scenario(self) -> Scenario:
        """The LoadGen ``TestScenario`` this runs as (Interactive runs as Server)."""
        return self.scenario.loadgen

    @property
    def target_latency_percentile(self) -> float:
        return self.limits.percentile


#: The submission checker's accuracy metric names -> the reference evaluations' keys.
REFERENCE_KEYS: Final = MappingProxyType({
    "ROUGE1": "rouge1", "ROUGE2": "rouge2", "ROUGEL": "rougeL", "ROUGELSUM": "rougeLsum",
    "GEN_LEN": "gen_len", "TOKENS_PER_SAMPLE": "tokens_per_sample",
    "exact_match": "exact_match", "gsm8k_accuracy": "gsm8k", "mbxp_accuracy": "mbxp",
})


@dataclass(frozen=True, slots=True)
class AccuracyTarget:
    """One accuracy requirement as the submission checker applies it.

    The score must satisfy ``lower_bound <= score <= upper_bound`` (each bound only where it
    exists): ``lower_bound = reference * lower_fraction`` (0.99 or 0.999 of the reference for
    quality metrics, 0.9 for output-length metrics such as ``TOKENS_PER_SAMPLE`` and
    ``GEN_LEN``), ``upper_bound = (upper_reference or reference) * upper_fraction`` (1.1 for
    output lengths). ``scenarios`` is empty when the target applies to every scenario.
    """

    metric: str
    reference: float
    lower_fraction: float | None = None
    upper_fraction: float | None = None
    upper_reference: float | None = None
    scenarios: frozenset[Scenario] = frozenset()

    @property
    def reference_key(self) -> str:
        """The key the reference evaluation prints the metric under (``accuracy.txt``):
        ``ROUGE1`` -> ``rouge1``, ``gsm8k_accuracy`` -> ``gsm8k``, ..."""
        return REFERENCE_KEYS.get(self.metric, self.metric)

    @property
    def lower_bound(self) -> float | None:
        if self.lower_fraction is None:
            return None
        return self.reference * self.lower_fraction

    @property
    def upper_bound(self) -> float | None:
        if self.upper_fraction is None:
            return None
        ref = self.reference if self.upper_reference is None else self.upper_reference
        return ref * self.upper_fraction

    def applies_to(self, scenario: Scenario) -> bool:
        return not self.scenarios or scenario in self.scenarios

    def accepts(self, score: float) -> bool:
        """Whether ``score`` meets this target (the checker's ``>=`` and ``<=``)."""
        lower, upper = self.lower_bound, self.upper_bound
        return (lower is None or score >= lower) and (upper is None or score <= upper)


@dataclass(frozen=True, slots=True)
class CategoryScenarios:
    """The scenarios a benchmark has in one system category and which of them are required.

    A submission must include every scenario in ``required`` and, when ``one_of`` is not
    empty, at least one of ``one_of`` (the checker's rule for Server/Interactive); it may
    include any scenario in ``optional``.
    """

    category: str
    required: tuple[Scenario, ...]
    optional: tuple[Scenario, ...] = ()
    one_of: tuple[Scenario, ...] = ()

    @property
    def allowed(self) -> tuple[Scenario, ...]:
        return self.required + tuple(s for s in self.optional if s not in self.required)

    def missing(self, submitted: Iterable[Scenario]) -> tuple[str, ...]:
        """What ``submitted`` lacks, as the checker would word it (empty when complete)."""
        have = set(submitted)
        out = [s.value for s in self.required if s not in have]
        if self.one_of and not have.intersection(self.one_of):
            out.append("(one of) " + " or ".join(s.value for s in self.one_of))
        return tuple(out)


@dataclass(frozen=True, slots=True)
class BenchmarkPreset:
    """One LLM benchmark of one round, named as the submission checker names it.

    ``aliases`` maps every other accepted name to the scenario it implies (``None``: any):
    LoadGen config keys such as ``llama3_1-8b`` and Interactive keys such as
    ``llama2-70b-interactive``. ``use_token_latencies`` says whether LoadGen judges TTFT/TPOT
    and the result is tokens/s (``True``), or judges end-to-end latency with samples/s
    (``False``, qwen3-vl). ``accuracy_sample_count`` is what accuracy mode covers (gpt-oss-120b:
    4395 of 6396). ``max_output_tokens_accuracy`` is set where accuracy mode allows longer
    outputs than performance mode.
    """

    name: str
    round: str
    loadgen_model: str
    aliases: Mapping[str, Scenario | None]
    model: str
    dataset: str
    dataset_size: int
    performance_sample_count: int
    accuracy_sample_count: int
    min_output_tokens: int | None
    max_output_tokens: int | None
    max_output_tokens_accuracy: int | None
    use_token_latencies: bool
    sample_concatenate_permutation: bool
    scenarios: Mapping[Scenario, ScenarioPreset]
    categories: Mapping[str, CategoryScenarios]
    accuracy: tuple[AccuracyTarget, ...]
    compliance_tests: tuple[str, ...]

    def __hash__(self) -> int:  # the mappings are unhashable; (round, name) identifies it
        return hash((self.round, self.name))

    @property
    def metric_unit(self) -> str:
        """The throughput unit of the result: ``tokens/s`` or ``samples/s``."""
        return "tokens/s" if self.use_token_latencies else "samples/s"

    @property
    def loadgen_models(self) -> tuple[str, ...]:
        """Every ``mlperf.conf`` key the benchmark runs under, base key first."""
        keys = [self.loadgen_model]
        keys += [p.loadgen_model for p in self.scenarios.values() if p.loadgen_model not in keys]
        return tuple(keys)

    def loadgen_token_limits(self, scenario: Scenario | str) -> tuple[int, int] | None:
        """The ``(ttft, tpot)`` limits LoadGen logs for a run of ``scenario``, in ns.

        LoadGen reads ``ttft_latency``/``tpot_latency`` from ``mlperf.conf``'s *Server*
        lines of the model key the run is configured under, whatever the scenario, and
        logs them (``ttft_latency (ns)``, ``requested_server_ttft_latency``) in every
        scenario. That key's Server lines are the limits of the scenario preset that runs
        as LoadGen Server under the same key: for Interactive (its own key, e.g.
        ``llama3_1-8b-interactive``) the Interactive limits; for Server, Offline and
        SingleStream (the base key) the Server limits. ``None`` where the key has no
        Server lines with token limits (``llama3_1-8b-edge``: LoadGen logs its 100 ms
        defaults).
        """
        key = self.scenario(scenario).loadgen_model
        for p in self.scenarios.values():
            lim = p.limits
            if (p.loadgen_model == key and p.scenario.loadgen is Scenario.SERVER
                    and lim.ttft_ns is not None and lim.tpot_ns is not None):
                return lim.ttft_ns, lim.tpot_ns
        return None

    def scenario(self, scenario: Scenario | str) -> ScenarioPreset:
        """The preset of ``scenario``; :class:`ConfigError` if the benchmark lacks it."""
        s = _parse_scenario(scenario)
        try:
            return self.scenarios[s]
        except KeyError:
            raise ConfigError(
                f"benchmark {self.name!r} has no {s.value} scenario in round {self.round}; "
                f"choose one of: {_names(self.scenarios)}"
            ) from None

    def required_scenarios(self, category: str) -> tuple[Scenario, ...]:
        """Scenarios a ``category`` submission must include (see also ``one_of``)."""
        return self.category(category).required

    def category(self, category: str) -> CategoryScenarios:
        try:
            return self.categories[category.strip().lower()]
        except KeyError:
            raise ConfigError(
                f"benchmark {self.name!r} is not in the {category!r} category in round "
                f"{self.round}; choose one of: {', '.join(self.categories)}"
            ) from None

    def accuracy_targets(
        self, scenario: Scenario | str | None = None
    ) -> tuple[AccuracyTarget, ...]:
        """The accuracy targets, all of them or those that apply to ``scenario``."""
        if scenario is None:
            return self.accuracy
        s = self.scenario(scenario).scenario
        return tuple(t for t in self.accuracy if t.applies_to(s))


@dataclass(frozen=True, slots=True)
class RoundPreset:
    """One MLPerf Inference round: seeds, scenario defaults and LLM benchmarks.

    ``status`` is ``"published"`` or ``"in progress"`` (the round's files may still change).
    ``excluded`` names the checker's other models of the round and why tokenmark has no
    preset for them. ``aliases`` maps each accepted lower-case alias to the benchmarks that
    declare it (two when an alias is ambiguous, as ``llama2-70b`` is between ``-99`` and
    ``-99.9``).
    """

    round: str
    status: str
    note: str
    seeds: Seeds
    sources: Mapping[str, str]
    defaults: Mapping[Scenario, ScenarioDefaults]
    benchmarks: Mapping[str, BenchmarkPreset]
    excluded: Mapping[str, str]
    aliases: Mapping[str, tuple[str, ...]]

    def __hash__(self) -> int:  # the mappings are unhashable; the round identifies it
        return hash(self.round)

    def benchmark(self, name: str) -> BenchmarkPreset:
        return self.resolve(name)[0]

    def resolve(self, name: str) -> tuple[BenchmarkPreset, Scenario | None]:
        """The benchmark ``name`` refers to and the scenario it implies (``None``: any).

        ``name`` is a checker name or an alias, matched without regard to case or
        surrounding space.
        """
        key = name.strip().lower()
        if key in self.benchmarks:
            return self.benchmarks[key], None
        owners = self.aliases.get(key, ())
        if len(owners) == 1:
            bench = self.benchmarks[owners[0]]
            return bench, bench.aliases[key]
        if owners:
            raise ConfigError(
                f"benchmark name {name!r} is ambiguous in round {self.round}: it is the "
                f"LoadGen name of {' and '.join(owners)}, which differ in accuracy target; "
                f"name one of them"
            )
        if key in self.excluded:
            raise ConfigError(
                f"benchmark {name!r} of round {self.round} has no tokenmark preset "
                f"({self.excluded[key]}); choose one of: {', '.join(self.benchmarks)}"
            )
        elsewhere = [r for r in rounds() if r != self.round and _declares(r, key)]
        where = f" (it is in {', '.join(elsewhere)})" if elsewhere else ""
        raise ConfigError(
            f"unknown benchmark {name!r} in round {self.round}{where}; "
            f"choose one of: {', '.join(self.benchmarks)}"
        )


# --------------------------------------------------------------------------------------------
# Public functions
# --------------------------------------------------------------------------------------------


def rounds() -> list[str]:
    """The rounds with a packaged preset, oldest first (e.g. ``["v5.1", "v6.0", "v6.1"]``)."""
    return list(_packaged_rounds())


def latest_round(*, published: bool = True) -> str:
    """The newest packaged round; with ``published`` (the default), the newest whose results
    are published, so its files no longer change (the default round for runs)."""
    names = [r for r in rounds() if not published or _load_packaged(r).status == "published"]
    if not names:
        raise ConfigError("no published MLPerf round has a preset; name a round explicitly")
    return names[-1]


def load_round(name: str) -> RoundPreset:
    """The packaged preset of round ``name`` (``"v6.0"``, ``"6.0"`` and ``"V6.0"`` all work).

    Raises :class:`ConfigError` for a round without a preset or a malformed preset file.
    """
    return _load_packaged(_round_name(name))


def load_round_file(path: str | Path) -> RoundPreset:
    """Load and validate a preset file outside the package (e.g. a draft of a new round).

    The file follows the packaged presets' schema; its ``round`` key names the round.
    """
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise ConfigError(
            f"cannot read preset file {str(p)!r} ({exc.strerror}); give an existing TOML file"
        ) from None
    return _parse_file(raw, p.name, expected_round=None)


def resolve(round_name: str, name: str) -> tuple[BenchmarkPreset, Scenario | None]:
    """The benchmark ``name`` (checker name or LoadGen alias) of a round, and the scenario
    the name implies: ``Scenario.INTERACTIVE`` for names like ``llama2-70b-interactive``,
    else ``None``."""
    return load_round(round_name).resolve(name)


def find_benchmark(round_name: str, name: str) -> BenchmarkPreset:
    """The benchmark ``name`` (checker name or LoadGen alias) of a round."""
    return resolve(round_name, name)[0]


def mlperf_settings(
    round_name: str, benchmark: str, scenario: Scenario | str | None = None
) -> TestSettings:
    """The settings an MLPerf run of ``benchmark`` in ``scenario`` starts from.

    These are what LoadGen's ``TestSettings.FromConfig`` yields from the round's
    ``mlperf.conf`` before any ``user.conf`` or flag: the round's seeds, minimum duration
    and query count, latency limits and their percentile, token latencies, equal-issue
    mode, performance and total sample counts, MultiStream samples per query and the
    SingleStream/MultiStream expected-latency placeholders. ``target_qps`` and
    ``offline_expected_qps`` keep the :class:`TestSettings` defaults (``mlperf.conf`` sets
    1.0 for both, for ``user.conf`` to override).

    ``scenario`` may be omitted when ``benchmark`` implies one (``llama2-70b-interactive``).
    Given such a name, ``Server`` is read as Interactive, because LoadGen runs the
    Interactive key as Server (``FromConfig(conf, "llama2-70b-interactive", "Server")``).
    """
    preset = load_round(round_name)
    bench, implied = preset.resolve(benchmark)
    sp = bench.scenario(_choose_scenario(bench, benchmark, implied, scenario))
    ms = preset.defaults[Scenario.MULTI_STREAM]
    multi = bench.scenarios.get(Scenario.MULTI_STREAM)
    settings = TestSettings(
        round=preset.round,
        benchmark=bench.name,
        scenario=sp.scenario,
        seeds=preset.seeds,
        multi_stream_samples_per_query=(
            multi.samples_per_query if multi is not None else ms.samples_per_query
        ),
        min_duration_ms=sp.min_duration_ms,
        min_query_count=sp.min_query_count,
        performance_sample_count=sp.performance_sample_count,
        total_sample_count=sp.dataset_size,
        accuracy_sample_count=sp.accuracy_sample_count,
        sample_concatenate_permutation=bench.sample_concatenate_permutation,
        use_token_latencies=bench.use_token_latencies,
        limits=sp.limits,
        target_latency_percentile=sp.limits.percentile,
    )
    # mlperf.conf's placeholders; LoadGen reads both keys whatever the scenario.
    ss_latency = preset.defaults[Scenario.SINGLE_STREAM].expected_latency_ns
    if ss_latency is not None:
        settings = replace(settings, single_stream_expected_latency_ns=ss_latency)
    if ms.expected_latency_ns is not None:
        settings = replace(settings, multi_stream_expected_latency_ns=ms.expected_latency_ns)
    return settings


# --------------------------------------------------------------------------------------------
# Name handling
# --------------------------------------------------------------------------------------------


def _round_name(name: str) -> str:
    m = _ROUND_RE.fullmatch(name.strip().lower())
    known = _packaged_rounds()
    if m is not None:
        norm = f"v{int(m.group(1))}.{int(m.group(2))}"
        if norm in known:
            return norm
    raise ConfigError(f"unknown MLPerf round {name!r}; choose one of: {', '.join(known)}")


def _parse_scenario(scenario: Scenario | str) -> Scenario:
    s = scenario if isinstance(scenario, Scenario) else Scenario.parse(scenario)
    if not s.is_mlperf:
        raise ConfigError(
            f"{s.value!r} is a tokenmark load pattern, not an MLPerf scenario; MLPerf presets "
            f"cover: {', '.join(x.value for x in _MLPERF_ORDER)}"
        )
    return s


def _choose_scenario(
    bench: BenchmarkPreset,
    name: str,
    implied: Scenario | None,
    scenario: Scenario | str | None,
) -> Scenario:
    if scenario is None:
        if implied is None:
            raise ConfigError(
                f"name a scenario for {bench.name!r} in round {bench.round}; "
                f"choose one of: {_names(bench.scenarios)}"
            )
        return implied
    s = _parse_scenario(scenario)
    if implied is None or s is implied:
        return s
    if implied is Scenario.INTERACTIVE and s is Scenario.SERVER:
        return implied  # LoadGen runs the Interactive key as its Server scenario
    raise ConfigError(
        f"{name!r} names the {implied.value} scenario of {bench.name!r}, not {s.value}; "
        f"use {bench.name!r} for the {s.value} scenario"
    )


def _names(scenarios: Iterable[Scenario]) -> str:
    have = set(scenarios)
    return ", ".join(s.value for s in _MLPERF_ORDER if s in have)


def _declares(round_name: str, key: str) -> bool:
    preset = _load_packaged(round_name)
    return key in preset.benchmarks or key in preset.aliases


# --------------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------------


@functools.cache
def _packaged_rounds() -> tuple[str, ...]:
    folder = resources.files(_PRESET_PACKAGE) / _PRESET_DIR
    found: list[tuple[int, int]] = []
    for entry in folder.iterdir():
        m = re.fullmatch(r"v(\d+)\.(\d+)\.toml", entry.name)
        if m is not None and entry.is_file():
            found.append((int(m.group(1)), int(m.group(2))))
    return tuple(f"v{a}.{b}" for a, b in sorted(found))


@functools.cache
def _load_packaged(name: str) -> RoundPreset:
    entry = resources.files(_PRESET_PACKAGE) / _PRESET_DIR / f"{name}.toml"
    return _parse_file(entry.read_bytes(), entry.name, expected_round=name)


def _parse_file(raw: bytes, source: str, expected_round: str | None) -> RoundPreset:
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(
            f"malformed preset {source}: not valid TOML ({exc}); fix the file"
        ) from None
    return _RoundParser(source).parse(data, expected_round)


# --------------------------------------------------------------------------------------------
# Schema check
# --------------------------------------------------------------------------------------------

_T = TypeVar("_T")


def _key_path(parts: Iterable[str]) -> str:
    """``parts`` as TOML writes a dotted key (``benchmarks."llama3.1-8b".accuracy[0]``)."""
    return ".".join(
        p if re.fullmatch(r"[A-Za-z0-9_-]+(\[\d+\])?", p) else f'"{p}"' for p in parts
    )


_MISSING: Final = object()


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


class _Table:
    """A TOML table being read: typed getters that name file and key in every error, and a
    final :meth:`done` that rejects keys nobody asked for (so a typo cannot pass silently)."""

    def __init__(self, source: str, path: tuple[str, ...], data: Mapping[str, object]) -> None:
        self.source = source
        self.path = path
        self.data = data
        self.seen: set[str] = set()

    def error(self, key: str | None, problem: str) -> ConfigError:
        where = _key_path((*self.path, key) if key is not None else self.path) or "top level"
        return ConfigError(f"malformed preset {self.source}: {where} {problem}; fix that key")

    def has(self, key: str) -> bool:
        return key in self.data

    def only(self, *known: str) -> None:
        """Reject keys outside ``known`` before reading any value, so a misspelt key is
        reported as such rather than as the absence of the key it was meant to be."""
        for key in self.data:
            if key not in known:
                raise self.error(key, f"is not a known key (known here: {', '.join(known)})")

    def _value(self, key: str, kind: str, check: Callable[[object], bool]) -> object:
        """The value of ``key`` if it passes ``check``, or ``_MISSING`` if absent."""
        self.seen.add(key)
        if key not in self.data:
            return _MISSING
        value = self.data[key]
        if not check(value):
            raise self.error(key, f"must be {kind} (got {value!r})")
        return value

    def _required(self, key: str, kind: str, check: Callable[[object], bool]) -> object:
        value = self._value(key, kind, check)
        if value is _MISSING:
            raise self.error(key, f"is missing (expected {kind})")
        return value

    def text(self, key: str) -> str:
        return cast(str, self._required(key, "a non-empty string", _is_text))

    def opt_text(self, key: str) -> str | None:
        value = self._value(key, "a non-empty string", _is_text)
        return None if value is _MISSING else cast(str, value)

    def integer(self, key: str, *, minimum: int = 1) -> int:
        return cast(int, self._required(key, f"an integer >= {minimum}", _at_least(minimum)))

    def opt_integer(self, key: str, *, minimum: int = 1) -> int | None:
        value = self._value(key, f"an integer >= {minimum}", _at_least(minimum))
        return None if value is _MISSING else cast(int, value)

    def number(self, key: str) -> float:
        value = self._required(key, "a positive number", _is_positive)
        return float(cast(float, value))

    def opt_number(self, key: str) -> float | None:
        value = self._value(key, "a positive number", _is_positive)
        return None if value is _MISSING else float(cast(float, value))

    def opt_fraction(self, key: str, *, upper: float) -> float | None:
        value = self._value(key, f"a number in (0, {upper})", _in_open(upper))
        return None if value is _MISSING else float(cast(float, value))

    def fraction(self, key: str, *, upper: float) -> float:
        value = self._required(key, f"a number in (0, {upper})", _in_open(upper))
        return float(cast(float, value))

    def boolean(self, key: str) -> bool:
        return cast(bool, self._required(key, "true or false", lambda v: isinstance(v, bool)))

    def names(self, key: str) -> tuple[str, ...]:
        value = self._required(key, "a list of strings", _is_str_list)
        return tuple(cast(list[str], value))

    def table(self, key: str) -> _Table:
        value = self._required(key, "a table", lambda v: isinstance(v, dict))
        return _Table(self.source, (*self.path, key), cast(dict[str, object], value))

    def opt_table(self, key: str) -> _Table | None:
        return self.table(key) if key in self.data else None

    def tables(self, key: str) -> list[_Table]:
        value = cast(list[dict[str, object]], self._required(key, "an array of tables", _is_tables))
        return [
            _Table(self.source, (*self.path, f"{key}[{i}]"), item) for i, item in enumerate(value)
        ]

    def children(self) -> list[tuple[str, _Table]]:
        """Every entry of a table of tables (keys chosen by the file, e.g. benchmark names)."""
        return [(key, self.table(key)) for key in self.data]

    def done(self) -> None:
        unknown = [k for k in self.data if k not in self.seen]
        if unknown:
            known = ", ".join(sorted(self.seen)) or "none"
            raise self.error(unknown[0], f"is not a known key (known here: {known})")


def _is_text(v: object) -> bool:
    return isinstance(v, str) and bool(v.strip())


def _is_positive(v: object) -> bool:
    return _is_number(v) and cast(float, v) > 0


def _is_str_list(v: object) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _is_tables(v: object) -> bool:
    return isinstance(v, list) and all(isinstance(x, dict) for x in v)


def _at_least(minimum: int) -> Callable[[object], bool]:
    return lambda v: _is_int(v) and cast(int, v) >= minimum


def _in_open(upper: float) -> Callable[[object], bool]:
    return lambda v: _is_number(v) and 0 < cast(float, v) < upper


class _RoundParser:
    """Turns one preset file's TOML data into a :class:`RoundPreset`, or raises."""

    def __init__(self, source: str) -> None:
        self.source = source

    def parse(self, data: Mapping[str, object], expected_round: str | None) -> RoundPreset:
        top = _Table(self.source, (), data)
        top.only(
            "schema", "round", "status", "note", "sources", "seeds", "defaults", "excluded",
            "benchmarks",
        )
        schema = top.integer("schema")
        if schema != SCHEMA_VERSION:
            raise top.error("schema", f"is {schema}, but this tokenmark reads {SCHEMA_VERSION}")
        round_name = top.text("round")
        if _ROUND_RE.fullmatch(round_name) is None or not round_name.startswith("v"):
            raise top.error("round", f"must look like 'v6.0' (got {round_name!r})")
        if expected_round is not None and round_name != expected_round:
            raise top.error("round", f"is {round_name!r} but the file is for {expected_round!r}")
        status = top.text("status")
        if status not in ROUND_STATUSES:
            raise top.error("status", f"must be one of {sorted(ROUND_STATUSES)} (got {status!r})")
        note = top.opt_text("note") or ""
        sources = self._sources(top)
        seeds = self._seeds(top)
        defaults = self._defaults(top)
        excluded = self._excluded(top)
        benches_table = top.table("benchmarks")
        benchmarks: dict[str, BenchmarkPreset] = {}
        for name, table in benches_table.children():
            if name != name.strip().lower():
                raise benches_table.error(name, "must be lower case without surrounding space")
            benchmarks[name] = self._benchmark(round_name, name, table, defaults)
        if not benchmarks:
            raise benches_table.error(None, "must hold at least one benchmark")
        top.done()
        for name in excluded:
            if name in benchmarks:
                raise top.error("excluded", f"names {name!r}, which has a preset")
        aliases: dict[str, list[str]] = {}
        for bench in benchmarks.values():
            for alias in bench.aliases:
                if alias in benchmarks or alias in excluded:
                    raise benches_table.error(
                        bench.name, f"declares alias {alias!r}, which is another benchmark's name"
                    )
                aliases.setdefault(alias, []).append(bench.name)
        return RoundPreset(
            round=round_name,
            status=status,
            note=note,
            seeds=seeds,
            sources=MappingProxyType(sources),
            defaults=MappingProxyType(defaults),
            benchmarks=MappingProxyType(benchmarks),
            excluded=MappingProxyType(excluded),
            aliases=MappingProxyType({k: tuple(v) for k, v in aliases.items()}),
        )

    def _sources(self, top: _Table) -> dict[str, str]:
        table = top.opt_table("sources")
        if table is None:
            return {}
        out = {key: table.text(key) for key in table.data}
        table.done()
        return out

    def _seeds(self, top: _Table) -> Seeds:
        table = top.table("seeds")
        table.only("qsl", "sample_index", "schedule", "accuracy_log")

        def seed(key: str, required: bool = True) -> int:
            text = table.text(key) if required else table.opt_text(key)
            if text is None:
                return 0
            if not text.isdigit() or int(text) >= _U64_LIMIT:
                raise table.error(key, f"must be a decimal unsigned 64-bit integer (got {text!r})")
            return int(text)

        seeds = Seeds(
            qsl=seed("qsl"),
            sample_index=seed("sample_index"),
            schedule=seed("schedule"),
            accuracy_log=seed("accuracy_log", required=False),
        )
        table.done()
        return seeds

    def _defaults(self, top: _Table) -> dict[Scenario, ScenarioDefaults]:
        table = top.table("defaults")
        out: dict[Scenario, ScenarioDefaults] = {}
        for key, sub in table.children():
            scenario = self._scenario_name(table, key)
            if scenario not in _LOADGEN_SCENARIOS:
                raise table.error(key, "has no defaults of its own (it runs as LoadGen Server)")
            sub.only(
                "min_duration_ms", "min_query_count", "percentile", "samples_per_query",
                "expected_latency_ms",
            )
            spq = sub.opt_integer("samples_per_query") or 1
            if spq != 1 and scenario is not Scenario.MULTI_STREAM:
                raise sub.error("samples_per_query", "may differ from 1 only in MultiStream")
            if scenario in (Scenario.SINGLE_STREAM, Scenario.MULTI_STREAM):
                latency: int | None = sub.integer("expected_latency_ms")
            else:
                latency = None
            out[scenario] = ScenarioDefaults(
                scenario=scenario,
                min_duration_ms=sub.integer("min_duration_ms", minimum=0),
                min_query_count=sub.integer("min_query_count"),
                percentile=sub.fraction("percentile", upper=1.0),
                samples_per_query=spq,
                expected_latency_ns=None if latency is None else latency * _MS_TO_NS,
            )
            sub.done()
        missing = [s.value for s in _LOADGEN_SCENARIOS if s not in out]
        if missing:
            raise table.error(missing[0], "is missing (every LoadGen scenario needs defaults)")
        return out

    def _excluded(self, top: _Table) -> dict[str, str]:
        table = top.opt_table("excluded")
        if table is None:
            return {}
        out = {key.strip().lower(): table.text(key) for key in table.data}
        table.done()
        return out

    def _scenario_name(self, table: _Table, key: str) -> Scenario:
        try:
            scenario = Scenario(key)
        except ValueError:
            scenario = None
        if scenario is None or not scenario.is_mlperf:
            raise table.error(key, f"is not an MLPerf scenario (choose: {_names(_MLPERF_ORDER)})")
        return scenario

    def _scenario_list(self, table: _Table, key: str) -> tuple[Scenario, ...]:
        out = tuple(self._scenario_name(table, n) for n in table.names(key))
        if len(set(out)) != len(out):
            raise table.error(key, "lists a scenario twice")
        return out

    def _benchmark(
        self,
        round_name: str,
        name: str,
        t: _Table,
        defaults: Mapping[Scenario, ScenarioDefaults],
    ) -> BenchmarkPreset:
        t.only(
            "model", "loadgen_model", "dataset", "dataset_size", "performance_sample_count",
            "accuracy_sample_count", "min_output_tokens", "max_output_tokens",
            "max_output_tokens_accuracy", "use_token_latencies", "sample_concatenate_permutation",
            "compliance_tests", "aliases", "categories", "scenarios", "accuracy",
        )
        loadgen_model = t.text("loadgen_model")
        dataset_size = t.integer("dataset_size")
        perf_count = t.integer("performance_sample_count")
        acc_count = t.integer("accuracy_sample_count")
        for key, count in (
            ("performance_sample_count", perf_count),
            ("accuracy_sample_count", acc_count),
        ):
            if count > dataset_size:
                raise t.error(key, f"({count}) exceeds dataset_size ({dataset_size})")
        min_out = t.opt_integer("min_output_tokens")
        max_out = t.opt_integer("max_output_tokens")
        if min_out is not None and max_out is not None and min_out > max_out:
            raise t.error("min_output_tokens", f"({min_out}) exceeds max_output_tokens ({max_out})")
        use_tokens = t.boolean("use_token_latencies")
        tests = t.names("compliance_tests")
        for test in tests:
            if test not in COMPLIANCE_TESTS:
                known = ", ".join(sorted(COMPLIANCE_TESTS))
                raise t.error("compliance_tests", f"names {test!r} (known: {known})")
        base = _BenchmarkBase(
            loadgen_model, t.text("dataset"), dataset_size, perf_count, acc_count
        )
        scenarios_t = t.table("scenarios")
        scenarios: dict[Scenario, ScenarioPreset] = {}
        for key, sub in scenarios_t.children():
            scenario = self._scenario_name(scenarios_t, key)
            scenarios[scenario] = self._scenario(sub, scenario, base, use_tokens, defaults)
        if not scenarios:
            raise scenarios_t.error(None, "must hold at least one scenario")
        categories = self._categories(t, scenarios)
        aliases = self._aliases(t, scenarios)
        self._check_loadgen_names(t, name, loadgen_model, aliases, scenarios)
        accuracy = tuple(self._accuracy(sub, scenarios) for sub in t.tables("accuracy"))
        if not accuracy:
            raise t.error("accuracy", "must hold at least one target")
        bench = BenchmarkPreset(
            name=name,
            round=round_name,
            loadgen_model=loadgen_model,
            aliases=MappingProxyType(aliases),
            model=t.text("model"),
            dataset=base.dataset,
            dataset_size=dataset_size,
            performance_sample_count=perf_count,
            accuracy_sample_count=acc_count,
            min_output_tokens=min_out,
            max_output_tokens=max_out,
            max_output_tokens_accuracy=t.opt_integer("max_output_tokens_accuracy"),
            use_token_latencies=use_tokens,
            sample_concatenate_permutation=t.boolean("sample_concatenate_permutation"),
            scenarios=MappingProxyType(
                {s: scenarios[s] for s in _MLPERF_ORDER if s in scenarios}
            ),
            categories=MappingProxyType(categories),
            accuracy=accuracy,
            compliance_tests=tests,
        )
        t.done()
        return bench

    def _scenario(
        self,
        t: _Table,
        scenario: Scenario,
        base: _BenchmarkBase,
        use_tokens: bool,
        defaults: Mapping[Scenario, ScenarioDefaults],
    ) -> ScenarioPreset:
        t.only(
            "loadgen_model", "ttft_ms", "tpot_ms", "e2e_ms", "percentile", "min_duration_ms",
            "min_query_count", "dataset", "dataset_size", "performance_sample_count",
            "accuracy_sample_count", "result_key", "unit",
        )
        d = defaults[scenario.loadgen]
        ttft, tpot, e2e = (t.opt_integer(k) for k in ("ttft_ms", "tpot_ms", "e2e_ms"))
        if scenario.loadgen is Scenario.SERVER:
            if use_tokens and (ttft is None or tpot is None or e2e is not None):
                raise t.error(None, "needs ttft_ms and tpot_ms, and no e2e_ms (token latencies)")
            if not use_tokens and (e2e is None or ttft is not None or tpot is not None):
                raise t.error(None, "needs e2e_ms, and no ttft_ms or tpot_ms (no token latencies)")
        elif ttft is not None or tpot is not None or e2e is not None:
            raise t.error(None, f"may not set latency limits ({scenario.value} has none)")
        dataset_size = _or(t.opt_integer("dataset_size"), base.dataset_size)
        perf = _or(t.opt_integer("performance_sample_count"), base.performance_sample_count)
        acc = _or(t.opt_integer("accuracy_sample_count"), base.accuracy_sample_count)
        if perf > dataset_size or acc > dataset_size:
            raise t.error(None, f"has a sample count above its dataset size ({dataset_size})")
        preset = ScenarioPreset(
            scenario=scenario,
            loadgen_model=_or(t.opt_text("loadgen_model"), base.loadgen_model),
            limits=LatencyLimits(
                ttft_ns=None if ttft is None else ttft * _MS_TO_NS,
                tpot_ns=None if tpot is None else tpot * _MS_TO_NS,
                e2e_ns=None if e2e is None else e2e * _MS_TO_NS,
                percentile=_or(t.opt_fraction("percentile", upper=1.0), d.percentile),
            ),
            min_duration_ms=_or(t.opt_integer("min_duration_ms", minimum=0), d.min_duration_ms),
            min_query_count=_or(t.opt_integer("min_query_count"), d.min_query_count),
            samples_per_query=d.samples_per_query,
            dataset=_or(t.opt_text("dataset"), base.dataset),
            dataset_size=dataset_size,
            performance_sample_count=perf,
            accuracy_sample_count=acc,
            result_key=t.text("result_key"),
            unit=t.text("unit"),
        )
        t.done()
        return preset

    def _categories(
        self, t: _Table, scenarios: Mapping[Scenario, ScenarioPreset]
    ) -> dict[str, CategoryScenarios]:
        table = t.table("categories")
        out: dict[str, CategoryScenarios] = {}
        covered: set[Scenario] = set()
        for key, sub in table.children():
            if key not in CATEGORIES:
                raise table.error(key, f"is not a category (choose: {', '.join(CATEGORIES)})")
            sub.only("required", "optional", "one_of")
            cat = CategoryScenarios(
                category=key,
                required=self._scenario_list(sub, "required"),
                optional=self._scenario_list(sub, "optional"),
                one_of=self._scenario_list(sub, "one_of"),
            )
            sub.done()
            if set(cat.required) & set(cat.optional):
                raise sub.error("optional", "repeats a required scenario")
            if not set(cat.one_of) <= set(cat.optional):
                raise sub.error("one_of", "must be a subset of optional")
            if len(cat.one_of) == 1:
                raise sub.error("one_of", "must name at least two scenarios (or none)")
            if not cat.required and not cat.one_of:
                raise sub.error("required", "is empty and no one_of is given")
            for s in cat.allowed:
                if s not in scenarios:
                    raise sub.error(None, f"names {s.value}, which has no scenario preset")
            covered.update(cat.allowed)
            out[key] = cat
        if not out:
            raise table.error(None, "must hold at least one category")
        for s in scenarios:
            if s not in covered:
                raise table.error(None, f"puts the {s.value} scenario in no category")
        return out

    def _aliases(
        self, t: _Table, scenarios: Mapping[Scenario, ScenarioPreset]
    ) -> dict[str, Scenario | None]:
        table = t.table("aliases")
        out: dict[str, Scenario | None] = {}
        for alias in table.data:
            value = table.text(alias)
            if alias != alias.strip().lower():
                raise table.error(alias, "must be lower case without surrounding space")
            if value == ANY_SCENARIO:
                out[alias] = None
                continue
            scenario = self._scenario_name(table, value)
            if scenario not in scenarios:
                raise table.error(alias, f"implies {scenario.value}, which the benchmark lacks")
            out[alias] = scenario
        table.done()
        return out

    def _check_loadgen_names(
        self,
        t: _Table,
        name: str,
        loadgen_model: str,
        aliases: Mapping[str, Scenario | None],
        scenarios: Mapping[Scenario, ScenarioPreset],
    ) -> None:
        # Every LoadGen key must be an accepted name, mapped explicitly to what it means.
        if loadgen_model != name and (loadgen_model not in aliases or aliases[loadgen_model]):
            raise t.error("aliases", f"must map the LoadGen name {loadgen_model!r} to 'any'")
        for preset in scenarios.values():
            key = preset.loadgen_model
            if key != loadgen_model and (key not in aliases or aliases[key] is not preset.scenario):
                raise t.error(
                    "aliases", f"must map the LoadGen name {key!r} to {preset.scenario.value!r}"
                )

    def _accuracy(
        self, t: _Table, scenarios: Mapping[Scenario, ScenarioPreset]
    ) -> AccuracyTarget:
        t.only(
            "metric", "reference", "lower_fraction", "upper_fraction", "upper_reference",
            "scenarios",
        )
        lower = t.opt_fraction("lower_fraction", upper=2.0)
        upper = t.opt_fraction("upper_fraction", upper=2.0)
        upper_ref = t.opt_number("upper_reference")
        if lower is None and upper is None:
            raise t.error(None, "needs lower_fraction, upper_fraction or both")
        if upper_ref is not None and upper is None:
            raise t.error("upper_reference", "needs upper_fraction")
        applies: frozenset[Scenario] = frozenset()
        if t.has("scenarios"):
            applies = frozenset(self._scenario_list(t, "scenarios"))
            if not applies or not applies <= set(scenarios):
                raise t.error("scenarios", "must list scenarios the benchmark has")
        target = AccuracyTarget(
            metric=t.text("metric"),
            reference=t.number("reference"),
            lower_fraction=lower,
            upper_fraction=upper,
            upper_reference=upper_ref,
            scenarios=applies,
        )
        t.done()
        return target


@dataclass(frozen=True, slots=True)
class _BenchmarkBase:
    """Benchmark-level values a scenario inherits unless it overrides them."""

    loadgen_model: str
    dataset: str
    dataset_size: int
    performance_sample_count: int
    accuracy_sample_count: int


def _or(value: _T | None, default: _T) -> _T:
    return default if value is None else value
