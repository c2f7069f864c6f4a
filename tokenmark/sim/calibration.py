"""Calibration against published MLPerf results, judged forward in time.

**The protocol** (:func:`forward_evaluation`): for each round R (``v5.1``, ``v6.0``,
``v6.1``) the parameters are fitted on the rows of the rounds before R only, and every
row of R the simulator can represent is predicted with them, through the one prediction
path (:func:`~tokenmark.sim.predict.predict`: the planner's candidates searched, Server
and Interactive bounded by the same deployment's Offline). The parameters shipped in
``data/efficiency.csv`` are the last step's fit (every round before the newest, v6.0
and earlier), so what users get is what was scored.

**What is fitted** - never one parameter per result or per system:

- *stage 1*: ``mfu``, step overhead, per-sequence overhead (the overheads only where
  the group's rows hold models of different sizes, below) and a first ``mbu`` per
  group (:func:`~tokenmark.sim.fit.fit_efficiency`; and the FP4 path's own ``fp4_mfu``
  where the group's rows can tell it, below), on the **Offline** rows only: an
  Offline run's steps do not depend on the parameters, so each candidate deployment's
  run is recorded once without parameters (:func:`~tokenmark.sim.predict.offline_trace`)
  and its throughput under any parameters is exact and cheap; a row's prediction is
  its best candidate's, as the planner chooses. One **global** size exponent (compute
  efficiency scales with ``(hidden / 8192) ** exponent``) is chosen by grid search;
- *stage 2*, the latency scenarios, on the latency rows (at most
  ``LATENCY_ROWS_PER_GROUP`` systems per architecture and scenario, the newest rounds
  first), each **inverted**: the parameter at which its simulated result (on the
  candidate the planner picks at a nominal value) equals the published one (secant
  search in log space). What differs physically between Offline and a latency
  scenario at one deployment is, first, the batches the latency limits allow - the
  simulator finds them itself (its latency search keeps the highest rate whose TTFT and
  TPOT fit) - and second, what serving costs on top of the kernels, which differs by
  scenario:

  - **Server**'s batches are near Offline's, so its steps run Offline's kernels; what
    it adds is serving overhead - scheduling arrivals, chunked prefill interfering with
    the decodes, the router - which slows a step as a whole, not its memory traffic
    alone. So Server takes one **Server speed**: every step's compute, memory and
    overhead time over it (:meth:`~tokenmark.perfmodel.Efficiency.at_speed`; the
    links' time is not the kernels'), the serial fraction stage 1's. A Server row
    whose system published the same benchmark Offline in the same round is inverted
    for the speed relative to its Offline parameters at its model's level *and* at
    that system's Offline residual (:meth:`Fit.offline_residual`), so that it holds
    what differs between the scenarios on one deployment, not the Offline fit's error
    on that system. The speed belongs to the serving stack and its scheduler rather
    than the chip, so it is fitted per **vendor** (then over everything): the median
    of the rows' log speeds, at most 1. (Inverting the bandwidth efficiency instead,
    as before, charged every Server shortfall to memory time: Blackwell Ultra's Server
    ``mbu`` came out 0.21 against 0.79 Offline, which a memory-bound model paid in
    full. Per architecture, the speed is no better: Blackwell Ultra's two systems
    before v6.0 gave 0.29, and its v6.0 Server rows came out -70%.)
  - **Interactive**'s limits cut batches to a few sequences per step, whose
    weight-reading kernels reach a bandwidth of their own, so Interactive takes the
    bandwidth efficiency ``mbu`` and the ``serial_fraction`` (how much of the shorter
    of a step's compute and memory time is not overlapped), which Offline's
    compute-bound steps hardly show: per serial fraction of ``SERIALS``, each row's
    ``mbu`` (at the nominal pair ``NOMINAL``); every group takes one serial fraction,
    chosen over all the training Interactive rows (how much of a step's shorter kernel
    side is not hidden is a property of how decoding kernels are written; chosen per
    group on two to four systems it flipped on noise: ``Fit._one_serial``): the one
    under which the most systems' rows are reproduced, then under which each
    architecture's rows agree best (the smallest median absolute deviation of
    ``log mbu``), and a group takes the median ``mbu`` under it (an inversion that
    ends clamped at an end of ``MBU_BOUNDS`` did not reach the published result - a
    compute-bound step hardly moves with ``mbu`` - and is left out; a group needs rows
    of ``MIN_SYSTEMS`` systems found, else it takes the next level's), per
    (architecture, stack, round) as stage 1 (a
    group without Interactive rows of its own takes every latency row's, Server's
    included).

  The rest of a latency row's parameters are its group's stage-1 values at its
  model's level.

**Model levels**: a group's parameters hold all its models, but a model new to an
architecture and stack runs on less mature kernels than the models the stack has been
tuned for (the fit on the rounds up to v6.0 puts gpt-oss-120b on TensorRT-LLM in v6.0,
its first round, at 0.50x its groups; Qwen3-VL, whose image sizes are assumed, at 1.58x). Each
(model, stack, round) with Offline rows in the training set gets a *level*, the log of
how many times as fast as its group's parameters say its rows run
(:meth:`~tokenmark.perfmodel.Efficiency.at_speed`: compute and bandwidth efficiency
times the speed, the fixed overheads over it; the links' time is not the kernels'), by
backfitting: the sum of its rows' log residuals against their groups over the row count
plus ``LEVEL_SHRINK`` (shrunk toward the group), the groups refitted on the results
over the speeds, ``LEVEL_ITERS`` times. A row takes its model's level of the newest
training round up to its own on its stack (else on any stack); a model the training set
never saw takes the **new-model prior**: the median level of the training set's models
in their first round (those that debuted after its first round), so what a new model's
kernels cost is fitted on earlier debuts, never set per model or row. Stage 2's
``mbu`` inversions are divided by their row's speed, so a latency group's ``mbu`` is
the group's too; its Server speeds are made at the row's level. Levels are per model,
stack and round - never per system or row.

**Debut rounds fit levels, not groups**: a model's debut round (its first round in the
training set, when that is not the set's first round) says how mature that model's
software is, not how fast the hardware is. So a group's physical parameters (``mfu``,
``mbu``, the overheads, and the size exponent) are fitted on the rows of models past
their debut round, and a debut model's level is then fitted against those groups, which
its rows do not enter. Fitted together (before), the two are confounded: a level is
shrunk toward its group, so a debut model far below it (DeepSeek-R1 in v5.1, its steps
nearly all memory-bound) pulled its groups down with it - in the v6.0 step Blackwell's
v5.1 ``mbu`` 0.42 (0.74 without those rows) and Blackwell Ultra's ``mfu`` 0.23 on two
systems, both DeepSeek-R1's, which every other model on those parts paid. An
architecture is *anchored* when its rows of models past their debut come from at least
``MIN_SYSTEMS`` systems; every level is measured on the anchored architectures' rows (on
all its rows where it has none there), and an architecture that is not anchored
(Blackwell Ultra and Xe2 before v6.0: one such system each) fits its groups on all its
rows, each at its model's level measured elsewhere (DeepSeek-R1's on Blackwell), rather
than borrowing a generation's parameters its hardware does not share (Blackwell's
``mfu`` on Blackwell Ultra's 1.5x FP4 peak puts its one mature row, Llama-3.1-405B on
72 GB300s, 1.43x too high). Where a group's mature rows hardly bind ``mbu``, it stays
near the prior's centre (``tokenmark.sim.fit.PRIOR``) instead of following one debut
model: Blackwell v5.1's rows (Llama-2-70B's steps mostly compute-bound) have a
root-mean-square log error of 0.096-0.103 at any ``mbu`` from 0.3 to 0.9, so only
DeepSeek-R1's rows, co-fitted with its level, had set it.

**Overheads need two model sizes**: a decode step's time per sequence is the compute of
one token over ``mfu`` plus the per-sequence overhead, and a step's its weight reads or
compute plus the step overhead; on the rows of one model both grow with the batch
together, so any overhead is matched by an ``mfu`` that gives the same times, and what
picks one is whatever else differs between the rows - on CDNA 4 in the v6.1 step, whose
v6.0 group holds Llama-2-70B alone, FP4 running far less than twice as fast as FP8,
which the fit put into a per-sequence overhead of 38 us (CDNA 3: 2 us; ``mfu`` 0.65; on
its 19 FP4 rows alone 2.1 us and ``mfu`` 0.31), and the 8B model and 5.7B-active MoE
that a 70B model's overhead was charged to came out 0.55-0.69x of published. Across
models whose compute per token differs, the overhead is what does not scale with it. So
a group fits its step and per-sequence overheads only where its rows (those it is fitted
on, above) hold models whose active parameters differ at least ``OVERHEAD_SPAN`` (2)
times (:func:`spans_sizes`: Llama-3.1-8B with Llama-2-70B does; gpt-oss-120b, 5.7B
active, with Llama-3.1-8B does not: with per-token times ``c / mfu + o`` and ``r c / mfu
+ o`` the overhead is ``(r t1 - t2) / (r - 1)``, so an error ``e`` in each row's time
per token moves it by up to ``(r + 1) / (r - 1) e``, three times at ``r = 2``, without
bound as ``r`` nears 1); otherwise it takes them from the next group that does -
(architecture, stack, round), then (architecture, stack), the architecture, its vendor,
everything (``Fit.overheads_from``; the source says "overheads of ...") - and fits its
``mfu`` and ``mbu`` with them (CDNA 4 in the v6.1 step: AMD's 1.60 ms and 2.59 us,
``mfu`` 0.41 before its FP4 path had its own efficiency, below). Not a prior centred
on the next group's overheads: where the rows cannot tell the two apart the prior alone
would decide, and where they seem to (CDNA 4's precisions) it is an effect of its own,
which a prior wide enough to let two model sizes speak still lets through.

**The FP4 path's own efficiency**: a part's FP4 peak is listed at twice its FP8 peak,
but its FP4 kernels need not reach as much of it: on CDNA 4, Llama-2-70B ran FP4 at
1.0-1.03x the throughput of FP8 in v6.0 (12,500 against 12,192 tokens/s an MI355X).
With one ``mfu`` for both, the v6.0 step's CDNA 4 rows came out 0.99-1.19x at FP4 and
0.55-0.65x at FP8, and the v6.1 step's fit (``mfu`` 0.41 for both, its FP4 rows alone
0.33, its FP8 rows 0.62) put every CDNA 4 row whose matmuls run at FP8 (Llama-3.1-8B,
and gpt-oss-120b, whose MXFP4 experts multiply FP8 activations) at its FP4 rows'
efficiency. So a group of one architecture whose rows hold matmuls at FP4 and at a
wider precision, each from ``MIN_SYSTEMS`` systems, fits ``fp4_mfu`` too
(:meth:`Fit._tells_fp4`; :func:`~tokenmark.sim.fit.fit_efficiency`): its FP4 rows reach
``mfu x fp4_mfu``, the others ``mfu`` (CDNA 4 in the v6.1 step: ``mfu`` 0.58, and 0.33
at FP4; RTX Blackwell: ``fp4_mfu`` 0.93-0.94). A vendor's or everything's group fits
none: over several generations the precision would stand for the part. A group without
it (one precision, or too few systems at one: the v5.1 and v6.0 steps have none) is as
before.

**Groups** go from specific to general: (architecture, stack, round) - the round
standing for the software release - where the newest round up to the row's own with
rows from at least ``MIN_SYSTEMS`` systems is taken (a round's software is at least
the last one's), then (architecture, stack), the architecture; an architecture without
a group of its own (group rows from fewer than ``MIN_SYSTEMS`` systems, as a shipped
table without its rows: a new generation, CDNA 4 before v5.1, Rubin before v6.1) takes
its vendor's most capable architecture that has one (the same software on the next
part) when its own part is at least as capable (a successor; a lesser part of a newer
line, the RTX PRO 6000 beside Blackwell Ultra, skips it), then the vendor and
everything. A row's Interactive parameters are looked for
from the group its Offline parameters come from on, as the shipped table's row for that
group holds them.

**How each row is set up** (:mod:`tokenmark.sim.plan`): the accelerator, its count
and nodes from the row (the scale-up domain the accelerator's: 72 for NVL72 parts),
the precision the row states (``weight_data_types``) or the planner's, the stack from
the row's software; the rules of the row's own round (speculative decoding from the
round that allows it; latency limits from that round's preset); request lengths from
``workloads.csv``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import pickle
from collections import defaultdict
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from tokenmark.errors import ConfigError
from tokenmark.mlperf.presets import load_round, rounds
from tokenmark.mlperf.settings import LatencyLimits, Scenario
from tokenmark.perfmodel import Deployment, Efficiency, find_accelerator
from tokenmark.sim.calibration_report import CalibrationReport, Level, RowResult
from tokenmark.sim.fit import OfflineTrace, fit_efficiency, predict_rate
from tokenmark.sim.params import EfficiencyRow, Levels, efficiency_for, level_of
from tokenmark.sim.plan import ClusterSpec, Plan, candidates, round_key
from tokenmark.sim.predict import (
    UNIT,
    offline_trace,
    predict,
    screen,
    server_rate,
)
from tokenmark.sim.published import PublishedRow
from tokenmark.sim.run import request_arrays
from tokenmark.sim.workloads import synthetic_dataset

__all__ = ["FORWARD_ROUNDS", "CalibrationReport", "Fit", "RowResult", "Setup",
           "TableParams", "forward_evaluation", "prepare"]

MIN_SYSTEMS = 2
FORWARD_ROUNDS = ("v5.1", "v6.0", "v6.1")
ALPHA_GRID = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0, 1.2)
SERIALS = (0.0, 1.0)
MBU_BOUNDS = (0.05, 1.0)
#: A group fits its own step and per-sequence overheads only where its rows hold models
#: whose active parameters differ at least this many times (module docstring).
OVERHEAD_SPAN = 2.0
#: The Server speed's search range (stage 2).
SPEED_BOUNDS = (0.05, 2.0)
#: A model level is shrunk toward its group as if it had this many more rows at zero.
LEVEL_SHRINK = 1.0
#: Backfitting rounds of the model levels and the groups.
LEVEL_ITERS = 3
#: Stage 2 inverts at most this many systems' rows per architecture and scenario.
LATENCY_ROWS_PER_GROUP = 12
#: The nominal latency pair at which an Interactive row's candidate is picked for stage 2.
NOMINAL = (0.4, 0.5)
#: The Server speed at which a Server row's candidate is picked for stage 2.
NOMINAL_SPEED = 0.7
#: GPT-J's Server limit (retired after v5.0, so absent from the presets): p99 E2E 20 s.
GPTJ_SERVER = LatencyLimits(e2e_ns=20_000_000_000)
DATASET_SAMPLES = 8192
#: Output caps of the synthetic datasets (the benchmarks' max_tokens; 20000 otherwise).
_MAX_OUT = {"llama3.1-8b": 128, "llama3.1-8b-edge": 128, "gptj-99": 128, "gptj-99.9": 128,
            "llama2-70b-99": 1024, "llama2-70b-99.9": 1024, "mixtral-8x7b": 1024,
            "gpt-oss-120b": 10000}


# -- preparing rows ---------------------------------------------------------------------


class Lengths:
    """Each benchmark's synthetic requests (8192 samples, seeded): prompt and output
    tokens, and the vision encoder's FLOPs (None for a text-only benchmark)."""

    def __init__(self) -> None:
        self._cache: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray | None]] = {}

    def get(self, bench: str) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        if bench not in self._cache:
            ds = synthetic_dataset(bench, DATASET_SAMPLES,
                                   max_output_tokens=_MAX_OUT.get(bench, 20000), seed=1)
            self._cache[bench] = request_arrays(ds, bench)
        return self._cache[bench]


def limits_for(bench: str, scenario: str, round_name: str) -> LatencyLimits | None:
    """The latency limits of ``bench`` in ``scenario`` under ``round_name``'s rules (the
    oldest packaged preset for an older round; GPT-J's retired Server limit)."""
    if scenario == "Offline":
        return None
    if bench.startswith("gptj"):
        return GPTJ_SERVER
    have = rounds()
    rnd = round_name if round_name in have else have[0]
    sc = Scenario.INTERACTIVE if scenario == "Interactive" else Scenario.SERVER
    for name in (rnd, *reversed(have)):
        b = load_round(name).benchmarks.get(bench)
        if b is not None and sc in b.scenarios:
            return b.scenarios[sc].limits
    return None


@dataclass
class Setup:
    """A published row made ready to predict."""

    row: PublishedRow
    spec: ClusterSpec
    plans: list[Plan]
    inputs: np.ndarray
    outputs: np.ndarray
    limits: LatencyLimits | None
    samples: bool  # its metric counts samples or queries, not tokens
    arch: str
    stack: str
    vendor: str
    encoder: np.ndarray | None = None  # each sample's vision-encoder FLOPs

    @property
    def key(self) -> tuple[Any, ...]:
        return (self.row.source, self.row.index)


def prepare(row: PublishedRow, lengths: Lengths) -> Setup | str:
    """``row`` as a :class:`Setup`, or why it cannot be represented."""
    assert row.accelerator is not None and row.benchmark is not None
    inp, out, enc = lengths.get(row.benchmark)
    per_node = max(1, row.per_node) * row.gpus_per_listed
    nodes = max(1, row.accelerators_used // per_node)
    if nodes * per_node != row.accelerators_used:
        per_node, nodes = row.accelerators_used, 1
    acc = find_accelerator(row.accelerator)
    spec = ClusterSpec(accelerator=row.accelerator, model=row.benchmark, nodes=nodes,
                       per_node=per_node, precision=row.precision, stack=row.stack,
                       efficiency=UNIT, rules_round=row.round)
    try:
        plans = candidates(spec, float(inp.mean()), float(out.mean()), row.scenario)
    except ConfigError as e:
        return f"does not fit as planned: {e}"
    limits = limits_for(row.benchmark, row.scenario, row.round)
    if row.scenario != "Offline" and limits is None:
        return f"no latency limits known for {row.benchmark} {row.scenario}"
    return Setup(row, spec, plans, inp, out, limits, row.metric in ("samples/s", "queries/s"),
                 acc.architecture, row.stack, acc.vendor, enc)


# -- jobs (run in worker processes, cached on disk) -------------------------------------


def _trace_job(job: tuple[Any, ...]) -> OfflineTrace:
    d, inp, out, samples, enc = job
    return offline_trace(d, inp, out, samples=samples, encoder=enc)


def _traces(jobs: list[tuple[Any, ...]], workers: int, cache_dir: Path | None,
            say: Callable[[str], None]) -> list[OfflineTrace]:
    """The trace jobs' traces (:func:`_run`), each told whether its deployment's matmuls
    run at FP4 (:attr:`~tokenmark.sim.fit.OfflineTrace.fp4`: a trace cached before the
    flag existed reads False)."""
    flat: list[OfflineTrace] = _run(_trace_job, jobs, workers, cache_dir, "traces", say)
    for t, j in zip(flat, jobs, strict=True):
        t.fp4 = j[0].fp4_matmuls
    return flat


def _invert_job(job: tuple[Any, ...]) -> tuple[int, list[float]]:
    """A latency row's candidate at the nominal pair and, per serial fraction, the
    ``mbu`` at which its simulated result equals the published one."""
    deps, inp, out, limits, samples, eff, published, requests, enc = job
    nominal = replace(eff, mbu=NOMINAL[0], serial_fraction=NOMINAL[1])
    vals = screen(list(deps), inp, out, limits, nominal, samples=samples,
                  requests=requests, encoder=enc)
    k = int(np.nanargmax(vals))
    d = deps[k]
    out_mbu = []
    for serial in SERIALS:
        def f(mbu: float, s: float = serial) -> float:
            e = replace(eff, mbu=mbu, serial_fraction=s)
            v, _ = server_rate(d, inp, out, limits, e, samples=samples, requests=requests,
                               rel_tol=0.03, encoder=enc)
            return math.log(max(v, 1e-9) / published)
        out_mbu.append(_secant_log(f, 0.3, 0.6, *MBU_BOUNDS))
    return k, out_mbu


def _speed_job(job: tuple[Any, ...]) -> tuple[int, list[float]]:
    """A Server row's candidate at ``NOMINAL_SPEED`` and the Server speed (a list of
    one) at which its simulated result equals the published one."""
    tag, deps, inp, out, limits, samples, eff, published, requests, enc = job
    assert tag == "speed"
    nominal = eff.at_speed(NOMINAL_SPEED)
    vals = screen(list(deps), inp, out, limits, nominal, samples=samples,
                  requests=requests, encoder=enc)
    k = int(np.nanargmax(vals))
    d = deps[k]

    def f(speed: float) -> float:
        v, _ = server_rate(d, inp, out, limits, eff.at_speed(speed), samples=samples,
                           requests=requests, rel_tol=0.03, encoder=enc)
        return math.log(max(v, 1e-9) / published)

    return k, [_secant_log(f, 0.5, 0.9, *SPEED_BOUNDS)]


def _found(mbu: float) -> bool:
    """Whether an inverted ``mbu`` lies inside :data:`MBU_BOUNDS` (not clamped to an
    end, where the search stops when the published result is out of reach)."""
    lo, hi = MBU_BOUNDS
    return lo * 1.001 < mbu < hi * 0.999


def _secant_log(f: Callable[[float], float], a: float, b: float, lo: float, hi: float,
                evals: int = 5, tol: float = 0.03) -> float:
    """The ``x`` in ``[lo, hi]`` with ``f(x) = 0`` (``f`` increasing), by the secant
    method in ``log x`` from ``a`` and ``b``; an end of the range when ``f`` keeps its
    sign there."""
    xa, xb = math.log(a), math.log(b)
    fa, fb = f(a), f(b)
    for _ in range(evals):
        if abs(fb) < tol:
            return math.exp(xb)
        if fb == fa:
            break
        xc = xb - fb * (xb - xa) / (fb - fa)
        xc = min(math.log(hi), max(math.log(lo), xc))
        if xc == xb:
            break
        xa, fa = xb, fb
        xb, fb = xc, f(math.exp(xc))
    return math.exp(xb)


def _predict_job(job: tuple[Any, ...]) -> tuple[float, str, str, float, float]:
    spec, scenario, inp, out, off_eff, lat_eff, limits, samples, requests, deps, enc = job
    p = predict(spec, scenario, inp, out, offline_eff=off_eff, latency_eff=lat_eff,
                limits=limits, samples=samples, requests=requests,
                plans=[Plan(d) for d in deps], encoder=enc)
    return p.value, p.plan.deployment.label, p.binding, p.offline_bound, p.unbounded


def _deployments(s: Setup) -> tuple[Deployment, ...]:
    """A row's candidate deployments (what its jobs carry, and their cache keys: not the
    planner's notes)."""
    return tuple(p.deployment for p in s.plans)


def _run(fn: Callable[[Any], Any], jobs: list[Any], workers: int, cache_dir: Path | None,
         name: str, say: Callable[[str], None], cached_only: bool = False) -> list[Any]:
    """``fn`` over ``jobs`` (in ``workers`` processes), each result kept in
    ``cache_dir/<name>/`` under the SHA-256 of its job's pickle and read back from
    there by a later run; with ``cached_only``, a job not in the cache is not run and
    its result is None."""
    keys = [hashlib.sha256(pickle.dumps((name, j), protocol=5)).hexdigest() for j in jobs]
    store = cache_dir / name if cache_dir is not None else None
    got: dict[str, Any] = {}
    if store is not None:
        for k in set(keys):
            p = store / f"{k}.pkl"
            if p.exists():
                with contextlib.suppress(Exception), open(p, "rb") as fh:
                    got[k] = pickle.load(fh)  # noqa: S301 (our own cache files)
    todo = [i for i, k in enumerate(keys) if k not in got]
    unique: dict[str, int] = {}
    for i in todo:
        unique.setdefault(keys[i], i)
    say(f"  {name}: {len(jobs)} jobs, {len(jobs) - len(todo)} cached, "
        f"{len(unique)} {'left out (cached only)' if cached_only else 'to run'}")
    if cached_only:
        return [got.get(k) for k in keys]
    order = list(unique.values())

    def keep(i: int, v: Any) -> None:
        got[keys[i]] = v
        if store is not None:  # as each finishes, so an interrupted run loses none
            store.mkdir(parents=True, exist_ok=True)
            with open(store / f"{keys[i]}.pkl", "wb") as fh:
                pickle.dump(v, fh, protocol=5)

    if workers > 1 and len(order) > 1:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            for n, (i, v) in enumerate(zip(order, pool.map(fn, [jobs[i] for i in order],
                                                            chunksize=1), strict=True)):
                keep(i, v)
                if n % 25 == 24:
                    say(f"    {n + 1}/{len(order)}")
    else:
        for n, i in enumerate(order):
            keep(i, fn(jobs[i]))
            if n % 25 == 24:
                say(f"    {n + 1}/{len(order)}")
    return [got[k] for k in keys]


# -- fitting ------------------------------------------------------------------------------


def spans_sizes(rows: Iterable[Setup]) -> bool:
    """Whether ``rows`` hold models whose active parameters differ at least
    ``OVERHEAD_SPAN`` times: only then can a fit tell the overheads from the compute
    (module docstring). A decode step's time per sequence is its compute per token over
    ``mfu`` plus the per-sequence overhead, and a step's its weight reads or compute plus
    the step overhead; on one model's rows both grow with the batch together, so any
    overhead is matched by an ``mfu`` that makes the same times."""
    act = [s.plans[0].deployment.model.active_params for s in rows]
    return bool(act) and max(act) >= OVERHEAD_SPAN * min(act)


def model_of(s: Setup) -> str:
    """The model a row runs (models.csv's name: both llama2-70b accuracy targets are
    one model)."""
    return s.plans[0].deployment.model.name


class Fit:
    """The parameters fitted on one training set (module docstring)."""

    def __init__(self, train: list[Setup], traces: dict[tuple[Any, ...], list[OfflineTrace]]
                 ) -> None:
        self.train = train
        self.traces = traces
        self.inverted: dict[tuple[Any, ...], tuple[int, list[float]]] = {}
        self.speeds: dict[tuple[Any, ...], float] = {}
        self.offline = self._dedup([s for s in train if s.row.scenario == "Offline"])
        #: each model's debut round, for a model that debuted after the training set's
        #: first round (one already there in the first round debuted before it)
        self.debut_round = self._debut_rounds(self.offline)
        #: the architectures whose rows of models past their debut round come from
        #: enough systems to fit their groups on those alone
        mature: dict[str, set[tuple[str, str, str]]] = defaultdict(set)
        for s in self.offline:
            if not self.is_debut(s):
                mature[s.arch].add(s.row.system_key)
        self.anchored = {a for a, v in mature.items() if len(v) >= MIN_SYSTEMS}
        #: the rows the groups' physical parameters are fitted on: a debut round's rows
        #: say how mature the model's software is, not how fast the hardware is, so they
        #: are left out, but on an architecture not anchored (module docstring)
        self.group_rows = [s for s in self.offline
                           if not self.is_debut(s) or s.arch not in self.anchored]
        self._arch_systems: dict[str, set[tuple[str, str, str]]] = defaultdict(set)
        for s in self.group_rows:
            self._arch_systems[s.arch].add(s.row.system_key)
        self.latency: list[Setup] = []
        #: each (system, benchmark, round)'s Offline rows (stage 2's pairs)
        self._offline_by: dict[tuple[Any, ...], list[Setup]] = defaultdict(list)
        for o in self.offline:
            self._offline_by[(o.row.system_key, o.row.benchmark, o.row.round)].append(o)
        self._stage1: dict[tuple[Level, float], tuple[Efficiency, float, int] | None] = {}
        #: the group each group that cannot fit its own overheads took them from
        self.overheads_from: dict[Level, Level] = {}
        self._stage2: dict[tuple[Level, str], tuple[float, float, int] | None] = {}
        self._server: dict[Level, tuple[float, int] | None] = {}
        #: the index in SERIALS of the serial fraction every group takes (_one_serial)
        self._serial = 0
        #: log speed of each (model, stack, round) with Offline rows (the model level)
        self.level: dict[tuple[str, str, str], float] = {}
        self.level_rows: dict[tuple[str, str, str], int] = {}
        self.alpha = self._fit_alpha()
        self.new_model = 0.0
        self.debuts: dict[str, tuple[str, float]] = {}
        self._fit_levels()

    def set_inverted(self, inverted: dict[tuple[Any, ...], tuple[int, list[float]]],
                     speeds: dict[tuple[Any, ...], float] | None = None) -> None:
        """Stage 2's inversions of the training latency rows: each row's candidate and
        ``mbu`` per serial fraction (for Interactive), and each Server row's speed."""
        self.inverted = inverted
        self.speeds = speeds or {}
        self.latency = [s for s in self.train if s.row.scenario != "Offline"
                        and s.key in inverted]
        self._stage2.clear()
        self._server.clear()
        self._serial = self._one_serial()

    def _one_serial(self) -> int:
        """The index in :data:`SERIALS` of the one serial fraction every group takes:
        how much of a step's shorter kernel side its longer one fails to hide is a
        property of how the decoding kernels are written, shared by the stacks and
        architectures the training set holds, not of one group; chosen per group on two
        to four systems it flipped on noise (one system more or less moved a group's
        Interactive ``mbu`` from 0.24 at serial 1 to 0.14 at serial 0, and a whole
        family's Interactive rows by 10-30%). Chosen over every training Interactive
        row as a group's was: the serial fraction that reproduces the most systems'
        rows, then the one under which each architecture's rows agree best (the
        median absolute deviation of ``log mbu`` about each architecture's median)."""
        rows = [s for s in self.latency if s.row.scenario == "Interactive"]
        best: tuple[tuple[int, float], int] | None = None
        for j in range(len(SERIALS)):
            found = [s for s in rows if _found(self.inverted[s.key][1][j])]
            by_arch: dict[str, list[float]] = defaultdict(list)
            for s in found:
                by_arch[s.arch].append(math.log(self.inverted[s.key][1][j] / self.speed(s)[0]))
            devs = [abs(x - float(np.median(v))) for v in by_arch.values() for x in v]
            score = (-len({s.row.system_key for s in found}),
                     float(np.median(devs)) if devs else math.inf)
            if best is None or score < best[0]:
                best = (score, j)
        return 0 if best is None else best[1]

    @staticmethod
    def _dedup(rows: list[Setup]) -> list[Setup]:
        seen: set[tuple[Any, ...]] = set()
        out = []
        for s in rows:
            k = (s.row.system_key, s.row.benchmark, s.row.scenario, round(s.row.result, 1))
            if k not in seen:
                seen.add(k)
                out.append(s)
        return out

    @staticmethod
    def _debut_rounds(offline: list[Setup]) -> dict[str, str]:
        """Each model's first round in ``offline``, for the models whose first round is
        not the first round of ``offline`` (a model there already may have debuted
        before it)."""
        first: dict[str, str] = {}
        for s in offline:
            m = model_of(s)
            if m not in first or round_key(s.row.round) < round_key(first[m]):
                first[m] = s.row.round
        start = min(first.values(), key=round_key, default="")
        return {m: r for m, r in first.items() if r != start}

    def is_debut(self, s: Setup) -> bool:
        """Whether ``s`` is a row of its model's debut round."""
        return self.debut_round.get(model_of(s)) == s.row.round

    # -- groups -----------------------------------------------------------------------------
    def _rounds(self, arch: str, stack: str) -> list[str]:
        """Rounds whose group rows (:attr:`group_rows`) of (arch, stack) come from
        enough systems."""
        by: dict[str, set[tuple[str, str, str]]] = defaultdict(set)
        for s in self.group_rows:
            if s.arch == arch and s.stack == stack:
                by[s.row.round].add(s.row.system_key)
        return sorted((r for r, v in by.items() if len(v) >= MIN_SYSTEMS), key=round_key)

    def _predecessor(self, s: Setup) -> str | None:
        """For an architecture without a group of its own (group rows from fewer than
        ``MIN_SYSTEMS`` systems, as a table without its rows): the vendor's most capable
        architecture with one (peak dense compute at the narrowest precision it has),
        if the row's accelerator is at least as capable - a successor; a lesser part
        takes its vendor's parameters (:func:`~tokenmark.sim.params._predecessor`)."""
        arch, vendor = s.arch, s.vendor
        if len(self._arch_systems.get(arch, ())) >= MIN_SYSTEMS:
            return None
        best: tuple[float, str] | None = None
        for g in self.group_rows:
            if g.vendor != vendor or len(self._arch_systems[g.arch]) < MIN_SYSTEMS:
                continue
            acc = g.plans[0].deployment.accelerator
            peak = acc.tflops_at(acc.lowest_precision)
            if best is None or peak > best[0]:
                best = (peak, g.arch)
        if best is None:
            return None
        acc = s.plans[0].deployment.accelerator
        return best[1] if acc.tflops_at(acc.lowest_precision) >= best[0] else None

    def levels(self, s: Setup) -> list[Level]:
        out: list[Level] = []
        newer = [r for r in self._rounds(s.arch, s.stack)
                 if round_key(r) <= round_key(s.row.round)]
        if newer:
            out.append((s.arch, s.stack, newer[-1]))
        out += [(s.arch, s.stack, "*"), (s.arch, "*", "*")]
        pre = self._predecessor(s)
        if pre is not None:
            out += [(pre, s.stack, "*"), (pre, "*", "*")]
        out += [(s.vendor, "*", "*"), ("*", "*", "*")]
        return out

    @staticmethod
    def _matches(s: Setup, level: Level) -> bool:
        fam, st, rnd = level
        if fam == "*":
            return True
        if fam == s.vendor and st == "*":
            return True
        return fam == s.arch and st in ("*", s.stack) and rnd in ("*", s.row.round)

    # -- stage 1 ----------------------------------------------------------------------------
    def _pairs(self, rows: Iterable[Setup]) -> list[tuple[list[OfflineTrace], float]]:
        """Each row's traces and published result over its model's speed (the group's
        parameters describe the models at level 0)."""
        return [(self.traces[s.key], s.row.result / math.exp(self._own_level(s)))
                for s in rows]

    # -- model levels -------------------------------------------------------------------
    @staticmethod
    def _level_key(s: Setup) -> tuple[str, str, str]:
        return (model_of(s), s.stack, s.row.round)

    def _own_level(self, s: Setup) -> float:
        return self.level.get(self._level_key(s), 0.0)

    def _fit_levels(self) -> None:
        """The model levels (module docstring), by backfitting: each pass, a model's
        level is the sum of its rows' log residuals against their groups (the groups'
        predictions at level 0) over its row count plus ``LEVEL_SHRINK`` (shrunk toward
        the group as if it had that many more rows at zero), and the groups are refitted
        on the results over the models' speeds; then the new-model prior from the
        models' debut rounds."""
        # a level is measured on the anchored architectures (a debut round's: against
        # groups its rows do not enter), on all its rows when it has none there; an
        # architecture not anchored then fits its groups on its rows at those levels
        measured = {self._level_key(s) for s in self.offline if s.arch in self.anchored}
        rows = [s for s in self.offline
                if s.arch in self.anchored or self._level_key(s) not in measured]
        for _ in range(LEVEL_ITERS):
            self._set_levels(rows)
            self._stage1.clear()
        # the debut rounds' levels once more, against the anchored groups as they end
        self._set_levels([s for s in rows if self.is_debut(s)])
        self._stage1.clear()
        self.debuts = {}
        for m, rnd in self.debut_round.items():
            ks = [k for k in self.level if k[0] == m and k[2] == rnd]
            n = sum(self.level_rows[k] for k in ks)
            self.debuts[m] = (rnd, sum(self.level[k] * self.level_rows[k] for k in ks) / n)
        self.new_model = (float(np.median([v for _, v in self.debuts.values()]))
                          if self.debuts else 0.0)

    def _set_levels(self, rows: list[Setup]) -> None:
        """Each (model, stack, round) of ``rows``: the sum of its rows' log residuals
        against their groups over its row count plus ``LEVEL_SHRINK``."""
        resid: dict[tuple[str, str, str], list[float]] = defaultdict(list)
        for s in rows:
            eff = self._offline(s)[0]
            pred = max(predict_rate(t, eff) for t in self.traces[s.key])
            resid[self._level_key(s)].append(math.log(s.row.result / max(pred, 1e-9)))
        for k, r in resid.items():
            self.level[k] = sum(r) / (len(r) + LEVEL_SHRINK)
            self.level_rows[k] = len(r)

    def model_level(self, model: str, stack: str, round_: str) -> tuple[float, str]:
        """The log speed of ``model`` on ``stack`` for a row of ``round_``
        (:func:`~tokenmark.sim.params.level_of` over this fit's levels)."""
        return level_of((self.level, self.new_model), model, stack, round_)

    def levels_table(self) -> list[tuple[str, str, str, float, int]]:
        """(model, stack, round, speed, rows) of every level, and the new-model prior
        as ``("*", "*", "*", speed, debut models)`` (model_levels.csv's rows)."""
        out = [(*k, math.exp(v), self.level_rows[k]) for k, v in sorted(self.level.items())]
        out.append(("*", "*", "*", math.exp(self.new_model), len(self.debuts)))
        return out

    def speed(self, s: Setup) -> tuple[float, str]:
        v, how = self.model_level(model_of(s), s.stack, s.row.round)
        return math.exp(v), how

    def stage1(self, level: Level, alpha: float | None = None
               ) -> tuple[Efficiency, float, int] | None:
        a = self.alpha if alpha is None else alpha
        k = (level, a)
        if k not in self._stage1:
            rows = [s for s in self.group_rows if self._matches(s, level)]
            systems = {s.row.system_key for s in rows}
            if len(systems) < MIN_SYSTEMS:
                self._stage1[k] = None
            else:
                source, overheads = "/".join(level), None
                up = None if spans_sizes(rows) else self._overhead_level(level)
                got = None if up is None else self.stage1(up, a)
                if got is not None and up is not None:
                    overheads = (got[0].step_overhead_ns, got[0].seq_overhead_ns)
                    # where they were fitted: up's own rows, or where up took them
                    self.overheads_from[level] = self.overheads_from.get(up, up)
                    source += f" (overheads of {'/'.join(self.overheads_from[level])})"
                eff, ape = fit_efficiency(self._pairs(rows), Efficiency(), source, a,
                                          overheads=overheads, fp4=self._tells_fp4(level, rows))
                self._stage1[k] = (eff, ape, len(systems))
        return self._stage1[k]

    def _tells_fp4(self, level: Level, rows: list[Setup]) -> bool:
        """Whether ``level`` fits its FP4 path's own efficiency (``fp4_mfu``): a group of
        one architecture (a vendor's or everything's would set its parts' generations
        against each other) whose rows hold matmuls at FP4 and at a wider precision,
        each from ``MIN_SYSTEMS`` systems."""
        if level[0] not in self._arch_systems:
            return False
        by: dict[bool, set[tuple[str, str, str]]] = defaultdict(set)
        for s in rows:
            by[s.plans[0].deployment.fp4_matmuls].add(s.row.system_key)
        return all(len(by[k]) >= MIN_SYSTEMS for k in (True, False))

    def _overhead_level(self, level: Level) -> Level | None:
        """The next more general group, whose overheads ``level`` takes when its rows
        cannot tell them from the compute (:func:`spans_sizes`): (architecture, stack,
        round), then (architecture, stack), the architecture, its vendor, everything."""
        fam, st, rnd = level
        if fam == "*":
            return None
        if rnd != "*":
            return (fam, st, "*")
        if st != "*":
            return (fam, "*", "*")
        vendor = next((s.vendor for s in self.group_rows if s.arch == fam), None)
        return ("*", "*", "*") if vendor is None else (vendor, "*", "*")

    def _fit_alpha(self) -> float:
        best = (math.inf, 0.0)
        for a in ALPHA_GRID:
            errs = []
            for s in self.group_rows:
                eff = self._offline(s, a)[0]
                pred = max(predict_rate(t, eff) for t in self.traces[s.key])
                errs.append(math.log(max(pred, 1e-9) / s.row.result) ** 2)
            best = min(best, (float(np.mean(errs)) if errs else 0.0, a))
        return best[1]

    def _offline(self, s: Setup, alpha: float | None = None) -> tuple[Efficiency, str]:
        for level in self.levels(s):
            got = self.stage1(level, alpha)
            if got is not None:
                return got[0], "/".join(level)
        a = self.alpha if alpha is None else alpha
        return replace(Efficiency(), size_exponent=a, source="defaults"), "defaults"

    def _from_offline_group(self, s: Setup) -> list[Level]:
        """``s``'s groups from the one its Offline parameters come from on: the groups
        its Interactive parameters are looked for in, as the shipped table's row for that
        group holds them (:meth:`table`; a group without stage-1 parameters has no row
        there, so a user's :func:`~tokenmark.sim.params.efficiency_for` never sees its
        Interactive rows)."""
        chain = self.levels(s)
        first = next((i for i, lv in enumerate(chain) if self.stage1(lv) is not None), 0)
        return chain[first:]

    def offline_params(self, s: Setup) -> tuple[Efficiency, str]:
        """A row's Offline parameters: its group's at its model's speed."""
        eff, used = self._offline(s)
        sp, how = self.speed(s)
        return (eff.at_speed(sp, f"{eff.source}; model {how} x{sp:.3f}"),
                f"{used}; model {how} x{sp:.3f}")

    # -- stage 2 ----------------------------------------------------------------------------
    def offline_residual(self, s: Setup) -> float | None:
        """How many times as fast as its parameters say the same system ran the same
        benchmark Offline in the same round (the geometric mean over its Offline rows
        there), or None when it has no such row: stage 2 inverts a latency row on its
        Offline parameters at this speed, so the latency speed holds what differs
        between the scenarios, not the Offline fit's error on that system."""
        pairs = self._offline_by.get((s.row.system_key, s.row.benchmark, s.row.round))
        if not pairs:
            return None
        logs = []
        for o in pairs:
            pred = max(predict_rate(t, self.offline_params(o)[0]) for t in self.traces[o.key])
            logs.append(math.log(o.row.result / max(pred, 1e-9)))
        return math.exp(sum(logs) / len(logs))

    def stage2(self, level: Level, scenario: str) -> tuple[float, float, int] | None:
        """(mbu, serial fraction, systems) of ``level``'s latency rows of ``scenario``
        (``""``: every latency scenario), or None with too few systems."""
        k = (level, scenario)
        if k not in self._stage2:
            rows = [s for s in self.latency if self._matches(s, level)
                    and (not scenario or s.row.scenario == scenario)]
            systems = {s.row.system_key for s in rows}
            if len(systems) < MIN_SYSTEMS:
                self._stage2[k] = None
            else:
                # every group takes the one serial fraction (_one_serial)
                j = self._serial
                serial = SERIALS[j]
                # an inversion that ended at an end of the range did not find the
                # published result (mbu cannot make the row that fast or that slow:
                # a compute-bound step hardly moves with it); it measures nothing
                found = [s for s in rows if _found(self.inverted[s.key][1][j])]
                n = len({s.row.system_key for s in found})
                best: tuple[float, float, int] | None = None
                if n >= MIN_SYSTEMS:
                    # the group's mbu: each inverted mbu over its row's model speed
                    logs = np.log([self.inverted[s.key][1][j] / self.speed(s)[0]
                                   for s in found])
                    best = (math.exp(float(np.median(logs))), serial, n)
                self._stage2[k] = best
        return self._stage2[k]

    def server_speed(self, level: Level) -> tuple[float, int] | None:
        """(Server speed, systems) of ``level``'s inverted Server rows, or None with too
        few systems: the median of their log speeds, at most 1 (serving adds work to a
        step, it takes none away)."""
        if level not in self._server:
            rows = [s for s in self.train if s.key in self.speeds
                    and self._matches(s, level)]
            systems = {s.row.system_key for s in rows}
            if len(systems) < MIN_SYSTEMS:
                self._server[level] = None
            else:
                med = float(np.median(np.log([self.speeds[s.key] for s in rows])))
                self._server[level] = (min(1.0, math.exp(med)), len(systems))
        return self._server[level]

    def _server_level(self, chain: list[Level]) -> tuple[float, Level, int] | None:
        """The Server speed a row of ``chain``'s groups takes: its vendor's, else
        everything's (``chain``'s last two levels)."""
        for level in chain[-2:]:
            got = self.server_speed(level)
            if got is not None:
                return got[0], level, got[1]
        return None

    def latency_params(self, s: Setup) -> tuple[Efficiency, str]:
        eff, used = self.offline_params(s)
        if s.row.scenario == "Server":
            srv = self._server_level(self.levels(s))
            if srv is None:
                return eff, used + " (no Server rows)"
            where = f"{'/'.join(srv[1])} Server"
            return (eff.at_speed(srv[0], f"{eff.source}; Server x{srv[0]:.3f} from {where}"),
                    f"{used} (Server x{srv[0]:.3f} from {where})")
        sp = self.speed(s)[0]
        for level in self._from_offline_group(s):
            for sc in (s.row.scenario, ""):
                got = self.stage2(level, sc)
                if got is not None:
                    mbu, serial, _ = got
                    mbu *= sp
                    return (replace(eff, mbu=mbu, serial_fraction=serial,
                                    source=f"{eff.source}; {'/'.join(level)} {sc or 'latency'}"),
                            f"{used} (mbu {mbu:.3f}, serial {serial:g} from "
                            f"{'/'.join(level)} {sc or 'latency'})")
        return eff, used + " (no latency rows)"

    # -- the shipped table ------------------------------------------------------------------
    def table(self) -> dict[tuple[str, str, str, str], tuple[Efficiency, float, int]]:
        """Every group's parameters per scenario (efficiency.csv's rows)."""
        # each group with the groups a row falls back to after it (latency_params' order)
        chains: dict[Level, list[Level]] = {}
        for s in self.train:
            chain = self.levels(s)
            for i, lv in enumerate(chain):
                if lv[2] == "*" or lv[2] == s.row.round:
                    chains.setdefault(lv, chain[i:])
        out: dict[tuple[str, str, str, str], tuple[Efficiency, float, int]] = {}
        for lv in sorted(chains):
            base = self.stage1(lv)
            if base is None:
                continue
            out[(*lv, "Offline")] = base
            srv = self._server_level(chains[lv])
            out[(*lv, "Server")] = (base if srv is None else
                                    (base[0].at_speed(srv[0]), base[1], srv[2]))
            # a group without Interactive rows of its own takes the next one's, as a
            # row's latency_params does (not its Offline mbu)
            got = next((g for g in (self.stage2(c, x) for c in chains[lv]
                                    for x in ("Interactive", "")) if g is not None), None)
            if got is not None:
                eff = replace(base[0], mbu=got[0], serial_fraction=got[1])
                out[(*lv, "Interactive")] = (eff, base[1], got[2])
            else:
                out[(*lv, "Interactive")] = base
        return out


class TableParams:
    """A fixed parameter table (an ``efficiency.csv`` and its ``model_levels.csv``, e.g.
    the packaged ones) in the place of a fit: each row takes what
    :func:`~tokenmark.sim.params.efficiency_for` gives a user simulating its system (the
    newest round of the table), so a shipped table is scored on a round as a fit is."""

    def __init__(self, rows: tuple[EfficiencyRow, ...] | None, levels: Levels | None,
                 name: str) -> None:
        self.rows, self.levels, self.name = rows, levels, name
        self.alpha = float("nan")

    def _params(self, s: Setup, scenario: str) -> tuple[Efficiency, str]:
        eff = efficiency_for(s.plans[0].deployment.accelerator, s.stack, None, scenario,
                             self.rows, model=model_of(s), levels=self.levels)
        return eff, f"{self.name}: {eff.source}"

    def offline_params(self, s: Setup) -> tuple[Efficiency, str]:
        return self._params(s, "Offline")

    def latency_params(self, s: Setup) -> tuple[Efficiency, str]:
        return self._params(s, s.row.scenario)


def _latency_sample(rows: list[Setup], per_group: int = LATENCY_ROWS_PER_GROUP
                    ) -> list[Setup]:
    """At most ``per_group`` systems per (architecture, scenario), the newest rounds
    first, then by benchmark and system, deterministic."""
    by: dict[tuple[str, str], list[Setup]] = defaultdict(list)
    for s in rows:
        by[(s.arch, s.row.scenario)].append(s)
    out: list[Setup] = []
    for group in by.values():
        group.sort(key=lambda s: (tuple(-x for x in round_key(s.row.round)),
                                  s.row.benchmark or "", s.row.system_key))
        systems: list[tuple[str, str, str]] = []
        for s in group:
            if s.row.system_key not in systems:
                if len(systems) >= per_group:
                    continue
                systems.append(s.row.system_key)
            out.append(s)
    return out


def fit(train: list[Setup], *, server: bool = True, requests: int = 1500,
        workers: int = 1, cache_dir: Path | None = None,
        latency_rows: int = LATENCY_ROWS_PER_GROUP, latency_before: str | None = None,
        cached_inversions: bool = False,
        say: Callable[[str], None] = lambda _m: None) -> Fit:
    """Fit the parameters on ``train`` (module docstring); stage 2 inverts at most
    ``latency_rows`` systems per (architecture, scenario), of the rounds before
    ``latency_before`` only when given (a cheaper fit: their inversions are mostly
    those an earlier step made); with ``cached_inversions`` only the inversions already
    in ``cache_dir`` are used (a fit cut short: stage 2 on fewer rows)."""
    offline = [s for s in train if s.row.scenario == "Offline"]
    jobs = [(p.deployment, s.inputs, s.outputs, s.samples, s.encoder)
            for s in offline for p in s.plans]
    flat = _traces(jobs, workers, cache_dir, say)
    traces: dict[tuple[Any, ...], list[OfflineTrace]] = {}
    i = 0
    for s in offline:
        traces[s.key] = flat[i:i + len(s.plans)]
        i += len(s.plans)
    inverted: dict[tuple[Any, ...], tuple[int, list[float]]] = {}
    speeds: dict[tuple[Any, ...], float] = {}
    f = Fit(train, traces)
    say(f"stage 1: size exponent {f.alpha}")
    if server:
        lat = _latency_sample([s for s in train if s.row.scenario != "Offline" and s.limits
                               and (latency_before is None or round_key(s.row.round)
                                    < round_key(latency_before))], latency_rows)
        ijobs = [(_deployments(s), s.inputs, s.outputs, s.limits, s.samples,
                  f.offline_params(s)[0], s.row.result, requests, s.encoder) for s in lat]
        say(f"stage 2: inverting {len(ijobs)} latency rows")
        for s, got in zip(lat, _run(_invert_job, ijobs, workers, cache_dir, "inversions",
                                    say, cached_inversions), strict=True):
            if got is not None:
                inverted[s.key] = got
        paired = _latency_sample([s for s in train if s.row.scenario == "Server" and s.limits
                                  and (latency_before is None or round_key(s.row.round)
                                       < round_key(latency_before))
                                  and f.offline_residual(s) is not None], latency_rows)
        sjobs = [("speed", _deployments(s), s.inputs, s.outputs, s.limits, s.samples,
                  f.offline_params(s)[0].at_speed(f.offline_residual(s) or 1.0),
                  s.row.result, requests, s.encoder) for s in paired]
        say(f"stage 2: inverting {len(sjobs)} Server rows' speed")
        for s, sgot in zip(paired, _run(_speed_job, sjobs, workers, cache_dir, "inversions",
                                        say, cached_inversions), strict=True):
            if sgot is not None:
                speeds[s.key] = sgot[1][0]
        say(f"stage 2: {len(inverted)} latency rows inverted, {len(speeds)} Server speeds")
    f.set_inverted(inverted, speeds)
    return f


# -- the forward evaluation ---------------------------------------------------------------


@dataclass
class ForwardStep:
    round: str
    train_rows: int
    fit: Fit | TableParams
    results: list[RowResult] = field(default_factory=list)


def _interleaved(test: list[tuple[RowResult, Setup]]) -> list[tuple[RowResult, Setup]]:
    """``test`` taken in turn from each (benchmark, scenario, architecture), so that an
    evaluation cut short (``cached_predictions``) has scored a spread of them rather
    than the first benchmarks of the table."""
    by: dict[tuple[str, str, str], list[tuple[RowResult, Setup]]] = defaultdict(list)
    for item in test:
        s = item[1]
        by[(s.row.benchmark or "", s.row.scenario, s.arch)].append(item)
    queues = [by[k] for k in sorted(by)]
    out: list[tuple[RowResult, Setup]] = []
    for i in range(max((len(q) for q in queues), default=0)):
        out.extend(q[i] for q in queues if i < len(q))
    return out


def forward_evaluation(
    rows: list[PublishedRow],
    rounds_: Iterable[str] = FORWARD_ROUNDS,
    *,
    score: Iterable[str] | None = None,
    server: bool = True,
    requests: int = 1500,
    workers: int = 1,
    cache_dir: Path | None = None,
    latency_rows: int = LATENCY_ROWS_PER_GROUP,
    progress: Callable[[str], None] | None = None,
    fitted: Callable[[str, Fit], None] | None = None,
    cached_predictions: bool = False,
    latency_before: str | None = None,
    cached_inversions: bool = False,
    table: TableParams | None = None,
) -> CalibrationReport:
    """Fit on the rounds before each of ``rounds_`` and predict that round's rows
    (those in ``score``, default all of ``rounds_``; a round not scored is still
    fitted for, so the newest step's fit is the one shipped). ``fitted`` is told each
    step's fit as soon as it is made (before that step's predictions). With
    ``cached_predictions`` only the predictions already in ``cache_dir`` are scored (an
    evaluation cut short: the coverage line shows the rows left out). With
    ``latency_before``, stage 2 inverts only latency rows of the rounds before it; with
    ``cached_inversions``, it uses only the inversions already in ``cache_dir``. With
    ``table``, nothing is fitted: every step is predicted with that fixed table (the
    report then carries no parameters to ship)."""
    say = progress or (lambda _m: None)
    lengths = Lengths()
    results: list[RowResult] = []
    setups: list[tuple[RowResult, Setup]] = []
    for row in rows:
        rr = RowResult(row, row.eligible, row.reason)
        results.append(rr)
        if not row.eligible:
            continue
        got = prepare(row, lengths)
        if isinstance(got, str):
            rr.eligible, rr.reason = False, got
            continue
        setups.append((rr, got))
    say(f"{len(setups)} representable rows of {len(results)}")
    steps: list[ForwardStep] = []
    scored = set(rounds_ if score is None else score)
    for rnd in rounds_:
        train = [s for _, s in setups if round_key(s.row.round) < round_key(rnd)]
        test = [(rr, s) for rr, s in setups if s.row.round == rnd]
        f: Fit | TableParams
        if table is not None:
            say(f"{rnd}: predicting with {table.name}")
            f = table
        else:
            say(f"{rnd}: fitting on {len(train)} rows of the rounds before it")
            f = fit(train, server=server, requests=requests, workers=workers,
                    cache_dir=cache_dir, latency_rows=latency_rows,
                    latency_before=latency_before, cached_inversions=cached_inversions,
                    say=say)
            if fitted is not None:
                fitted(rnd, f)
        step = ForwardStep(rnd, 0 if table is not None else len(train), f)
        steps.append(step)
        if rnd not in scored:
            continue
        # Offline rows: predict() takes the best candidate's offline_rate, which is
        # predict_rate over the same parameter-free traces stage 1 records, so they
        # come from the trace jobs (and their cache)
        offline = [(rr, s) for rr, s in test if s.row.scenario == "Offline"]
        say(f"{rnd}: predicting {len(offline)} Offline rows from their traces")
        flat = _traces([(p.deployment, s.inputs, s.outputs, s.samples, s.encoder)
                        for _, s in offline for p in s.plans], workers, cache_dir, say)
        i = 0
        for rr, s in offline:
            off_eff, rr.group = f.offline_params(s)
            vals = [predict_rate(t, off_eff) for t in flat[i:i + len(s.plans)]]
            i += len(s.plans)
            k = int(np.argmax(vals))
            rr.step, rr.predicted, rr.offline_bound = rnd, vals[k], vals[k]
            rr.deployment, rr.binding = s.plans[k].deployment.label, "Offline"
            step.results.append(rr)
        jobs = []
        todo = []
        for rr, s in _interleaved(test):
            if s.row.scenario == "Offline" or not server:
                continue
            off_eff, used = f.offline_params(s)
            lat_eff = None
            if s.row.scenario != "Offline":
                lat_eff, used = f.latency_params(s)
            rr.step, rr.group = rnd, used
            jobs.append((s.spec, s.row.scenario, s.inputs, s.outputs, off_eff, lat_eff,
                         s.limits, s.samples, requests, _deployments(s), s.encoder))
            todo.append(rr)
        say(f"{rnd}: predicting {len(jobs)} Server/Interactive rows")
        for rr, got in zip(todo, _run(_predict_job, jobs, workers, cache_dir, "predictions",
                                      say, cached_predictions), strict=True):
            if got is None:
                rr.step = rr.group = ""
                continue
            value, label, binding, bound, unbounded = got
            rr.predicted, rr.deployment, rr.binding = value, label, binding
            rr.offline_bound, rr.unbounded = bound, unbounded
            step.results.append(rr)
    notes = [f"representable rows: {len(setups)} of {len(results)}"]
    if table is not None:
        notes += [f"{st.round}: predicted with {table.name}, {len(st.results)} rows"
                  for st in steps]
        return CalibrationReport(results, {}, notes,
                                 [st.round for st in steps if st.round in scored])
    fits = [(st, st.fit) for st in steps if isinstance(st.fit, Fit)]
    last = fits[-1][1] if fits else None
    for st, ft in fits:
        notes.append(f"{st.round}: fitted on {st.train_rows} rows (size exponent "
                     f"{ft.alpha}), {len(st.results)} rows predicted")
    for st, ft in fits:
        debuts = ", ".join(f"{m} {r} x{math.exp(v):.3f}"
                           for m, (r, v) in sorted(ft.debuts.items()))
        notes.append(f"{st.round}: new-model prior x{math.exp(ft.new_model):.3f} "
                     f"(median of the debut rounds' levels: {debuts or 'none'})")
    return CalibrationReport(results, last.table() if last is not None else {}, notes,
                             [st.round for st in steps if st.round in scored],
                             last.levels_table() if last is not None else [])


def write_inversions(path: Path, f: Fit) -> None:
    """Stage 2's per-row inversions (for reading the fit)."""
    with open(path, "w", encoding="utf-8") as fh:
        for s in f.latency:
            k, mbus = f.inverted[s.key]
            fh.write(json.dumps({"round": s.row.round, "submitter": s.row.submitter,
                                 "system": s.row.system_id, "benchmark": s.row.benchmark,
                                 "scenario": s.row.scenario, "arch": s.arch,
                                 "candidate": s.plans[k].deployment.label,
                                 "mbu_by_serial": dict(zip(map(str, SERIALS), mbus,
                                                           strict=True)),
                                 "server_speed": f.speeds.get(s.key)}) + "\n")
