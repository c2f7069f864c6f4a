"""The MLPerf LoadGen log format: writer and parser in one module.

LoadGen 6.0.17 writes ``mlperf_log_summary.txt`` (fixed human-readable text) and
``mlperf_log_detail.txt`` (one ``:::MLLOG {json}`` line per logged key). This module
renders both from a tokenmark run, in LoadGen's wording, spacing, key spelling, value
types and number formatting, and parses both back, for tokenmark's own files and for
real LoadGen logs of any round since v4.1. The writer and the parser live together so
that one round-trip test guards the format (STYLE.md §10 item 10).

Writing (pure: returns strings, touches no file; :mod:`tokenmark.output.mlperf` writes):

- :func:`render_summary` and :func:`render_detail` take the effective settings, the
  :class:`~tokenmark.metrics.summary.Summary`, the
  :class:`~tokenmark.mlperf.rules.Verdicts` (the MLPerf verdict's findings are LoadGen's
  criteria), the :class:`~tokenmark.mlperf.scenarios.Schedule` (what LoadGen logs as
  ``loaded_qsl_set`` and ``generated_*``) and :class:`RunFacts` (names, wall clock,
  errors). Every LoadGen figure is recomputed from the summary's raw run facts with
  LoadGen's own arithmetic (C++ ``double`` division, ``size_t`` wrap-around, integer
  means), so the numbers are LoadGen's, not merely close.
- Number formatting follows the C++ stream LoadGen writes through: ``DoubleToString``
  is ``std::fixed`` with 2 decimals (1 for the target-percentile labels); a ``double``
  streamed as is uses the default format, i.e. ``%g`` with 6 significant digits
  (``Samples per second: 664.711``, ``Tokens per second: 2.49431e+06`` and every
  ``double`` value in the detail log); integers print in full; booleans print ``0``/``1``
  in the summary and ``true``/``false`` in the detail log.
- Each file carries one extra line saying it was written by tokenmark, not LoadGen, and
  that the result is unverified: the detail log starts with a ``tokenmark_note`` key (an
  ordinary ``:::MLLOG`` line, so LoadGen-format readers, including the submission
  checker's, accept the file); the summary ends with the note after LoadGen's
  errors/warnings trailer. LoadGen's identity keys (``loadgen_version``,
  ``loadgen_git_*``, ``loadgen_build_*``, ``loadgen_file_sha1``) are *not* written:
  tokenmark is not LoadGen and claims no LoadGen version. LoadGen's own internals
  (``get_sut_name_duration_ns``, ``logger_*`` contention counters) are left out too.

How exact: ``tests/integration/test_mllog_real.py`` replays official LoadGen 6.0.17 runs
(its settings, its per-sample times) through tokenmark and gets LoadGen's summary byte
for byte and every detail value, in order, for Server, Interactive, Offline and
accuracy runs, with and without token latencies; SingleStream and MultiStream match
too except the figures LoadGen measures from its ``start``, which its trace omits.

Deliberate differences from LoadGen's bytes (each a case LoadGen gets wrong or cannot
meet): ``test_datetime`` is UTC (LoadGen formats local time with a ``Z``); a non-finite
``double`` in the detail log is written ``NaN``/``Infinity`` (valid for Python's
``json``) instead of the stream's ``nan``/``inf``; the ``file``/``line_no`` metadata name
this module (``line_no`` 0) instead of a LoadGen source position; ``time_ms`` is 0 for
lines LoadGen logs before the run and the run's active duration for those it logs at
the end. A failed or unanswered request (which LoadGen cannot record: it waits for
every query) makes the run INVALID, is logged as an ``error_runtime`` line and is named
in the summary's ``Recommendations:``.

Parsing: :func:`parse_detail` gives every key's values in file order (keys repeat, e.g.
``generic_message`` and error lines) as a :class:`DetailLog`; :func:`parse_summary` gives
a :class:`SummaryLog` with the scenario, mode, validity, sub-criteria, early-stopping
texts, headline metrics and every ``label : value`` line by section. Both take an
optional source name for messages and raise :class:`MLLogError` (a
:class:`~tokenmark.errors.BadInputError`) naming the file and line of the first problem
(garbage, a truncated file, a missing header); with ``strict=False`` they skip bad lines
instead and list them in ``skipped``.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from tokenmark import __version__
from tokenmark.errors import BadInputError, InternalError
from tokenmark.metrics.stats import LOADGEN_PERCENTILES, Distribution
from tokenmark.metrics.summary import Summary
from tokenmark.mlperf.rules import Finding, Validity, Verdicts
from tokenmark.mlperf.scenarios import Schedule
from tokenmark.mlperf.settings import EffectiveSettings, Mode, Scenario
from tokenmark.resultrows import UNVERIFIED_NOTE

__all__ = [
    "LOADGEN_FORMAT_VERSION",
    "MARKER",
    "NOTE_KEY",
    "NOTE_PREFIX",
    "SECTION_ADDITIONAL",
    "SECTION_PARAMETERS",
    "SECTION_PER_QUERY",
    "SECTION_RESULTS",
    "DetailEntry",
    "DetailLog",
    "MLLogError",
    "RunFacts",
    "SummaryLine",
    "SummaryLog",
    "fmt_fixed",
    "fmt_g",
    "note_text",
    "parse_detail",
    "parse_summary",
    "render_detail",
    "render_summary",
]

#: The LoadGen release whose log format (wording, keys, layout) tokenmark writes.
LOADGEN_FORMAT_VERSION = "6.0.17"
#: Prefix of every detail-log line.
MARKER = ":::MLLOG"
#: How tokenmark's note starts, in both files.
NOTE_PREFIX = "Written by tokenmark"
#: The detail-log key of tokenmark's note.
NOTE_KEY = "tokenmark_note"

_BANNER = "=" * 48
_NAMESPACE = "mlperf::logging"
_SOURCE_FILE = "tokenmark/mlperf/mllog.py"
#: LoadGen's ``TestSettings`` defaults, logged where tokenmark has no value of its own.
_DEFAULT_TOKEN_LATENCY_NS = 100_000_000
_U64 = 1 << 64


def note_text(version: str = __version__) -> str:
    """The line that says a file was written by tokenmark, in LoadGen's format."""
    return (
        f"{NOTE_PREFIX} {version} in the log format of MLPerf LoadGen "
        f"{LOADGEN_FORMAT_VERSION}, not by LoadGen. "
        f"{UNVERIFIED_NOTE}"
    )


class MLLogError(BadInputError):
    """A log file that cannot be read as an MLPerf LoadGen log.

    ``source`` names the file (or whatever the caller passed) and ``line`` the 1-based
    line of the first problem (``None`` for the file as a whole).
    """

    def __init__(self, source: str, line: int | None, problem: str) -> None:
        where = f"{source}:{line}" if line is not None else source
        super().__init__(f"{where}: {problem}")
        self.source = source
        self.line = line


# -- inputs ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RunFacts:
    """What the logs say about a run beyond its settings and metrics.

    ``start_wall_ns`` is the wall clock (ns since the epoch) at the run's origin ``t0``
    (LoadGen's ``start``, logged as ``power_begin``); ``active_duration_ns`` runs from
    there to the last completion (LoadGen's ``sut_active_duration``: ``power_end`` and the
    ``time_ms`` of the end-of-run lines). ``test_datetime`` defaults to the start.
    ``errors`` and ``warnings`` are logged as ``error_runtime`` and
    ``warning_generic_message`` lines and counted in the summary's trailer;
    ``ran_out_of_generated_queries`` logs LoadGen's own "Ending early" error.

    ``server_token_limits_ns`` is the benchmark's Server ``(ttft, tpot)`` limits: with
    token latencies LoadGen reads ``ttft_latency``/``tpot_latency`` from ``mlperf.conf``'s
    *Server* lines whatever the scenario, and logs them (``ttft_latency (ns)``,
    ``requested_server_ttft_latency``) in Offline and SingleStream runs too. tokenmark's
    settings carry only the run's own scenario's limits, so the caller passes the Server
    preset's; ``None`` uses the run's own limits, else LoadGen's 100 ms defaults (what
    LoadGen logs for a benchmark with no Server limits, such as llama3.1-8b-edge).
    """

    sut_name: str
    qsl_name: str
    start_wall_ns: int
    active_duration_ns: int
    test_datetime: datetime | None = None
    ran_out_of_generated_queries: bool = False
    errors: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    server_token_limits_ns: tuple[int, int] | None = None
    pid: int = 0
    tokenmark_version: str = __version__


# -- C++ number formatting --------------------------------------------------------------


def _nan_text(x: float) -> str:
    return "-nan" if math.copysign(1.0, x) < 0 else "nan"


def fmt_fixed(x: float, precision: int = 2) -> str:
    """LoadGen's ``DoubleToString``: ``std::fixed`` with ``precision`` decimals (glibc)."""
    if math.isnan(x):
        return _nan_text(x)
    return f"{x:.{precision}f}"


def fmt_g(x: float) -> str:
    """A ``double`` written to a default C++ stream: ``%g``, 6 significant digits."""
    if math.isnan(x):
        return _nan_text(x)
    return f"{x:g}"


def _cdiv(a: float, b: float) -> float:
    """IEEE division as C++ does it: x/0 is +-inf and 0/0 the x86-64 default NaN."""
    if b == 0.0:
        if a == 0.0 or math.isnan(a):
            return -math.nan  # the sign bit is set, as x86-64's default NaN
        return math.copysign(math.inf, a) * math.copysign(1.0, b)
    return a / b


def _size_t(v: int) -> float:
    """An unsigned 64-bit count converted to ``double`` (``sample_count - 1`` wraps at 0)."""
    return float(v % _U64)


def _seconds(ns: int) -> float:
    """LoadGen's ``DurationToSeconds``/``QuerySampleLatencyToSeconds``: ``ns / 1e9``."""
    return ns / 1e9


def _pct2(p: float) -> str:
    return fmt_fixed(p * 100)


def _pct1(p: float) -> str:
    return fmt_fixed(p * 100, 1)


# -- LoadGen's view of a run ------------------------------------------------------------

_MIN_DURATION_ADVICE = {
    Scenario.OFFLINE: "Increase expected QPS so the loadgen pre-generates a larger "
    "(coalesced) query.",
    Scenario.SERVER: "Increase the target QPS so the loadgen pre-generates more queries.",
    Scenario.SINGLE_STREAM: "Decrease the expected latency so the loadgen pre-generates "
    "more queries.",
    Scenario.MULTI_STREAM: "Decrease the expected latency so the loadgen pre-generates "
    "more queries.",
}
_MIN_QUERIES_SUMMARY = (
    " * The test exited early, before enough queries were issued.\n"
    "   See the detailed log for why this may have occurred."
)
_MIN_QUERIES_DETAIL = "The test exited early, before enough queries were issued."
_TTFT_FAIL = "TTFT constrain not met: Reduce target QPS to improve latency."
_TPOT_FAIL = "TPOT constrain not met: Reduce target QPS to improve latency."
_LATENCY_FAIL = "Reduce target QPS to improve latency."
_RAN_OUT = (
    "Ending early: Ran out of generated queries to issue before the minimum query count "
    "and test duration were reached. Please update the relevant expected latency or "
    "target qps in the TestSettings so they are more accurate."
)
_ENDING_NATURALLY = "Ending naturally: Minimum query count and test duration met."
_CONCAT_WARNING = (
    "WARNING: sample_concatenate_permutation was set to true. ",
    "Generated samples per query might be different as the one in the setting.",
    "Check the generated_samples_per_query line in the detailed log for the real",
    "samples_per_query value",
)


@dataclass(frozen=True, slots=True)
class _View:
    """LoadGen's ``PerformanceSummary`` of a tokenmark run, shared by both writers."""

    scenario: Scenario  # LoadGen's TestScenario (Interactive is Server)
    mode: Mode
    tokens: bool
    n: int
    queries: int
    token_count: int
    lat: Distribution
    ttft: Distribution
    tpot: Distribution
    qlat: Distribution
    target_p: float
    max_latency_s: float
    final_sched_s: float
    final_issued_s: float
    final_done_s: float
    target_latency_ns: int
    ttft_limit_ns: int
    tpot_limit_ns: int
    overlatency: int
    valid: bool
    perf_met: bool
    min_duration_met: bool
    min_queries_met: bool
    early_stopping_met: bool
    perf_rec: str
    min_duration_rec: str
    unanswered: Finding | None
    es_texts: dict[str, str]
    es_latency_ss: int
    es_latency_ms: int
    errors: tuple[str, ...]
    warnings: tuple[str, ...]


def _finding(verdicts: Verdicts, rule: str) -> Finding | None:
    for f in verdicts.mlperf.findings:
        if f.rule == rule:
            return f
    return None


def _passed(verdicts: Verdicts, rule: str) -> bool:
    f = _finding(verdicts, rule)
    return True if f is None else f.passed


def _view(
    eff: EffectiveSettings, s: Summary, verdicts: Verdicts, facts: RunFacts
) -> _View:
    if not eff.scenario.is_mlperf:
        raise InternalError(
            f"MLPerf logs are written for MLPerf scenarios only, not {eff.scenario.value!r}"
        )
    if verdicts.mlperf.validity is Validity.NOT_APPLICABLE:
        raise InternalError("MLPerf logs need the MLPerf verdict; it is 'not applicable'")
    sc = eff.scenario.loadgen
    tokens = eff.use_token_latencies
    lim = eff.limits
    target_latency = (lim.e2e_ns or 0) if sc is Scenario.SERVER else 0
    if facts.server_token_limits_ns is not None:
        ttft_limit, tpot_limit = facts.server_token_limits_ns
    else:
        ttft_limit = lim.ttft_ns if lim.ttft_ns is not None else _DEFAULT_TOKEN_LATENCY_NS
        tpot_limit = lim.tpot_ns if lim.tpot_ns is not None else _DEFAULT_TOKEN_LATENCY_NS
    # LoadGen hard-codes 0.99 for Offline, where the percentile is not used.
    target_p = 0.99 if sc is Scenario.OFFLINE else eff.target_latency_percentile

    perf_met = _passed(verdicts, "perf_constraints")
    perf_rec = ""
    if sc is Scenario.SERVER and not perf_met:
        perf_rec = _perf_recommendation(eff, s, target_latency)
        if not perf_rec:  # the verdict failed on a limit LoadGen would not test
            f = _finding(verdicts, "perf_constraints")
            perf_rec = f.advice if f is not None else ""
    min_duration_met = _passed(verdicts, "min_duration")
    answered = _finding(verdicts, "all_queries_answered")
    unanswered = answered if answered is not None and not answered.passed else None

    es_texts = {k: v.text for k, v in verdicts.early_stopping.items()}
    ss = ms = 0
    es = verdicts.early_stopping
    if sc in (Scenario.SINGLE_STREAM, Scenario.MULTI_STREAM):
        # LoadGen evaluates TPOT then TTFT into the same members, so the estimates of
        # the last evaluation that got that far are the ones it logs.
        ttft = es.get("ttft")
        last = ttft if ttft is not None and ttft.text else es.get("tpot", es.get("latency"))
        if last is not None:
            if sc is Scenario.SINGLE_STREAM:
                ss = last.estimate_ns or 0
                ms = last.estimate_p99_ns or 0
            else:
                ms = last.estimate_ns or 0

    errors: list[str] = []
    if facts.ran_out_of_generated_queries:
        errors.append(_RAN_OUT)
    errors.extend(facts.errors)
    if unanswered is not None:
        errors.append(f"tokenmark: not every query was answered: {unanswered.observed}.")

    overlatency = 0
    if sc is Scenario.SERVER and s.sorted_latency.size:
        overlatency = int((s.sorted_latency > target_latency).sum())
    return _View(
        scenario=sc,
        mode=eff.mode,
        tokens=tokens,
        n=s.sample_count,
        queries=s.queries_issued,
        token_count=s.token_count,
        lat=s.latency,
        ttft=s.ttft,
        tpot=s.tpot,
        qlat=s.query_latency,
        target_p=target_p,
        max_latency_s=_seconds(s.max_latency_ns),
        final_sched_s=_seconds(s.final_query_scheduled_ns),
        final_issued_s=_seconds(s.final_query_issued_ns),
        final_done_s=_seconds(s.final_query_done_ns),
        target_latency_ns=target_latency,
        ttft_limit_ns=ttft_limit,
        tpot_limit_ns=tpot_limit,
        overlatency=overlatency,
        valid=verdicts.mlperf.validity is Validity.VALID,
        perf_met=perf_met,
        min_duration_met=min_duration_met,
        min_queries_met=_passed(verdicts, "min_queries"),
        early_stopping_met=_passed(verdicts, "early_stopping"),
        perf_rec=perf_rec,
        min_duration_rec="" if min_duration_met else _MIN_DURATION_ADVICE[sc],
        unanswered=unanswered,
        es_texts=es_texts,
        es_latency_ss=ss,
        es_latency_ms=ms,
        errors=tuple(errors),
        warnings=tuple(facts.warnings),
    )


def _perf_recommendation(eff: EffectiveSettings, s: Summary, target_latency: int) -> str:
    """LoadGen's ``PerfConstraintsMet`` recommendation text."""
    p = eff.target_latency_percentile
    if not eff.use_token_latencies:
        return _LATENCY_FAIL if s.latency.percentiles.get(p, 0) > target_latency else ""
    rec = ""
    lim = eff.limits
    if lim.ttft_ns is not None and s.ttft.percentiles.get(p, 0) > lim.ttft_ns:
        rec = _TTFT_FAIL
    if lim.tpot_ns is not None and s.tpot.percentiles.get(p, 0) > lim.tpot_ns:
        rec = f"{rec}\n * {_TPOT_FAIL}" if rec else _TPOT_FAIL
    return rec


def _yes(b: bool) -> str:
    return "Yes" if b else "NO"


# -- the summary --------------------------------------------------------------------------


def render_summary(
    eff: EffectiveSettings, summary: Summary, verdicts: Verdicts, facts: RunFacts
) -> str:
    """``mlperf_log_summary.txt`` as LoadGen 6.0.17 writes it, plus tokenmark's note.

    In accuracy mode LoadGen's summary holds only the warnings/errors trailer; so does
    this one. Raises :class:`~tokenmark.errors.InternalError` for a non-MLPerf scenario.
    """
    v = _view(eff, summary, verdicts, facts)
    out: list[str] = []
    if v.mode is Mode.PERFORMANCE:
        out += _summary_results(v, facts)
        out += _summary_additional(v)
        out += ["", _BANNER, "Test Parameters Used", _BANNER]
        out += _summary_parameters(eff, v)
    out += _trailer(len(v.warnings), len(v.errors))
    out += ["", note_text(facts.tokenmark_version)]
    return "\n".join(out) + "\n"


def _summary_results(v: _View, facts: RunFacts) -> list[str]:
    out = [_BANNER, "MLPerf Results Summary", _BANNER]
    out += [
        f"SUT name : {facts.sut_name}",
        f"Scenario : {v.scenario.value}",
        f"Mode     : {v.mode.value}",
    ]
    sc = v.scenario
    if sc is Scenario.SINGLE_STREAM:
        out.append(f"{_pct1(v.target_p)}th percentile latency (ns) : "
                   f"{v.lat.percentiles.get(v.target_p, 0)}")
    elif sc is Scenario.MULTI_STREAM:
        out.append(f"{_pct1(v.target_p)}th percentile latency (ns) : "
                   f"{v.qlat.percentiles.get(v.target_p, 0)}")
    elif sc is Scenario.SERVER:
        sps = _cdiv(_size_t(v.n - 1), v.final_done_s)
        out.append(f"Completed samples per second    : {fmt_fixed(sps)}")
    else:
        out.append(f"Samples per second: {fmt_g(_cdiv(float(v.n), v.max_latency_s))}")
    if v.tokens:
        if sc in (Scenario.SINGLE_STREAM, Scenario.MULTI_STREAM):
            out.append(f"{_pct1(v.target_p)}th first token percentile latency (ns) : "
                       f"{v.ttft.percentiles.get(v.target_p, 0)}")
        elif sc is Scenario.OFFLINE:
            tps = _cdiv(float(v.token_count), v.max_latency_s)
            out.append(f"Tokens per second: {fmt_g(tps)}")
        else:
            tps = _cdiv(float(v.token_count), v.final_done_s)
            out.append(f"Completed tokens per second: {fmt_fixed(tps)}")

    out.append(f"Result is : {'VALID' if v.valid else 'INVALID'}")
    if sc is Scenario.SERVER:
        out.append(f"  Performance constraints satisfied : {_yes(v.perf_met)}")
    out.append(f"  Min duration satisfied : {_yes(v.min_duration_met)}")
    out.append(f"  Min queries satisfied : {_yes(v.min_queries_met)}")
    out.append(f"  Early stopping satisfied: {_yes(v.early_stopping_met)}")
    if not v.valid:
        out.append("Recommendations:")
        if not v.perf_met:
            out.append(f" * {v.perf_rec}")
        if not v.min_duration_met:
            out.append(f" * {v.min_duration_rec}")
        if not v.min_queries_met:
            out.append(_MIN_QUERIES_SUMMARY)
        if v.unanswered is not None:
            out.append(f" * Not every query was answered (tokenmark): "
                       f"{v.unanswered.observed}.")
    if sc is not Scenario.OFFLINE:
        if v.tokens:
            out += ["TTFT Early Stopping Result:", v.es_texts.get("ttft", "")]
            out += ["TPOT Early Stopping Result:", v.es_texts.get("tpot", "")]
        else:
            out += ["Early Stopping Result:", v.es_texts.get("latency", "")]
    return out


def _latency_block(d: Distribution) -> list[str]:
    out = [
        f"Min latency (ns)                : {d.min}",
        f"Max latency (ns)                : {d.max}",
        f"Mean latency (ns)               : {d.mean_trunc}",
    ]
    for p in LOADGEN_PERCENTILES:
        out.append(f"{_pct2(p)} percentile latency (ns)   : {d.percentiles.get(p, 0)}")
    return out


def _summary_additional(v: _View) -> list[str]:
    out = ["", _BANNER, "Additional Stats", _BANNER]
    sc = v.scenario
    mean_s = _seconds(v.lat.mean_trunc)
    if sc is Scenario.SINGLE_STREAM:
        qps_w = _cdiv(_size_t(v.n - 1), v.final_issued_s)
        qps_wo = _cdiv(1.0, mean_s)
        out.append(f"QPS w/ loadgen overhead         : {fmt_fixed(qps_w)}")
        out.append(f"QPS w/o loadgen overhead        : {fmt_fixed(qps_wo)}")
        out.append("")
    elif sc is Scenario.SERVER:
        sched = _cdiv(_size_t(v.n - 1), v.final_sched_s)
        out.append(f"Scheduled samples per second : {fmt_fixed(sched)}")
    elif sc is Scenario.MULTI_STREAM:
        out.append("Per-query latency:  ")
        out += _latency_block(v.qlat)
    if sc is not Scenario.MULTI_STREAM:
        out += _latency_block(v.lat)
    if v.tokens:
        out.append("")
        if sc is Scenario.SINGLE_STREAM:
            tps_w = _cdiv(float(v.token_count), v.final_issued_s)
            tps_wo = _cdiv(float(v.token_count), mean_s * float(v.n))
            out.append(f"TPS w/ loadgen overhead         : {fmt_fixed(tps_w)}")
            out.append(f"TPS w/o loadgen overhead        : {fmt_fixed(tps_wo)}")
        elif sc is Scenario.SERVER:
            tps = _cdiv(float(v.token_count), v.final_done_s)
            out.append(f"Completed tokens per second                 : {fmt_fixed(tps)}")
        if sc is not Scenario.OFFLINE:
            t = v.ttft
            out.append(f"Min First Token latency (ns)                : {t.min}")
            out.append(f"Max First Token latency (ns)                : {t.max}")
            out.append(f"Mean First Token latency (ns)               : {t.mean_trunc}")
            for p in LOADGEN_PERCENTILES:
                out.append(f"{_pct2(p)} percentile first token latency (ns)   : "
                           f"{t.percentiles.get(p, 0)}")
            out.append("")
            t = v.tpot
            out.append(f"Min Time per Output Token (ns)                : {t.min}")
            out.append(f"Max Time per Output Token (ns)                : {t.max}")
            out.append(f"Mean Time per Output Token (ns)               : {t.mean_trunc}")
            for p in LOADGEN_PERCENTILES:
                out.append(f"{_pct2(p)} percentile time to output token (ns)   : "
                           f"{t.percentiles.get(p, 0)}")
    return out


def _summary_parameters(eff: EffectiveSettings, v: _View) -> list[str]:
    seeds = eff.seeds
    out = [
        f"samples_per_query : {eff.samples_per_query}",
        f"target_qps : {fmt_g(eff.target_qps)}",
    ]
    if not v.tokens:
        out.append(f"target_latency (ns): {v.target_latency_ns}")
    else:
        out.append(f"ttft_latency (ns): {v.ttft_limit_ns}")
        out.append(f"tpot_latency (ns): {v.tpot_limit_ns}")
    out += [
        f"max_async_queries : {eff.max_async_queries}",
        f"min_duration (ms): {eff.min_duration_ns // 1_000_000}",
        f"max_duration (ms): {eff.max_duration_ns // 1_000_000}",
        f"min_query_count : {eff.min_query_count}",
        f"max_query_count : {eff.max_query_count}",
        f"qsl_rng_seed : {seeds.qsl}",
        f"sample_index_rng_seed : {seeds.sample_index}",
        f"schedule_rng_seed : {seeds.schedule}",
        f"accuracy_log_rng_seed : {seeds.accuracy_log}",
        f"accuracy_log_probability : {fmt_g(eff.requested.accuracy_log_probability)}",
        f"accuracy_log_sampling_target : {eff.requested.accuracy_log_sampling_target}",
        "print_timestamps : 0",
        f"performance_issue_unique : {int(eff.requested.performance_issue_unique)}",
        f"performance_issue_same : {int(eff.requested.performance_issue_same)}",
        f"performance_issue_same_index : {eff.requested.performance_issue_same_index}",
        f"performance_sample_count : {eff.performance_sample_count}",
        f"accuracy_sample_count : {eff.accuracy_sample_count or eff.total_sample_count}",
    ]
    if eff.sample_concatenate_permutation:
        out += list(_CONCAT_WARNING)
    return out


def _trailer(warnings: int, errors: int) -> list[str]:
    if warnings == 0:
        w = "No warnings encountered during test."
    elif warnings == 1:
        w = "1 warning encountered. See detailed log."
    else:
        w = f"{warnings} warnings encountered. See detailed log."
    if errors == 0:
        e = "No errors encountered during test."
    elif errors == 1:
        e = "1 ERROR encountered. See detailed log."
    else:
        e = f"{errors} ERRORS encountered. See detailed log."
    return ["", w, "", e]


# -- the detail log -----------------------------------------------------------------------


def _json_value(value: Any) -> str:
    """A value as LoadGen's ``ArgValueTransform`` writes it into a detail line."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return fmt_g(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list | tuple):
        return "[" + ",".join(str(int(i)) for i in value) + "]"
    raise InternalError(f"cannot log a value of type {type(value).__name__} in MLLOG")


class _DetailWriter:
    def __init__(self, pid: int) -> None:
        self.lines: list[str] = []
        self.pid = pid
        self.errors = 0
        self.t_ns = 0

    def log(self, key: str, value: Any, *, error: bool = False, warning: bool = False) -> None:
        t = self.t_ns
        self.lines.append(
            f'{MARKER} {{"key": {json.dumps(key)}, "value": {_json_value(value)}, '
            f'"time_ms": {t // 1_000_000}.{t % 1_000_000:06d}, '
            f'"namespace": "{_NAMESPACE}", "event_type": "POINT_IN_TIME", '
            f'"metadata": {{"is_error": {_json_value(error)}, '
            f'"is_warning": {_json_value(warning)}, "file": "{_SOURCE_FILE}", '
            f'"line_no": 0, "pid": {self.pid}, "tid": {self.pid}}}}}'
        )
        if error:
            self.errors += 1


def _utc(ns: int) -> tuple[time.struct_time, int]:
    secs, rem = divmod(ns, 1_000_000_000)
    return time.gmtime(secs), rem // 1_000_000


def _test_datetime(facts: RunFacts) -> str:
    if facts.test_datetime is not None:
        d = facts.test_datetime
        if d.tzinfo is not None:
            d = d.astimezone(UTC)
        return d.strftime("%Y-%m-%dT%H:%M:%SZ")
    t, _ = _utc(facts.start_wall_ns)
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", t)


def _power_time(ns: int) -> str:
    """LoadGen's ``DateTimeStringForPower``: UTC ``MM-DD-YYYY HH:MM:SS.mmm``."""
    t, ms = _utc(ns)
    return f"{time.strftime('%m-%d-%Y %H:%M:%S', t)}.{ms:03d}"


def render_detail(
    eff: EffectiveSettings,
    summary: Summary,
    verdicts: Verdicts,
    schedule: Schedule,
    facts: RunFacts,
) -> str:
    """``mlperf_log_detail.txt``: LoadGen 6.0.17's ``:::MLLOG`` lines for this run.

    The first line is tokenmark's note; then, in LoadGen's order, the run's identity,
    ``requested_*`` and ``effective_*`` settings, ``loaded_qsl_set`` and
    ``generated_*`` (from ``schedule``), errors and warnings, ``power_begin``/``_end``
    and, in performance mode, every ``result_*``/``early_stopping_*`` key and
    ``num_errors``. In accuracy mode LoadGen repeats ``loaded_qsl_set``,
    ``generated_*`` and the power lines for each loadable set it issues; a tokenmark
    :class:`~tokenmark.mlperf.scenarios.Schedule` holds one set, so one is logged. Raises
    :class:`~tokenmark.errors.InternalError` for a non-MLPerf scenario.
    """
    v = _view(eff, summary, verdicts, facts)
    w = _DetailWriter(facts.pid)
    w.log(NOTE_KEY, note_text(facts.tokenmark_version))
    w.log("test_datetime", _test_datetime(facts))
    w.log("sut_name", facts.sut_name)
    w.log("qsl_name", facts.qsl_name)
    w.log("qsl_reported_total_count", eff.total_sample_count)
    # tokenmark's QSL (the dataset) reports all of itself as loadable, as the MLPerf LLM
    # harnesses do; the performance sample count is the override (settings.effective).
    w.log("qsl_reported_performance_count", eff.total_sample_count)
    _log_requested(w, eff, v)
    _log_effective(w, eff, v)
    perf = v.mode is Mode.PERFORMANCE
    w.log("generic_message", "Starting performance mode" if perf else "Starting accuracy mode")
    w.log("loaded_qsl_set", list(schedule.loaded_set))
    w.log("generated_query_count", schedule.generated_query_count)
    w.log("generated_samples_per_query", schedule.samples_per_query)
    w.log("generated_query_duration", schedule.generated_query_duration_ns)
    w.t_ns = max(0, facts.active_duration_ns)
    if perf and v.scenario is not Scenario.SERVER and not facts.ran_out_of_generated_queries:
        if not summary.interrupted:
            w.log("generic_message", _ENDING_NATURALLY)
    for message in v.errors:
        w.log("error_runtime", message, error=True)
    for message in v.warnings:
        w.log("warning_generic_message", message, warning=True)
    w.log("power_begin", _power_time(facts.start_wall_ns))
    w.log("power_end", _power_time(facts.start_wall_ns + max(0, facts.active_duration_ns)))
    if perf:
        _log_results(w, v)
    return "\n".join(w.lines) + "\n"


def _log_requested(w: _DetailWriter, eff: EffectiveSettings, v: _View) -> None:
    r = eff.requested
    sc = v.scenario
    w.log("requested_scenario", sc.value)
    w.log("requested_test_mode", r.mode.value)
    if sc is Scenario.SINGLE_STREAM:
        w.log("requested_single_stream_expected_latency_ns",
              float(r.single_stream_expected_latency_ns))
        w.log("requested_single_stream_target_latency_percentile",
              float(r.target_latency_percentile))
    elif sc is Scenario.MULTI_STREAM:
        w.log("requested_multi_stream_expected_latency_ns",
              float(r.multi_stream_expected_latency_ns))
        w.log("requested_multi_stream_target_latency_percentile",
              float(r.target_latency_percentile))
        w.log("requested_multi_stream_samples_per_query", r.multi_stream_samples_per_query)
    elif sc is Scenario.SERVER:
        w.log("requested_server_target_qps", float(r.target_qps))
        w.log("requested_server_target_latency_ns", v.target_latency_ns)
        w.log("requested_server_target_latency_percentile",
              float(r.target_latency_percentile))
        w.log("requested_server_coalesce_queries", False)
        w.log("requested_server_find_peak_qps_decimals_of_precision", 1)
        w.log("requested_server_find_peak_qps_boundary_step_size", 1.0)
        w.log("requested_server_max_async_queries", r.max_async_queries)
        w.log("requested_server_num_issue_query_threads", 0)
    else:
        w.log("requested_offline_expected_qps", float(r.offline_expected_qps))
    w.log("requested_min_duration_ms", r.min_duration_ms)
    w.log("requested_max_duration_ms", r.max_duration_ms)
    w.log("requested_min_query_count", r.min_query_count)
    w.log("requested_max_query_count", r.max_query_count)
    w.log("requested_qsl_rng_seed", r.seeds.qsl)
    w.log("requested_sample_index_rng_seed", r.seeds.sample_index)
    w.log("requested_schedule_rng_seed", r.seeds.schedule)
    w.log("requested_accuracy_log_rng_seed", r.seeds.accuracy_log)
    w.log("requested_accuracy_log_probability", float(r.accuracy_log_probability))
    w.log("requested_accuracy_log_sampling_target", r.accuracy_log_sampling_target)
    w.log("requested_print_timestamps", False)
    w.log("requested_performance_issue_unique", r.performance_issue_unique)
    w.log("requested_performance_issue_same", r.performance_issue_same)
    w.log("requested_performance_issue_same_index", r.performance_issue_same_index)
    w.log("requested_performance_sample_count_override", r.performance_sample_count)
    w.log("requested_accuracy_sample_count_override", 0)
    w.log("requested_sample_concatenate_permutation", r.sample_concatenate_permutation)
    if r.use_token_latencies:
        w.log("requested_use_token_latencies", True)
        if sc is not Scenario.OFFLINE:
            w.log("requested_server_ttft_latency", v.ttft_limit_ns)
            w.log("requested_server_tpot_latency", v.tpot_limit_ns)


def _log_effective(w: _DetailWriter, eff: EffectiveSettings, v: _View) -> None:
    seeds = eff.seeds
    w.log("effective_scenario", v.scenario.value)
    w.log("effective_test_mode", eff.mode.value)
    w.log("effective_samples_per_query", eff.samples_per_query)
    w.log("effective_target_qps", float(eff.target_qps))
    w.log("effective_target_latency_ns", v.target_latency_ns)
    w.log("effective_target_latency_percentile", float(v.target_p))
    w.log("effective_max_async_queries", eff.max_async_queries)
    w.log("effective_target_duration_ms", eff.target_duration_ns // 1_000_000)
    w.log("effective_min_duration_ms", eff.min_duration_ns // 1_000_000)
    w.log("effective_max_duration_ms", eff.max_duration_ns // 1_000_000)
    w.log("effective_min_query_count", eff.min_query_count)
    w.log("effective_max_query_count", eff.max_query_count)
    w.log("effective_min_sample_count", eff.min_sample_count)
    w.log("effective_qsl_rng_seed", seeds.qsl)
    w.log("effective_sample_index_rng_seed", seeds.sample_index)
    w.log("effective_schedule_rng_seed", seeds.schedule)
    w.log("effective_accuracy_log_rng_seed", seeds.accuracy_log)
    w.log("effective_accuracy_log_probability", float(eff.requested.accuracy_log_probability))
    w.log("effective_accuracy_log_sampling_target", eff.requested.accuracy_log_sampling_target)
    w.log("effective_print_timestamps", False)
    w.log("effective_performance_issue_unique", eff.requested.performance_issue_unique)
    w.log("effective_performance_issue_same", eff.requested.performance_issue_same)
    w.log("effective_performance_issue_same_index", eff.requested.performance_issue_same_index)
    w.log("effective_performance_sample_count", eff.performance_sample_count)
    w.log("effective_accuracy_sample_count", eff.accuracy_sample_count or eff.total_sample_count)
    w.log("effective_sample_concatenate_permutation", eff.sample_concatenate_permutation)


def _log_results(w: _DetailWriter, v: _View) -> None:
    sc = v.scenario
    w.log("result_validity", "VALID" if v.valid else "INVALID")
    if sc is Scenario.SERVER:
        w.log("result_perf_constraints_met", v.perf_met)
    w.log("result_min_duration_met", v.min_duration_met)
    w.log("result_min_queries_met", v.min_queries_met)
    w.log("early_stopping_met", v.early_stopping_met)
    if not v.valid:
        reason = ""
        if not v.perf_met:
            reason += v.perf_rec + " "
        if not v.min_duration_met:
            reason += v.min_duration_rec + " "
        if not v.min_queries_met:
            reason += _MIN_QUERIES_DETAIL
        if v.unanswered is not None:
            reason += f"Not every query was answered (tokenmark): {v.unanswered.observed}."
        w.log("result_invalid_reason", reason.replace("\n", " "))
    if not v.tokens:
        w.log("early_stopping_result", v.es_texts.get("latency", "").replace("\n", " "))
    else:
        w.log("early_stopping_ttft_result", v.es_texts.get("ttft", "").replace("\n", " "))
        w.log("early_stopping_tpot_result", v.es_texts.get("tpot", "").replace("\n", " "))
    w.log("result_query_count", v.queries)
    if sc is Scenario.SERVER:
        w.log("result_overlatency_query_count", v.overlatency)

    mean_s = _seconds(v.lat.mean_trunc)
    if sc is Scenario.SINGLE_STREAM:
        w.log("result_qps_with_loadgen_overhead", _cdiv(_size_t(v.n - 1), v.final_issued_s))
        w.log("result_qps_without_loadgen_overhead", _cdiv(1.0, mean_s))
        w.log("early_stopping_latency_ss", v.es_latency_ss)
        w.log("early_stopping_latency_ms", v.es_latency_ms)
    elif sc is Scenario.MULTI_STREAM:
        q = v.qlat
        w.log("result_min_query_latency_ns", q.min)
        w.log("result_max_query_latency_ns", q.max)
        w.log("result_mean_query_latency_ns", q.mean_trunc)
        for p in LOADGEN_PERCENTILES:
            w.log(f"result_{_pct2(p)}_percentile_per_query_latency_ns", q.percentiles.get(p, 0))
        w.log("early_stopping_latency_ms", v.es_latency_ms)
    elif sc is Scenario.SERVER:
        w.log("result_scheduled_samples_per_sec", _cdiv(_size_t(v.n - 1), v.final_sched_s))
        w.log("result_completed_samples_per_sec", _cdiv(_size_t(v.n - 1), v.final_done_s))
    else:
        w.log("result_samples_per_second", _cdiv(float(v.n), v.max_latency_s))

    d = v.lat
    w.log("result_min_latency_ns", d.min)
    w.log("result_max_latency_ns", d.max)
    w.log("result_mean_latency_ns", d.mean_trunc)
    for p in LOADGEN_PERCENTILES:
        w.log(f"result_{_pct2(p)}_percentile_latency_ns", d.percentiles.get(p, 0))
    if v.tokens:
        if sc is not Scenario.OFFLINE:
            t = v.ttft
            w.log("result_first_token_min_latency_ns", t.min)
            w.log("result_first_token_max_latency_ns", t.max)
            w.log("result_first_token_mean_latency_ns", t.mean_trunc)
            for p in LOADGEN_PERCENTILES:
                w.log(f"result_first_token_{_pct2(p)}_percentile_latency_ns",
                      t.percentiles.get(p, 0))
            tokens = float(v.token_count)
            w.log("result_token_throughput_with_loadgen_overhead",
                  _cdiv(tokens, v.final_issued_s))
            # LoadGen divides by the mean latency in ns times the count (integers), so
            # this figure is ~1e-9 of a rate: a unit bug, logged as LoadGen logs it.
            w.log("result_token_throughput", _cdiv(tokens, _size_t(v.lat.mean_trunc * v.n)))
            t = v.tpot
            for p in LOADGEN_PERCENTILES:
                w.log(f"result_time_per_output_token_{_pct2(p)}_percentile_ns",
                      t.percentiles.get(p, 0))
            w.log("result_time_to_output_token_min", t.min)
            w.log("result_time_to_output_token_max", t.max)
            w.log("result_time_to_output_token_mean", t.mean_trunc)
            w.log("result_completed_tokens_per_second", _cdiv(tokens, v.final_done_s))
        else:
            w.log("result_tokens_per_second", _cdiv(float(v.token_count), v.max_latency_s))
    w.log("num_errors", w.errors)


# -- parsing the detail log ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DetailEntry:
    """One ``:::MLLOG`` line. ``lineno`` is its 1-based line in the parsed file."""

    key: str
    value: Any
    time_ms: float | None
    metadata: Mapping[str, Any]
    lineno: int
    namespace: str = _NAMESPACE
    event_type: str = "POINT_IN_TIME"

    @property
    def is_error(self) -> bool:
        return bool(self.metadata.get("is_error", False))

    @property
    def is_warning(self) -> bool:
        return bool(self.metadata.get("is_warning", False))


@dataclass(frozen=True)
class DetailLog:
    """A parsed detail log: every entry in file order, looked up by key.

    As the submission checker does, a key's value is its first entry's
    (:meth:`get`, ``log[key]``); :meth:`values` gives all of them. ``skipped`` lists
    ``(line, reason)`` for lines a lenient parse left out.
    """

    source: str
    entries: tuple[DetailEntry, ...]
    skipped: tuple[tuple[int, str], ...] = ()
    _by_key: dict[str, list[DetailEntry]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        for e in self.entries:
            self._by_key.setdefault(e.key, []).append(e)

    def __contains__(self, key: object) -> bool:
        return key in self._by_key

    def __getitem__(self, key: str) -> Any:
        try:
            return self._by_key[key][0].value
        except KeyError:
            raise KeyError(f"{self.source}: no {key!r} in the detail log") from None

    def get(self, key: str, default: Any = None) -> Any:
        found = self._by_key.get(key)
        return found[0].value if found else default

    def values(self, key: str) -> list[Any]:
        return [e.value for e in self._by_key.get(key, ())]

    def keys(self) -> list[str]:
        """Every key, in order of first appearance."""
        return list(self._by_key)

    def as_dict(self) -> dict[str, list[Any]]:
        return {k: [e.value for e in es] for k, es in self._by_key.items()}

    @property
    def errors(self) -> tuple[DetailEntry, ...]:
        return tuple(e for e in self.entries if e.is_error)

    @property
    def warnings(self) -> tuple[DetailEntry, ...]:
        return tuple(e for e in self.entries if e.is_warning)

    @property
    def num_errors(self) -> int:
        """LoadGen's ``num_errors`` where logged, else the error lines counted (v4.1)."""
        n = self.get("num_errors")
        return int(n) if isinstance(n, int) else len(self.errors)

    @property
    def tokenmark_note(self) -> str | None:
        note = self.get(NOTE_KEY)
        return note if isinstance(note, str) else None

    @property
    def has_results(self) -> bool:
        """Whether the run's results were logged (a performance run that finished)."""
        return "result_validity" in self


# LoadGen streams non-finite doubles as the C library prints them, which is not JSON.
_NON_FINITE = re.compile(r'("value": )(-?nan|-?inf)(?=, "time_ms")')
_NON_FINITE_JSON = {"nan": "NaN", "-nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}


def _load_line(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        fixed = _NON_FINITE.sub(lambda m: m.group(1) + _NON_FINITE_JSON[m.group(2)], text)
        if fixed == text:
            raise
        return json.loads(fixed)


def parse_detail(
    lines: Iterable[str] | str, source: str = "<detail log>", *, strict: bool = True
) -> DetailLog:
    """Parse ``mlperf_log_detail.txt`` (LoadGen's, of any round since v4.1, or tokenmark's).

    ``lines`` is the text or an iterable of its lines (an open file). Blank lines are
    ignored. In strict mode any other line that is not a well-formed ``:::MLLOG``
    entry (garbage, a line cut off by a truncated write) raises :class:`MLLogError`
    naming ``source`` and the line; with ``strict=False`` it is skipped and listed in
    :attr:`DetailLog.skipped`. A log with no entry at all raises in both modes.
    """
    if isinstance(lines, str):
        lines = lines.splitlines()
    entries: list[DetailEntry] = []
    skipped: list[tuple[int, str]] = []
    for lineno, raw in enumerate(lines, start=1):
        line = raw.rstrip("\r\n")
        if not line.strip():
            continue
        problem = ""
        entry: DetailEntry | None = None
        if not line.startswith(MARKER):
            problem = f"not a {MARKER} line: {_clip(line)!r}"
        else:
            try:
                obj = _load_line(line[len(MARKER):])
            except (json.JSONDecodeError, RecursionError) as exc:
                problem = (f"the JSON after {MARKER} does not parse ({exc.args[0]}); "
                           "the file may be truncated or edited")
            else:
                entry, problem = _entry(obj, lineno)
        if entry is not None:
            entries.append(entry)
        elif strict:
            raise MLLogError(source, lineno, problem + " (strict=False skips such lines)")
        else:
            skipped.append((lineno, problem))
    if not entries:
        raise MLLogError(source, None, f"no {MARKER} entries: not an MLPerf detail log")
    return DetailLog(source, tuple(entries), tuple(skipped))


def _entry(obj: Any, lineno: int) -> tuple[DetailEntry | None, str]:
    if not isinstance(obj, dict):
        return None, f"the {MARKER} payload is not a JSON object"
    key = obj.get("key")
    if not isinstance(key, str) or "value" not in obj:
        return None, f"the {MARKER} object has no string 'key' and 'value'"
    meta = obj.get("metadata", {})
    if not isinstance(meta, dict):
        return None, "'metadata' is not a JSON object"
    t = obj.get("time_ms")
    time_ms = float(t) if isinstance(t, int | float) and not isinstance(t, bool) else None
    return DetailEntry(
        key=key,
        value=obj["value"],
        time_ms=time_ms,
        metadata=meta,
        lineno=lineno,
        namespace=str(obj.get("namespace", _NAMESPACE)),
        event_type=str(obj.get("event_type", "POINT_IN_TIME")),
    ), ""


def _clip(s: str, n: int = 60) -> str:
    return s if len(s) <= n else s[:n] + "..."


# -- parsing the summary ------------------------------------------------------------------

#: Labels older LoadGen versions printed, mapped to 6.0.17's wording.
_LABEL_ALIASES = {
    "Min Time to Output Token (ns)": "Min Time per Output Token (ns)",
    "Max Time to Output Token (ns)": "Max Time per Output Token (ns)",
    "Mean Time to Output Token (ns)": "Mean Time per Output Token (ns)",
}
_HEADLINE = {
    "Completed samples per second": "completed_samples_per_second",
    "Completed tokens per second": "completed_tokens_per_second",
    "Samples per second": "samples_per_second",
    "Tokens per second": "tokens_per_second",
    "Tokens per second (inferred)": "inferred_tokens_per_second",
    "Completed tokens per second (inferred)": "inferred_completed_tokens_per_second",
}
_CRITERIA = {
    "Performance constraints satisfied": "performance_constraints",
    "Min duration satisfied": "min_duration",
    "Min queries satisfied": "min_queries",
    "Early stopping satisfied": "early_stopping",
}
_ES_HEADERS = {
    "Early Stopping Result:": "latency",
    "TTFT Early Stopping Result:": "ttft",
    "TPOT Early Stopping Result:": "tpot",
}
_TARGET_LATENCY = re.compile(r"^(\d+(?:\.\d+)?)th percentile latency \(ns\)$")
_TARGET_TTFT = re.compile(r"^(\d+(?:\.\d+)?)th first token percentile latency \(ns\)$")
_LABEL_VALUE = re.compile(r"^(?P<label>[^:]*[^:\s])\s*: ?(?P<value>.*)$")
_TRAILER_END = r" encountered(?: during test\.|\. See detailed log\.)$"
_WARNINGS = re.compile(r"^(?:No|(\d+)) warnings?" + _TRAILER_END)
_ERRORS = re.compile(r"^(?:No|(\d+)) (?:errors|ERRORS?)" + _TRAILER_END)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")

SECTION_RESULTS = "results"
SECTION_ADDITIONAL = "additional_stats"
SECTION_PER_QUERY = "per_query_latency"
SECTION_PARAMETERS = "test_parameters"
_SECTION_TITLES = {
    "MLPerf Results Summary": SECTION_RESULTS,
    "Additional Stats": SECTION_ADDITIONAL,
    "Test Parameters Used": SECTION_PARAMETERS,
}


@dataclass(frozen=True, slots=True)
class SummaryLine:
    """One ``label : value`` line: its 1-based line, section, label as printed, value."""

    lineno: int
    section: str
    label: str
    value: str


@dataclass(frozen=True)
class SummaryLog:
    """A parsed ``mlperf_log_summary.txt``.

    ``fields`` maps a section (``results``, ``additional_stats``,
    ``per_query_latency``, ``test_parameters``) to its ``label -> value`` pairs, labels
    stripped and in LoadGen 6.0.17's wording (older "Time to Output Token" labels are
    mapped); ``lines`` keeps every such line as printed. ``headline`` holds the
    scenario's leading figures as numbers: ``completed_samples_per_second`` and
    ``completed_tokens_per_second`` (Server), ``samples_per_second`` and
    ``tokens_per_second`` (Offline), ``target_latency_ns`` and
    ``target_first_token_latency_ns`` at ``target_percentile`` (SingleStream,
    MultiStream). ``criteria`` maps ``performance_constraints``, ``min_duration``,
    ``min_queries`` and ``early_stopping`` to whether they were satisfied;
    ``early_stopping`` maps ``latency``/``ttft``/``tpot`` to the text under each
    "Early Stopping Result:" header, exactly as printed.
    """

    source: str
    sut_name: str | None = None
    scenario: str | None = None
    mode: str | None = None
    result_validity: str | None = None
    criteria: dict[str, bool] = field(default_factory=dict)
    recommendations: tuple[str, ...] = ()
    early_stopping: dict[str, str] = field(default_factory=dict)
    headline: dict[str, float] = field(default_factory=dict)
    target_percentile: float | None = None
    fields: dict[str, dict[str, str]] = field(default_factory=dict)
    lines: tuple[SummaryLine, ...] = ()
    notes: tuple[str, ...] = ()
    warning_count: int | None = None
    error_count: int | None = None
    tokenmark_note: str | None = None
    skipped: tuple[tuple[int, str], ...] = ()

    @property
    def valid(self) -> bool:
        return self.result_validity == "VALID"

    @property
    def complete(self) -> bool:
        """Whether the errors trailer, LoadGen's last line, was read."""
        return self.error_count is not None

    def get(self, label: str, section: str = SECTION_RESULTS) -> str | None:
        return self.fields.get(section, {}).get(label)

    def number(self, label: str, section: str = SECTION_RESULTS) -> float | None:
        """A ``label``'s value as a float (``None`` when absent)."""
        value = self.get(label, section)
        return None if value is None else _number(value)


def _number(text: str) -> float:
    t = text.strip()
    if t in ("nan", "-nan"):
        return math.nan
    return float(t)


@dataclass
class _SummaryState:
    source: str
    strict: bool
    section: str | None = None
    expect_title: bool = False
    block: str | None = None  # "recommendations" or an early-stopping key
    block_lines: list[str] = field(default_factory=list)
    after_warning: bool = False
    seen_header: bool = False
    out: dict[str, Any] = field(default_factory=dict)
    fields: dict[str, dict[str, str]] = field(default_factory=dict)
    lines: list[SummaryLine] = field(default_factory=list)
    recommendations: list[str] = field(default_factory=list)
    early_stopping: dict[str, str] = field(default_factory=dict)
    criteria: dict[str, bool] = field(default_factory=dict)
    headline: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    skipped: list[tuple[int, str]] = field(default_factory=list)

    def bad(self, lineno: int, problem: str) -> None:
        if self.strict:
            raise MLLogError(self.source, lineno, problem + " (strict=False skips such lines)")
        self.skipped.append((lineno, problem))

    def close_block(self) -> None:
        if self.block is None:
            return
        if self.block == "recommendations":
            items: list[str] = []
            for ln in self.block_lines:
                if ln.startswith(" * "):
                    items.append(ln[3:])
                elif items:
                    items[-1] += "\n" + ln.strip()
            self.recommendations.extend(items)
        else:
            self.early_stopping[self.block] = "\n".join(self.block_lines)
        self.block = None
        self.block_lines = []


def parse_summary(
    text: str, source: str = "<summary log>", *, strict: bool = True
) -> SummaryLog:
    """Parse ``mlperf_log_summary.txt`` (LoadGen's, of any round since v4.1, or tokenmark's).

    Reads the header (SUT name, scenario, mode), the headline metric lines, the
    validity and its sub-criteria, recommendations, early-stopping texts, "Additional
    Stats", "Test Parameters Used" and the warnings/errors trailer. An accuracy-mode
    summary (the trailer alone) parses with no scenario. In strict mode a line that
    fits nowhere (garbage, control characters), a header without its scenario, or a
    file that stops before the trailer (truncated) raises :class:`MLLogError` naming
    ``source`` and the line; ``strict=False`` skips such lines (see
    :attr:`SummaryLog.skipped`) and reports truncation as ``complete == False``.
    """
    if not text.strip():
        raise MLLogError(source, None, "the summary is empty")
    st = _SummaryState(source, strict)
    all_lines = text.splitlines()
    for lineno, raw in enumerate(all_lines, start=1):
        _summary_line(st, lineno, raw.rstrip("\r\n"))
    st.close_block()
    out = st.out
    if not st.seen_header and "error_count" not in out:
        raise MLLogError(source, None, "no 'MLPerf Results Summary' header and no "
                         "errors trailer: not an MLPerf LoadGen summary")
    if st.seen_header and "scenario" not in out:
        st.bad(len(all_lines), "the header has no 'Scenario :' line")
    if "error_count" not in out and strict:
        raise MLLogError(source, len(all_lines), "the summary stops before LoadGen's "
                         "errors trailer ('No errors encountered during test.'): "
                         "the file is truncated (strict=False reads what is there)")
    return SummaryLog(
        source=source,
        sut_name=out.get("sut_name"),
        scenario=out.get("scenario"),
        mode=out.get("mode"),
        result_validity=out.get("result_validity"),
        criteria=st.criteria,
        recommendations=tuple(st.recommendations),
        early_stopping=st.early_stopping,
        headline=st.headline,
        target_percentile=out.get("target_percentile"),
        fields=st.fields,
        lines=tuple(st.lines),
        notes=tuple(st.notes),
        warning_count=out.get("warning_count"),
        error_count=out.get("error_count"),
        tokenmark_note=out.get("tokenmark_note"),
        skipped=tuple(st.skipped),
    )


def _summary_line(st: _SummaryState, lineno: int, line: str) -> None:
    if _CONTROL.search(line):
        st.bad(lineno, f"control characters in {_clip(line)!r}: not summary text")
        return
    stripped = line.strip()
    if st.block is not None:
        if st.block == "recommendations":
            if line.startswith((" * ", "   ")):
                st.block_lines.append(line)
                return
        elif line.startswith(" "):
            st.block_lines.append(line)
            return
        elif not stripped and not st.block_lines:
            # an empty early-stopping text prints as an empty line
            st.close_block()
            return
        st.close_block()
    if not stripped:
        if st.section == SECTION_PER_QUERY:  # MultiStream's per-query block ends here
            st.section = SECTION_ADDITIONAL
        return
    if stripped == _BANNER:
        if st.expect_title:  # the closing banner of a section title
            st.expect_title = False
        else:
            st.expect_title = True
            st.section = None
        return
    if st.section is None and st.expect_title:
        title = _SECTION_TITLES.get(stripped)
        if title is None:
            st.bad(lineno, f"unknown section title {_clip(stripped)!r}")
            return
        st.section = title
        st.seen_header = st.seen_header or title == SECTION_RESULTS
        st.after_warning = False
        return
    if stripped.startswith(NOTE_PREFIX):
        st.out["tokenmark_note"] = stripped
        return
    m = _WARNINGS.match(stripped)
    if m:
        st.out["warning_count"] = int(m.group(1) or 0)
        return
    m = _ERRORS.match(stripped)
    if m:
        st.out["error_count"] = int(m.group(1) or 0)
        return
    if st.section == SECTION_RESULTS:
        _results_line(st, lineno, stripped)
    elif st.section in (SECTION_ADDITIONAL, SECTION_PER_QUERY):
        if stripped == "Per-query latency:":  # MultiStream prints it with 2 trailing spaces
            st.section = SECTION_PER_QUERY
            return
        _field_line(st, lineno, stripped)
    elif st.section == SECTION_PARAMETERS:
        if stripped.startswith("WARNING"):
            st.after_warning = True
            st.notes.append(line)
            return
        if st.after_warning and ":" not in stripped:
            st.notes.append(line)
            return
        _field_line(st, lineno, stripped)
    else:
        st.bad(lineno, f"text outside any section: {_clip(stripped)!r}")


def _field_line(st: _SummaryState, lineno: int, stripped: str) -> tuple[str, str] | None:
    m = _LABEL_VALUE.match(stripped)
    if m is None or not m.group("value").strip():
        st.bad(lineno, f"expected 'label : value', got {_clip(stripped)!r}")
        return None
    label = m.group("label").strip()
    value = m.group("value").strip()
    section = st.section or SECTION_RESULTS
    st.lines.append(SummaryLine(lineno, section, label, value))
    st.fields.setdefault(section, {}).setdefault(_LABEL_ALIASES.get(label, label), value)
    return label, value


def _results_line(st: _SummaryState, lineno: int, stripped: str) -> None:
    if stripped == "Recommendations:":
        st.block = "recommendations"
        return
    es = _ES_HEADERS.get(stripped)
    if es is not None:
        st.block = es
        return
    got = _field_line(st, lineno, stripped)
    if got is None:
        return
    label, value = got
    out = st.out
    if label == "SUT name":
        out["sut_name"] = value
    elif label == "Scenario":
        out["scenario"] = value
    elif label == "Mode":
        out["mode"] = value
    elif label == "Result is":
        out["result_validity"] = value
    elif label in _CRITERIA:
        st.criteria[_CRITERIA[label]] = value.lower() == "yes"
    else:
        try:
            number = _number(value)
        except ValueError:
            st.bad(lineno, f"{label!r} has no number: {_clip(value)!r}")
            return
        if label in _HEADLINE:
            st.headline[_HEADLINE[label]] = number
        elif m := _TARGET_LATENCY.match(label):
            out["target_percentile"] = float(m.group(1)) / 100
            st.headline["target_latency_ns"] = number
        elif m := _TARGET_TTFT.match(label):
            out["target_percentile"] = float(m.group(1)) / 100
            st.headline["target_first_token_latency_ns"] = number
