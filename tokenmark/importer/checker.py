"""Which figure of a LoadGen log is a result, as the MLPerf submission checker decides.

Copied as data (with its source) from ``mlcommons/inference``
``tools/submission/submission_checker/constants.py`` (``RESULT_FIELD_NEW``,
``RESULT_FIELD_BENCHMARK_OVERWRITE``, ``model_mapping``; the v4.1 table from the checker
at commit ``0910c6e3^``) and ``checks/performance_check.py``
(``get_performance_metric_check``, ``get_inferred_result``), and from
``checks/power_check.py`` for the power figure. Pure functions over a parsed detail log.

Rules, as the checker applies them:

* The key is chosen by the scenario LoadGen *ran* (``effective_scenario``), so an
  ``Interactive`` folder (LoadGen runs it as ``Server``) reads the Server key.
* Token benchmarks override the key per round (``result_tokens_per_second`` Offline,
  ``result_completed_tokens_per_second`` Server, gpt-j's ``result_inferred_*``); the
  llama3.1-8b-edge SingleStream result is ``result_90.00_percentile_latency_ns``.
* SingleStream/MultiStream figures are nanoseconds divided by 10^6 (milliseconds).
* A folder whose scenario differs from the one that ran (edge Offline from a
  SingleStream run, ...) holds an *inferred* result, computed by the checker's formulas.

Deliberate differences from the published tables (each a checker quirk, tested):
units follow the key (``Tokens/s`` for every token figure, where the v5.1 tables say
``Samples/s`` for whisper and ``Queries/s`` for llama3.1-8b Interactive, and the v4.1
table ``Samples/s``/``Queries/s`` for NeuralMagic's open llama2-70b-99.9 folders named
``offline``/``server``), and a folder named ``offline`` is not "inferred" from an
``Offline`` run (the checker compares case). Such quirks are kept and flagged, never
silently rewritten: :func:`table_unit` returns the checker's unit, the table's unit and a
one-line quirk; :func:`known_table_unit` flags the same quirks on rows read from the logs
(:data:`KNOWN_TABLE_UNITS`); :func:`inferred_quirk` flags a table's ``inferred`` mark
where the checker could not have inferred the figure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any, Final

from tokenmark.errors import ConfigError
from tokenmark.resultrows import round_order

__all__ = [
    "KNOWN_TABLE_UNITS",
    "SCENARIOS",
    "THROUGHPUT_UNITS",
    "Figure",
    "canonical_benchmark",
    "canonical_scenario",
    "checker_model_name",
    "inferred_figure",
    "inferred_quirk",
    "is_known_benchmark",
    "known_table_unit",
    "power_figure",
    "result_key",
    "result_scenario",
    "table_unit",
    "unit_for",
]

SCENARIOS: Final = {
    "offline": "Offline",
    "server": "Server",
    "interactive": "Interactive",
    "singlestream": "SingleStream",
    "multistream": "MultiStream",
}

_BASE: Final = {
    "Offline": "result_samples_per_second",
    "SingleStream": "early_stopping_latency_ss",
    "MultiStream": "early_stopping_latency_ms",
    "Server": "result_completed_samples_per_sec",
}
_TOK: Final = {"Offline": "result_tokens_per_second",
               "Server": "result_completed_tokens_per_second"}
_GPTJ: Final = {"Offline": "result_inferred_tokens_per_second",
                "Server": "result_inferred_completed_tokens_per_second"}
_EDGE: Final = {"Offline": "result_tokens_per_second",
                "SingleStream": "result_90.00_percentile_latency_ns"}
_OVERRIDES: Final[dict[str, dict[str, Mapping[str, str]]]] = {
    "v4.1": {"llama2-70b-99": _TOK, "llama2-70b-99.9": _TOK, "gptj-99": _GPTJ,
             "gptj-99.9": _GPTJ, "mixtral-8x7b": _TOK},
    "v5.0": {"llama2-70b-99": _TOK, "llama2-70b-99.9": _TOK,
             "llama2-70b-interactive-99": _TOK, "llama2-70b-interactive-99.9": _TOK,
             "gptj-99": _GPTJ, "gptj-99.9": _GPTJ, "mixtral-8x7b": _TOK,
             "llama3.1-405b": _TOK},
    "v5.1": {"llama2-70b-99": _TOK, "llama2-70b-99.9": _TOK, "llama3.1-8b": _TOK,
             "llama3.1-8b-edge": _EDGE, "mixtral-8x7b": _TOK, "llama3.1-405b": _TOK,
             "deepseek-r1": _TOK, "whisper": {"Offline": "result_tokens_per_second"}},
}
_OVERRIDES["v6.0"] = {"gpt-oss-120b": _TOK, **_OVERRIDES["v5.1"]}
_OVERRIDES["v6.1"] = dict(_OVERRIDES["v6.0"])
#: The checker's own benchmark renames (``MODEL_CONFIG[...]["model_mapping"]``).
_CHECKER_MODEL_MAPPING: Final = {
    "ssd-resnet34": "retinanet",
    "mobilenet": "resnet",
    "resnet50": "resnet",
    "llama3_1-405b": "llama3.1-405b",
    "llama3_1-8b": "llama3.1-8b",
    "llama3_1-8b-edge": "llama3.1-8b-edge",
}
#: Units a throughput figure can carry; a table that prints one where the checker's key
#: gives another is a quirk (below). Latency and energy units are taken as published.
THROUGHPUT_UNITS: Final = frozenset({"Tokens/s", "Samples/s", "Queries/s"})
#: The unit each published table prints for a whole benchmark and scenario where it is
#: not the checker's (round, benchmark, scenario) -> table unit. From the tables in
#: ``../shared/data/mlperf/summaries`` (v5.1 ``summary_results.json``: all 8 llama3.1-8b
#: Interactive rows ``Queries/s``; whisper Offline ``Samples/s`` in all 37 v5.1, 37 v6.0
#: and 25 v6.1 rows), so that a row read from the logs says how the table shows it.
KNOWN_TABLE_UNITS: Final = {
    ("v5.1", "llama3.1-8b", "Interactive"): "Queries/s",
    ("v5.1", "whisper", "Offline"): "Samples/s",
    ("v6.0", "whisper", "Offline"): "Samples/s",
    ("v6.1", "whisper", "Offline"): "Samples/s",
}
_MS_TO_NS: Final = 1_000_000
_POWER_TIME: Final = "%m-%d-%Y %H:%M:%S.%f"


@dataclass(frozen=True, slots=True)
class Figure:
    """A result figure: ``value`` in ``unit``, read from ``metric``."""

    value: float
    unit: str
    metric: str
    inferred: bool = False


@cache
def canonical_benchmark(name: str, round_name: str | None = None) -> str:
    """The checker's name of a benchmark or folder name (``llama3_1-8b`` ->
    ``llama3.1-8b``): the presets' aliases (``round_name``'s first, then the newest
    round's), then the checker's own mapping and guesses; unknown names are kept."""
    from tokenmark.mlperf.presets import folder_benchmark  # on first use: TOML files

    found = folder_benchmark(name, round_name)
    return found[0] if found is not None else checker_model_name(name)


@cache
def is_known_benchmark(name: str) -> bool:
    """Whether some round's preset names a benchmark ``name`` (the checker's names)."""
    from tokenmark.mlperf.presets import load_round, rounds

    for rnd in rounds():
        try:
            if name in load_round(rnd).benchmarks:
                return True
        except ConfigError:
            continue
    return False


def result_scenario(folder: str, scenario: str, round_name: str | None = None) -> str:
    """The scenario a result is of: the folder's, except that a ``Server`` run in a
    folder whose name implies ``Interactive`` (v5.0's ``llama2-70b-interactive-99/
    Server``: LoadGen's Server scenario under the interactive latency limits, which
    v5.1 renamed ``llama2-70b-99/Interactive``) is the ``Interactive`` result."""
    from tokenmark.mlperf.presets import implied_scenario  # on first use: TOML files

    if scenario == "Server" and implied_scenario(folder, round_name) == "Interactive":
        return "Interactive"
    return scenario


def canonical_scenario(name: str) -> str | None:
    """``Offline``... for a scenario folder name in any case; ``None`` if not one."""
    return SCENARIOS.get(name.strip().lower())


def checker_model_name(name: str) -> str:
    """The checker's name for a model folder it has no mapping for
    (``Configuration.get_mlperf_model``: its table, then its guesses by substring)."""
    if name in _CHECKER_MODEL_MAPPING:
        return _CHECKER_MODEL_MAPPING[name]
    if "mobilenet" in name or "efficientnet" in name or "resnet50" in name:
        return "resnet"
    for guess in ("bert-99.9", "bert-99"):
        if guess in name:
            return guess
    if "llama3_1-405b" in name:
        return "llama3.1-405b"
    return name


def _table_round(round_name: str) -> str:
    """The checker table that applies to a round: its own, else the newest older one."""
    if round_name in _OVERRIDES:
        return round_name
    known = sorted(_OVERRIDES, key=round_order)
    older = [r for r in known if round_order(r) <= round_order(round_name)]
    return older[-1] if older else known[0]


def result_key(round_name: str, benchmark: str, ran: str) -> str:
    """The detail-log key of the result of ``benchmark`` when LoadGen ran ``ran``."""
    over = _OVERRIDES[_table_round(round_name)].get(benchmark, {})
    return over.get(ran, _BASE.get(ran, ""))


def unit_for(key: str, scenario: str, benchmark: str = "") -> str:
    """The unit of a figure read from ``key`` for a result of ``scenario``."""
    if "tokens_per_second" in key:
        return "Tokens/s"
    if "latency" in key:
        return "Latency (s)" if benchmark == "wan-2.2-t2v-a14b" else "Latency (ms)"
    return "Samples/s" if scenario == "Offline" else "Queries/s"


def table_unit(round_name: str, benchmark: str, scenario: str, published: str,
               inferred: bool = False) -> tuple[str, str, str]:
    """The unit of a table's figure as the checker's key gives it.

    Returns ``(unit, published_unit, quirk)``: where the table prints a throughput unit
    other than the checker's (for the key of the scenario LoadGen ran: Server for
    Interactive; ``Samples/s`` for an Offline figure the table marks inferred),
    ``unit`` is the checker's, ``published_unit`` the table's and ``quirk`` says so;
    otherwise ``(published, "", "")``.
    """
    if published not in THROUGHPUT_UNITS:
        return published, "", ""
    ran = "Server" if scenario == "Interactive" else scenario
    key = result_key(round_name, benchmark, ran)
    if not key or (inferred and scenario == "Offline"):
        return published, "", ""
    unit = unit_for(key, scenario, benchmark)
    if unit == published or unit not in THROUGHPUT_UNITS:
        return published, "", ""
    return unit, published, (f"published as {published}; the checker's figure for "
                             f"{benchmark} {scenario} ({key}) is in {unit}")


def known_table_unit(round_name: str, benchmark: str, scenario: str,
                     unit: str) -> tuple[str, str]:
    """For a row read from the logs: the unit the round's table prints instead
    (:data:`KNOWN_TABLE_UNITS`) and the quirk, or ``("", "")``."""
    published = KNOWN_TABLE_UNITS.get((round_name, benchmark, scenario))
    if published is None or published == unit:
        return "", ""
    return published, (f"published as {published} in the {round_name} summary table; the "
                       f"checker's figure for {benchmark} {scenario} is in {unit}")


def inferred_quirk(round_name: str, benchmark: str, scenario: str, inferred: bool) -> str:
    """A quirk where a table marks a figure inferred that the checker never infers.

    The checker infers only Offline (from a SingleStream or MultiStream run) and
    MultiStream (from SingleStream); a Server, Interactive or SingleStream figure, or an
    Offline figure of a benchmark whose round has no SingleStream/MultiStream scenario,
    cannot be inferred.
    """
    if not inferred:
        return ""
    why = ""
    if scenario in ("Server", "Interactive", "SingleStream"):
        why = f"the checker never infers a {scenario}-scenario figure"
    elif scenario == "Offline":
        from tokenmark.mlperf.presets import load_round

        try:
            preset = load_round(round_name).benchmarks.get(benchmark)
        except ConfigError:
            preset = None
        if preset is not None and not {str(s) for s in preset.scenarios} & {
                "SingleStream", "MultiStream"}:
            why = f"{benchmark} has no SingleStream or MultiStream run to infer Offline from"
    return f"marked inferred in the table, but {why}" if why else ""


def _num(detail: Mapping[str, Any], key: str) -> float | None:
    v = detail.get(key)
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return float(v)


def inferred_figure(
    detail: Mapping[str, Any], round_name: str, benchmark: str, folder: str, ran: str
) -> Figure | str:
    """The figure of a result folder of scenario ``folder`` whose log ran ``ran``.

    Returns the :class:`Figure`, or a one-line reason when the log lacks what the
    checker reads (the caller reports it against the detail log).
    """
    key = result_key(round_name, benchmark, ran)
    raw = _num(detail, key) if key else None
    if raw is None:
        return (f"has no numeric {key or 'result'!r}, the figure the submission checker reads "
                f"for {benchmark} {ran} (a truncated or non-performance log?)")
    value = raw / _MS_TO_NS if ran in ("SingleStream", "MultiStream") else raw
    if benchmark == "wan-2.2-t2v-a14b" and ran in ("SingleStream", "MultiStream"):
        value /= 1000
    if folder == ran or (folder, ran) == ("Interactive", "Server"):
        return Figure(value, unit_for(key, folder, benchmark), key)
    if folder == "Offline" and ran == "SingleStream":
        qps = _num(detail, "result_qps_without_loadgen_overhead")
        if qps is None:
            return "has no result_qps_without_loadgen_overhead to infer Offline from SingleStream"
        return Figure(qps, "Samples/s", "inferred:result_qps_without_loadgen_overhead", True)
    if folder == "Offline" and ran == "MultiStream":
        spq, mean = _num(detail, "effective_samples_per_query"), _num(
            detail, "result_mean_query_latency_ns")
        if not spq or not mean:
            return "lacks effective_samples_per_query/result_mean_query_latency_ns to infer Offline"
        return Figure(spq * 1000 / (mean / _MS_TO_NS), "Samples/s",
                      "inferred:samples_per_query*1000/mean_query_latency_ms", True)
    if folder == "MultiStream" and ran == "SingleStream":
        es = _num(detail, "early_stopping_latency_ms")
        if es is None:
            return "has no early_stopping_latency_ms to infer MultiStream from SingleStream"
        return Figure(es * 8 / _MS_TO_NS, "Latency (ms)", "inferred:8*early_stopping_latency_ms",
                      True)
    return f"ran {ran} in a {folder} folder, which the submission checker cannot infer"


def power_figure(
    spl_text: str, power_begin: str, power_end: str, scenario: str, query_count: float | None,
    ran: str | None = None,
) -> tuple[float, str] | str:
    """The power result from PTDaemon's ``spl.txt`` over the run's power window.

    Offline/Server/Interactive: average Watts of the positive samples strictly inside
    ``(power_begin, power_end)``; SingleStream/MultiStream: millijoules per query
    (``avg W x window s x 1000 / result_query_count``, times 8 samples per query for a
    MultiStream result inferred from a SingleStream run). Returns ``(value, unit)`` or a
    reason.
    """
    try:
        begin = datetime.strptime(power_begin, _POWER_TIME)
        end = datetime.strptime(power_end, _POWER_TIME)
    except (TypeError, ValueError):
        return f"power_begin/power_end {power_begin!r}/{power_end!r} are not MM-DD-YYYY times"
    total, n = 0.0, 0
    for line in spl_text.splitlines():
        if not line.startswith("Time"):
            continue
        parts = line.split(",")
        try:
            t = datetime.strptime(parts[1], _POWER_TIME)
            watts = float(parts[3])
        except (IndexError, ValueError):
            return f"has a malformed sample line: {line[:60]!r}"
        if begin < t < end and watts > 0 and math.isfinite(watts):
            total += watts
            n += 1
    if n == 0:
        return f"has no power samples between {power_begin} and {power_end}"
    avg = total / n
    if scenario in ("Offline", "Server", "Interactive"):
        return avg, "Watts"
    if not query_count:
        return "has no result_query_count for the energy per query"
    seconds = (end - begin).total_seconds()
    per_query = 8 if (scenario, ran) == ("MultiStream", "SingleStream") else 1
    return avg * seconds * per_query * 1000 / query_count, "millijoules"
