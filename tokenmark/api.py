"""The Python entry points. The CLI is a thin layer over these.

:func:`run_benchmark` is the main job: settings -> schedule -> runner against a system
under test -> records on disk -> summary -> both verdicts -> ``results.json`` (and the
MLPerf log files for MLPerf scenarios).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from tokenmark import __version__
from tokenmark.adapters.inprocess import LatencyModel, LatencyModelSUT, NullSUT
from tokenmark.clock import Clock, FakeClock, MonotonicClock, run_virtual, wall_anchor
from tokenmark.config.layering import LayeredSettings
from tokenmark.dataset import Dataset, LengthDistribution, SyntheticDataset, describe_dataset
from tokenmark.errors import ConfigError
from tokenmark.loadgen.runner import Runner, RunnerStats, RunOutcome
from tokenmark.metrics.endpoints import EndpointBreakdown
from tokenmark.metrics.summary import Accumulator, Summary, summarize
from tokenmark.mllog import RunFacts
from tokenmark.output.accuracy import AccuracyRecorder, accuracy_recorder
from tokenmark.output.mlperf import write_mlperf_logs
from tokenmark.output.records import RECORDS_FILE, JsonlRecordSink
from tokenmark.output.results import (
    RESULTS_FILE,
    SCHEMA,
    effective_json,
    requested_json,
    summary_json,
    verdicts_json,
    write_json_atomic,
)
from tokenmark.records import RequestRecord
from tokenmark.rules import ClientStats, Verdicts, evaluate
from tokenmark.scenarios import Schedule, build_schedule, timed_trace
from tokenmark.settings import EffectiveSettings, Scenario, effective
from tokenmark.sut import SystemUnderTest

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_INTERNAL",
    "EXIT_INTERRUPTED",
    "EXIT_INVALID",
    "EXIT_VALID",
    "RunResult",
    "SutSpec",
    "default_dataset",
    "make_sut",
    "run_benchmark",
]

#: Documented exit codes (README "Exit codes").
EXIT_VALID = 0
EXIT_INVALID = 1
EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 3
EXIT_INTERRUPTED = 130

ProgressFn = Callable[[RunnerStats, float], None]


@dataclass(frozen=True)
class SutSpec:
    """Which built-in system under test to run against."""

    kind: str = "latency-model"  # latency-model | null
    model: LatencyModel = LatencyModel()
    stream_tokens: bool = False


def make_sut(spec: SutSpec, clock: Clock) -> SystemUnderTest:
    if spec.kind == "latency-model":
        return LatencyModelSUT(clock, spec.model, stream_tokens=spec.stream_tokens)
    if spec.kind == "null":
        return NullSUT()
    raise ConfigError(f"unknown system under test {spec.kind!r}; choose latency-model or null")


def default_dataset(
    layered: LayeredSettings,
    *,
    size: int | None = None,
    input_lengths: str | None = None,
    output_lengths: str | None = None,
    seed: int = 0,
) -> SyntheticDataset:
    """A synthetic dataset shaped like the benchmark's (size from the preset or profile)."""
    s = layered.settings
    preset = layered.preset
    n = size or s.total_sample_count or s.performance_sample_count or preset.dataset_size
    max_out = preset.max_output_tokens or 128
    inp = LengthDistribution.parse(input_lengths or "normal:800:200")
    out = LengthDistribution.parse(output_lengths or f"uniform:{max(2, max_out // 2)}:{max_out}")
    return SyntheticDataset(n, inp, out, seed=seed, max_output_tokens=max_out)


@dataclass(frozen=True)
class RunResult:
    settings: EffectiveSettings
    summary: Summary
    verdicts: Verdicts
    outcome: RunOutcome
    output_dir: Path
    exit_code: int
    document: dict[str, Any]


def run_benchmark(
    layered: LayeredSettings,
    dataset: Dataset,
    sut: SutSpec | Callable[[Clock], SystemUnderTest],
    output_dir: Path,
    *,
    virtual_time: bool = False,
    progress: ProgressFn | None = None,
    record_consumers: Sequence[Callable[[RequestRecord], None]] = (),
    drain_timeout_s: float = 0.0,
    trace: tuple[np.ndarray, np.ndarray] | None = None,
    encode: Callable[[str], Sequence[int]] | None = None,
) -> RunResult:
    """Run one benchmark and write its results folder. Raises ConfigError on bad input.

    ``trace`` (send offsets in ns, dataset indices) replaces the scenario's schedule: the
    run replays the trace's timing (the ``trace`` pattern). ``encode`` turns returned
    text into token ids for ``mlperf_log_accuracy.json`` when a system answers in text
    (an HTTP target): give the model's tokenizer.
    """
    if trace is not None:
        offsets, samples = trace
        span = float(offsets[-1] - offsets[0]) if len(offsets) > 1 else 0.0
        qps = (len(offsets) - 1) / (span / 1e9) if span > 0 else 1.0
        layered = replace(layered, settings=replace(
            layered.settings, scenario=Scenario.TRACE, target_qps=qps))
    eff = effective(layered.settings, len(dataset))
    if trace is not None:
        schedule = timed_trace(eff, trace[0], trace[1])
    else:
        schedule = build_schedule(eff, len(dataset))
    output_dir.mkdir(parents=True, exist_ok=True)
    clock: Clock = FakeClock() if virtual_time else MonotonicClock()
    factory = sut if callable(sut) else (lambda c: make_sut(sut, c))
    system = factory(clock)
    started = dt.datetime.now(dt.UTC)
    recorder = accuracy_recorder(output_dir, eff, encode=encode)
    coro = _run_async(eff, schedule, dataset, system, clock, output_dir, progress,
                      drain_timeout_s, recorder, record_consumers)
    if isinstance(clock, FakeClock):
        outcome, summary, verdicts, anchor, per_endpoint = run_virtual(coro, clock)
    else:
        outcome, summary, verdicts, anchor, per_endpoint = asyncio.run(coro)
    doc = _document(layered, eff, dataset, system, summary, verdicts, outcome, started,
                    anchor, virtual_time)
    if recorder is not None:
        doc["accuracy_log"] = recorder.stats.to_json()
    if any(name != "(none)" for name in per_endpoint):
        doc["summary"]["per_endpoint"] = per_endpoint
    if eff.is_mlperf:
        facts = _run_facts(layered, dataset, system, summary, outcome, started, anchor)
        logs = write_mlperf_logs(output_dir, eff, summary, verdicts, schedule, facts,
                                 accuracy_written=recorder is not None)
        doc["files"]["mlperf_logs"] = [p.name for p in logs]
    write_json_atomic(output_dir / RESULTS_FILE, doc)
    if outcome.interrupted and "Ctrl-C" in outcome.interrupt_reason:
        code = EXIT_INTERRUPTED
    else:
        code = EXIT_VALID if verdicts.valid else EXIT_INVALID
    return RunResult(eff, summary, verdicts, outcome, output_dir, code, doc)


async def _run_async(
    eff: EffectiveSettings,
    schedule: Schedule,
    dataset: Dataset,
    system: SystemUnderTest,
    clock: Clock,
    output_dir: Path,
    progress: ProgressFn | None,
    drain_timeout_s: float,
    recorder: AccuracyRecorder | None,
    record_consumers: Sequence[Callable[[RequestRecord], None]] = (),
) -> tuple[RunOutcome, Summary, Verdicts, tuple[int, int], dict[str, Any]]:
    sink = JsonlRecordSink(output_dir / RECORDS_FILE)
    acc = Accumulator()
    endpoints = EndpointBreakdown()
    runner = Runner(
        schedule,
        dataset,
        system,
        clock,
        sinks=[sink],
        consumers=[acc.add, endpoints.add, *record_consumers],
        max_concurrency=eff.max_concurrency,
        drain_timeout_ns=int(drain_timeout_s * 1e9),
        outputs=recorder,
    )
    loop = asyncio.get_running_loop()
    handled = _install_sigint(loop, runner)
    reporter: asyncio.Task[None] | None = None
    await system.start()
    anchor = wall_anchor()
    try:
        if progress is not None:
            reporter = asyncio.ensure_future(_report(runner, clock, progress))
        outcome = await runner.run()
    finally:
        if reporter is not None:
            reporter.cancel()
        if handled:
            loop.remove_signal_handler(signal.SIGINT)
        sink.close()
        if recorder is not None:
            recorder.close()
        await system.stop()
    data = acc.finish(outcome.scheduled, interrupted=outcome.interrupted,
                      reason=outcome.interrupt_reason)
    summary = summarize(data, eff)
    gaps = outcome.closed_gaps_ns
    client = ClientStats(
        issue_span_ns=outcome.issue_span_ns,
        closed_gap_p99_ns=int(np.sort(gaps)[int(gaps.size * 0.99)]) if gaps.size else 0,
        closed_gap_count=int(gaps.size),
    )
    verdicts = evaluate(summary, eff, client)
    data.itl.close()
    return outcome, summary, verdicts, anchor, endpoints.to_json()


def _run_facts(
    layered: LayeredSettings,
    dataset: Dataset,
    system: SystemUnderTest,
    summary: Summary,
    outcome: RunOutcome,
    started: dt.datetime,
    anchor: tuple[int, int],
) -> RunFacts:
    server = layered.preset.scenarios.get(Scenario.SERVER)
    limits = None
    if server is not None and server.limits.ttft_ns is not None and server.limits.tpot_ns:
        limits = (server.limits.ttft_ns, server.limits.tpot_ns)
    errors = (
        ("n_tokens argument missing or attempted to record 0 as number of tokens",)
        * summary.zero_token_samples
        + ("Number of tokens need to be greater than 1",) * summary.one_token_samples
    )
    return RunFacts(
        sut_name=system.name,
        qsl_name=dataset.name,
        start_wall_ns=anchor[1],
        active_duration_ns=outcome.end_ns,
        test_datetime=started,
        ran_out_of_generated_queries=outcome.ran_out_of_queries,
        errors=errors,
        server_token_limits_ns=limits,
        pid=os.getpid(),
    )


def _install_sigint(loop: asyncio.AbstractEventLoop, runner: Runner) -> bool:
    def on_sigint() -> None:
        if runner.stopping:
            raise KeyboardInterrupt  # a second Ctrl-C: stop at once
        runner.request_stop("interrupted by the user (Ctrl-C)")

    try:
        loop.add_signal_handler(signal.SIGINT, on_sigint)
        return True
    except (NotImplementedError, RuntimeError, ValueError):  # not the main thread
        return False


async def _report(runner: Runner, clock: Clock, progress: ProgressFn) -> None:
    while True:
        await asyncio.sleep(0.25)
        progress(runner.stats, (clock.now_ns() - runner.t0) / 1e9)


def _document(
    layered: LayeredSettings,
    eff: EffectiveSettings,
    dataset: Dataset,
    system: SystemUnderTest,
    summary: Summary,
    verdicts: Verdicts,
    outcome: RunOutcome,
    started: dt.datetime,
    anchor: tuple[int, int],
    virtual_time: bool,
) -> dict[str, Any]:
    r = eff.requested
    note = ""
    if r.profile == "demo":
        note = ("demo profile: a short run (min duration and dataset cut down), judged by "
                "LoadGen's rules but not an MLPerf-length run")
    return {
        "schema": SCHEMA,
        "tokenmark_version": __version__,
        "label": "unverified",
        "label_note": "Result not verified by MLCommons Association.",
        "profile_note": note,
        "run": {
            "started_utc": started.isoformat(),
            "wall_anchor_ns": {"monotonic": anchor[0], "epoch": anchor[1]},
            "clock": "virtual" if virtual_time else "monotonic",
            "round": r.round,
            "benchmark": r.benchmark,
            "scenario": r.scenario.value,
            "mode": r.mode.value,
            "sut": {"name": system.name, **system.describe()},
            "dataset": {"name": dataset.name, "size": len(dataset),
                        "fingerprint": dataset.fingerprint, **describe_dataset(dataset)},
            "interrupted": outcome.interrupted,
            "interrupt_reason": outcome.interrupt_reason,
            "ran_out_of_generated_queries": outcome.ran_out_of_queries,
        },
        "settings": {
            "layers": layered.layers_json(),
            "requested": requested_json(r),
            "effective": effective_json(eff),
        },
        "summary": summary_json(summary),
        "verdicts": verdicts_json(verdicts),
        "files": {"records": RECORDS_FILE},
    }
