"""MLPerf round presets: what each round's LLM benchmarks require, as packaged data.

Each MLPerf Inference round has one TOML file in ``tokenmark/mlperf/presets/`` (``v5.1.toml``,
``v6.0.toml``, ...), written from MLCommons' executed files (LoadGen's ``mlperf.conf`` and the
submission checker's ``constants.py``) with every value's source cited in a comment. This
package loads and validates those files and answers three questions:

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

Its modules: :mod:`.datatypes` (the frozen data types), :mod:`.lookup` (rounds, benchmarks and
the settings a run starts from), :mod:`.schema` (the schema check); every public name is
importable from here. This is a domain package: it imports only the standard library and
the foundation layer.
"""

from tokenmark.mlperf.presets.datatypes import (
    CATEGORIES,
    COMPLIANCE_TESTS,
    REFERENCE_KEYS,
    AccuracyTarget,
    BenchmarkPreset,
    CategoryScenarios,
    RoundPreset,
    ScenarioDefaults,
    ScenarioPreset,
)
from tokenmark.mlperf.presets.lookup import (
    find_benchmark,
    folder_benchmark,
    implied_scenario,
    latest_round,
    load_round,
    load_round_file,
    mlperf_settings,
    resolve,
    rounds,
)

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
    "folder_benchmark",
    "implied_scenario",
    "latest_round",
    "load_round",
    "load_round_file",
    "mlperf_settings",
    "resolve",
    "rounds",
]
