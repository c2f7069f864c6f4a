"""Python entry points of the simulator: ``tokenmark simulate`` is a thin layer over these.

- :func:`simulate`: one benchmark run in virtual time against a simulated cluster,
  written as the same kind of results folder a real run writes (``results.json`` with
  the summary and both verdicts, the MLPerf log files for MLPerf scenarios,
  ``records.jsonl``) plus ``simulation.json`` and ``report.txt`` that say what the
  cluster was and why the numbers came out as they did;
- :func:`simulate_scaling`: predicted throughput and scaling efficiency across cluster sizes;
- :func:`fit_perf_model`: fit the efficiency parameters on published results, rounds before
  each round, and report each round's prediction error (:mod:`tokenmark.sim.calibration`).

Every prediction goes through one path (:func:`tokenmark.sim.predict.predict`): a
simulated run uses the deployment it chooses for the run's scenario (unless the layout
is given), ``--scaling`` its figures, and calibration the same.

Bad input (unknown accelerator or model, a model that does not fit, parallelism that
does not divide the accelerators) raises :class:`~tokenmark.errors.ConfigError` with
the numbers; every other exception is a bug.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from tokenmark.config.layering import Layer, LayeredSettings
from tokenmark.dataset import Dataset, LengthDistribution, describe_dataset
from tokenmark.errors import ConfigError
from tokenmark.metrics.summary import Summary
from tokenmark.mlperf.mllog import RunFacts
from tokenmark.mlperf.rules import Verdicts
from tokenmark.mlperf.settings import EffectiveSettings, Scenario, effective
from tokenmark.output.mlperf import write_mlperf_logs
from tokenmark.output.records import RECORDS_FILE
from tokenmark.output.results import ResultsDocument, RunInfo, write_results
from tokenmark.output.simulation import (
    REPORT_FILE,
    SIMULATION_FILE,
    write_report,
    write_sim_records,
    write_simulation_json,
)
from tokenmark.sim.calibration import CalibrationReport, forward_evaluation
from tokenmark.sim.cluster import Cluster, Router
from tokenmark.sim.plan import ClusterSpec, Plan, candidates
from tokenmark.sim.predict import calibrated, predict
from tokenmark.sim.published import PublishedRow, read_packaged
from tokenmark.sim.report import deployment_json, report_lines
from tokenmark.sim.run import SimulatedRun, request_arrays, run_simulation
from tokenmark.sim.scaling import ScalingPoint, scaling_sweep
from tokenmark.sim.workloads import synthetic_dataset, workload

__all__ = [
    "ScalingPoint",
    "SimulationResult",
    "fit_perf_model",
    "simulate",
    "simulate_scaling",
    "simulation_dataset",
]

#: The documented exit codes (README "Exit codes"), as :mod:`tokenmark.api.run` has them.
EXIT_VALID = 0
EXIT_INVALID = 1


@dataclass(frozen=True)
class SimulationResult:
    settings: EffectiveSettings
    summary: Summary
    verdicts: Verdicts
    plan: Plan
    explanation: dict[str, Any]
    output_dir: Path | None
    exit_code: int
    document: dict[str, Any]
    timing: dict[str, float]  # host seconds: simulate, summarize, write, total


def simulation_dataset(
    layered: LayeredSettings,
    *,
    size: int | None = None,
    input_lengths: str | None = None,
    output_lengths: str | None = None,
    seed: int = 0,
) -> Dataset:
    """The benchmark's synthetic dataset: its size from the settings or preset, its
    lengths from ``data/workloads.csv`` unless given."""
    s = layered.settings
    preset = layered.preset
    n = size or s.total_sample_count or s.performance_sample_count or preset.dataset_size
    inp = LengthDistribution.parse(input_lengths) if input_lengths else None
    out = LengthDistribution.parse(output_lengths) if output_lengths else None
    return synthetic_dataset(preset.name, n, max_output_tokens=preset.max_output_tokens,
                             seed=seed, input_lengths=inp, output_lengths=out)


def choose_plan(layered: LayeredSettings, spec: ClusterSpec, dataset: Dataset) -> Plan:
    """The deployment a simulated run uses: the planner's candidates searched as every
    prediction searches them, for the run's scenario (Offline throughput, or the highest
    rate within its latency limits; tokenmark's own patterns with the preset's Server
    limits), the best kept. With a single candidate, that one. Outside Offline a note
    says the run's rate is the settings', not a prediction (its throughput is not the
    system's best)."""
    return _choose(layered, spec, dataset, at_prediction=False)[0]


def _choose(layered: LayeredSettings, spec: ClusterSpec, dataset: Dataset, *,
            at_prediction: bool) -> tuple[Plan, float]:
    """:func:`choose_plan`, and with ``at_prediction`` in Server or Interactive the
    predicted rate (queries per second; NaN when the system fails the limits at any
    rate) that the run then uses, as a submitter sets ``target_qps`` in user.conf."""
    inp, out, enc = request_arrays(dataset, spec.model)
    plans = candidates(spec, float(inp.mean()), float(out.mean()))
    sc = layered.settings.scenario
    at_prediction = at_prediction and sc in (Scenario.SERVER, Scenario.INTERACTIVE)
    where = ("the searched rate is the prediction (--scaling prints it)" if len(plans) > 1
             else "--scaling prints the predicted rate")
    rate = () if sc is Scenario.OFFLINE else (
        f"this run's rate: {layered.settings.target_qps:g} queries/s (--qps, else the "
        f"preset's target_qps); {where}",)
    if len(plans) == 1 and not at_prediction:
        return Plan(plans[0].deployment, (*plans[0].notes, *rate)), math.nan
    name = "Offline" if sc is Scenario.OFFLINE else (
        "Interactive" if sc is Scenario.INTERACTIVE else "Server")
    limits = layered.settings.limits
    if name != "Offline" and not limits.any:
        server = layered.preset.scenarios.get(Scenario.SERVER)
        limits = server.limits if server is not None else limits
    off_eff, lat_eff = calibrated(spec, name)
    p = predict(spec, name if limits.any else "Offline", inp, out, offline_eff=off_eff,
                latency_eff=lat_eff, limits=limits if limits.any else None, plans=plans,
                encoder=enc)
    qps = p.qps if at_prediction and p.qps > 0 else math.nan
    if at_prediction:
        rate = ((f"this run's rate: {qps:,.4g} queries/s, the predicted rate ({p.binding}; "
                 "--qps runs at another)",) if qps == qps else
                (f"this run's rate: {layered.settings.target_qps:g} queries/s (the preset's "
                 f"target_qps): the prediction is that it {p.binding}",))
    if len(plans) == 1:
        return Plan(p.plan.deployment, (*p.plan.notes, *rate)), qps
    tried = "; ".join(f"{label}: " + (f"{v:,.0f}" if v == v else "not searched (its "
                                      "saturated rate cannot beat the best)")
                      for label, v in p.tried)
    what = ("Offline throughput" if name == "Offline" or not limits.any
            else "the highest rate within the latency limits, to 10%, before the Offline bound")
    return Plan(p.plan.deployment, (*p.plan.notes, f"layout searched for {name} ({what}): "
                                    f"{tried} tokens per second", *rate)), qps


def simulate(
    layered: LayeredSettings,
    spec: ClusterSpec,
    output_dir: Path | None,
    *,
    dataset: Dataset | None = None,
    router: str = "round-robin",
    seed: int = 0,
    write_records: bool = True,
    at_prediction: bool = False,
) -> SimulationResult:
    """Simulate one benchmark run and (unless ``output_dir`` is None) write its folder.
    ``at_prediction``: a Server or Interactive run issues queries at the predicted rate
    (the searched layout's highest rate within the latency limits, as a submitter sets
    ``target_qps``), not the settings' (``tokenmark simulate`` without ``--qps``)."""
    t0 = time.perf_counter()
    started = dt.datetime.now(dt.UTC)
    wall0 = time.time_ns()
    ds = dataset or simulation_dataset(layered, seed=seed)
    plan, qps = _choose(layered, spec, ds, at_prediction=at_prediction)
    base = layered

    def at(q: float) -> _RateRun:
        lay = base if q != q else replace(
            base, settings=replace(base.settings, target_qps=q),
            layers=(*base.layers, Layer("prediction", {"target_qps": q})))
        e = effective(lay.settings, len(ds))
        c = Cluster(plan.deployment, Router.parse(router), seed=seed)
        return lay, e, c, run_simulation(e, ds, c)

    t1 = time.perf_counter()
    layered, eff, cluster, run = at(qps)
    if qps == qps and not _within_limits(run):
        # the search's runs are shorter than MLPerf's: back off as a submitter does, to
        # the highest rate a run of the settings' length passes
        got = _back_off(qps, run, at)
        layered, eff, cluster, run = got[1]
        plan = replace(plan, notes=(*(n for n in plan.notes
                                      if not n.startswith("this run's rate")), got[0]))
    t2 = time.perf_counter()
    timing = {"plan_s": t1 - t0, "simulate_s": run.result.wall_s,
              "summarize_s": t2 - t1 - run.result.wall_s}
    doc = _document(layered, eff, ds, run, plan, cluster, started, wall0, timing)
    if output_dir is not None:
        output_dir.mkdir(parents=True, exist_ok=True)
        files: dict[str, Any] = {"simulation": SIMULATION_FILE, "report": REPORT_FILE}
        if write_records:
            _write_records(output_dir / RECORDS_FILE, run)
            files["records"] = RECORDS_FILE
        if eff.is_mlperf:
            logs = write_mlperf_logs(output_dir, eff, run.summary, run.verdicts,
                                     run.schedule, _facts(layered, ds, run, started, wall0))
            files["mlperf_logs"] = [p.name for p in logs]
        doc = replace(doc, files=files)
        write_simulation_json(output_dir / SIMULATION_FILE, doc.sections["simulation"])
        write_report(output_dir / REPORT_FILE, report_lines(doc.to_json()))
        timing["write_s"] = time.perf_counter() - t2
        timing["total_s"] = time.perf_counter() - t0
        doc.sections["simulation"]["timing_s"] = {k: round(v, 3) for k, v in timing.items()}
        write_results(output_dir, doc)
    else:
        timing["total_s"] = time.perf_counter() - t0
    code = EXIT_VALID if run.verdicts.valid else EXIT_INVALID
    return SimulationResult(eff, run.summary, run.verdicts, plan, run.explanation,
                            output_dir, code, doc.to_json(), timing)


#: One run at a rate: its settings (layered and effective), its cluster and the run.
_RateRun = tuple[LayeredSettings, EffectiveSettings, Cluster, SimulatedRun]
#: Rules a Server/Interactive run at a too high rate fails.
_LATENCY_RULES = ("perf_constraints", "early_stopping")
#: The back-off: each step 10% lower until a run passes, then bisection to this ratio.
_BACK_OFF = 0.9
_BACK_OFF_TOL = 1.03
_BACK_OFF_RUNS = 8


def _within_limits(run: SimulatedRun) -> bool:
    return not any(f.rule in _LATENCY_RULES for f in run.verdicts.mlperf.failed)


def _back_off(searched: float, failed: SimulatedRun,
              at: Callable[[float], _RateRun]) -> tuple[str, _RateRun]:
    """The highest rate below ``searched`` (whose run ``failed`` its limits) that a run
    of the settings' length passes, found by stepping down 10% at a time and then
    bisecting in log space to 3%, in at most ``_BACK_OFF_RUNS`` runs; its note and
    ``at``'s result for it (the lowest rate tried when none passed)."""
    hi, lo = searched, 0.0
    best: _RateRun | None = None
    last: _RateRun | None = None
    q = tried = searched * _BACK_OFF
    runs = 0
    while runs < _BACK_OFF_RUNS:
        tried, last = q, at(q)
        runs += 1
        if _within_limits(last[3]):
            lo, best = q, last
        else:
            hi = q
        if best is not None and hi / lo <= _BACK_OFF_TOL:
            break
        q = math.sqrt(lo * hi) if best is not None else q * _BACK_OFF
    p99 = "; ".join(f"{f.observed}" for f in failed.verdicts.mlperf.failed
                    if f.rule in _LATENCY_RULES)
    if best is None:
        assert last is not None
        return (f"this run's rate: {tried:,.4g} queries/s, the lowest of {runs} tried below "
                f"the predicted {searched:,.4g} (from the search's shorter runs; --scaling "
                f"and calibration give it), which fails a run of the settings' length "
                f"({p99}), as every rate tried does"), last
    return (f"this run's rate: {lo:,.4g} queries/s ({lo / searched:.0%} of the predicted "
            f"{searched:,.4g}), the highest that passes a run of the settings' length "
            f"({runs} more runs): the predicted rate, from the search's shorter runs "
            f"(--scaling and calibration give it), fails one ({p99})"), best


def _write_records(path: Path, run: SimulatedRun) -> None:
    r = run.result
    o = run.order
    sched = r.scheduled[o]
    s = run.schedule
    phase = np.where(sched < s.warmup_end_ns, "warmup", "measure").astype(object)
    if s.cooldown_start_ns >= 0:
        phase[sched > s.cooldown_start_ns] = "cooldown"
    write_sim_records(path, seq=o, query=r.query_id[o], sample=r.sample_index[o],
                      phase=phase.tolist(), scheduled=sched, issued=r.issued[o],
                      first=r.first[o], done=r.done[o], input_tokens=r.input_tokens[o],
                      output_tokens=r.output_tokens[o], error=r.rejected[o])


def _facts(layered: LayeredSettings, ds: Dataset, run: SimulatedRun,
           started: dt.datetime, wall0: int) -> RunFacts:
    sc = layered.settings.scenario
    limits = layered.preset.loadgen_token_limits(sc) if sc in layered.preset.scenarios else None
    s = run.summary
    errors = (
        ("n_tokens argument missing or attempted to record 0 as number of tokens",)
        * s.zero_token_samples
        + ("Number of tokens need to be greater than 1",) * s.one_token_samples
    )
    return RunFacts(
        sut_name="tokenmark-simulator",
        qsl_name=ds.name,
        start_wall_ns=wall0,
        active_duration_ns=run.result.end_ns,
        test_datetime=started,
        ran_out_of_generated_queries=run.result.ran_out_of_queries,
        errors=errors,
        warnings=("simulated run: every time is predicted by tokenmark's performance model",),
        server_token_limits_ns=limits,
        pid=os.getpid(),
    )


def _document(layered: LayeredSettings, eff: EffectiveSettings, ds: Dataset,
              run: SimulatedRun, plan: Plan, cluster: Cluster, started: dt.datetime,
              wall0: int, timing: dict[str, float]) -> ResultsDocument:
    r = eff.requested
    d = plan.deployment
    sim = {
        "deployment": deployment_json(d),
        "cluster": cluster.describe(),
        "plan_notes": list(plan.notes),
        "explanation": run.explanation,
        "events": run.result.events,
        "requests": len(run.result),
        "virtual_duration_s": run.result.end_ns / 1e9,
        "timing_s": {k: round(v, 3) for k, v in timing.items()},
        "workload": _workload_json(r.benchmark),
        "note": ("predicted by tokenmark's performance model in virtual time; per-request "
                 "summaries (no per-token timestamps); ITL from the engines' step times"),
    }
    info = RunInfo(
        round=r.round, benchmark=r.benchmark, scenario=r.scenario.value, mode=r.mode.value,
        started_utc=started.isoformat(), clock="virtual (simulator)",
        sut={"name": "tokenmark-simulator", "kind": "simulated cluster",
             "profile": d.label.replace("emulated", "simulated"),
             "note": "predicted by the performance model, not measured"},
        dataset={"name": ds.name, "size": len(ds), "fingerprint": ds.fingerprint,
                 **describe_dataset(ds)},
        ran_out_of_generated_queries=run.result.ran_out_of_queries,
        wall_anchor_ns={"monotonic": 0, "epoch": wall0})
    return ResultsDocument.of_run(
        layered, eff, run.summary, run.verdicts, info, sections={"simulation": sim},
        profile_note="simulated run: predictions of a performance model, not measurements")


def _workload_json(benchmark: str) -> dict[str, Any]:
    try:
        w = workload(benchmark)
    except ConfigError:  # a benchmark without a row in workloads.csv
        return {}
    return {"input_tokens": str(w.input_tokens), "output_tokens": str(w.output_tokens),
            "status": w.status, "sources": w.sources}


def simulate_scaling(
    layered: LayeredSettings,
    spec: ClusterSpec,
    sizes: list[int],
    *,
    dataset: Dataset | None = None,
    seed: int = 0,
    requests: int = 1500,
) -> list[ScalingPoint]:
    """Predicted throughput and scaling efficiency of ``spec``'s accelerator and model at
    each total accelerator count in ``sizes`` (see :mod:`tokenmark.sim.scaling`)."""
    ds = dataset or simulation_dataset(layered, seed=seed)
    return scaling_sweep(layered, spec, sizes, ds, requests=requests)


def fit_perf_model(rows: list[PublishedRow] | None = None, out_dir: Path | None = None,
                   **options: Any) -> CalibrationReport:
    """The forward evaluation on published results (``rows``; default: the packaged
    table of every published LLM result, :func:`~tokenmark.sim.published.read_packaged`)
    and the parameters fitted on the rounds before the newest; with ``out_dir``, write
    the rows, tables and ``efficiency.csv`` there
    (:func:`tokenmark.sim.calibration.forward_evaluation` takes ``options``)."""
    report = forward_evaluation(read_packaged() if rows is None else rows, **options)
    if out_dir is not None:
        report.write(out_dir)
    return report


# The names before issue 20 (``calibrate`` also measured the client in the trust API;
# ``scaling`` also read published scaling efficiency in the results API).
calibrate = fit_perf_model
scaling = simulate_scaling
