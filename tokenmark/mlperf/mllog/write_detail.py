"""``mlperf_log_detail.txt``: one ``:::MLLOG {json}`` line per key, as LoadGen 6.0.17 logs them."""

from __future__ import annotations

import json
import math
import time
from datetime import UTC
from typing import Any

from tokenmark.errors import InternalError
from tokenmark.metrics.stats import LOADGEN_PERCENTILES
from tokenmark.metrics.summary import Summary
from tokenmark.mlperf.mllog.common import (
    _NAMESPACE,
    _SOURCE_FILE,
    MARKER,
    NOTE_KEY,
    RunFacts,
    _cdiv,
    _pct2,
    _seconds,
    _size_t,
    fmt_g,
    note_text,
)
from tokenmark.mlperf.mllog.view import _ENDING_NATURALLY, _MIN_QUERIES_DETAIL, _View, _view
from tokenmark.mlperf.rules import Verdicts
from tokenmark.mlperf.scenarios import Schedule
from tokenmark.mlperf.settings import EffectiveSettings, Mode, Scenario

__all__ = [
    "render_detail",
]

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


