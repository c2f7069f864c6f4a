"""The schema check of a preset file: every key, type and cross-reference, each error naming
the file and the key."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final, TypeVar, cast

from tokenmark.errors import ConfigError
from tokenmark.mlperf.presets.datatypes import (
    _LOADGEN_SCENARIOS,
    _MLPERF_ORDER,
    _MS_TO_NS,
    _ROUND_RE,
    _U64_LIMIT,
    ANY_SCENARIO,
    CATEGORIES,
    COMPLIANCE_TESTS,
    ROUND_STATUSES,
    SCHEMA_VERSION,
    AccuracyTarget,
    BenchmarkPreset,
    CategoryScenarios,
    RoundPreset,
    ScenarioDefaults,
    ScenarioPreset,
    _names,
)
from tokenmark.mlperf.settings import LatencyLimits, Scenario, Seeds

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
