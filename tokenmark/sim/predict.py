"""The one prediction path: what a system delivers in an MLPerf scenario.

``tokenmark simulate`` (which deployment it runs), ``simulate --scaling``, the
calibration and its forward evaluation all predict through :func:`predict`, so the same
system gets the same figure whichever asks:

1. the planner's candidates (:func:`~tokenmark.sim.plan.candidates`: precision, tensor /
   attention-data / expert parallelism, speculative decoding, replicas);
2. **Offline** throughput of a candidate: one replica's Offline run in its place in the
   topology, recorded once without parameters (:func:`offline_trace`: every request
   queued at once, as many as ``OFFLINE_SECONDS`` of work at the replica's saturated
   rate under a nominal efficiency, the size LoadGen gives an Offline run:
   :func:`trace_requests`), timed under the Offline efficiency exactly
   (:class:`~tokenmark.sim.fit.OfflineTrace`), times the replicas. The scenario's
   prediction is the best candidate;
3. **Server / Interactive**: the highest Poisson rate within the benchmark's p99
   limits (:func:`~tokenmark.sim.search.max_server_rate`) under the scenario's
   efficiency, found coarsely (10%) for every candidate that can win (:func:`screen`)
   and to 2% for the best, times the
   tokens (or samples) per request, and never above the **same deployment's Offline
   throughput** under the Offline efficiency (a Server run cannot deliver more than the
   system does with every query queued at once; published Server results are at most the
   Offline ones for 96% of the systems with both), which itself is at most the system's
   Offline prediction. A prefill/decode-disaggregated candidate's Offline is that of the
   same replicas aggregated (:func:`offline_trace`);
4. **LoadGen's completed figure** (Server / Interactive): LoadGen reports the tokens
   (or samples) of a Server run over its issue span ``T`` *plus* the latency of the last
   query issued (``final_query_all_samples_done_time``), so the figure is the offered
   rate times ``T / (T + L)`` for one draw ``L`` of the run's latencies. The prediction
   is the offered rate (3.) times its expected value, ``E[T / (T + L)]``, over the
   latencies of the searched rate (:func:`~tokenmark.sim.search.completed_share`), with
   ``T`` the span the run's ``min_duration`` and ``min_query_count`` give it:
   :data:`SERVER_SECONDS` for published results. Llama's requests live seconds (a share
   of ~0.99), DeepSeek-R1's minutes (0.90-0.93 at 1,200 s on 8-GPU nodes, ~0.96 on NVL72
   racks, whose simulated answers decode faster): it is why a Server
   result of a long-answer benchmark stays below its Offline one even where its latency
   limits leave room up to the Offline throughput.

Traces are kept per deployment and workload for the life of the process.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from tokenmark.mlperf.settings import LatencyLimits
from tokenmark.perfmodel import (
    Deployment,
    Efficiency,
    ReplicaEngine,
    find_accelerator,
    find_model,
)
from tokenmark.sim.fit import OfflineTrace, predict_rate
from tokenmark.sim.params import efficiency_for
from tokenmark.sim.plan import ClusterSpec, Plan, candidates, widened
from tokenmark.sim.search import (
    ServerPoint,
    completed_share,
    loadgen_run_seconds,
    max_server_rate,
    replica_saturated_rate,
)

__all__ = ["MIN_QUERIES", "OFFLINE_SECONDS", "SERVER_SECONDS", "SIZING", "UNIT", "Prediction",
           "calibrated", "deployment_key", "offline_rate", "offline_trace", "predict",
           "saturated_rate", "screen", "server_rate", "trace_requests", "workload_key"]

#: Parameters used only to size the Offline traces (never for a prediction).
SIZING = Efficiency(mfu=0.5, mbu=0.75, step_overhead_ns=1_500_000, seq_overhead_ns=2_000)
UNIT = Efficiency(mfu=1.0, mbu=1.0, step_overhead_ns=0, seq_overhead_ns=0, source="trace")
#: How long an Offline run lasts as submitters size it (``min_duration``): the rules ask
#: 600 s at least; the runs published are longer: NVIDIA's DeepSeek-R1 runs 2,000 s
#: (v5.1 GB300 NVL72: 396,000 samples in 3,472 s; v6.0 GB300 x288: 3,071,600 samples in
#: 4,621 s; ``user.conf`` ``*.Offline.min_duration = 2000000``), AMD's llama2-70b 1,200 s
#: (87 x MI355X) and 3,600 s (8 x MI355X, AMD's and Dell's): LoadGen summaries of v5.1 and
#: v6.0 in ``../shared/data/mlperf/samples``. The longer the run, the smaller the share of
#: its drain (the last, longest answers decoding alone).
OFFLINE_SECONDS = 2000.0
#: How long a Server or Interactive run issues queries as submitters size it (LoadGen's
#: issue span ``T``, from ``min_duration`` and ``min_query_count``), which sets the
#: share of the offered rate its last query leaves in the result (module docstring, 4.):
#: the rules ask 600 s at least; the runs whose LoadGen logs ``../shared/data/mlperf/
#: samples`` holds (v4.1-v6.0) span 667 s (AMD v4.1 8 x MI300X llama2-70b Server),
#: 1,158 s (NVIDIA v6.0 GB300 x4 Qwen3-VL Server: ``min_query_count`` = the dataset's
#: 48,289), 1,204 s (AMD v6.0 87 x MI355X llama2-70b Interactive: ``min_duration``
#: 1,200 s) and 2,450 s (NVIDIA v6.0 GB300 x288 DeepSeek-R1 Server: 1,053,120 queries at
#: 430/s). This is their median.
SERVER_SECONDS = 1200.0
#: mlperf.conf's ``min_query_count`` for the LLM Server and Interactive scenarios.
MIN_QUERIES = 100
#: An Offline trace holds at least the dataset's worth of requests per system, at most this
#: or four times the replica's sequence cap (what its saturated rate is measured on).
MAX_TRACE_REQUESTS = 60000
DATASET_SAMPLES = 8192
#: Server searches: every candidate to this relative tolerance, the best one to the next.
SCREEN_TOL = 0.1
FINAL_TOL = 0.02
#: A run's mean answer may exceed the dataset's by this factor (a sample of requests):
#: the room :func:`screen` leaves when it bounds a candidate's tokens per second.
UNIT_MARGIN = 1.25

_TRACES: dict[tuple[Any, ...], OfflineTrace] = {}


def deployment_key(d: Deployment) -> tuple[Any, ...]:
    """What makes two deployments step alike (efficiency aside)."""
    t = d.topo
    p = d.policy
    return (d.accelerator.short, d.model.name, d.precision.value, d.kv_dtype.value, d.tp,
            d.dp, d.pp, d.ep, d.spec_tokens, d.replicas, t.nodes, t.per_node, t.domain,
            t.scale_out_gb_s, p.max_num_seqs, p.max_batched_tokens,
            p.gpu_memory_utilization, p.beams, p.prefill_replicas, p.adp_balance_steps)


def workload_key(inputs: np.ndarray, outputs: np.ndarray,
                 encoder: np.ndarray | None = None) -> str:
    h = hashlib.sha256(np.ascontiguousarray(inputs, dtype=np.int64).tobytes())
    h.update(np.ascontiguousarray(outputs, dtype=np.int64).tobytes())
    if encoder is not None:
        h.update(np.ascontiguousarray(encoder, dtype=np.float64).tobytes())
    return h.hexdigest()[:16]


def trace_requests(d: Deployment, inputs: np.ndarray, outputs: np.ndarray,
                   encoder: np.ndarray | None = None) -> int:
    """Requests one replica of ``d`` gets in an Offline run, as LoadGen sizes it:
    ``samples_per_query = max(dataset, 1.1 x min_duration x offline_expected_qps)``
    (``loadgen/test_settings_internal.cc``; a run that ends before ``min_duration`` is
    invalid, so submitters set the expected rate at least at what the system sustains),
    shared over the replicas, with ``min_duration`` = :data:`OFFLINE_SECONDS`. The
    expected rate is the replica's *saturated* rate at the sizing efficiency
    (:func:`~tokenmark.sim.search.replica_saturated_rate`: the steady rate with a queue
    behind a full batch), not the rate of a short run of 1,500 requests queued at once,
    which its drain (the longest answers decoding alone) holds far below the steady rate
    where a replica's batch is thousands of sequences (DeepSeek-R1 on an attention
    data-parallel GB300 replica of 8: 6.4 requests/s against a steady 28). Sized by that
    short run a trace held 8,192 / replicas requests, so one replica of an NVL72 rack (9
    of them) ran a shorter, drain-dominated run than the same replica alone on 8 GPUs and
    came out 26% slower (54,464 against 73,339 tokens/s under the same parameters). At
    most ``MAX_TRACE_REQUESTS``, or four times the replica's sequence cap where that is
    more (a batch of 73,728 on a dp72 rack: the requests its saturated rate is measured
    on)."""
    sizing = replace(d, efficiency=SIZING)
    rate = replica_saturated_rate(sizing, inputs, outputs, encoder=encoder)
    cap = max(MAX_TRACE_REQUESTS, 4 * d.policy.max_num_seqs)
    return int(min(cap, max(DATASET_SAMPLES / d.replicas, 1.1 * OFFLINE_SECONDS * rate, 500)))


def offline_trace(d: Deployment, inputs: np.ndarray, outputs: np.ndarray, *,
                  samples: bool = False, seed: int = 7,
                  encoder: np.ndarray | None = None) -> OfflineTrace:
    """The parameter-free Offline run of one replica of ``d`` in its place: about
    ``OFFLINE_SECONDS`` of work at the sizing efficiency (at least the dataset's
    ``DATASET_SAMPLES`` requests spread over the replicas), each step's compute and
    memory time at 100% efficiency, communication and sequences. ``samples``: its units
    are requests, else output tokens (of the answer: one beam's with beam search);
    ``encoder``: each sample's vision-encoder FLOPs.
    Kept per deployment and workload. A prefill/decode-disaggregated deployment's is its
    replicas' aggregated run (:meth:`~tokenmark.perfmodel.Deployment.aggregated`): what
    the same accelerators complete with every query queued at once."""
    d = d.aggregated()
    key = (deployment_key(d), workload_key(inputs, outputs, encoder), samples, seed)
    got = _TRACES.get(key)
    if got is not None:
        return got
    n = trace_requests(d, inputs, outputs, encoder)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, inputs.shape[0], size=n)
    eng = ReplicaEngine(replace(d.single_replica(), efficiency=UNIT))
    for i, k in enumerate(idx.tolist()):
        eng.submit(i, int(inputs[k]), int(outputs[k]),
                   encoder_flops=float(encoder[k]) if encoder is not None else 0.0)
    c0: list[float] = []
    m0: list[float] = []
    a0: list[float] = []
    k0: list[float] = []
    cm: list[float] = []
    sq: list[int] = []
    while eng.has_work:
        o = eng.advance()
        c = o.plan.cost
        c0.append(c.compute_ns)
        m0.append(c.memory_ns)
        a0.append(c.compute_ns * c.attn_flop_share)
        k0.append(c.memory_ns * c.kv_byte_share)
        cm.append(c.comm_ns)
        sq.append(eng.cost.group_seqs(o.plan.batch))  # what seq_overhead is charged for
    # every request runs to its end: its answer's tokens (with beam search, GPT-J's 4
    # beams, the engine makes width x them; MLPerf counts the answer's)
    units = float(n) if samples else float(outputs[idx].sum())
    trace = OfflineTrace(np.asarray(c0, np.float64), np.asarray(m0, np.float64),
                         np.asarray(cm, np.float64), np.asarray(sq, np.float64), units,
                         d.replicas, d.model.hidden, np.asarray(a0, np.float64),
                         np.asarray(k0, np.float64), fp4=d.fp4_matmuls)
    _TRACES[key] = trace
    return trace


def offline_rate(d: Deployment, inputs: np.ndarray, outputs: np.ndarray, eff: Efficiency,
                 *, samples: bool = False, encoder: np.ndarray | None = None) -> float:
    """The system's Offline units per second with deployment ``d`` under ``eff``."""
    return predict_rate(offline_trace(d, inputs, outputs, samples=samples, encoder=encoder),
                        eff)


def server_rate(d: Deployment, inputs: np.ndarray, outputs: np.ndarray,
                limits: LatencyLimits, eff: Efficiency, *, samples: bool = False,
                requests: int = 1500, rel_tol: float = FINAL_TOL,
                encoder: np.ndarray | None = None,
                saturated: float | None = None,
                min_duration_s: float = SERVER_SECONDS,
                min_queries: int = MIN_QUERIES) -> tuple[float, bool]:
    """The units per second LoadGen reports for the system at the highest rate within
    ``limits`` under ``eff`` (unbounded; the offered rate times its expected completed
    share in a run of ``min_duration_s`` and ``min_queries``: module docstring, 4.), and
    whether any rate passes. ``saturated``: the deployment's saturated rate under ``eff``
    when known (:func:`saturated_rate`)."""
    value, ok, best = _server_point(d, inputs, outputs, limits, eff, samples=samples,
                                    requests=requests, rel_tol=rel_tol, encoder=encoder,
                                    saturated=saturated)
    return value * completed_share(best.e2e_ns, best.qps, min_duration_s, min_queries), ok


def _server_point(d: Deployment, inputs: np.ndarray, outputs: np.ndarray,
                  limits: LatencyLimits, eff: Efficiency, *, samples: bool, requests: int,
                  rel_tol: float, encoder: np.ndarray | None,
                  saturated: float | None = None) -> tuple[float, bool, ServerPoint]:
    """The offered units per second at the highest rate within ``limits`` (0 when none
    passes), whether one passes, and the search's point there (its rate and latencies)."""
    best = max_server_rate(replace(d, efficiency=eff), inputs, outputs, limits,
                           requests=requests, rel_tol=rel_tol, encoder=encoder,
                           saturated=saturated)
    if not best.passed:
        return 0.0, False, best
    return (best.qps if samples else best.qps * best.tokens_per_request), True, best


def saturated_rate(d: Deployment, inputs: np.ndarray, outputs: np.ndarray,
                   eff: Efficiency, encoder: np.ndarray | None = None) -> float:
    """Requests per second the whole deployment completes saturated under ``eff``
    (:func:`~tokenmark.sim.search.replica_saturated_rate`): no rate within any limit
    reaches it."""
    return replica_saturated_rate(replace(d, efficiency=eff), inputs, outputs,
                                  encoder=encoder) * d.replicas


def screen(deps: list[Deployment], inputs: np.ndarray, outputs: np.ndarray,
           limits: LatencyLimits, eff: Efficiency, *, samples: bool = False,
           requests: int = 1500, encoder: np.ndarray | None = None,
           min_duration_s: float = SERVER_SECONDS,
           min_queries: int = MIN_QUERIES) -> list[float]:
    """Each candidate's units per second within ``limits`` to ``SCREEN_TOL``, NaN for
    one not searched because it cannot win: the candidates are searched from the
    highest saturated rate down (:func:`saturated_rate`, the search's own upper
    bracket), and one whose saturated rate, in units with ``UNIT_MARGIN`` for the
    answers' lengths, is below the best value found is left out (no rate it passes
    can exceed it). The best candidate is the same as searching all of them."""
    sat = [saturated_rate(d, inputs, outputs, eff, encoder) for d in deps]
    per = 1.0 if samples else float(outputs.mean()) * UNIT_MARGIN
    vals = [math.nan] * len(deps)
    best = 0.0
    for k in sorted(range(len(deps)), key=lambda i: -sat[i]):
        if sat[k] * per < best:
            continue
        vals[k], _ = server_rate(deps[k], inputs, outputs, limits, eff, samples=samples,
                                 requests=requests, rel_tol=SCREEN_TOL, encoder=encoder,
                                 saturated=sat[k], min_duration_s=min_duration_s,
                                 min_queries=min_queries)
        best = max(best, vals[k])
    return vals


def calibrated(spec: ClusterSpec, scenario: str) -> tuple[Efficiency, Efficiency]:
    """The Offline parameters and ``scenario``'s for ``spec`` (its explicit
    efficiency for both when it gives one), from ``data/efficiency.csv``."""
    if spec.efficiency is not None:
        return spec.efficiency, spec.efficiency
    acc = find_accelerator(spec.accelerator)
    model = find_model(spec.model).name
    return (efficiency_for(acc, spec.stack, spec.software_round, "Offline", model=model),
            efficiency_for(acc, spec.stack, spec.software_round, scenario, model=model))


@dataclass(frozen=True)
class Prediction:
    """A system's predicted result in one scenario (units per second: tokens, or
    samples for samples-based benchmarks) and how it was reached."""

    value: float
    plan: Plan
    binding: str  # "Offline", "latency limits", "Offline throughput (saturated)", ...
    offline_bound: float  # the chosen deployment's Offline throughput (latency scenarios)
    tried: tuple[tuple[str, float], ...]  # every candidate's label and (screened) value
    #: latency scenarios: the offered units per second within the limits, unbounded
    unbounded: float = math.nan
    #: latency scenarios: the Poisson rate (queries per second) offered (the searched
    #: rate, scaled down where the Offline bound caps it)
    qps: float = math.nan
    #: latency scenarios: the expected share of the offered rate LoadGen reports
    #: (``value`` = offered x it: module docstring, 4.), and the issue span it is for
    completed: float = 1.0
    run_s: float = math.nan
    #: latency scenarios: the measured requests' end-to-end latencies (ns) at the
    #: searched rate, which the completed share is taken over
    latency_ns: np.ndarray | None = field(default=None, compare=False, repr=False)

    @property
    def offered(self) -> float:
        """The offered units per second (latency scenarios; ``value`` for Offline)."""
        return self.value / self.completed if self.completed > 0 else self.value


def predict(spec: ClusterSpec, scenario: str, inputs: np.ndarray, outputs: np.ndarray, *,
            offline_eff: Efficiency, latency_eff: Efficiency | None = None,
            limits: LatencyLimits | None = None, samples: bool = False,
            requests: int = 1500, plans: list[Plan] | None = None,
            encoder: np.ndarray | None = None, min_duration_s: float = SERVER_SECONDS,
            min_queries: int = MIN_QUERIES) -> Prediction:
    """What ``spec`` delivers in ``scenario`` (module docstring). ``offline_eff`` and
    ``latency_eff`` are the calibrated parameters of the Offline rows and of the
    scenario; ``plans`` the candidates when already made; ``encoder`` each sample's
    vision-encoder FLOPs (vision-language models); ``min_duration_s`` and
    ``min_queries`` the Server run's LoadGen settings (its issue span)."""
    plans = plans or candidates(spec, float(inputs.mean()), float(outputs.mean()), scenario)
    if scenario == "Offline" or limits is None:
        tried = [(p.deployment.label, offline_rate(p.deployment, inputs, outputs, offline_eff,
                                                   samples=samples, encoder=encoder))
                 for p in plans]
        k = int(np.argmax([v for _, v in tried]))
        return Prediction(tried[k][1], plans[k], "Offline", tried[k][1], tuple(tried))
    eff = latency_eff or offline_eff
    vals = screen([p.deployment for p in plans], inputs, outputs, limits, eff,
                  samples=samples, requests=requests, encoder=encoder,
                  min_duration_s=min_duration_s, min_queries=min_queries)
    screened = [(p.deployment.label, v) for p, v in zip(plans, vals, strict=True)]
    k = int(np.nanargmax(vals))
    plan = plans[k]
    d = plan.deployment
    value, ok, pt = _server_point(d, inputs, outputs, limits, eff, samples=samples,
                                  requests=requests, rel_tol=FINAL_TOL, encoder=encoder)
    bound = offline_rate(d, inputs, outputs, offline_eff, samples=samples, encoder=encoder)
    if not ok:  # widen the widest dense replica (plan.widened) until one meets them
        widest = max(plans, key=lambda q: q.deployment.tp)
        for w in widened(widest, spec):
            v, ok, wpt = _server_point(w.deployment, inputs, outputs, limits, eff,
                                       samples=samples, requests=requests, rel_tol=FINAL_TOL,
                                       encoder=encoder)
            screened.append((w.deployment.label,
                             v * completed_share(wpt.e2e_ns, wpt.qps, min_duration_s,
                                                 min_queries)))
            if ok:
                plan, d, value, pt = w, w.deployment, v, wpt
                bound = offline_rate(d, inputs, outputs, offline_eff, samples=samples,
                                     encoder=encoder)
                break
    if not ok:
        return Prediction(0.0, plan, "fails the limits at any rate", bound, tuple(screened),
                          0.0)
    binding, offered, qps = "latency limits", value, pt.qps
    if value > bound:
        binding, offered, qps = "Offline throughput (saturated)", bound, pt.qps * bound / value
    share = completed_share(pt.e2e_ns, qps, min_duration_s, min_queries)
    return Prediction(offered * share, plan, binding, bound, tuple(screened), value, qps,
                      share, loadgen_run_seconds(qps, min_duration_s, min_queries), pt.e2e_ns)
