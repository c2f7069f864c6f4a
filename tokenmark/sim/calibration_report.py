"""The outcome of a calibration: every published row with its predictions, the fitted
parameters, and the median errors by benchmark and scenario (in and out of sample).

:meth:`CalibrationReport.write` writes ``calibration_rows.csv`` (every row, eligible or
not and why, its deployment, fold, predictions and absolute percentage errors),
``efficiency.csv`` (the parameters in the format :mod:`tokenmark.sim.params` reads) and
``calibration_summary.json`` (the medians, notes and the count of ineligible rows by
reason).
"""

from __future__ import annotations

import csv
import json
import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tokenmark.perfmodel import Efficiency
from tokenmark.sim.published import PublishedRow

__all__ = ["CalibrationReport", "Group", "RowResult"]

Group = tuple[str, str, str]  # (architecture or vendor, stack, round), "*" = any


@dataclass
class RowResult:
    row: PublishedRow
    eligible: bool
    reason: str
    precision: str = ""
    tp: int = 0
    replicas: int = 0
    fold: str = ""
    group_in: str = ""
    group_out: str = ""
    predicted_in: float = math.nan
    predicted_out: float = math.nan
    roofline: float = math.nan
    protocol: str = ""  # "cross-round" or "leave-one-system-out" (how it was held out)
    tp_latency: int = 0  # latency rows: the tensor parallelism of the better candidate

    @property
    def ape_in(self) -> float:
        return abs(self.predicted_in / self.row.result - 1) if self.row.result else math.nan

    @property
    def ape_out(self) -> float:
        return abs(self.predicted_out / self.row.result - 1) if self.row.result else math.nan


@dataclass
class CalibrationReport:
    rows: list[RowResult]
    #: full fit per (group..., scenario): eff, median APE, systems; "Offline" is stage
    #: 1's fit, "Server"/"Interactive" stage 1 refitted around that scenario's pair
    params: dict[tuple[str, str, str, str], tuple[Efficiency, float, int]]
    notes: list[str] = field(default_factory=list)

    def medians(self) -> list[dict[str, Any]]:
        """Median APE by benchmark and scenario (in and out of sample), then overall."""
        groups: dict[tuple[str, str], list[RowResult]] = defaultdict(list)
        for r in self.rows:
            if r.eligible and not math.isnan(r.predicted_out):
                groups[(r.row.benchmark or "", r.row.scenario)].append(r)
        out = []
        for (b, s), rs in sorted(groups.items()):
            out.append(_median_row(b, s, rs))
        everything = [r for rs in groups.values() for r in rs]
        for sc in ("Offline", "Server", "Interactive"):
            sub = [r for r in everything if r.row.scenario == sc]
            if sub:
                out.append(_median_row("all", sc, sub))
        if everything:
            out.append(_median_row("all", "all", everything))
        return out

    def medians_by_protocol(self) -> list[dict[str, Any]]:
        """Median APE of the rows held out across rounds and of those held out with
        their system, per scenario and overall."""
        done = [r for r in self.rows if r.eligible and not math.isnan(r.predicted_out)]
        out = []
        for proto in ("cross-round", "leave-one-system-out"):
            sub = [r for r in done if r.protocol == proto]
            for sc in ("Offline", "Server", "Interactive", "all"):
                rs = [r for r in sub if sc == "all" or r.row.scenario == sc]
                if rs:
                    out.append(_median_row(proto, sc, rs))
        return out

    def write(self, out_dir: Path) -> list[Path]:
        out_dir.mkdir(parents=True, exist_ok=True)
        rows_path = out_dir / "calibration_rows.csv"
        with open(rows_path, "w", encoding="utf-8", newline="") as f:
            w = csv.writer(f)
            w.writerow(["csv_row", "round", "division", "submitter", "system_id",
                        "accelerator", "accelerators", "benchmark", "scenario", "metric",
                        "published", "eligible", "reason", "stack", "precision", "tp",
                        "replicas", "protocol", "fold", "group_in", "predicted_in",
                        "ape_in", "group_out", "predicted_out", "ape_out", "tp_latency",
                        "roofline", "roofline_ratio"])
            for r in self.rows:
                p = r.row
                w.writerow([p.index, p.round, p.division, p.submitter, p.system_id,
                            p.accelerator or p.accelerator_name, p.accelerators_used,
                            p.benchmark or p.benchmark_raw, p.scenario, p.metric, p.result,
                            int(r.eligible), r.reason, p.stack, r.precision, r.tp,
                            r.replicas, r.protocol, r.fold, r.group_in,
                            _num(r.predicted_in), _num(r.ape_in), r.group_out,
                            _num(r.predicted_out), _num(r.ape_out), r.tp_latency or "",
                            _num(r.roofline),
                            _num(r.roofline / p.result if p.result else math.nan)])
        eff_path = out_dir / "efficiency.csv"
        with open(eff_path, "w", encoding="utf-8", newline="") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(["family", "stack", "round", "scenario", "mfu", "mbu",
                        "step_overhead_us",
                        "seq_overhead_us", "size_exponent", "serial_fraction", "rows",
                        "median_ape", "notes"])
            for (fam, st, rnd, sc), (eff, ape, n) in sorted(self.params.items()):
                w.writerow([fam, st, rnd, sc, f"{eff.mfu:.4f}", f"{eff.mbu:.4f}",
                            f"{eff.step_overhead_ns / 1000:.1f}",
                            f"{eff.seq_overhead_ns / 1000:.2f}", f"{eff.size_exponent:.2f}",
                            f"{eff.serial_fraction:.2f}", n, f"{ape:.4f}",
                            "mfu and overheads fitted on published Offline rows, mbu and "
                            "serial fraction on Server/Interactive rows, by "
                            "bench/calibrate.py"])
        summary_path = out_dir / "calibration_summary.json"
        with open(summary_path, "w", encoding="utf-8") as f:
            json.dump({"medians": self.medians(),
                       "medians_by_protocol": self.medians_by_protocol(),
                       "notes": self.notes,
                       "eligible_rows": sum(r.eligible for r in self.rows),
                       "rows": len(self.rows),
                       "ineligible_reasons": self.ineligible_reasons()}, f, indent=2)
        return [rows_path, eff_path, summary_path]

    def ineligible_reasons(self) -> dict[str, int]:
        out: dict[str, int] = defaultdict(int)
        for r in self.rows:
            if not r.eligible:
                out[r.reason.split(";")[0]] += 1
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def _num(v: float) -> str:
    return "" if math.isnan(v) else f"{v:.6g}"


def _median_row(b: str, s: str, rs: list[RowResult]) -> dict[str, Any]:
    ins = [r.ape_in for r in rs if not math.isnan(r.ape_in)]
    outs = [r.ape_out for r in rs if not math.isnan(r.ape_out)]
    roof = [r.row.result / r.roofline for r in rs if r.roofline > 0]
    return {"benchmark": b, "scenario": s, "rows": len(rs),
            "median_ape_in": float(np.median(ins)) if ins else math.nan,
            "median_ape_out": float(np.median(outs)) if outs else math.nan,
            "median_published_over_roofline": float(np.median(roof)) if roof else math.nan}
