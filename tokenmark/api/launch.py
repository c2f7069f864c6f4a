"""Run a :class:`~tokenmark.config.runspec.RunSpec`: the one entry of ``tokenmark run`` and
of the Python API.

:func:`prepare` turns a spec into a :class:`Launch`: the spec under its manifest (when
``spec.trust.manifest`` names one: :meth:`RunSpec.with_manifest`; the options the spec
gives beat the manifest's, and a run that changes none is a re-run), the layered settings
(with a compliance audit's), the workload, the system under test, the run's watchers
(the workload manifest, client calibration, the client monitor, the environment
fingerprint, the server's metrics) and the results folder; every bad input fails here,
before anything is sent, as a BadInputError naming the fix. :meth:`Launch.run` runs it:
tokenmark's load generator (:func:`~tokenmark.api.run.run_benchmark`) or the official
LoadGen, then an audit's verdict folder. :func:`run_spec` is both steps.

``tokenmark run`` builds the spec from its flags and a ``--config`` file
(:meth:`RunSpec.from_options`), calls :func:`prepare` and :meth:`Launch.run`, and renders:
the notices, the live view, the tables, the report, the results database::

    from tokenmark.api import RunSpec, run_spec
    from tokenmark.config.runspec import LoadOptions, SutOptions

    result = run_spec(RunSpec(load=LoadOptions(scenario="closed", concurrency=4,
                                               min_duration=0, max_queries=64,
                                               virtual_time=True),
                              sut=SutOptions(kind="latency-model")))
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from tokenmark.api import suts
from tokenmark.api.assemble import Workload, build_workload, default_api
from tokenmark.api.run import ProgressFn, RunResult, RunWatcher, run_benchmark
from tokenmark.config.layering import LayeredSettings
from tokenmark.config.runspec import RunSpec
from tokenmark.errors import ConfigError
from tokenmark.mlperf.settings import Mode, effective
from tokenmark.records import RequestRecord

if TYPE_CHECKING:
    from tokenmark.adapters.openai_target import OpenAIConfig
    from tokenmark.api.correctness import AuditOutcome
    from tokenmark.api.trust import Plan
    from tokenmark.loadgen.remote import RunDriver

__all__ = ["Launch", "Notice", "RunSpec", "prepare", "run_spec"]


@dataclass(frozen=True)
class Notice:
    """Something the user should read before the run: ``level`` 'warning' or 'info'."""

    level: str
    text: str


@dataclass
class Launch:
    """A run ready to start (:func:`prepare`)."""

    spec: RunSpec
    layered: LayeredSettings
    workload: Workload
    sut: suts.SutSpec | suts.SutFactory
    target: OpenAIConfig | None
    output_dir: Path
    plan: Plan | None
    notices: list[Notice] = field(default_factory=list)
    #: The run's own watchers (:func:`tokenmark.api.trust.run_watchers`).
    watchers: list[RunWatcher] = field(default_factory=list)
    #: Remote workers that drive the run (``--distributed``), or None.
    driver: RunDriver | None = None
    #: The TEST06/TEST09 verdict, once an audit run has run.
    audit: AuditOutcome | None = None

    @property
    def official(self) -> bool:
        """Whether the official LoadGen drives the run."""
        return self.spec.load.loadgen == "official"

    @property
    def dataset_size(self) -> int:
        return len(self.workload.dataset)

    def run(self, *, progress: ProgressFn | None = None,
            record_consumers: Sequence[Callable[[RequestRecord], None]] = (),
            watchers: Sequence[RunWatcher] = ()) -> RunResult:
        """Run it and write the results folder. ``progress``, ``record_consumers`` and
        ``watchers`` (added to the run's own) watch tokenmark's load generator; the
        official LoadGen (``spec.load.loadgen == "official"``) takes none."""
        ld, ds = self.spec.load, self.spec.dataset
        if self.official:
            from tokenmark.api.submission import run_official_loadgen

            if progress is not None or record_consumers or watchers:
                raise ConfigError("the official LoadGen takes no progress, record "
                                  "consumers or watchers; drop them, or run with "
                                  "loadgen 'tokenmark'")

            result = run_official_loadgen(self.layered, self.workload.dataset, self.sut,
                                          self.output_dir, find_peak=ld.find_peak,
                                          audit=ld.audit)
        else:
            trace = None
            w = self.workload
            if w.trace_offsets_ns is not None and w.trace_samples is not None:
                trace = (w.trace_offsets_ns, w.trace_samples)
            encode = None
            if self.logs_outputs and ds.tokenizer != "builtin":
                from tokenmark.sources.hf_tokenizer import load_hf_tokenizer

                encode = load_hf_tokenizer(ds.tokenizer).encode
            result = run_benchmark(
                self.layered, w.dataset, self.sut, self.output_dir,
                virtual_time=ld.virtual_time, progress=progress,
                record_consumers=record_consumers, trace=trace, encode=encode,
                driver=self.driver, watchers=[*self.watchers, *watchers])
        if ld.audit is not None and ld.audit.upper() in ("TEST06", "TEST09") and (
                self.output_dir / "mlperf_log_accuracy.json").is_file():
            from tokenmark.api.correctness import audit_results

            self.audit = audit_results(ld.audit, self.output_dir)
        return result

    @property
    def logs_outputs(self) -> bool:
        """Whether the run logs its outputs (accuracy mode, an audit)."""
        return _logs_outputs(self.layered, self.spec.load.audit)


def _logs_outputs(layered: LayeredSettings, audit: str | None) -> bool:
    return layered.settings.mode is Mode.ACCURACY or audit is not None


def prepare(spec: RunSpec) -> Launch:
    """Everything before the first request; raises BadInputError naming the fix."""
    from tokenmark.api import trust as trust_api

    ld = spec.load
    if ld.loadgen not in ("tokenmark", "official"):
        raise ConfigError(f"unknown --loadgen {ld.loadgen!r}; choose tokenmark or official")
    if ld.find_peak and ld.loadgen != "official":
        raise ConfigError("--find-peak is LoadGen's FindPeakPerformance: add "
                          "--loadgen official")
    spec, manifest, changed = trust_api.apply_manifest(spec)
    layered = spec.settings()
    if ld.audit is not None and ld.loadgen != "official":  # LoadGen applies audit.config
        from tokenmark.compliance.audit import apply_audit, audit_for

        layered = replace(layered, settings=apply_audit(layered.settings,
                                                        audit_for(ld.audit)))
    notices: list[Notice] = []
    plan = None
    if manifest is not None:
        changed = [*spec.manifest_changes(layered), *changed]
        if changed:
            notices.append(Notice("warning", f"not a re-run of {manifest.source}: your "
                                  f"options change {'; '.join(changed)}. The run records "
                                  "a manifest of its own."))
        else:
            plan = trust_api.Plan(manifest, layered, spec.dataset, manifest.sampling)
    ds, tg = spec.dataset, spec.target
    logs_outputs = _logs_outputs(layered, ld.audit)
    served_tok = None
    if ds.tokenizer == "server" and tg.urls:
        from tokenmark.api.assemble import prebuild, server_tokenizer

        served_tok = server_tokenizer(suts.http_config(spec))
    api = default_api(tg.api, ds, layered.preset.name)
    workload = build_workload(ds, layered, served_tok)
    if served_tok is not None:
        n_built = prebuild(workload.dataset)
        notices.append(Notice("info", f"{n_built} prompts built with the server's tokenizer "
                                      f"({served_tok.name}, {served_tok.round_trips} round "
                                      "trips)"))
        served_tok.close()
    effective(layered.settings, len(workload.dataset))  # bad settings fail before any output
    if tg.urls and logs_outputs and ds.tokenizer in ("builtin", "server"):
        raise ConfigError("logging outputs of an HTTP target needs the model's "
                          "tokenizer to turn text into token ids; give --tokenizer PATH")
    sut, cfg = suts.from_spec(spec, layered, api=api, keep_text=logs_outputs)
    if ld.loadgen == "official" and isinstance(sut, suts.SutSpec):
        # LoadGen's own threads start from the client's: they get the whole machine
        sut = replace(sut, pin_cpus=False, unpinned_because="--loadgen official")
    if cfg is not None and ds.tokenizer == "builtin" and not cfg.served_by.startswith(
            "tokenmark/"):
        from tokenmark.adapters.openai_target import http_name

        notices.append(Notice("warning", f"prompts are measured with tokenmark's built-in "
                              f"word tokenizer, not the model's: {http_name(cfg)} will count "
                              "other lengths (often several times more tokens). Give the "
                              "model's tokenizer with --tokenizer PATH, or --tokenizer "
                              "server."))
    if ld.loadgen == "official" and (ld.virtual_time or workload.trace_offsets_ns is not None):
        raise ConfigError("--loadgen official runs in real time, without --virtual-time "
                          "or --trace")
    note = _length_note(layered, len(workload.dataset))
    if note:
        notices.append(Notice("warning", note))
    out = spec.output.output or Path("results") / (
        f"{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}-{layered.preset.name}-"
        f"{layered.settings.scenario.value}")
    launch = Launch(spec, layered, workload, sut, cfg, out, plan, notices,
                    driver=_driver(spec))
    if ld.loadgen != "official":
        launch.watchers = _watchers(launch, notices)
    return launch


def run_spec(spec: RunSpec, *,
             record_consumers: Sequence[Callable[[RequestRecord], None]] = (),
             watchers: Sequence[RunWatcher] = (),
             progress: ProgressFn | None = None) -> RunResult:
    """Run ``spec`` as ``tokenmark run`` does (:func:`prepare`, then :meth:`Launch.run`)
    and write its results folder (``spec.output.output``, default
    ``results/<time>-<benchmark>-<scenario>``). Raises BadInputError (ConfigError,
    DatasetError, TargetError) naming the fix on bad input."""
    return prepare(spec).run(progress=progress, record_consumers=record_consumers,
                             watchers=watchers)


def _watchers(launch: Launch, notices: list[Notice]) -> list[RunWatcher]:
    """The run's own watchers (:func:`tokenmark.api.trust.run_watchers`); client
    calibration (``spec.trust.calibrate``) measures this client first."""
    from tokenmark.api import trust as trust_api

    spec, tr = launch.spec, launch.spec.trust
    capacity = None
    if tr.calibrate and launch.target is not None:
        capacity, was_cached = trust_api.calibrate_client(workers=spec.target.workers)
        notices.append(Notice("info", f"client capacity{' (cached)' if was_cached else ''}: "
                                      f"{capacity.requests_per_s:,.0f} requests/s, "
                                      f"{capacity.tokens_per_s:,.0f} tokens/s"))
    real = tr.client_watch and not spec.load.virtual_time
    return trust_api.run_watchers(
        launch.layered, spec.dataset, launch.workload.dataset, target=launch.target,
        plan=launch.plan, monitor=real, environment=real, metrics=real,
        metrics_interval_s=tr.metrics_interval, capacity=capacity,
        max_share=tr.client_share, allow_overload=tr.allow_client_overload)


def _driver(spec: RunSpec) -> RunDriver | None:
    ld = spec.load
    if not (ld.distributed or ld.ray_address):
        return None
    from tokenmark.api.scale import distributed_driver

    return distributed_driver(ld.distributed, ld.ray_address, ld.ray_workers)


def _length_note(layered: LayeredSettings, dataset_size: int) -> str:
    """Why LoadGen's rules make the run much longer than asked (issue 27), or ''."""
    from tokenmark.errors import BadInputError
    from tokenmark.mlperf.scenarios import build_schedule, length_note

    try:
        eff = effective(layered.settings, dataset_size)
        note = length_note(eff, build_schedule(eff, dataset_size))
    except BadInputError:
        return ""  # the run itself reports it
    return "" if note is None else note.message()

