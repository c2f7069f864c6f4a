"""One run against another: differences with confidence intervals, and verdicts.

Both runs are read from their results folders (``records.jsonl``; requests of the
measured phase that completed). For each figure the result is the ratio ``B / A`` with a
95% confidence interval:

- **output tokens/s**: the run's span (first send to last completion) is cut into
  ``windows`` equal windows and the streamed tokens counted in each by their arrival
  times (batch means); the ratio of the two means gets a delta-method interval with
  Student's t on ``windows - 1`` degrees of freedom per run.
- **latency percentiles** (TTFT and E2E from the scheduled time, as LoadGen measures;
  TPOT per request): each run's percentile has a distribution-free order-statistic
  interval (:func:`tokenmark.metrics.stats.quantile_interval`); the ratio's interval is
  ``[lo_B / hi_A, hi_B / lo_A]``, conservative (at least ~90% joint coverage).

:func:`reproduction` reads every ratio against a tolerance (default 4%, as partners are
read against a vendor's own result): *within* when the whole interval of ``B/A - 1`` lies
inside ``±tolerance``, *outside* when it lies wholly beyond, *inconclusive* otherwise;
the result is REPRODUCED when every headline figure (throughput, p50 TTFT, TPOT, E2E) is
within, NOT REPRODUCED when one is outside.

:func:`regression` is the CI gate: a figure regressed when it got worse by more than the
threshold (lower throughput, higher latency) *and* its interval excludes no change, i.e.
the change is real; any regression fails the gate.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

import numpy as np

from tokenmark.errors import BadInputError
from tokenmark.inputs import MIB, json_loads, read_bounded
from tokenmark.metrics.stats import quantile_interval
from tokenmark.output.records import RECORDS_FILE, read_records
from tokenmark.records import Phase

__all__ = [
    "DEFAULT_TOLERANCE",
    "Delta",
    "Regression",
    "Reproduction",
    "RunData",
    "compare_runs",
    "load_run",
    "regression",
    "reproduction",
]

DEFAULT_TOLERANCE: Final = 0.04
PERCENTILES: Final = (0.5, 0.9, 0.99)
HEADLINE: Final = ("output tokens/s", "TTFT p50", "TPOT p50", "E2E p50")
#: Student's t, two-sided 95%, by degrees of freedom (beyond 30: the normal 1.96).
_T95: Final = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
               2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
               2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def _t95(df: int) -> float:
    return _T95[df - 1] if 1 <= df <= len(_T95) else 1.96


@dataclass
class RunData:
    """What a comparison needs of one run."""

    path: Path
    results: dict[str, Any]
    ttft_ns: np.ndarray
    tpot_ns: np.ndarray
    e2e_ns: np.ndarray
    window_rates: np.ndarray  # output tokens/s per window
    requests: int
    manifest_sha256: str = ""

    @property
    def label(self) -> str:
        return str(self.path)


def load_run(path: Path, *, windows: int = 20) -> RunData:
    """Read a results folder (or its results.json); BadInputError naming what is missing."""
    folder = path.parent if path.is_file() else path
    res_path = folder / "results.json"
    rec_path = folder / RECORDS_FILE
    if not res_path.is_file():
        raise BadInputError(f"{path} holds no results.json; give a results folder "
                            "'tokenmark run' wrote")
    if not rec_path.is_file():
        raise BadInputError(f"{folder} has no {RECORDS_FILE}; comparisons need the records "
                            "of both runs")
    try:
        results = json_loads(read_bounded(res_path, 64 * MIB))
        recs = [r for r in read_records(rec_path) if r.ok and r.phase is Phase.MEASURE]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise BadInputError(f"cannot read {folder} ({e}); give an intact results "
                            "folder") from None
    if len(recs) < 2:
        raise BadInputError(f"{folder} has {len(recs)} completed requests; a comparison "
                            "needs at least 2")
    ttft = np.array([r.first_token_ns - r.scheduled_ns for r in recs if r.first_token_ns >= 0],
                    dtype=np.int64)
    tpot = np.array([(r.done_ns - r.first_token_ns) / (r.output_tokens - 1) for r in recs
                     if r.first_token_ns >= 0 and r.output_tokens > 1], dtype=np.float64)
    e2e = np.array([r.done_ns - r.scheduled_ns for r in recs], dtype=np.int64)
    start = min(r.issued_ns for r in recs)
    end = max(r.done_ns for r in recs)
    span = max(end - start, 1)
    edges = np.linspace(start, end, windows + 1)
    tokens = np.zeros(windows)
    for r in recs:
        if r.chunk_ns:
            idx = np.clip(np.searchsorted(edges, r.chunk_ns, side="right") - 1, 0, windows - 1)
            np.add.at(tokens, idx, r.chunk_tokens)
        else:  # no streamed chunks: count the tokens when the request completed
            i = min(int((r.done_ns - start) / span * windows), windows - 1)
            tokens[i] += r.output_tokens
    rates = tokens / (span / windows / 1e9)
    trust = results.get("manifest") if isinstance(results.get("manifest"), dict) else {}
    return RunData(folder, results, ttft, tpot, e2e, rates, len(recs),
                   str(trust.get("sha256", "")))


@dataclass(frozen=True)
class Delta:
    """``B / A`` of one figure with its 95% interval; ``higher_is_better`` its direction."""

    metric: str
    a: float
    b: float
    ratio: float
    lo: float
    hi: float
    higher_is_better: bool
    unit: str = ""

    @property
    def change(self) -> float:
        return self.ratio - 1.0

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "change": self.change}


def _throughput(a: RunData, b: RunData) -> Delta:
    ma, mb = float(a.window_rates.mean()), float(b.window_rates.mean())
    if ma <= 0:
        raise BadInputError(f"{a.label} streamed no output tokens; nothing to compare")
    ratio = mb / ma
    na, nb = a.window_rates.size, b.window_rates.size
    va = float(a.window_rates.var(ddof=1)) / na / ma ** 2 if na > 1 else 0.0
    vb = float(b.window_rates.var(ddof=1)) / nb / mb ** 2 if nb > 1 and mb > 0 else 0.0
    t = _t95(min(na, nb) - 1)
    sd = ratio * math.sqrt(va + vb)
    return Delta("output tokens/s", ma, mb, ratio, max(0.0, ratio - t * sd), ratio + t * sd,
                 True, "tokens/s")


def _percentile(name: str, xa: np.ndarray, xb: np.ndarray, p: float, unit: str) -> Delta | None:
    if xa.size < 2 or xb.size < 2:
        return None
    sa, sb = np.sort(xa), np.sort(xb)

    def at(s: np.ndarray) -> tuple[float, float, float]:
        n = s.size
        lo, hi = quantile_interval(n, p)
        return float(s[min(int(n * p), n - 1)]), float(s[lo]), float(s[hi])

    pa, la, ha = at(sa)
    pb, lb, hb = at(sb)
    if pa <= 0 or la <= 0:
        return None
    return Delta(f"{name} p{p * 100:g}", pa, pb, pb / pa, lb / ha, hb / la, False, unit)


def compare_runs(a: RunData, b: RunData,
                 percentiles: Sequence[float] = PERCENTILES) -> list[Delta]:
    out = [_throughput(a, b)]
    for name, xa, xb, unit in (("TTFT", a.ttft_ns, b.ttft_ns, "ns"),
                               ("TPOT", a.tpot_ns, b.tpot_ns, "ns"),
                               ("E2E", a.e2e_ns, b.e2e_ns, "ns")):
        for p in percentiles:
            d = _percentile(name, xa, xb, p, unit)
            if d is not None:
                out.append(d)
    return out


def _notes(a: RunData, b: RunData) -> list[str]:
    notes = []
    if a.manifest_sha256 and b.manifest_sha256 and a.manifest_sha256 != b.manifest_sha256:
        notes.append(f"different workloads: manifest {a.manifest_sha256[:12]} vs "
                     f"{b.manifest_sha256[:12]}")
    elif not (a.manifest_sha256 and b.manifest_sha256):
        notes.append("a run has no manifest: the workloads cannot be proven equal")
    return notes


@dataclass(frozen=True)
class Reproduction:
    tolerance: float
    deltas: tuple[Delta, ...]
    readings: dict[str, str]  # metric -> within | outside | inconclusive
    verdict: str  # REPRODUCED | NOT REPRODUCED | INCONCLUSIVE
    notes: tuple[str, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        return {"tolerance": self.tolerance, "verdict": self.verdict,
                "headline": list(HEADLINE), "readings": self.readings,
                "deltas": [d.to_json() for d in self.deltas], "notes": list(self.notes)}


def _reading(d: Delta, tol: float) -> str:
    lo, hi = d.lo - 1.0, d.hi - 1.0
    if -tol <= lo and hi <= tol:
        return "within"
    if hi < -tol or lo > tol:
        return "outside"
    return "inconclusive"


def reproduction(a: RunData, b: RunData, *, tolerance: float = DEFAULT_TOLERANCE
                 ) -> Reproduction:
    """Is B (the reproduction) within ``tolerance`` of A (the original)?"""
    if not 0 < tolerance < 1:
        raise BadInputError(f"the tolerance must be between 0 and 1 (got {tolerance:g}); "
                            "e.g. 0.04 for 4%")
    deltas = compare_runs(a, b)
    readings = {d.metric: _reading(d, tolerance) for d in deltas}
    head = [readings[m] for m in HEADLINE if m in readings]
    if any(r == "outside" for r in head):
        verdict = "NOT REPRODUCED"
    elif head and all(r == "within" for r in head):
        verdict = "REPRODUCED"
    else:
        verdict = "INCONCLUSIVE"
    return Reproduction(tolerance, tuple(deltas), readings, verdict, tuple(_notes(a, b)))


@dataclass(frozen=True)
class Regression:
    threshold: float
    deltas: tuple[Delta, ...]
    regressed: tuple[str, ...]
    notes: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        return not self.regressed

    def to_json(self) -> dict[str, Any]:
        return {"threshold": self.threshold, "passed": self.passed,
                "regressed": list(self.regressed),
                "deltas": [{**d.to_json(), "worse_by": worse_by(d)} for d in self.deltas],
                "notes": list(self.notes)}


def worse_by(d: Delta) -> tuple[float, float, float]:
    """How much worse B is than A (point, low, high); negative: better."""
    if d.higher_is_better:
        return 1 - d.ratio, 1 - d.hi, 1 - d.lo
    return d.ratio - 1, d.lo - 1, d.hi - 1


def regression(a: RunData, b: RunData, *, threshold: float,
               percentiles: Sequence[float] = PERCENTILES) -> Regression:
    """The CI gate: which figures of B regressed beyond ``threshold`` against A."""
    if not 0 <= threshold < 1:
        raise BadInputError(f"--max-regression must be between 0% and 100% (got "
                            f"{threshold:.4g}); e.g. 5%")
    deltas = compare_runs(a, b, percentiles)
    bad = []
    for d in deltas:
        point, lo, _ = worse_by(d)
        if point > threshold and lo > 0:
            bad.append(d.metric)
    return Regression(threshold, tuple(deltas), tuple(bad), tuple(_notes(a, b)))


def parse_share(text: str) -> float:
    """``5%``, ``0.05`` or ``5`` (percent when above 1) as a fraction."""
    t = text.strip()
    try:
        v = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        raise BadInputError(f"cannot read {text!r} as a share; write e.g. 5% or 0.05") from None
    if not t.endswith("%") and v > 1:
        v /= 100
    if not 0 <= v < 1 or not math.isfinite(v):
        raise BadInputError(f"{text!r} is not a share between 0% and 100%")
    return v
