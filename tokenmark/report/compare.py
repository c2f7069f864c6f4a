"""Comparing runs: throughput against latency for two or more runs (or a sweep), with
the Pareto front.

A point per run, from its ``results.json`` only: throughput is tokenmark's output
tokens/s over the measured window (defined the same way for every scenario and
pattern, so runs of different scenarios compare), latencies are the run's exact TTFT,
TPOT and end-to-end percentiles at one percentile shared by all points (the runs'
common target percentile, else p99). A run is on the front of a latency when no other
run has at least its throughput and at most its latency with one of them strictly
better (:func:`pareto_front`). A sweep is a folder of run folders: :func:`find_runs`
collects every ``results.json`` under the paths it is given.

Runs of one system, benchmark and scenario form a group, drawn as one curve in load
order (a sweep). Beside each point: its achieved requests/s and p50/p90/p99 of each
latency (GuideLLM's latency-against-rate curves), and each latency limit of the runs'
presets (drawn when it holds at the percentile shown).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenmark.output.results import RESULTS_FILE

__all__ = ["METRICS", "RunPoint", "comparison_data", "find_runs", "pareto_front"]

METRICS = ("ttft", "tpot", "e2e")
#: Percentiles drawn against the request rate (GuideLLM's sweep curves).
_CURVE_PCTS = ("50", "90", "99")
_MAX_DEPTH = 4


def find_runs(paths: Iterable[Path]) -> list[Path]:
    """Results folders under ``paths`` (a run folder, ``results.json``, or a folder of
    runs searched up to four levels down), each once, in the order found (sorted
    within a folder)."""
    out: list[Path] = []
    seen: set[Path] = set()

    def visit(p: Path, depth: int) -> None:
        if (p / RESULTS_FILE).is_file():
            key = p.resolve()
            if key not in seen:
                seen.add(key)
                out.append(p)
            return
        if depth >= _MAX_DEPTH:
            return
        for child in sorted(c for c in p.iterdir() if c.is_dir() and not c.name.startswith(".")):
            visit(child, depth + 1)

    for path in paths:
        if path.is_file() and path.name == RESULTS_FILE:
            visit(path.parent, 0)
        elif path.is_dir():
            visit(path, 0)
    return out


def pareto_front(points: Sequence[tuple[float, float]]) -> list[bool]:
    """Which ``(throughput, latency)`` points no other point dominates (more or equal
    throughput and less or equal latency, one of them strictly): more throughput is
    better, less latency is better. Equal points are on the front together.

    One pass from the highest throughput down, O(n log n): a point is on the front when
    its latency is the least of its throughput and below every latency of a strictly
    higher throughput. ``test_report`` proves it equal to the pairwise definition.
    """
    order = sorted(range(len(points)), key=lambda i: (-points[i][0], points[i][1]))
    out = [False] * len(points)
    best_above = math.inf  # least latency among strictly higher throughputs
    k = 0
    while k < len(order):
        x = points[order[k]][0]
        group_end = k
        while group_end < len(order) and points[order[group_end]][0] == x:
            group_end += 1
        least = points[order[k]][1]  # sorted by latency within a throughput
        if least < best_above:
            for i in order[k:group_end]:
                out[i] = points[i][1] == least
        best_above = min(best_above, least)
        k = group_end
    return out


@dataclass(frozen=True)
class RunPoint:
    """One run as the comparison shows it."""

    name: str
    href: str | None
    group: str
    benchmark: str
    scenario: str
    target_qps: float | None
    concurrency: float | None
    throughput: float | None
    requests_per_second: float | None
    latency: dict[str, float | None]
    percentiles: dict[str, dict[str, float]]
    limits: dict[str, float | None]
    tokenmark_validity: str
    mlperf_validity: str


def _number(x: Any) -> float | None:
    """A finite number, else ``None`` (a NaN or infinity is no point to draw)."""
    if isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x):
        return float(x)
    return None


def _pct_key(p: float) -> str:
    return f"{p * 100:g}"


def _point(name: str, href: str | None, doc: Mapping[str, Any], pct: str) -> RunPoint:
    run = doc.get("run", {})
    summary = doc.get("summary", {})
    eff = doc.get("settings", {}).get("effective", {})
    lat = summary.get("latency_ms", {})
    values: dict[str, float | None] = {}
    pcts: dict[str, dict[str, float]] = {}
    for m in METRICS:
        d = lat.get(m) or {}
        given = (d.get("percentiles") or {}) if d.get("count") else {}
        values[m] = _number(given.get(pct))
        pcts[m] = {k: v for k in _CURVE_PCTS if (v := _number(given.get(k))) is not None}
    limits_ns = eff.get("limits_ns") or {}
    limits = {m: (None if (v := _number(limits_ns.get(f"{m}_ns"))) is None else v / 1e6)
              for m in METRICS}
    verdicts = doc.get("verdicts", {})
    sut = str((run.get("sut") or {}).get("name", "?"))
    concurrency = _number(eff.get("concurrency")) or None  # 0: not closed-loop
    return RunPoint(
        name=name, href=href,
        group=f"{sut} {run.get('benchmark', '?')} {run.get('scenario', '?')}",
        benchmark=str(run.get("benchmark", "?")),
        scenario=str(run.get("scenario", "?")),
        # a closed-loop run (concurrency > 0) has no offered rate, whatever target_qps says
        target_qps=None if concurrency else _number(eff.get("target_qps")),
        concurrency=concurrency,
        throughput=_number(summary.get("throughput", {}).get("output_tokens_per_second")),
        requests_per_second=_number(summary.get("throughput", {}).get("requests_per_second")),
        latency=values, percentiles=pcts, limits=limits,
        tokenmark_validity=str(verdicts.get("tokenmark", {}).get("validity", "?")),
        mlperf_validity=str(verdicts.get("mlperf", {}).get("validity", "?")),
    )


def comparison_data(runs: Sequence[tuple[str, str | None, Mapping[str, Any]]]) -> dict[str, Any]:
    """The comparison of ``runs`` (name, link or ``None``, ``results.json`` document),
    JSON-ready, sorted by target rate, then concurrency, then throughput (a sweep of
    rates or of concurrencies reads in load order)."""
    targets = {doc.get("settings", {}).get("effective", {}).get("target_latency_percentile")
               for _, _, doc in runs}
    common = targets.pop() if len(targets) == 1 else None
    pct = _pct_key(common) if isinstance(common, float) else "99"
    points = [_point(name, href, doc, pct) for name, href, doc in runs]
    points.sort(key=lambda p: (p.target_qps or 0.0, p.concurrency or 0.0, p.throughput or 0.0,
                               p.name))
    fronts: dict[str, list[bool]] = {}
    for m in METRICS:
        usable = [i for i, p in enumerate(points)
                  if p.throughput is not None and p.latency[m] is not None]
        flags = pareto_front([(points[i].throughput or 0.0, points[i].latency[m] or 0.0)
                              for i in usable])
        fronts[m] = [False] * len(points)
        for i, f in zip(usable, flags, strict=True):
            fronts[m][i] = f
    metrics = [m for m in METRICS if any(p.latency[m] is not None for p in points)]
    # the limits to draw: each distinct limit of the runs, when they hold at the
    # percentile the comparison shows
    limits = {m: sorted({v for p in points if (v := p.limits[m]) is not None})
              if isinstance(common, float) else [] for m in METRICS}
    groups = list(dict.fromkeys(p.group for p in points))
    return {
        "kind": "comparison",
        "groups": groups,
        "throughput_label": "output tokens/s",
        "percentile_label": pct,
        "metrics": metrics,
        "limits": limits,
        "rates": sum(p.target_qps is not None and p.requests_per_second is not None
                     for p in points) >= 2,
        "skipped": [],
        "points": [{
            "name": p.name, "href": p.href, "group": p.group, "benchmark": p.benchmark,
            "scenario": p.scenario,
            "target_qps": p.target_qps, "concurrency": p.concurrency,
            "throughput": p.throughput,
            "requests_per_second": p.requests_per_second, "latency": p.latency,
            "percentiles": p.percentiles,
            "front": {m: fronts[m][i] for m in METRICS},
            "tokenmark_validity": p.tokenmark_validity, "mlperf_validity": p.mlperf_validity,
        } for i, p in enumerate(points)],
    }
