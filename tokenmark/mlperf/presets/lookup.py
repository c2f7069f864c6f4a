"""Finding a round's preset and a benchmark in it by any of its names, and the
``TestSettings`` an MLPerf run starts from; the packaged files are loaded once and cached."""

from __future__ import annotations

import functools
import re
import tomllib
from dataclasses import replace
from importlib import resources
from pathlib import Path

from tokenmark.errors import ConfigError
from tokenmark.mlperf.presets.datatypes import (
    _PRESET_DIR,
    _PRESET_PACKAGE,
    _ROUND_RE,
    BenchmarkPreset,
    RoundPreset,
    _names,
    _parse_scenario,
)
from tokenmark.mlperf.presets.schema import _RoundParser
from tokenmark.mlperf.settings import Scenario, TestSettings

__all__ = [
    "find_benchmark",
    "folder_benchmark",
    "implied_scenario",
    "latest_round",
    "load_round",
    "load_round_file",
    "mlperf_settings",
    "resolve",
    "rounds",
]

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


def folder_benchmark(name: str, round_name: str | None = None) -> tuple[str, str | None] | None:
    """The benchmark a benchmark or folder name names in the presets (``round_name``'s
    first, then the newest round's) and the scenario the name implies (its alias's:
    ``llama2-70b-interactive-99`` is llama2-70b-99's ``Interactive``; ``None``: any), or
    ``None`` when no preset knows the name (or it is an alias of several benchmarks)."""
    candidates = ([round_name] if round_name else []) + [
        r for r in reversed(rounds()) if r != round_name]
    key = name.strip().lower()
    for rnd in candidates:
        try:
            preset = load_round(rnd)
        except ConfigError:
            continue
        if key in preset.benchmarks:
            return key, None
        owners = preset.aliases.get(key, ())
        if len(owners) == 1:
            implied = preset.benchmarks[owners[0]].aliases.get(key)
            return owners[0], implied.value if implied is not None else None
    return None


def implied_scenario(name: str, round_name: str | None = None) -> str | None:
    """The scenario a benchmark folder's name implies (:func:`folder_benchmark`), or
    ``None`` where it implies none (a benchmark's own name, ``any``, an unknown name)."""
    found = folder_benchmark(name, round_name)
    return found[1] if found is not None else None


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
    return replace(_RoundParser(source).parse(data, expected_round),
                   rounds_declaring=_rounds_declaring)


def _rounds_declaring(key: str) -> tuple[str, ...]:
    return tuple(r for r in rounds() if _declares(r, key))


