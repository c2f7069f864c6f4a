"""Entry points for runs of many runs: find-peak, sweeps and scaling efficiency.

Every probe, point and confirming run is a full run (:func:`tokenmark.api.run.run_benchmark`)
with its own results folder under one parent folder; the parent holds an index
(``index.json`` and ``index.csv``) rewritten after every run, so a report can read it and
an interrupted search keeps what it measured. They work with any system under test:
a :class:`~tokenmark.api.run.SutSpec`, an HTTP factory
(:func:`tokenmark.api.assemble.http_sut_factory`) or any ``Callable[[Clock], SystemUnderTest]``.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tokenmark.api.run import RunResult, SutSpec, make_sut, run_benchmark
from tokenmark.clock import Clock
from tokenmark.config.layering import Layer, LayeredSettings
from tokenmark.dataset import Dataset
from tokenmark.errors import ConfigError
from tokenmark.loadgen.remote import RunDriver
from tokenmark.mlperf.scenarios import build_schedule
from tokenmark.mlperf.settings import Scenario, TestSettings, effective
from tokenmark.output.results import write_json_atomic
from tokenmark.scale.findpeak import (
    MAX_QUERY_GROWTH,
    PeakSearch,
    ProbeJudgement,
    ProbeKind,
    certain_failure,
    judge,
)
from tokenmark.scale.scaling import ScalingPoint, efficiency
from tokenmark.scale.sweep import SWEEP_COLUMNS, pareto_front, point_row
from tokenmark.sut import SystemUnderTest

__all__ = [
    "INDEX_CSV",
    "INDEX_JSON",
    "PeakResult",
    "Probe",
    "ScalingResult",
    "SweepResult",
    "auto_rates",
    "distributed_driver",
    "find_peak",
    "scaling_run",
    "sweep",
]

INDEX_JSON = "index.json"
INDEX_CSV = "index.csv"
SutArg = SutSpec | Callable[[Clock], SystemUnderTest]
_PEAK_SCENARIOS = (Scenario.SERVER, Scenario.INTERACTIVE, Scenario.CONSTANT,
                   Scenario.POISSON, Scenario.GAMMA)
PROBE_COLUMNS = ("probe", "kind", "rate_qps", "min_query_count", "folder", "outcome",
                 "reason", "tokenmark_verdict", "mlperf_verdict", "issued", "completed",
                 "tokens_per_s", "ttft_p99_ms", "tpot_p99_ms", "e2e_p99_ms")


def _factory(sut: SutArg) -> Callable[[Clock], SystemUnderTest]:
    if callable(sut):
        return sut
    return lambda c: make_sut(sut, c)


def _with(layered: LayeredSettings, name: str, **changes: Any) -> LayeredSettings:
    settings: TestSettings = replace(layered.settings, **changes)
    shown = {k: (v.value if isinstance(v, Scenario) else v) for k, v in changes.items()}
    return replace(layered, settings=settings,
                   layers=(*layered.layers, Layer(name, shown)))


def _write_index(parent: Path, doc: dict[str, Any], rows: Sequence[dict[str, Any]],
                 columns: Sequence[str]) -> None:
    write_json_atomic(parent / INDEX_JSON, doc)
    tmp = parent / (INDEX_CSV + ".tmp")
    with open(tmp, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(columns), extrasaction="ignore")
        w.writeheader()
        for row in rows:
            w.writerow({k: ("" if row.get(k) is None else row.get(k)) for k in columns})
    tmp.replace(parent / INDEX_CSV)


def _throughput(res: RunResult) -> float:
    s = res.summary
    return s.tokens_per_second if s.tokens_per_second is not None else (
        s.output_tokens_per_second)


def _p99_ms(res: RunResult, which: str) -> float | None:
    d = getattr(res.summary, which)
    return d.percentiles[0.99] / 1e6 if d.count and 0.99 in d.percentiles else None


# -- find-peak ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Probe:
    index: int
    kind: str  # "probe" or "confirm"
    rate: float
    min_query_count: int
    folder: Path
    judgement: ProbeJudgement
    result: RunResult

    @property
    def passed(self) -> bool:
        return self.judgement.kind is ProbeKind.PASSED

    def row(self, parent: Path) -> dict[str, Any]:
        r = self.result
        return {
            "probe": self.index, "kind": self.kind, "rate_qps": self.rate,
            "min_query_count": self.min_query_count,
            "folder": str(self.folder.relative_to(parent)),
            "outcome": self.judgement.kind.value, "reason": self.judgement.reason,
            "tokenmark_verdict": r.verdicts.tokenmark.validity.value,
            "mlperf_verdict": r.verdicts.mlperf.validity.value,
            "issued": r.summary.issued, "completed": r.summary.completed,
            "tokens_per_s": _throughput(r), "ttft_p99_ms": _p99_ms(r, "ttft"),
            "tpot_p99_ms": _p99_ms(r, "tpot"), "e2e_p99_ms": _p99_ms(r, "latency"),
        }


@dataclass
class PeakResult:
    parent: Path
    rate: float | None  # the confirmed peak (queries/s); None: no valid rate found
    confirmed: RunResult | None
    lo: float | None  # highest rate that passed as a probe
    hi: float | None  # lowest rate that failed
    note: str
    client_limited: bool = False
    probes: list[Probe] = field(default_factory=list)

    @property
    def resolution(self) -> float:
        """``hi / lo`` of the search (how far above the peak the true limit may be)."""
        if self.rate is None or self.hi is None:
            return math.inf
        return max(1.0, self.hi / self.rate)

    def to_json(self) -> dict[str, Any]:
        c = self.confirmed
        return {
            "kind": "find-peak",
            "peak_qps": self.rate,
            "confirmed_folder": str(c.output_dir.relative_to(self.parent)) if c else None,
            "peak_tokens_per_s": _throughput(c) if c else None,
            "highest_valid_probe_qps": self.lo,
            "lowest_invalid_qps": self.hi,
            "note": self.note,
            "client_limited": self.client_limited,
            "probes": [p.row(self.parent) for p in self.probes],
            "label": "unverified",
        }


def find_peak(
    layered: LayeredSettings,
    dataset: Dataset,
    sut: SutArg,
    parent: Path,
    *,
    start_qps: float | None = None,
    tolerance: float = 0.05,
    min_qps: float = 0.0,
    max_qps: float = math.inf,
    max_probes: int = 16,
    probe_duration_s: float | None = None,
    confirm_attempts: int = 3,
    stop_early: bool = True,
    virtual_time: bool = False,
    on_probe: Callable[[Probe], None] | None = None,
) -> PeakResult:
    """The highest rate whose run is VALID under ``layered``'s limits, confirmed.

    ``probe_duration_s`` shortens the search's probes (the length rules are then left to
    the confirming run, which always has the full settings); ``stop_early`` ends a probe
    as soon as its failure is certain. Raises ConfigError for a scenario without a rate
    or without latency limits.
    """
    s = layered.settings
    if s.scenario not in _PEAK_SCENARIOS:
        raise ConfigError(f"find-peak searches the rate of Server, Interactive, constant, "
                          f"poisson or gamma runs, not {s.scenario.value}; choose one of them")
    eff0 = effective(s, len(dataset))
    if not eff0.limits.any:
        raise ConfigError("find-peak needs latency limits to judge a rate: use an MLPerf "
                          "Server/Interactive preset or give --ttft-ms/--tpot-ms/--e2e-ms")
    if not 0 < tolerance < 1:
        raise ConfigError(f"--tolerance must be between 0 and 1 (got {tolerance})")
    if confirm_attempts < 1 or max_probes < 1:
        raise ConfigError("--max-probes and --confirm-attempts must be at least 1")
    if probe_duration_s is not None and probe_duration_s <= 0:
        raise ConfigError(f"--probe-duration must be > 0 s (got {probe_duration_s})")
    start = start_qps if start_qps is not None else s.target_qps
    if not start > 0:
        raise ConfigError(f"--start-qps must be > 0 (got {start})")
    parent.mkdir(parents=True, exist_ok=True)
    factory = _factory(sut)
    search = PeakSearch(start, tolerance=tolerance, min_rate=min_qps, max_rate=max_qps,
                        max_probes=max_probes)
    out = PeakResult(parent, None, None, None, None, "")
    short = probe_duration_s is not None and probe_duration_s * 1000 < s.min_duration_ms

    def save() -> None:
        doc = out.to_json()
        doc["tolerance"] = tolerance
        doc["settings"] = {"round": s.round, "benchmark": s.benchmark,
                           "scenario": s.scenario.value, "profile": s.profile}
        _write_index(parent, doc, doc["probes"], PROBE_COLUMNS)

    def probe(kind: str, rate: float, min_queries: int) -> Probe:
        n = len(out.probes) + 1
        changes: dict[str, Any] = {"target_qps": rate, "min_query_count": min_queries}
        if kind == "probe" and short:
            assert probe_duration_s is not None
            changes["min_duration_ms"] = int(probe_duration_s * 1000)
        lay = _with(layered, f"find-peak {kind} {n}", **changes)
        folder = parent / f"{kind}-{n:02d}-{rate:.4g}qps"
        stop = None
        if kind == "probe" and stop_early:
            eff = effective(lay.settings, len(dataset))
            stop = certain_failure(eff, len(build_schedule(eff, len(dataset))))
        res = run_benchmark(lay, dataset, factory, folder, virtual_time=virtual_time,
                            stop_when=stop)
        j = judge(res.verdicts, interrupt_reason=res.outcome.interrupt_reason,
                  ignore_length=kind == "probe" and short)
        p = Probe(n, kind, rate, min_queries, folder, j, res)
        out.probes.append(p)
        save()
        if on_probe is not None:
            on_probe(p)
        return p

    def judged(kind: str, rate: float, min_queries: int) -> Probe:
        # Early stopping may ask for more queries than the minimum: LoadGen's advice is
        # to run longer, so the same rate runs once more with the count it asked for.
        p = probe(kind, rate, min_queries)
        if p.judgement.kind is ProbeKind.MORE_QUERIES:
            needed = p.judgement.queries_needed
            if needed <= MAX_QUERY_GROWTH * max(1, p.result.summary.queries_issued):
                p = probe(kind, rate, max(needed, min_queries))
        return p

    queries = s.min_query_count  # the count the passing probes needed (never lowered)
    while (rate := search.next_rate()) is not None:
        p = judged("probe", rate, queries)
        if p.judgement.kind is ProbeKind.CLIENT_LIMITED:
            out.client_limited = True
            search.note = (f"client-limited at {rate:g}/s ({p.judgement.reason}); higher "
                           "rates would measure the client, not the server")
            break
        search.record(rate, p.passed)
        if p.passed:
            queries = max(queries, p.min_query_count)
    out.lo, out.hi, out.note = search.lo, search.hi, search.note
    rate = search.lo
    for _ in range(confirm_attempts):
        if rate is None or rate < min_qps:
            break
        c = judged("confirm", rate, queries)
        if c.passed:
            out.rate, out.confirmed = rate, c.result
            break
        queries = max(queries, c.min_query_count)
        out.hi = rate if out.hi is None else min(out.hi, rate)
        rate = rate * (1 - tolerance)
    if out.rate is None:
        out.note += "; no rate was confirmed VALID" if out.note else "no rate was confirmed VALID"
    save()
    return out


# -- sweeps -------------------------------------------------------------------------------


#: Streams of an automatic sweep's throughput run (GuideLLM's "throughput" profile sends
#: as much as the server takes; a closed loop this wide keeps any single server busy).
AUTO_THROUGHPUT_CONCURRENCY = 64


@dataclass
class SweepResult:
    parent: Path
    rows: list[dict[str, Any]]
    results: list[RunResult]


def sweep(
    layered: LayeredSettings,
    dataset: Dataset,
    sut: SutArg,
    parent: Path,
    *,
    rates: Sequence[float] = (),
    concurrencies: Sequence[int] = (),
    pareto_latency: str = "e2e_p99_ms",
    virtual_time: bool = False,
    on_point: Callable[[dict[str, Any]], None] | None = None,
    auto: int = 0,
    throughput_concurrency: int = AUTO_THROUGHPUT_CONCURRENCY,
) -> SweepResult:
    """One full run per rate (open loop) or per concurrency (closed loop).

    ``auto`` > 0 chooses the range itself, as GuideLLM's sweep does: a synchronous run
    (a closed loop of one stream), then a throughput run (a closed loop of
    ``throughput_concurrency`` streams), then ``auto`` rates evenly spaced strictly
    between the two runs' measured requests/s, in the sweep's open-loop scenario.
    """
    if auto:
        return _auto_sweep(layered, dataset, sut, parent, auto, throughput_concurrency,
                           pareto_latency=pareto_latency, virtual_time=virtual_time,
                           on_point=on_point)
    if bool(rates) == bool(concurrencies):
        raise ConfigError("give the sweep's points as --rates or as --concurrency, not both")
    if pareto_latency not in ("ttft_p99_ms", "tpot_p99_ms", "e2e_p99_ms"):
        raise ConfigError(f"unknown Pareto latency {pareto_latency!r}; choose ttft_p99_ms, "
                          "tpot_p99_ms or e2e_p99_ms")
    sc = layered.settings.scenario
    points: list[tuple[str, float]]
    if rates:
        if sc not in _PEAK_SCENARIOS:
            raise ConfigError(f"a rate sweep needs an open-loop scenario (Server, Interactive, "
                              f"constant, poisson, gamma), not {sc.value}")
        points = [("rate", float(r)) for r in rates]
    else:
        if sc is not Scenario.CLOSED_LOOP:
            raise ConfigError("a concurrency sweep runs the 'closed' pattern; pass "
                              "--scenario closed")
        points = [("concurrency", float(c)) for c in concurrencies]
    out = SweepResult(parent, [], [])
    for kind, value in points:
        _sweep_point(out, layered, dataset, sut, kind, value, pareto_latency=pareto_latency,
                     virtual_time=virtual_time, on_point=on_point)
    return out


def _sweep_point(out: SweepResult, layered: LayeredSettings, dataset: Dataset, sut: SutArg,
                 kind: str, value: float, *, pareto_latency: str, virtual_time: bool,
                 on_point: Callable[[dict[str, Any]], None] | None) -> RunResult:
    """Run one point of a sweep into ``out`` and rewrite the index. ``kind``: ``rate``
    (the sweep's open-loop scenario at ``value`` queries/s), ``concurrency`` (its closed
    loop), ``synchronous`` or ``throughput`` (a closed loop of ``value`` streams)."""
    parent = out.parent
    parent.mkdir(parents=True, exist_ok=True)
    i = len(out.rows) + 1
    if kind == "rate":
        lay = _with(layered, f"sweep point {i}", target_qps=value)
        folder = parent / f"point-{i:02d}-{value:.4g}qps"
    elif kind == "concurrency":
        lay = _with(layered, f"sweep point {i}", concurrency=int(value))
        folder = parent / f"point-{i:02d}-c{int(value)}"
    else:
        lay = _with(layered, f"sweep point {i}", scenario=Scenario.CLOSED_LOOP,
                    concurrency=int(value))
        folder = parent / f"point-{i:02d}-{kind}"
    res = run_benchmark(lay, dataset, _factory(sut), folder, virtual_time=virtual_time)
    out.results.append(res)
    out.rows.append(point_row(i, kind, value, folder.name, res.settings, res.summary,
                              res.verdicts))
    _mark_pareto(out.rows, pareto_latency)
    _write_index(parent, _sweep_doc(layered, out.rows, pareto_latency), out.rows,
                 SWEEP_COLUMNS)
    if on_point is not None:
        on_point(out.rows[-1])
    return res


def auto_rates(synchronous: float, throughput: float, n: int) -> tuple[float, ...]:
    """``n`` rates evenly spaced strictly between the synchronous and the throughput
    run's requests/s (none when the throughput run was not faster)."""
    if not throughput > synchronous > 0 or n < 1:
        return ()
    step = (throughput - synchronous) / (n + 1)
    return tuple(synchronous + step * k for k in range(1, n + 1))


def _auto_sweep(layered: LayeredSettings, dataset: Dataset, sut: SutArg, parent: Path,
                n: int, throughput_concurrency: int, *, pareto_latency: str,
                virtual_time: bool, on_point: Callable[[dict[str, Any]], None] | None
                ) -> SweepResult:
    sc = layered.settings.scenario
    if sc not in _PEAK_SCENARIOS:
        raise ConfigError(f"an automatic sweep runs its rates in an open-loop scenario "
                          f"(Server, Interactive, constant, poisson, gamma), not {sc.value}")
    if throughput_concurrency < 2:
        raise ConfigError("the throughput run needs at least 2 streams "
                          "(--throughput-concurrency)")
    out = SweepResult(parent, [], [])
    kw: dict[str, Any] = {"pareto_latency": pareto_latency, "virtual_time": virtual_time,
                          "on_point": on_point}
    sync = _sweep_point(out, layered, dataset, sut, "synchronous", 1, **kw)
    peak = _sweep_point(out, layered, dataset, sut, "throughput", throughput_concurrency, **kw)
    for rate in auto_rates(sync.summary.requests_per_second,
                           peak.summary.requests_per_second, n):
        _sweep_point(out, layered, dataset, sut, "rate", rate, **kw)
    return out


def _mark_pareto(rows: list[dict[str, Any]], latency: str) -> None:
    usable = [r for r in rows if r[latency] is not None]
    front = pareto_front([(r["output_tokens_per_s"], r[latency]) for r in usable])
    for r in rows:
        r["pareto"] = False
    for r, on in zip(usable, front, strict=True):
        r["pareto"] = on


def _sweep_doc(layered: LayeredSettings, rows: list[dict[str, Any]], latency: str
               ) -> dict[str, Any]:
    s = layered.settings
    return {"kind": "sweep", "label": "unverified",
            "settings": {"round": s.round, "benchmark": s.benchmark,
                         "scenario": s.scenario.value, "profile": s.profile},
            "pareto": {"throughput": "output_tokens_per_s", "latency": latency},
            "points": rows}


# -- scaling efficiency ---------------------------------------------------------------------

SCALING_COLUMNS = ("replicas", "repeats", "peak_qps", "tokens_per_s", "tokens_per_s_low",
                   "tokens_per_s_high", "tokens_per_s_per_replica", "efficiency",
                   "efficiency_low", "efficiency_high", "interval", "folders")


@dataclass
class ScalingResult:
    parent: Path
    points: list[ScalingPoint]
    searches: dict[int, list[PeakResult]]


def scaling_run(
    layered: LayeredSettings,
    dataset: Dataset,
    sut_for: Callable[[int], SutArg],
    parent: Path,
    *,
    replicas: Sequence[int] = (1, 2, 4),
    repeats: int = 1,
    start_qps: float | None = None,
    virtual_time: bool = False,
    on_point: Callable[[ScalingPoint], None] | None = None,
    on_probe: Callable[[Probe], None] | None = None,
    **peak_options: Any,
) -> ScalingResult:
    """Find and confirm the peak for each replica count; efficiency against the first.

    ``sut_for(n)`` gives the system with ``n`` replicas (endpoints). The search for
    ``n`` replicas starts at ``n / base`` times the base count's peak.
    """
    counts = sorted(set(replicas))
    if not counts or counts[0] < 1:
        raise ConfigError("--replicas must list counts >= 1, such as 1,2,4")
    if repeats < 1:
        raise ConfigError(f"--repeats must be at least 1 (got {repeats})")
    parent.mkdir(parents=True, exist_ok=True)
    searches: dict[int, list[PeakResult]] = {}
    inputs: list[tuple[int, list[float], list[float], float]] = []
    points: list[ScalingPoint] = []
    base_peak: float | None = None
    for n in counts:
        runs: list[PeakResult] = []
        for k in range(repeats):
            start = start_qps
            if base_peak is not None:
                start = base_peak * n / counts[0]
            folder = parent / (f"replicas-{n}" if repeats == 1 else f"replicas-{n}-r{k + 1}")
            pr = find_peak(layered, dataset, sut_for(n), folder, start_qps=start,
                           virtual_time=virtual_time, on_probe=on_probe, **peak_options)
            if pr.rate is None or pr.confirmed is None:
                raise ConfigError(f"no VALID rate was found with {n} replica(s) ({pr.note}); "
                                  f"see {folder / INDEX_JSON}")
            runs.append(pr)
        searches[n] = runs
        if base_peak is None:
            base_peak = sum(r.rate or 0.0 for r in runs) / len(runs)
        vals = [_throughput(r.confirmed) for r in runs if r.confirmed is not None]
        rates = [r.rate or 0.0 for r in runs]
        inputs.append((n, vals, rates, max(r.resolution for r in runs)))
        points = efficiency(inputs)
        _write_scaling_index(parent, layered, points, searches)
        if on_point is not None:
            on_point(points[-1])
    return ScalingResult(parent, points, searches)


def _write_scaling_index(parent: Path, layered: LayeredSettings, points: list[ScalingPoint],
                         searches: dict[int, list[PeakResult]]) -> None:
    rows = []
    for p in points:
        rows.append({
            "replicas": p.replicas, "repeats": len(p.peak_rates),
            "peak_qps": sum(p.peak_rates) / len(p.peak_rates),
            "tokens_per_s": p.throughput, "tokens_per_s_low": p.low,
            "tokens_per_s_high": p.high if math.isfinite(p.high) else None,
            "tokens_per_s_per_replica": p.per_replica, "efficiency": p.efficiency,
            "efficiency_low": p.efficiency_low,
            "efficiency_high": p.efficiency_high if math.isfinite(p.efficiency_high) else None,
            "interval": p.sources,
            "folders": " ".join(str(r.parent.relative_to(parent))
                                for r in searches[p.replicas]),
        })
    s = layered.settings
    doc = {"kind": "scaling", "label": "unverified",
           "settings": {"round": s.round, "benchmark": s.benchmark,
                        "scenario": s.scenario.value, "profile": s.profile},
           "efficiency": "T(N) / (N / N0 * T(N0)), T = the confirming run's tokens/s",
           "points": rows}
    _write_index(parent, doc, rows, SCALING_COLUMNS)


# -- distributed runs -----------------------------------------------------------------------


def distributed_driver(kind: str, address: str | None = None, workers: int = 2, *,
                       clock_offsets_ns: Sequence[int] = ()) -> RunDriver | None:
    """The driver of ``tokenmark run --distributed KIND`` ('' for a local run).

    Connects to (or starts) the cluster and checks it now, so an unreachable address or
    too few CPUs fail before anything else happens.
    """
    if not kind:
        if address:
            raise ConfigError("--ray-address needs --distributed ray")
        return None
    if kind != "ray":
        raise ConfigError(f"unknown --distributed {kind!r}; the one backend is 'ray'")
    from tokenmark.distributed.ray_runner import RayDriver, RayOptions  # the ray extra

    return RayDriver(RayOptions(workers=workers, address=address,
                                clock_offsets_ns=tuple(clock_offsets_ns)))
