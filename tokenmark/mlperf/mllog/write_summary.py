"""``mlperf_log_summary.txt``, written in LoadGen 6.0.17's words and layout."""

from __future__ import annotations

from tokenmark.metrics.stats import LOADGEN_PERCENTILES, Distribution
from tokenmark.metrics.summary import Summary
from tokenmark.mlperf.mllog.common import (
    _BANNER,
    RunFacts,
    _cdiv,
    _pct1,
    _pct2,
    _seconds,
    _size_t,
    fmt_fixed,
    fmt_g,
    note_text,
)
from tokenmark.mlperf.mllog.view import _CONCAT_WARNING, _MIN_QUERIES_SUMMARY, _View, _view, _yes
from tokenmark.mlperf.rules import Verdicts
from tokenmark.mlperf.settings import EffectiveSettings, Mode, Scenario

__all__ = [
    "render_summary",
]

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


