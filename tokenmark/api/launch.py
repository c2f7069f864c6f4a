"""Run a :class:`~tokenmark.config.runspec.RunSpec` from Python: the spec's settings, its
workload and its system under test (:mod:`tokenmark.api.suts`), then
:func:`~tokenmark.api.run_benchmark`.

``tokenmark run`` builds the same spec from its flags and a ``--config`` file
(:meth:`RunSpec.from_options`); it adds what only the command does (manifests, audits,
the official LoadGen, calibration and watchers, the live view, the report and the results
database)::

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
from pathlib import Path

from tokenmark.api import suts
from tokenmark.api.assemble import build_workload, default_api
from tokenmark.api.run import RunResult, RunWatcher, run_benchmark
from tokenmark.config.runspec import RunSpec
from tokenmark.mlperf.settings import Mode
from tokenmark.records import RequestRecord

__all__ = ["RunSpec", "run_spec"]


def run_spec(spec: RunSpec, *,
             record_consumers: Sequence[Callable[[RequestRecord], None]] = (),
             watchers: Sequence[RunWatcher] = ()) -> RunResult:
    """Run ``spec`` and write its results folder (``spec.output.output``, default
    ``results/<time>-<benchmark>-<scenario>``). Raises BadInputError (ConfigError,
    DatasetError, TargetError) naming the fix on bad input."""
    layered = spec.settings()
    workload = build_workload(spec.dataset, layered)
    keep_text = layered.settings.mode is Mode.ACCURACY
    api = default_api(spec.target.api, spec.dataset, layered.preset.name)
    sut, _ = suts.from_spec(spec, layered, api=api, keep_text=keep_text)
    ld = spec.load
    driver = None
    if ld.distributed or ld.ray_address:
        from tokenmark.api.scale import distributed_driver

        driver = distributed_driver(ld.distributed, ld.ray_address, ld.ray_workers)
    encode = None
    if keep_text and spec.dataset.tokenizer not in ("builtin", "server"):
        from tokenmark.sources.hf_tokenizer import load_hf_tokenizer

        encode = load_hf_tokenizer(spec.dataset.tokenizer).encode
    trace = None
    if workload.trace_offsets_ns is not None and workload.trace_samples is not None:
        trace = (workload.trace_offsets_ns, workload.trace_samples)
    out = spec.output.output or Path("results") / (
        f"{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}-{layered.preset.name}-"
        f"{layered.settings.scenario.value}")
    return run_benchmark(layered, workload.dataset, sut, out, virtual_time=ld.virtual_time,
                         record_consumers=record_consumers, trace=trace, encode=encode,
                         driver=driver, watchers=watchers)
