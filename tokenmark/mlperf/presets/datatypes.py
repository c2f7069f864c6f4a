"""The round presets' data types: a round, its benchmarks, their scenarios, limits and
accuracy targets (frozen dataclasses over read-only mappings)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final

from tokenmark.errors import ConfigError
from tokenmark.mlperf.settings import LatencyLimits, Scenario, Seeds

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
    #: The packaged rounds that declare a name (set by the loader, which knows the files;
    #: used only to say where an unknown benchmark is).
    rounds_declaring: Callable[[str], tuple[str, ...]] | None = field(
        default=None, compare=False, repr=False)

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
        declaring = self.rounds_declaring(key) if self.rounds_declaring else ()
        elsewhere = [r for r in declaring if r != self.round]
        where = f" (it is in {', '.join(elsewhere)})" if elsewhere else ""
        raise ConfigError(
            f"unknown benchmark {name!r} in round {self.round}{where}; "
            f"choose one of: {', '.join(self.benchmarks)}"
        )




def _parse_scenario(scenario: Scenario | str) -> Scenario:
    s = scenario if isinstance(scenario, Scenario) else Scenario.parse(scenario)
    if not s.is_mlperf:
        raise ConfigError(
            f"{s.value!r} is a tokenmark load pattern, not an MLPerf scenario; MLPerf presets "
            f"cover: {', '.join(x.value for x in _MLPERF_ORDER)}"
        )
    return s



def _names(scenarios: Iterable[Scenario]) -> str:
    have = set(scenarios)
    return ", ".join(s.value for s in _MLPERF_ORDER if s in have)

