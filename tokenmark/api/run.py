"""The Python entry points. The CLI is a thin layer over these.

:func:`run_benchmark` is the main job: settings -> schedule -> runner against a system
under test -> records on disk -> summary -> both verdicts -> ``results.json`` (and the
MLPerf log files for MLPerf scenarios).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import os
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from tokenmark.adapters import eventloop
from tokenmark.api.suts import EmulatedTarget, SutSpec, make_sut
from tokenmark.clock import Clock, FakeClock, MonotonicClock, run_virtual, wall_anchor
from tokenmark.config.layering import LayeredSettings
from tokenmark.dataset import Dataset, LengthDistribution, SyntheticDataset, describe_dataset
from tokenmark.errors import (
    EXIT_BAD_INPUT,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_INVALID,
    EXIT_VALID,
    ConfigError,
)
from tokenmark.loadgen.remote import RunDriver
from tokenmark.loadgen.runner import Runner, RunnerStats, RunOutcome
from tokenmark.metrics.endpoints import EndpointBreakdown
from tokenmark.metrics.lengths import LengthTally
from tokenmark.metrics.summary import Accumulator, Summary, summarize
from tokenmark.mlperf.mllog import RunFacts
from tokenmark.mlperf.rules import ClientStats, Finding, Verdicts, evaluate, with_findings
from tokenmark.mlperf.scenarios import Schedule, build_schedule, timed_trace
from tokenmark.mlperf.settings import EffectiveSettings, Scenario, effective
from tokenmark.output.accuracy import AccuracyRecorder, accuracy_recorder
from tokenmark.output.mlperf import write_mlperf_logs
from tokenmark.output.records import RECORDS_FILE, JsonlRecordSink
from tokenmark.output.results import ResultsDocument, RunInfo, write_results
from tokenmark.records import RequestRecord
from tokenmark.sut import PromptProbe, SystemUnderTest
from tokenmark.tokenizer import exact_text

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_INTERNAL",
    "EXIT_INTERRUPTED",
    "EXIT_INVALID",
    "EXIT_VALID",
    "EmulatedTarget",
    "InterruptGuard",
    "RunResult",
    "RunWatcher",
    "SutSpec",
    "default_dataset",
    "make_sut",
    "run_benchmark",
]

# The documented exit codes (README "Exit codes") live in tokenmark.errors, which the
# CLI can import without loading the run path; they are re-exported here.

ProgressFn = Callable[[RunnerStats, float], None]


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


class RunWatcher(Protocol):
    """Something that watches a run from beside it (:mod:`tokenmark.trust`): the workload
    manifest, the client monitor, the environment fingerprint, a metrics scraper.

    ``plan`` sees the schedule before anything is written (it may raise BadInputError);
    ``start``/``stop`` bracket the run on its event loop (``stop`` runs even when the run
    fails); ``record`` sees every finished record; ``finish`` returns the results.json
    section stored under ``key`` and findings for the tokenmark verdict.
    """

    key: str

    def plan(self, eff: EffectiveSettings, schedule: Schedule) -> None: ...

    async def start(self, output_dir: Path) -> None: ...

    def record(self, rec: RequestRecord) -> None: ...

    async def stop(self) -> None: ...

    def finish(self, summary: Summary, output_dir: Path
               ) -> tuple[dict[str, Any], list[Finding]]: ...


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
    stop_when: Callable[[RequestRecord], str] | None = None,
    driver: RunDriver | None = None,
    watchers: Sequence[RunWatcher] = (),
) -> RunResult:
    """Run one benchmark and write its results folder. Raises ConfigError on bad input.

    ``trace`` (send offsets in ns, dataset indices) replaces the scenario's schedule: the
    run replays the trace's timing (the ``trace`` pattern). ``encode`` turns returned
    text into token ids for ``mlperf_log_accuracy.json`` when a system answers in text
    (an HTTP target): give the model's tokenizer. ``stop_when`` sees every finished
    record and returns a reason to stop the run early ('' to go on; find-peak probes
    stop once their verdict is certain). ``driver`` runs the schedule on remote workers
    (:mod:`tokenmark.distributed`) instead of a local runner; ``sut`` is then built
    on each worker. ``watchers`` run beside the run (:class:`RunWatcher`); their
    sections and findings go into the results.
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
    for w in watchers:
        w.plan(eff, schedule)
    output_dir.mkdir(parents=True, exist_ok=True)
    clock: Clock = FakeClock() if virtual_time else MonotonicClock()
    factory = sut if callable(sut) else (lambda c: make_sut(sut, c))
    recorder = accuracy_recorder(output_dir, eff, encode=encode)
    if driver is not None and (virtual_time or recorder is not None):
        raise ConfigError("a distributed run is a performance run in real time; drop "
                          "--virtual-time and --mode accuracy / --audit")
    local: SystemUnderTest | None = None
    system: SystemUnderTest | RunDriver
    if driver is None:
        system = local = factory(clock)
    else:
        system = driver
    started = dt.datetime.now(dt.UTC)
    lengths = LengthTally()
    probes: dict[str, Any] = {}
    coro = _run_async(eff, schedule, dataset, local, clock, output_dir, progress,
                      drain_timeout_s, recorder, [*record_consumers, lengths.add], stop_when,
                      factory, driver, watchers, probes)
    if isinstance(clock, FakeClock):
        outcome, summary, verdicts, anchor, per_endpoint = run_virtual(coro, clock)
    else:
        outcome, summary, verdicts, anchor, per_endpoint = eventloop.run(coro)
    sections: dict[str, Any] = {}
    extra: list[Finding] = []
    for w in watchers:
        section, found = w.finish(summary, output_dir)
        sections[w.key] = section
        extra.extend(found)
    if probes.get("overhead") is not None:
        s0 = probes.get("sample0")
        if s0 is not None:
            lengths.add_probe(s0["planned"], s0["served"])
        extra.extend(lengths.findings(probes["overhead"], probes.get("note", "")))
    if extra:
        verdicts = with_findings(verdicts, extra)
    sections["lengths"] = {**lengths.to_json(), "probe": probes}
    if recorder is not None:
        sections["accuracy_log"] = recorder.stats.to_json()
    if driver is not None:
        sections["distributed"] = driver.report()
    doc = _document(layered, eff, dataset, system, summary, verdicts, outcome, started,
                    anchor, virtual_time)
    files: dict[str, Any] = dict(doc.files)
    if eff.is_mlperf:
        facts = _run_facts(layered, dataset, system, summary, outcome, started, anchor)
        logs = write_mlperf_logs(output_dir, eff, summary, verdicts, schedule, facts,
                                 accuracy_written=recorder is not None)
        files["mlperf_logs"] = [p.name for p in logs]
    summary_doc = dict(doc.summary)
    if any(name != "(none)" for name in per_endpoint):
        summary_doc["per_endpoint"] = per_endpoint
    doc = replace(doc, files=files, summary=summary_doc, sections=sections)
    write_results(output_dir, doc)
    if outcome.interrupted and "Ctrl-C" in outcome.interrupt_reason:
        code = EXIT_INTERRUPTED
    else:
        code = EXIT_VALID if verdicts.valid else EXIT_INVALID
    return RunResult(eff, summary, verdicts, outcome, output_dir, code, doc.to_json())


async def _run_async(
    eff: EffectiveSettings,
    schedule: Schedule,
    dataset: Dataset,
    system: SystemUnderTest | None,
    clock: Clock,
    output_dir: Path,
    progress: ProgressFn | None,
    drain_timeout_s: float,
    recorder: AccuracyRecorder | None,
    record_consumers: Sequence[Callable[[RequestRecord], None]] = (),
    stop_when: Callable[[RequestRecord], str] | None = None,
    factory: Callable[[Clock], SystemUnderTest] | None = None,
    driver: RunDriver | None = None,
    watchers: Sequence[RunWatcher] = (),
    probes: dict[str, Any] | None = None,
) -> tuple[RunOutcome, Summary, Verdicts, tuple[int, int], dict[str, Any]]:
    sink = JsonlRecordSink(output_dir / RECORDS_FILE)
    acc = Accumulator()
    endpoints = EndpointBreakdown()
    loop = asyncio.get_running_loop()
    consumers = [acc.add, endpoints.add, *record_consumers, *(w.record for w in watchers)]
    runner: Runner | RunDriver
    if stop_when is not None:
        def watch(rec: RequestRecord) -> None:
            reason = stop_when(rec)
            if reason and not runner.stopping:
                loop.call_soon(runner.request_stop, reason)

        consumers.append(watch)
    if driver is not None or system is None:
        assert driver is not None
        runner = driver
    else:
        runner = Runner(
            schedule,
            dataset,
            system,
            clock,
            sinks=[sink],
            consumers=consumers,
            max_concurrency=eff.max_concurrency,
            drain_timeout_ns=int(drain_timeout_s * 1e9),
            outputs=recorder,
        )
    handled = _install_sigint(loop, runner)
    reporter: asyncio.Task[None] | None = None
    if system is not None:
        await system.start()
        if probes is not None and isinstance(system, PromptProbe):
            probes.update(await probe_prompts(system, dataset))
    anchor = wall_anchor()
    started_watchers: list[RunWatcher] = []
    try:
        for w in watchers:
            await w.start(output_dir)
            started_watchers.append(w)
        if progress is not None:
            reporter = asyncio.ensure_future(_report(runner, clock, progress))
        if isinstance(runner, Runner):
            outcome = await runner.run()
        else:
            assert factory is not None
            outcome = await runner.run(eff, schedule, dataset, factory, consumers, [sink])
    finally:
        if reporter is not None:
            reporter.cancel()
        if handled:
            loop.remove_signal_handler(signal.SIGINT)
            if InterruptGuard.active is not None:
                InterruptGuard.active.reinstall()
        sink.close()
        if recorder is not None:
            recorder.close()
        for w in reversed(started_watchers):
            await w.stop()
        if system is not None:
            await system.stop()
    data = acc.finish(outcome.scheduled, interrupted=outcome.interrupted,
                      reason=outcome.interrupt_reason)
    summary = summarize(data, eff)
    gaps = outcome.closed_gaps_ns
    causes: dict[str, Any] = {}
    for w in watchers:  # the client monitor measured what a late send can be blamed on
        figures = getattr(w, "client_figures", None)
        if callable(figures):
            causes.update(figures())
    stats = getattr(system, "stats", None)  # an HTTP SUT's per-endpoint statistics
    if isinstance(stats, list) and stats and hasattr(stats[0], "connect_waits"):
        causes["connect_waits"] = sum(st.connect_waits for st in stats)
    client = ClientStats(
        issue_span_ns=outcome.issue_span_ns,
        closed_gap_p99_ns=int(np.sort(gaps)[int(gaps.size * 0.99)]) if gaps.size else 0,
        closed_gap_count=int(gaps.size),
        **causes,
    )
    verdicts = evaluate(summary, eff, client)
    data.itl.close()
    return outcome, summary, verdicts, anchor, endpoints.to_json()


def _run_facts(
    layered: LayeredSettings,
    dataset: Dataset,
    system: SystemUnderTest | RunDriver,
    summary: Summary,
    outcome: RunOutcome,
    started: dt.datetime,
    anchor: tuple[int, int],
) -> RunFacts:
    sc = layered.settings.scenario
    limits = layered.preset.loadgen_token_limits(sc) if sc in layered.preset.scenarios else None
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


def run_title(system: SystemUnderTest | RunDriver, benchmark: str, scenario: str) -> str:
    """What a run measured, for titles and lists: an HTTP target's served model and server
    software; otherwise the benchmark preset."""
    d = system.describe()
    if "served_model" in d:
        return f"{system.name} · {scenario}"
    return f"{benchmark} {scenario}"


async def probe_prompts(system: PromptProbe, dataset: Dataset) -> dict[str, Any]:
    """Measure once what the server adds to every prompt (a chat template's tokens, a
    BOS token): one request whose prompt is one word of the dataset's tokenizer, and one
    with the first sample's prompt (checked even when the stream reports no prompt
    tokens). Not measured for datasets whose samples are conversations (the template adds
    tokens per message there), nor when the system's ``length_probe`` is off."""
    if not getattr(system, "length_probe", True):
        return {"overhead": None, "note": "; not judged: the length probe is off"}
    first = dataset.sample(0)
    msgs = first.messages if first.is_chat else None
    if msgs is not None and len(msgs) > 1:
        return {"overhead": None, "note": "; not judged: samples hold several messages"}
    tok = getattr(dataset, "tokenizer", None)
    words = tok.word_ids() if tok is not None and hasattr(tok, "word_ids") else None
    if tok is None or not words:
        return {"overhead": None, "note": "; not judged: no tokenizer vocabulary to probe"}
    text, ids = exact_text(tok, [words[len(words) // 2]])
    try:
        overhead = await system.prompt_overhead(text, len(ids))
        # the first sample's prompt too: a server whose stream reports no prompt_tokens
        # (llama.cpp) is still checked on one real prompt
        extra = None if overhead is None or first.is_chat else await system.prompt_overhead(
            first.prompt, first.input_tokens)
    except (OSError, TimeoutError, ConnectionError) as e:
        return {"overhead": None, "note": f"; not judged: the probe failed ({e})"}
    note = "" if overhead is not None else "; not judged: the probe got no prompt_tokens"
    out: dict[str, Any] = {"overhead": overhead, "text": text, "planned": len(ids),
                           "note": note}
    if extra is not None and overhead is not None:
        out["sample0"] = {"planned": first.input_tokens,
                          "served": first.input_tokens + extra}
    return out


class InterruptGuard:
    """Ctrl-C (SIGINT) during a run, however many arrive and whenever they arrive.

    Inside ``with InterruptGuard():`` (main thread) no SIGINT raises KeyboardInterrupt;
    each is counted (:attr:`count`). The first one that arrives during a run, or before
    it begins, stops the run once, as interrupted; later ones change nothing, so the
    run's results are always written. Only inside :meth:`skippable` does an interrupt
    raise KeyboardInterrupt, to skip that step (``tokenmark run``: the report).
    ``on_stop`` is called in the run's event loop when an interrupt stops it.
    """

    active: InterruptGuard | None = None

    def __init__(self, on_stop: Callable[[], None] | None = None) -> None:
        self.count = 0
        self.on_stop = on_stop
        self._skippable = False
        self._old: Any = None
        self._installed = False

    def __enter__(self) -> InterruptGuard:
        if threading.current_thread() is threading.main_thread():
            self._old = signal.signal(signal.SIGINT, self._on_signal)
            self._installed = True
        self._outer, InterruptGuard.active = InterruptGuard.active, self
        return self

    def __exit__(self, *exc: object) -> None:
        InterruptGuard.active = self._outer
        if self._installed:
            signal.signal(signal.SIGINT, self._old)

    def _on_signal(self, signum: int, frame: object) -> None:
        self.count += 1
        if self._skippable:
            self._skippable = False
            raise KeyboardInterrupt

    def reinstall(self) -> None:
        """Take SIGINT back (asyncio's ``remove_signal_handler`` gives it to Python)."""
        if self._installed:
            signal.signal(signal.SIGINT, self._on_signal)

    @contextlib.contextmanager
    def skippable(self) -> Iterator[None]:
        """A step an interrupt may cut short: it raises KeyboardInterrupt inside."""
        self._skippable = True
        try:
            yield
        finally:
            self._skippable = False


def _install_sigint(loop: asyncio.AbstractEventLoop, runner: Runner | RunDriver) -> bool:
    guard = InterruptGuard.active
    reason = "interrupted by the user (Ctrl-C)"

    def on_sigint() -> None:
        if guard is not None:
            guard.count += 1
        if runner.stopping:
            return  # stopping already: the results are being written, whatever comes
        runner.request_stop(reason)
        if guard is not None and guard.on_stop is not None:
            guard.on_stop()

    if guard is not None and guard.count:  # Ctrl-C while the run was being set up
        guard.count -= 1  # on_sigint counts it again
        loop.call_soon(on_sigint)
    try:
        loop.add_signal_handler(signal.SIGINT, on_sigint)
        return True
    except (NotImplementedError, RuntimeError, ValueError):  # not the main thread
        return False


async def _report(runner: Runner | RunDriver, clock: Clock, progress: ProgressFn) -> None:
    while True:
        await asyncio.sleep(0.25)
        progress(runner.stats, (clock.now_ns() - runner.t0) / 1e9)


def _document(
    layered: LayeredSettings,
    eff: EffectiveSettings,
    dataset: Dataset,
    system: SystemUnderTest | RunDriver,
    summary: Summary,
    verdicts: Verdicts,
    outcome: RunOutcome,
    started: dt.datetime,
    anchor: tuple[int, int],
    virtual_time: bool,
) -> ResultsDocument:
    r = eff.requested
    run = RunInfo(
        round=r.round, benchmark=r.benchmark, scenario=r.scenario.value, mode=r.mode.value,
        started_utc=started.isoformat(), clock="virtual" if virtual_time else "monotonic",
        title=run_title(system, r.benchmark, r.scenario.value),
        sut={"name": system.name, **system.describe()},
        dataset={"name": dataset.name, "size": len(dataset),
                 "fingerprint": dataset.fingerprint, **describe_dataset(dataset)},
        interrupted=outcome.interrupted, interrupt_reason=outcome.interrupt_reason,
        ran_out_of_generated_queries=outcome.ran_out_of_queries,
        wall_anchor_ns={"monotonic": anchor[0], "epoch": anchor[1]})
    return ResultsDocument.of_run(layered, eff, summary, verdicts, run,
                                  files={"records": RECORDS_FILE})
