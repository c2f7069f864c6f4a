"""A simulated benchmark: schedule -> simulated cluster -> the same metrics and rules.

:func:`run_simulation` builds the schedule exactly as a real run does
(:func:`~tokenmark.mlperf.scenarios.build_schedule`), plays it against the cluster with the
simulator's own driver, turns the per-request columns into the metrics' own
:class:`~tokenmark.metrics.summary.RunData` (what the accumulator would have built from
records) and judges it with :func:`~tokenmark.mlperf.rules.evaluate`, so the summary and both
verdicts mean exactly what they mean for a real run. Writing the results folder is the
entry point's job (:mod:`tokenmark.api.simulation`).

Differences from a real run, by construction: the send lag is zero (a virtual client
is never late) and the inter-token latency comes from the engines' step times
(:func:`~tokenmark.sim.explain.itl_column`) rather than from streamed chunks.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np

from tokenmark.dataset import Dataset, SyntheticDataset
from tokenmark.metrics.summary import RunData, Summary, summarize
from tokenmark.mlperf.rules import ClientStats, Verdicts, evaluate
from tokenmark.mlperf.scenarios import Schedule, ScheduleKind, build_schedule
from tokenmark.mlperf.settings import EffectiveSettings
from tokenmark.perfmodel.hardware import find_model
from tokenmark.perfmodel.outputs import OutputPlanner, output_model
from tokenmark.perfmodel.vision import chat_images, vision_encoder
from tokenmark.records import ErrorClass
from tokenmark.sim.cluster import Cluster
from tokenmark.sim.driver import SimResult, simulate
from tokenmark.sim.explain import explain, itl_column, with_verdict
from tokenmark.sim.workloads import image_arrays

__all__ = ["SimulatedRun", "dataset_lengths", "file_requests", "request_arrays", "run_data",
           "run_simulation"]


@dataclass
class SimulatedRun:
    settings: EffectiveSettings
    schedule: Schedule
    result: SimResult
    summary: Summary
    verdicts: Verdicts
    explanation: dict[str, Any]
    order: np.ndarray  # row order of the result by completion (the records' order)


def dataset_lengths(dataset: Dataset) -> tuple[np.ndarray, np.ndarray]:
    """Each sample's input and output token counts (arrays when the dataset has them)."""
    inp = getattr(dataset, "input_token_counts", None)
    out = getattr(dataset, "output_token_counts", None)
    if isinstance(inp, np.ndarray) and isinstance(out, np.ndarray):
        return inp.astype(np.int64), out.astype(np.int64)
    n = len(dataset)
    a = np.empty(n, dtype=np.int64)
    b = np.empty(n, dtype=np.int64)
    for i in range(n):
        s = dataset.sample(i)
        a[i] = s.input_tokens
        b[i] = s.output_tokens
    return a, b


def request_arrays(dataset: Dataset, benchmark: str
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Each sample's prompt tokens, output tokens and vision-encoder FLOPs (None for a
    text-only benchmark): a vision-language benchmark's synthetic samples carry its
    images' tokens and encoder work (:func:`~tokenmark.sim.workloads.image_arrays`) on top
    of their drawn text; a dataset file's samples are read as the emulated server reads
    them (:func:`file_requests`)."""
    if not isinstance(dataset, SyntheticDataset):
        return file_requests(dataset, benchmark)
    inp, out = dataset_lengths(dataset)
    images = image_arrays(benchmark, inp.shape[0])
    if images is None:
        return inp, out, None
    return inp + images[0], out, images[1]


def file_requests(dataset: Dataset, benchmark: str
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """A dataset file's samples as the emulated server takes them, by the same rules
    (:class:`~tokenmark.adapters.emulated_sut.EmulatedSUT`): each chat's images add
    their tokens and encoder FLOPs (:func:`~tokenmark.perfmodel.vision.chat_images`),
    and the answer's length is planned by the model's
    :class:`~tokenmark.perfmodel.outputs.OutputPlanner` (the sample's reference answer
    length when the file has one, else its output tokens)."""
    n = len(dataset)
    inp = np.empty(n, dtype=np.int64)
    out = np.empty(n, dtype=np.int64)
    enc = np.zeros(n, dtype=np.float64)
    planner = OutputPlanner(output_model(benchmark))
    for i in range(n):
        s = dataset.sample(i)
        tokens, flops = 0, 0.0
        if s.images and s.is_chat and s.messages is not None:
            model = find_model(benchmark)
            tokens, flops, _ = chat_images(vision_encoder(model), s.messages, model.name)
        inp[i] = max(1, s.input_tokens) + tokens
        enc[i] = flops
        out[i] = planner.plan("", max(1, s.output_tokens),
                              reference=s.expected_output_tokens).total
    return inp, out, (enc if enc.any() else None)


def run_data(r: SimResult, schedule: Schedule, cluster: Cluster) -> tuple[RunData, np.ndarray]:
    """The metrics' columns of a simulated run, in completion order (as records would
    arrive), and that order."""
    sent = np.nonzero(r.issued >= 0)[0]
    order = sent[np.argsort(r.done[sent], kind="stable")]
    sched = r.scheduled[order]
    measured = sched >= schedule.warmup_end_ns
    if schedule.cooldown_start_ns >= 0:
        measured &= sched <= schedule.cooldown_start_ns
    rejected = r.rejected[order]
    ok = (r.done[order] >= 0) & ~rejected
    errors: Counter[str] = Counter()
    if rejected.any():
        errors[ErrorClass.SUT_ERROR.value] = int(rejected.sum())
    unanswered = int(((r.done[order] < 0) & ~rejected).sum())
    if unanswered:
        errors[ErrorClass.UNANSWERED.value] = unanswered
    first = r.first[order]
    data = RunData(
        seq=order.astype(np.int64),
        query_id=r.query_id[order],
        scheduled=sched,
        issued=r.issued[order],
        first=first,
        done=r.done[order],
        output_tokens=np.where(ok, r.output_tokens[order], 0),
        input_tokens=r.input_tokens[order],
        ok=ok,
        measured=measured,
        itl=itl_column(cluster.engines),
        errors=errors,
        token_disagreements=0,
        scheduled_total=r.scheduled_total,
        first_answer=first.copy(),
        reasoning_tokens=np.full(order.shape[0], -1, dtype=np.int64),
    )
    return data, order


def run_simulation(eff: EffectiveSettings, dataset: Dataset, cluster: Cluster) -> SimulatedRun:
    """Simulate one benchmark run of ``eff`` over ``dataset`` on ``cluster``."""
    schedule = build_schedule(eff, len(dataset))
    inp, out, enc = request_arrays(dataset, eff.requested.benchmark)
    result = simulate(schedule, inp, out, cluster, max_concurrency=eff.max_concurrency,
                      encoder_by_sample=enc)
    data, order = run_data(result, schedule, cluster)
    summary = summarize(data, eff)
    n_queries = int(np.unique(result.query_id).shape[0]) if len(result) else 0
    gaps = max(0, n_queries - max(1, schedule.streams))
    client = ClientStats(issue_span_ns=result.issue_span_ns, closed_gap_p99_ns=0,
                         closed_gap_count=gaps if schedule.kind is ScheduleKind.CLOSED else 0)
    verdicts = evaluate(summary, eff, client)
    why = explain(cluster.engines, result.first, result.scheduled, result.issued,
                  result.admitted, (result.done >= 0) & ~result.rejected, done=result.done)
    why = with_verdict(why, [(f.rule, f.observed, f.required)
                             for f in verdicts.mlperf.failed])
    return SimulatedRun(eff, schedule, result, summary, verdicts, why, order)
