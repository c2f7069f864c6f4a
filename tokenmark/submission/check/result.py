"""One result folder: its performance log re-parsed and every verdict recomputed (seeds,
duration, sample counts, early stopping, latency limits, LoadGen's own verdict, tokenmark's
records beside the log)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from tokenmark.errors import BadInputError
from tokenmark.importer.checker import canonical_scenario, inferred_figure
from tokenmark.metrics.summary import Accumulator, Summary, summarize
from tokenmark.mlperf.mllog import DetailLog, SummaryLog
from tokenmark.mlperf.presets import BenchmarkPreset
from tokenmark.mlperf.rules import ClientStats, Validity, evaluate
from tokenmark.mlperf.settings import (
    EffectiveSettings,
    LatencyLimits,
    Mode,
    Scenario,
    Seeds,
    TestSettings,
)
from tokenmark.output.records import read_records
from tokenmark.submission.check.csvrow import _csv_row
from tokenmark.submission.check.evidence import (
    _check_accuracy,
    _check_compliance,
    _check_measurements,
)
from tokenmark.submission.check.report import (
    RECORDS_NAME,
    Finding,
    ResultCheck,
    Severity,
    _agree,
    _Ctx,
    _num,
    _parse_detail,
    _parse_summary,
)
from tokenmark.submission.layout import TEST_DURATION_MS, ResultPaths

# -- one result ------------------------------------------------------------------------------


def _check_result(ctx: _Ctx, rc: ResultCheck, bench: BenchmarkPreset, paths: ResultPaths,
                  sysj: dict[str, Any] | None) -> None:
    out = rc.findings
    folder_sc = canonical_scenario(rc.scenario)
    if folder_sc is None:
        out.append(Finding(Severity.ERROR, rc.path, "scenarios",
                           f"{rc.scenario!r} is not a scenario folder name",
                           "use Offline, Server, Interactive, SingleStream or MultiStream"))
        return
    scenario = Scenario.parse(folder_sc)
    detail = _parse_detail(ctx, paths.perf_detail, out, "performance log")
    summary = _parse_summary(ctx, paths.perf_summary, out, "performance log")
    accuracy = _check_accuracy(ctx, rc, bench, scenario, paths)
    measurements = _check_measurements(ctx, rc, paths)
    _check_compliance(ctx, rc, bench, scenario, paths)
    if detail is None:
        return
    if not detail.has_results:
        out.append(Finding(Severity.ERROR, ctx.rel(paths.perf_detail), "performance log",
                           "holds no results (an accuracy run, or a run that did not end)",
                           "put the performance run's logs in performance/run_1"))
        return
    _check_performance(ctx, rc, bench, scenario, detail, summary, paths, sysj)
    if rc.errors or rc.figure is None or sysj is None:
        return
    rc.row = _csv_row(ctx, rc, bench, detail, paths, sysj, accuracy, measurements)


def _check_performance(ctx: _Ctx, rc: ResultCheck, bench: BenchmarkPreset, scenario: Scenario,
                       d: DetailLog, s: SummaryLog | None, paths: ResultPaths,
                       sysj: dict[str, Any] | None) -> None:
    out = rc.findings
    rel = ctx.rel(paths.perf_detail)
    rnd = ctx.preset
    ran = str(d.get("effective_scenario", ""))
    if d.num_errors:
        msgs = "; ".join(str(e.value) for e in d.errors[:3])
        out.append(Finding(Severity.ERROR, rel, "LoadGen errors",
                           f"LoadGen logged {d.num_errors} error(s): {msgs}",
                           "fix what the errors name and run again"))
    seeds = rnd.seeds
    for key, want in (("effective_qsl_rng_seed", seeds.qsl),
                      ("effective_sample_index_rng_seed", seeds.sample_index),
                      ("effective_schedule_rng_seed", seeds.schedule)):
        got = d.get(key)
        if got != want:
            out.append(Finding(Severity.ERROR, rel, "seeds",
                               f"{key} is {got}, not round {rnd.round}'s {want}",
                               f"run with LoadGen's mlperf.conf of round {rnd.round} (tokenmark "
                               f"sets the round's seeds with --round {rnd.round})"))
    # the scenario LoadGen ran
    if scenario is Scenario.INTERACTIVE:
        expected_ran = "Server"
    else:
        expected_ran = scenario.value
    inferred = ran != expected_ran
    if inferred:
        edge = "edge" in str((sysj or {}).get("system_type", "")).lower()
        allowed = {("SingleStream", "MultiStream"), ("MultiStream", "Offline"),
                   ("SingleStream", "Offline")}
        if not edge or (ran, scenario.value) not in allowed:
            out.append(Finding(Severity.ERROR, rel, "scenario",
                               f"LoadGen ran {ran or '(nothing)'} but the folder is "
                               f"{scenario.value}; that result cannot be inferred"
                               + ("" if edge else " (only edge systems infer results)"),
                               "put the run in the folder of the scenario it ran"))
    # min duration (the setting, as the checker reads it) and achieved
    min_dur = _num(d.get("effective_min_duration_ms"))
    if min_dur is None or min_dur < TEST_DURATION_MS:
        out.append(Finding(Severity.ERROR, rel, "min duration",
                           f"effective_min_duration_ms is {d.get('effective_min_duration_ms')}, "
                           f"below {TEST_DURATION_MS}",
                           "run with the round's min_duration (600000 ms): drop any "
                           "min_duration override (--profile demo sets one)"))
    for key, label in (("result_min_duration_met", "min duration"),
                       ("result_min_queries_met", "min queries")):
        if d.get(key) is False:
            out.append(Finding(Severity.ERROR, rel, label, f"{key} is false",
                               "run longer (LoadGen stopped before the minimum)",
                               official=False))
    psc = _num(d.get("effective_performance_sample_count"))
    if psc is None or psc < bench.performance_sample_count:
        out.append(Finding(Severity.ERROR, rel, "performance sample count",
                           f"effective_performance_sample_count is "
                           f"{d.get('effective_performance_sample_count')}, below "
                           f"{bench.performance_sample_count}",
                           f"use the whole {bench.dataset} set ({bench.dataset_size} samples); "
                           "drop performance_sample_count_override"))
    if ran == "Offline" and rc.division == "closed":
        spq = _num(d.get("effective_samples_per_query"))
        if spq is None or spq < bench.dataset_size:
            out.append(Finding(Severity.ERROR, rel, "min queries",
                               "Offline samples per query is "
                               f"{d.get('effective_samples_per_query')}, below the dataset "
                               f"size {bench.dataset_size}",
                               "raise the Offline expected QPS (target_qps) so the query "
                               "covers the dataset"))
    if ran in ("Server", "SingleStream", "MultiStream") and d.get("early_stopping_met") is not True:
        out.append(Finding(Severity.ERROR, rel, "early stopping",
                           f"early stopping was not met: {d.get('early_stopping_result', '')}"
                           .strip(), "run more queries (longer, or a higher rate)"))
    if bench.use_token_latencies and d.get("requested_use_token_latencies") is not True:
        out.append(Finding(Severity.ERROR, rel, "token latencies",
                           "requested_use_token_latencies is not true",
                           "LLM runs must report TTFT/TPOT: use the benchmark's mlperf.conf key"))
    # LoadGen's own verdict (the official checker's first gap)
    validity = d.get("result_validity")
    if validity != "VALID":
        reason = d.get("result_invalid_reason") or ""
        out.append(Finding(Severity.ERROR, rel, "result validity",
                           f"LoadGen marked the run {validity or '(no verdict)'}"
                           + (f": {reason}" if reason else ""),
                           "the run does not meet LoadGen's own criteria; fix them and "
                           "run again", official=False))
    _check_limits(ctx, rc, bench, scenario, d, rel)
    _check_consistency(ctx, rc, d, s, paths)
    fig = inferred_figure(_first_values(d), rnd.round, bench.name, scenario.value, ran)
    if isinstance(fig, str):
        out.append(Finding(Severity.ERROR, rel, "result", fig,
                           "copy the complete performance log"))
    else:
        rc.figure = fig
    _check_records(ctx, rc, bench, scenario, d, paths)


def _first_values(d: DetailLog) -> dict[str, Any]:
    return {k: d.get(k) for k in d.keys()}


def _check_limits(ctx: _Ctx, rc: ResultCheck, bench: BenchmarkPreset, scenario: Scenario,
                  d: DetailLog, rel: str) -> None:
    """TTFT/TPOT (or end-to-end) p99 under the folder scenario's limits, strictly."""
    out = rc.findings
    if scenario not in bench.scenarios or scenario.loadgen is not Scenario.SERVER:
        return
    lim = bench.scenarios[scenario].limits
    server = bench.scenarios.get(Scenario.SERVER)
    stricter = scenario is Scenario.INTERACTIVE
    if bench.use_token_latencies and lim.ttft_ns is not None and lim.tpot_ns is not None:
        ttft = _num(d.get("result_first_token_99.00_percentile_latency_ns"))
        tpot = _num(d.get("result_time_per_output_token_99.00_percentile_ns"))
        if ttft is None or tpot is None:
            out.append(Finding(Severity.ERROR, rel, "latency limits",
                               "TTFT or TPOT p99 is missing from the log",
                               "run with token latencies (use_token_latencies = 1)"))
            return
        for name, value, limit in (("TTFT", ttft, lim.ttft_ns), ("TPOT", tpot, lim.tpot_ns)):
            if value < limit:
                continue
            # Would the official checker (Server limits for an Interactive folder) pass it?
            official = True
            if stricter and server is not None:
                slim = server.limits.ttft_ns if name == "TTFT" else server.limits.tpot_ns
                official = slim is not None and value >= slim
            out.append(Finding(
                Severity.ERROR, rel, "latency limits",
                f"{name} p99 {value / 1e6:.3f} ms is not under the {scenario.value} limit "
                f"{limit / 1e6:g} ms", "lower the rate (target_qps) until the limit is met",
                official=official))
    elif lim.e2e_ns is not None:
        p99 = _num(d.get("result_99.00_percentile_latency_ns"))
        if p99 is None or p99 > lim.e2e_ns:
            out.append(Finding(Severity.ERROR, rel, "latency limits",
                               f"p99 latency {p99} ns exceeds the {scenario.value} limit "
                               f"{lim.e2e_ns} ns", "lower the rate (target_qps)"))


_SUMMARY_FIGURES = (
    ("completed_tokens_per_second", "result_completed_tokens_per_second"),
    ("completed_samples_per_second", "result_completed_samples_per_sec"),
    ("tokens_per_second", "result_tokens_per_second"),
    ("samples_per_second", "result_samples_per_second"),
)


def _check_consistency(ctx: _Ctx, rc: ResultCheck, d: DetailLog, s: SummaryLog | None,
                       paths: ResultPaths) -> None:
    """The detail log against itself and against the summary: edits show up here."""
    out = rc.findings
    rel = ctx.rel(paths.perf_detail)
    ran = str(d.get("effective_scenario", ""))
    crit = {"min duration": d.get("result_min_duration_met"),
            "min queries": d.get("result_min_queries_met")}
    if ran in ("Server", "SingleStream", "MultiStream"):
        crit["early stopping"] = d.get("early_stopping_met")
    if ran == "Server":
        crit["performance constraints"] = d.get("result_perf_constraints_met")
        ttft = _num(d.get("result_first_token_99.00_percentile_latency_ns"))
        tpot = _num(d.get("result_time_per_output_token_99.00_percentile_ns"))
        lt = _num(d.get("requested_server_ttft_latency"))
        lp = _num(d.get("requested_server_tpot_latency"))
        if (d.get("requested_use_token_latencies") is True and None not in (ttft, tpot, lt, lp)
                and isinstance(d.get("result_perf_constraints_met"), bool)):
            assert ttft is not None and tpot is not None and lt is not None and lp is not None
            met = ttft <= lt and tpot <= lp
            if met != d.get("result_perf_constraints_met"):
                out.append(Finding(
                    Severity.ERROR, rel, "log consistency",
                    f"result_perf_constraints_met is {d.get('result_perf_constraints_met')} "
                    f"but its own TTFT/TPOT p99 ({ttft:.0f}/{tpot:.0f} ns) against the limits "
                    f"({lt:.0f}/{lp:.0f} ns) say {met}",
                    "the log was edited; use the file LoadGen wrote", official=False))
    if all(isinstance(v, bool) for v in crit.values()) and "result_validity" in d:
        expect = "VALID" if all(crit.values()) else "INVALID"
        if d.get("result_validity") != expect:
            bad = [k for k, v in crit.items() if not v]
            out.append(Finding(
                Severity.ERROR, rel, "log consistency",
                f"result_validity is {d.get('result_validity')} but its criteria say {expect}"
                + (f" (not met: {', '.join(bad)})" if bad else ""),
                "the log was edited; use the file LoadGen wrote", official=False))
    if s is None:
        return
    srel = ctx.rel(paths.perf_summary)
    if s.result_validity is not None and s.result_validity != d.get("result_validity"):
        out.append(Finding(Severity.ERROR, srel, "log consistency",
                           f"the summary says {s.result_validity}, the detail log "
                           f"{d.get('result_validity')}",
                           "copy both files of the same run, unedited", official=False))
    for head, key in _SUMMARY_FIGURES:
        a, b = s.headline.get(head), _num(d.get(key))
        if a is not None and b is not None and not _agree(a, b):
            out.append(Finding(Severity.ERROR, srel, "log consistency",
                               f"the summary's {head.replace('_', ' ')} {a:g} differs from the "
                               f"detail log's {key} {b:g}",
                               "copy both files of the same run, unedited", official=False))


def _eff_from_detail(d: DetailLog, bench: BenchmarkPreset, scenario: Scenario,
                     dataset_size: int) -> EffectiveSettings:
    """LoadGen's effective settings, as logged, in tokenmark's type."""

    def i(key: str, default: int = 0) -> int:
        v = d.get(key)
        return int(v) if isinstance(v, int | float) and not isinstance(v, bool) else default

    pct = float(d.get("effective_target_latency_percentile") or 0.99)
    limits = LatencyLimits(
        ttft_ns=i("requested_server_ttft_latency") or None,
        tpot_ns=i("requested_server_tpot_latency") or None,
        e2e_ns=(i("effective_target_latency_ns") or None)
        if not bench.use_token_latencies and scenario.loadgen is Scenario.SERVER else None,
        percentile=pct)
    if scenario.loadgen is not Scenario.SERVER:
        limits = LatencyLimits(percentile=pct)
    seeds = Seeds(i("effective_qsl_rng_seed"), i("effective_sample_index_rng_seed"),
                  i("effective_schedule_rng_seed"))
    token = d.get("requested_use_token_latencies") is True
    spq = i("effective_samples_per_query", 1)
    req = TestSettings(round=bench.round, benchmark=bench.name, scenario=scenario, seeds=seeds,
                       target_qps=float(d.get("effective_target_qps") or 1.0),
                       min_duration_ms=i("effective_min_duration_ms"),
                       min_query_count=i("effective_min_query_count"),
                       use_token_latencies=token, limits=limits,
                       target_latency_percentile=pct)
    return EffectiveSettings(
        requested=req, scenario=scenario, mode=Mode.PERFORMANCE, samples_per_query=spq,
        target_qps=req.target_qps, target_duration_ns=i("effective_target_duration_ms") * 10**6,
        min_duration_ns=req.min_duration_ms * 10**6,
        max_duration_ns=i("effective_max_duration_ms") * 10**6,
        min_query_count=req.min_query_count, max_query_count=i("effective_max_query_count"),
        min_sample_count=i("effective_min_sample_count", req.min_query_count * spq),
        performance_sample_count=i("effective_performance_sample_count", dataset_size),
        total_sample_count=dataset_size,
        sample_concatenate_permutation=bool(d.get("effective_sample_concatenate_permutation")),
        use_token_latencies=token, limits=limits, target_latency_percentile=pct,
        max_async_queries=i("effective_max_async_queries"), seeds=seeds, concurrency=0,
        max_concurrency=0, warmup_ns=0, cooldown_ns=0)


def _summary_from_records(path: Path, eff: EffectiveSettings
                          ) -> tuple[Summary, Validity, int, tuple[int, int]]:
    """The records' summary, verdict and count, and (first scheduled, last done) in ns."""
    acc = Accumulator()
    n = 0
    first, last = -1, 0
    for rec in read_records(path):
        acc.add(rec)
        n += 1
        first = rec.scheduled_ns if first < 0 else min(first, rec.scheduled_ns)
        last = max(last, rec.done_ns)
    data = acc.finish(n, interrupted=False, reason="")
    summary = summarize(data, eff)
    verdict = evaluate(summary, eff, ClientStats()).mlperf.validity
    data.itl.close()
    return summary, verdict, n, (max(first, 0), last)


def _loadgen_rate_bounds(ran: str, s: Summary, first_ns: int, last_ns: int
                         ) -> tuple[float, float]:
    """Where LoadGen's token rate of a run must lie, given tokenmark's records of it.

    The records time from tokenmark's ``t0``, taken just before LoadGen starts; LoadGen
    times from its own origin, which lies between ``t0`` and the first query reaching
    tokenmark (Offline: the one query's scheduled time, between ``t0`` and the records'
    scheduled time). So LoadGen's span is at most the records' and at least that less
    the first query's arrival, whatever the machine's load: bounds, not a tolerance.
    """
    ours = s.tokens_per_second or 0.0
    if ran == "Offline":
        return (ours * s.max_latency_ns / last_ns if last_ns > 0 else 0.0), ours
    span = s.final_query_done_ns
    return ours, (ours * span / (span - first_ns) if span > first_ns else math.inf)


def _check_records(ctx: _Ctx, rc: ResultCheck, bench: BenchmarkPreset, scenario: Scenario,
                   d: DetailLog, paths: ResultPaths) -> None:
    """Recompute the log's figures and LoadGen's verdict from tokenmark's records."""
    rec_path = paths.perf_dir / RECORDS_NAME
    if not ctx.is_file(rec_path):
        return
    out = rc.findings
    rel = ctx.rel(rec_path)
    total = int(_num(d.get("qsl_reported_total_count")) or bench.dataset_size)
    try:
        eff = _eff_from_detail(d, bench, scenario, total)
        summary, validity, n, (first_ns, last_ns) = _summary_from_records(rec_path, eff)
    except (BadInputError, ValueError, KeyError, TypeError, OSError) as exc:
        out.append(Finding(Severity.ERROR, rel, "records",
                           f"cannot be read or summarised ({exc})",
                           "package the records.jsonl the run wrote, or leave it out",
                           official=False))
        return
    # Logs tokenmark wrote hold figures computed from these very records (equal to the
    # %g printing). LoadGen's own logs time from its scheduled time, tokenmark's records
    # from the moment LoadGen's IssueQuery reached tokenmark, so LoadGen's latencies are
    # never smaller than the records' (one-sided check: an edit that flatters a latency
    # shows), and its token rate lies within the bounds of _loadgen_rate_bounds (0.1%
    # slack for the µs between tokenmark's record and LoadGen's completion stamp).
    own = d.tokenmark_note is not None
    ran = str(d.get("effective_scenario", ""))
    key = ("result_tokens_per_second" if ran == "Offline"
           else "result_completed_tokens_per_second")
    counts: list[tuple[str, float | None, float | None]] = [
        ("query count", _num(d.get("result_query_count")), float(summary.queries_issued))]
    if bench.use_token_latencies and summary.tokens_per_second is not None:
        counts.append(("tokens/s", _num(d.get(key)), summary.tokens_per_second))
    lats: list[tuple[str, float | None, float | None]] = []
    if ran != "Offline" and bench.use_token_latencies and summary.ttft.count:
        lats.append(("TTFT p99 (ns)",
                     _num(d.get("result_first_token_99.00_percentile_latency_ns")),
                     summary.ttft.percentiles.get(0.99)))
        lats.append(("TPOT p99 (ns)",
                     _num(d.get("result_time_per_output_token_99.00_percentile_ns")),
                     summary.tpot.percentiles.get(0.99)))
    if summary.latency.count:
        lats.append(("latency p99 (ns)", _num(d.get("result_99.00_percentile_latency_ns")),
                     summary.latency.percentiles.get(0.99)))
    rc.recomputed = {"records": n, "mlperf_validity": validity.value}
    advice = ("the log no longer matches the run that made it; package the run again from "
              "its results folder")
    for name, logged, ours in [*counts, *lats]:
        rc.recomputed[name] = ours
        if logged is None or ours is None:
            continue
        theirs = float(ours)
        if name in ("query count",) or own:
            ok = _agree(logged, theirs, 0.0 if name == "query count" else 1e-5, 0.5)
        elif name == "tokens/s":
            lo, hi = _loadgen_rate_bounds(ran, summary, first_ns, last_ns)
            ok = lo * (1 - 1e-3) <= logged <= hi * (1 + 1e-3)
        else:
            ok = logged >= theirs * (1 - 1e-3) - 1e6
        if not ok:
            out.append(Finding(Severity.ERROR, ctx.rel(paths.perf_detail), "records",
                               f"{name} is {logged:g} in the log but {theirs:g} from the "
                               f"run's {n} records", advice, official=False))
    if own and validity.value != d.get("result_validity"):
        out.append(Finding(Severity.ERROR, ctx.rel(paths.perf_detail), "records",
                           f"result_validity is {d.get('result_validity')} in the log but "
                           f"{validity.value} recomputed from the records",
                           "the log no longer matches the run that made it", official=False))


