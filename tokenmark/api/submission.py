"""Entry points for MLPerf submissions: runs driven by the official LoadGen, packaging a
submission tree from runs, and checking a tree. The CLI (``tokenmark run --loadgen
official``, ``tokenmark submission package``, ``tokenmark submission check``) is a thin
layer over these.

:func:`run_official_loadgen` is ``run_benchmark``'s twin for ``--loadgen official``: the
official ``mlcommons-loadgen`` schedules and times the run and writes the
``mlperf_log_*`` files, while tokenmark's SUT serves the requests and tokenmark writes
``records.jsonl`` and ``results.json`` (its own summary from the records, with LoadGen's
figures and verdict beside them and how far apart the two are).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from tokenmark import __version__
from tokenmark.adapters.official_loadgen import (
    AUDIT_CONFIG_FILE,
    LoadGenMode,
    LoadGenRequest,
    OfficialOutcome,
    loadgen_version,
    run_official,
)
from tokenmark.api.run import EXIT_INVALID, EXIT_VALID, RunResult, SutSpec, make_sut
from tokenmark.clock import Clock, MonotonicClock, wall_anchor
from tokenmark.compliance.audit import Audit, apply_audit, audit_config_text, audit_for
from tokenmark.config.layering import LayeredSettings
from tokenmark.dataset import Dataset, describe_dataset
from tokenmark.errors import ConfigError
from tokenmark.importer.checker import inferred_figure, result_key
from tokenmark.loadgen.runner import RunOutcome
from tokenmark.metrics.summary import Accumulator, Summary, summarize
from tokenmark.mlperf.mllog import parse_detail, parse_summary
from tokenmark.mlperf.rules import (
    ClientStats,
    Finding,
    Validity,
    Verdict,
    VerdictKind,
    Verdicts,
    evaluate,
)
from tokenmark.mlperf.settings import EffectiveSettings, Mode, Scenario, effective
from tokenmark.output.records import RECORDS_FILE, JsonlRecordSink
from tokenmark.output.results import ResultsDocument, RunInfo, write_results
from tokenmark.submission.check import CheckReport, check_tree
from tokenmark.submission.package import PackageReport, PackageSpec, package_runs
from tokenmark.sut import SystemUnderTest

__all__ = [
    "LOADGEN_DRIVER",
    "check_submission",
    "package_submission",
    "run_official_loadgen",
    "user_conf_text",
]

#: ``results.json`` ``run.loadgen`` of a run the official LoadGen drove.
LOADGEN_DRIVER = "official"


def user_conf_text(eff: EffectiveSettings, loadgen_model: str) -> str:
    """The ``user.conf`` lines that give LoadGen tokenmark's effective settings."""
    r = eff.requested
    sc = eff.scenario.loadgen.value
    key = f"{loadgen_model}.{sc}"
    lines = [f"# Written by tokenmark {__version__} for {r.benchmark} {eff.scenario.value} "
             f"(round {r.round})"]
    if eff.scenario.loadgen is Scenario.SERVER:
        lines.append(f"{key}.target_qps = {r.target_qps:g}")
    elif eff.scenario.loadgen is Scenario.OFFLINE:
        lines.append(f"{key}.target_qps = {r.offline_expected_qps:g}")
    elif eff.scenario.loadgen is Scenario.SINGLE_STREAM:
        lines.append(f"{key}.target_latency = {r.single_stream_expected_latency_ns / 1e6:g}")
    elif eff.scenario.loadgen is Scenario.MULTI_STREAM:
        lines.append(f"{key}.target_latency = {r.multi_stream_expected_latency_ns / 1e6:g}")
    lines.append(f"{key}.min_duration = {r.min_duration_ms}")
    lines.append(f"{key}.min_query_count = {r.min_query_count}")
    if r.max_duration_ms:
        lines.append(f"{key}.max_duration = {r.max_duration_ms}")
    if r.max_query_count:
        lines.append(f"{key}.max_query_count = {r.max_query_count}")
    lines.append(f"{loadgen_model}.*.performance_sample_count_override = "
                 f"{eff.performance_sample_count}")
    return "\n".join(lines) + "\n"


def _overrides(eff: EffectiveSettings) -> dict[str, int | float | bool]:
    """What the round's preset says LoadGen must use, whatever its compiled mlperf.conf has."""
    lim = eff.limits
    out: dict[str, int | float | bool] = {
        "use_token_latencies": eff.use_token_latencies,
        "sample_concatenate_permutation": eff.sample_concatenate_permutation,
    }
    if eff.scenario.loadgen is Scenario.SERVER:
        if lim.ttft_ns is not None:
            out["ttft_latency"] = lim.ttft_ns
        if lim.tpot_ns is not None:
            out["tpot_latency"] = lim.tpot_ns
        if lim.e2e_ns is not None:
            out["server_target_latency_ns"] = lim.e2e_ns
        out["server_target_latency_percentile"] = eff.target_latency_percentile
    if eff.accuracy_sample_count and eff.accuracy_sample_count != eff.total_sample_count:
        out["accuracy_sample_count_override"] = eff.accuracy_sample_count
    return out


def _loadgen_verdict(detail: Any, summary_log: Any) -> Verdict:
    """LoadGen's own MLPerf verdict, read back from the logs it wrote."""
    findings = []
    crit = summary_log.criteria if summary_log is not None else {}
    names = {"performance_constraints": "latency limits (LoadGen)",
             "min_duration": "min duration (LoadGen)", "min_queries": "min queries (LoadGen)",
             "early_stopping": "early stopping (LoadGen)"}
    for key, label in names.items():
        if key in crit:
            ok = bool(crit[key])
            findings.append(Finding(label, VerdictKind.MLPERF, ok, "Yes" if ok else "NO",
                                    "Yes", "" if ok else "see LoadGen's Recommendations in "
                                    "mlperf_log_summary.txt"))
    errors = detail.num_errors
    findings.append(Finding("LoadGen errors", VerdictKind.MLPERF, errors == 0, str(errors), "0",
                            "" if errors == 0 else "read the error lines of "
                            "mlperf_log_detail.txt"))
    validity = str(detail.get("result_validity", ""))
    findings.append(Finding("result_validity (LoadGen)", VerdictKind.MLPERF,
                            validity == "VALID", validity or "(not logged)", "VALID"))
    ok = validity == "VALID" and errors == 0
    return Verdict(VerdictKind.MLPERF, Validity.VALID if ok else Validity.INVALID,
                   tuple(findings))


def _compare(detail: Any, summary: Summary, round_name: str, benchmark: str,
             scenario: Scenario) -> dict[str, dict[str, float | None]]:
    """LoadGen's figures beside tokenmark's from the records (relative difference)."""
    ran = str(detail.get("effective_scenario", scenario.loadgen.value))
    pairs: dict[str, tuple[Any, float | None]] = {
        # queries with queries: one Offline query holds every sample
        "query_count": (detail.get("result_query_count"), float(summary.queries_issued)),
    }
    key = result_key(round_name, benchmark, ran)
    if key in ("result_tokens_per_second", "result_completed_tokens_per_second"):
        pairs["tokens_per_second"] = (detail.get(key), summary.tokens_per_second)
    if ran == "Server":
        pairs["samples_per_second"] = (detail.get("result_completed_samples_per_sec"),
                                       summary.samples_per_second)
    elif ran == "Offline":
        pairs["samples_per_second"] = (detail.get("result_samples_per_second"),
                                       summary.samples_per_second)
    p = summary.ttft.percentiles
    if summary.ttft.count and 0.99 in p:
        pairs["ttft_p99_ns"] = (detail.get("result_first_token_99.00_percentile_latency_ns"),
                                p[0.99])
    q = summary.tpot.percentiles
    if summary.tpot.count and 0.99 in q:
        pairs["tpot_p99_ns"] = (detail.get("result_time_per_output_token_99.00_percentile_ns"),
                                q[0.99])
    e = summary.latency.percentiles
    if summary.latency.count and 0.99 in e:
        pairs["latency_p99_ns"] = (detail.get("result_99.00_percentile_latency_ns"), e[0.99])
    out: dict[str, dict[str, float | None]] = {}
    for name, (lgv, tmv) in pairs.items():
        lv = float(lgv) if isinstance(lgv, int | float) and not isinstance(lgv, bool) else None
        rel = None
        if lv is not None and tmv is not None and lv != 0:
            rel = (float(tmv) - lv) / lv
        out[name] = {"loadgen": lv, "tokenmark": None if tmv is None else float(tmv),
                     "relative_difference": rel}
    return out


def run_official_loadgen(
    layered: LayeredSettings,
    dataset: Dataset,
    sut: SutSpec | Callable[[Clock], SystemUnderTest],
    output_dir: Path,
    *,
    find_peak: bool = False,
    audit: str | None = None,
) -> RunResult:
    """Run one benchmark with the official LoadGen driving ``sut``; write the results folder.

    ``audit`` (``TEST06``, ``TEST07``, ``TEST09``) runs the compliance test as a submitter
    does: ``user.conf`` says what the performance run's says, and LoadGen applies the
    test's ``audit.config`` over it (written in ``output_dir`` for the run, then removed;
    :mod:`tokenmark.adapters.official_loadgen`); tokenmark's own figures are judged with
    the audited settings LoadGen ran.

    Raises :class:`~tokenmark.errors.ConfigError` for what LoadGen cannot run (a tokenmark
    pattern, FindPeakPerformance outside Server, an audit of an accuracy or FindPeak run,
    the LoadGen package missing).
    """
    s = layered.settings
    if not s.scenario.is_mlperf:
        raise ConfigError(f"--loadgen official runs MLPerf scenarios only, not the "
                          f"{s.scenario.value} pattern; use --loadgen tokenmark")
    if find_peak and s.scenario.loadgen is not Scenario.SERVER:
        raise ConfigError("LoadGen's FindPeakPerformance searches Server (and Interactive) "
                          f"runs only, not {s.scenario.value}")
    spec: Audit | None = None
    if audit is not None:
        spec = audit_for(audit)
        if find_peak or s.mode is Mode.ACCURACY:
            raise ConfigError(f"{spec.test} is a performance-mode run; drop --find-peak and "
                              "--mode accuracy")
    eff = effective(s, len(dataset))
    # what LoadGen runs: the audit.config keys over user.conf (tokenmark's figures use it)
    ran = eff if spec is None else effective(apply_audit(s, spec), len(dataset))
    preset = layered.preset.scenario(eff.scenario)
    model_key = preset.loadgen_model
    output_dir.mkdir(parents=True, exist_ok=True)
    conf = output_dir / "user.conf"
    conf.write_text(user_conf_text(eff, model_key), encoding="utf-8")
    if find_peak:
        mode = LoadGenMode.FIND_PEAK
    else:
        mode = LoadGenMode.ACCURACY if eff.mode is Mode.ACCURACY else LoadGenMode.PERFORMANCE
    audit_text = "" if spec is None else audit_config_text(spec, f"tokenmark {__version__}")
    request = LoadGenRequest(loadgen_model=model_key, scenario=eff.scenario.loadgen, mode=mode,
                             user_conf=conf, overrides=_overrides(eff), seeds=eff.seeds,
                             audit_config=audit_text)
    clock = MonotonicClock()
    factory = sut if callable(sut) else (lambda c: make_sut(sut, c))
    system = factory(clock)
    started = dt.datetime.now(dt.UTC)
    sink = JsonlRecordSink(output_dir / RECORDS_FILE)
    acc = Accumulator()
    anchor = wall_anchor()
    try:
        outcome = asyncio.run(run_official(request, system, dataset, clock, output_dir,
                                           sinks=[sink], consumers=[acc.add],
                                           performance_sample_count=eff.performance_sample_count))
    finally:
        sink.close()
    trace = output_dir / "mlperf_log_trace.json"
    if trace.is_file() and trace.stat().st_size == 0:
        trace.unlink()
    data = acc.finish(outcome.issued, interrupted=False, reason="")
    summary = summarize(data, ran)
    ours = evaluate(summary, ran, ClientStats())
    data.itl.close()
    detail = parse_detail((output_dir / "mlperf_log_detail.txt").read_text(encoding="utf-8"),
                          str(output_dir / "mlperf_log_detail.txt"), strict=False)
    summary_log = None
    if (output_dir / "mlperf_log_summary.txt").is_file():
        summary_log = parse_summary(
            (output_dir / "mlperf_log_summary.txt").read_text(encoding="utf-8"),
            str(output_dir / "mlperf_log_summary.txt"), strict=False)
    if mode in (LoadGenMode.PERFORMANCE, LoadGenMode.FIND_PEAK):
        mlperf = _loadgen_verdict(detail, summary_log)
    elif mode is LoadGenMode.ACCURACY:
        mlperf = ours.mlperf  # accuracy mode's one criterion, as a native run: all answered
    else:
        mlperf = Verdict(VerdictKind.MLPERF, Validity.NOT_APPLICABLE, ())
    tm_findings = tuple(f for f in ours.tokenmark.findings if "MLPerf" not in f.rule)
    tm_valid = all(f.passed for f in tm_findings) and mlperf.validity is not Validity.INVALID
    tokenmark = Verdict(VerdictKind.TOKENMARK, Validity.VALID if tm_valid else Validity.INVALID,
                        tm_findings)
    verdicts = Verdicts(mlperf, tokenmark, ours.early_stopping)
    doc = _document(layered, ran, dataset, system, summary, verdicts, outcome, started,
                    anchor, request, detail, summary_log, mode)
    if spec is not None:
        loadgen = {**doc.sections["loadgen"], "audit": {
            "test": spec.test, "config_file": AUDIT_CONFIG_FILE, "config_text": audit_text,
            "found_by_loadgen": any("Found Audit Config file" in str(w.value)
                                    for w in detail.warnings),
        }}
        doc = replace(doc, run=replace(doc.run, extra={**doc.run.extra, "audit": spec.test}),
                      sections={**doc.sections, "loadgen": loadgen})
    write_results(output_dir, doc)
    run_outcome = RunOutcome(
        t0_ns=outcome.t0_ns, end_ns=outcome.end_ns, scheduled=outcome.issued,
        issued=outcome.issued, interrupted=False, interrupt_reason="",
        ran_out_of_queries=False, issue_span_ns=0, closed_gaps_ns=np.zeros(0, np.int64))
    code = EXIT_VALID if verdicts.valid else EXIT_INVALID
    return RunResult(ran, summary, verdicts, run_outcome, output_dir, code, doc.to_json())


def _document(
    layered: LayeredSettings, eff: EffectiveSettings, dataset: Dataset,
    system: SystemUnderTest, summary: Summary, verdicts: Verdicts, outcome: OfficialOutcome,
    started: dt.datetime, anchor: tuple[int, int], request: LoadGenRequest, detail: Any,
    summary_log: Any, mode: LoadGenMode,
) -> ResultsDocument:
    r = eff.requested
    lg: dict[str, Any] = {
        "driver": LOADGEN_DRIVER,
        "package": "mlcommons-loadgen",
        "version": loadgen_version(),
        "logged_version": str(detail.get("loadgen_version", "")),
        "model_key": request.loadgen_model,
        "mode": mode.value,
        "user_conf": "user.conf",
        "settings_applied": outcome.applied,
        "set_by_tokenmark": {k: {"mlperf_conf": _j(a), "used": _j(b)}
                             for k, (a, b) in outcome.changed.items()},
        "result_validity": detail.get("result_validity"),
        "num_errors": detail.num_errors,
        "errors": [str(e.value) for e in detail.errors][:20],
    }
    if mode is LoadGenMode.PERFORMANCE:
        fig = inferred_figure({k: detail.get(k) for k in detail.keys()}, r.round, r.benchmark,
                              eff.scenario.value,
                              str(detail.get("effective_scenario", eff.scenario.loadgen.value)))
        if not isinstance(fig, str):
            # the result as the submission checker reads it from LoadGen's detail log
            lg["result"] = {"value": fig.value, "unit": fig.unit, "metric": fig.metric}
        lg["comparison"] = _compare(detail, summary, r.round, r.benchmark, eff.scenario)
        lg["timing_note"] = ("LoadGen times from its scheduled time, tokenmark's records from "
                             "the moment LoadGen's IssueQuery reached tokenmark: LoadGen's "
                             "latencies include its issue delay")
    if mode is LoadGenMode.FIND_PEAK:
        msgs = [str(v) for v in detail.values("generic_message") if "FindPeak" in str(v)]
        peak = None
        for m in msgs:
            if "Found peak performance field:" in m:
                peak = float(m.rsplit(":", 1)[1])
        lg["find_peak"] = {"peak_qps": peak, "search": msgs,
                           "note": "LoadGen's FindPeakPerformance judges each trial by the "
                           "latency limits only; submit a PerformanceOnly run at that QPS"}
    files = sorted(p.name for p in Path(request.user_conf).parent.glob("mlperf_log_*"))
    info = RunInfo(
        round=r.round, benchmark=r.benchmark, scenario=r.scenario.value, mode=r.mode.value,
        started_utc=started.isoformat(), clock="monotonic", loadgen=LOADGEN_DRIVER,
        sut={"name": system.name, **system.describe()},
        dataset={"name": dataset.name, "size": len(dataset),
                 "fingerprint": dataset.fingerprint, **describe_dataset(dataset)},
        wall_anchor_ns={"monotonic": anchor[0], "epoch": anchor[1]}, pid=os.getpid())
    return ResultsDocument.of_run(
        layered, eff, summary, verdicts, info, sections={"loadgen": lg},
        files={"records": RECORDS_FILE, "mlperf_logs": files, "user_conf": "user.conf"})


def _j(v: Any) -> Any:
    return v if isinstance(v, bool | int | float | str) else str(v)


def package_submission(spec: PackageSpec) -> PackageReport:
    """Assemble a submission tree from tokenmark run folders (see
    :func:`tokenmark.submission.package.package_runs`)."""
    return package_runs(spec)


def check_submission(root: Path, round_name: str, *, csv_path: Path | None = None,
                     submitter: str | None = None) -> CheckReport:
    """Check a submission tree (see :func:`tokenmark.submission.check.check_tree`); write
    the summary CSV (the official checker's columns) when ``csv_path`` is given."""
    report = check_tree(root, round_name, submitter=submitter)
    if csv_path is not None:
        report.write_csv(csv_path)
    return report

