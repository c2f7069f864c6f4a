"""The outcome of a calibration: every published row with its forward prediction, the
fitted parameters, and the forward evaluation's tables.

:func:`forward_tables` computes, per forward step (round R, predicted with parameters
fitted on the rounds before it), the median, p75 and p90 of the absolute percentage
error and the shares within 10% and 25%, overall and by benchmark, scenario,
accelerator family and node count, and the 20 worst rows; it works on
:class:`Scored` rows, so the same tables come from this code's predictions and from any
other predictions file in the same columns (``bench/forward_before.py``'s).

:meth:`CalibrationReport.write` writes ``efficiency.csv`` (the parameters in the format
:mod:`tokenmark.sim.params` reads), ``forward_rows.csv`` (every row, eligible or not and
why, with its step, group, deployment, prediction and error), ``forward_summary.json``
(the tables) and ``forward_tables.md`` (the tables as text).
"""

from __future__ import annotations

import csv
import json
import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tokenmark.errors import ConfigError
from tokenmark.perfmodel import Efficiency, find_accelerator
from tokenmark.sim.published import PublishedRow

__all__ = ["CalibrationReport", "Level", "RowResult", "Scored", "forward_tables",
           "read_scored", "tables_markdown", "write_forward"]

Level = tuple[str, str, str]  # (architecture or vendor, stack, round), "*" = any
WORST = 20


@dataclass
class RowResult:
    row: PublishedRow
    eligible: bool
    reason: str
    step: str = ""  # the round it was predicted as (forward step)
    group: str = ""  # the parameters' groups
    deployment: str = ""
    binding: str = ""
    predicted: float = math.nan
    offline_bound: float = math.nan
    unbounded: float = math.nan

    @property
    def ape(self) -> float:
        return abs(self.predicted / self.row.result - 1) if self.row.result else math.nan


@dataclass(frozen=True)
class Scored:
    """One predicted row, as the tables need it."""

    step: str
    benchmark: str
    scenario: str
    family: str
    accelerator: str
    accelerators: int
    nodes: int
    submitter: str
    system: str
    published: float
    predicted: float
    note: str = ""

    @property
    def ape(self) -> float:
        return abs(self.predicted / self.published - 1)

    @property
    def node_bucket(self) -> str:
        n = self.nodes
        return ("1 node" if n <= 1 else "2-8 nodes" if n <= 8 else "9-18 nodes" if n <= 18
                else "over 18 nodes")


def _family(accelerator: str) -> str:
    try:
        return find_accelerator(accelerator).architecture
    except ConfigError:
        return accelerator


def _stats(rs: list[Scored]) -> dict[str, Any]:
    e = np.array([r.ape for r in rs])
    return {"rows": len(rs), "median": float(np.median(e)),
            "p75": float(np.percentile(e, 75)), "p90": float(np.percentile(e, 90)),
            "within_10": float(np.mean(e <= 0.10)), "within_25": float(np.mean(e <= 0.25)),
            "median_signed": float(np.median([r.predicted / r.published - 1 for r in rs]))}


def forward_tables(rows: Iterable[Scored], representable: dict[str, tuple[int, int]] | None
                   = None) -> dict[str, Any]:
    """Per step: overall, by benchmark, scenario, accelerator family and node count,
    and the worst rows. ``representable``: per step, (rows predicted, LLM rows of the
    round in the closed division) when known."""
    by_step: dict[str, list[Scored]] = defaultdict(list)
    for r in rows:
        if math.isfinite(r.predicted) and r.published > 0:
            by_step[r.step].append(r)
    out: dict[str, Any] = {}
    for step in sorted(by_step, key=lambda s: tuple(int(x) for x in s.lstrip("v").split("."))):
        rs = by_step[step]
        t: dict[str, Any] = {"overall": _stats(rs)}
        if representable and step in representable:
            t["coverage"] = {"predicted": representable[step][0],
                             "closed_llm_rows": representable[step][1]}
        for name in ("benchmark", "scenario", "family", "nodes"):
            groups: dict[str, list[Scored]] = defaultdict(list)
            for r in rs:
                groups[r.node_bucket if name == "nodes" else str(getattr(r, name))].append(r)
            t[f"by_{name}"] = {k: _stats(v) for k, v in sorted(groups.items())}
        worst = sorted(rs, key=lambda r: -r.ape)[:WORST]
        t["worst"] = [{"benchmark": r.benchmark, "scenario": r.scenario,
                       "submitter": r.submitter, "system": r.system,
                       "accelerator": r.accelerator, "accelerators": r.accelerators,
                       "published": r.published, "predicted": r.predicted,
                       "ratio": r.predicted / r.published, "note": r.note} for r in worst]
        out[step] = t
    return out


def _pct(v: float) -> str:
    return f"{v * 100:.1f}%"


def tables_markdown(tables: dict[str, Any], title: str) -> str:
    lines = [f"# {title}", ""]
    head = "| | rows | median | p75 | p90 | within 10% | within 25% | median signed |"
    rule = "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    for step, t in tables.items():
        cov = t.get("coverage")
        lines.append(f"## {step}: fitted on the rounds before {step}")
        if cov:
            lines.append(f"{cov['predicted']} rows predicted of {cov['closed_llm_rows']} "
                         "closed-division LLM rows in the round.")
        lines += ["", head, rule]

        def row(name: str, s: dict[str, Any]) -> str:
            return (f"| {name} | {s['rows']} | {_pct(s['median'])} | {_pct(s['p75'])} | "
                    f"{_pct(s['p90'])} | {_pct(s['within_10'])} | {_pct(s['within_25'])} | "
                    f"{s['median_signed'] * 100:+.1f}% |")

        lines.append(row("**all**", t["overall"]))
        for part in ("benchmark", "scenario", "family", "nodes"):
            for k, s in t[f"by_{part}"].items():
                lines.append(row(f"{part}: {k}", s))
        lines += ["", f"Worst {len(t['worst'])} rows:", "",
                  "| benchmark | scenario | submitter | system | accelerators | published | "
                  "predicted | ratio |", "| --- | --- | --- | --- | ---: | ---: | ---: | ---: |"]
        for w in t["worst"]:
            lines.append(f"| {w['benchmark']} | {w['scenario']} | {w['submitter']} | "
                         f"{w['system']} | {w['accelerators']} x {w['accelerator']} | "
                         f"{w['published']:,.6g} | {w['predicted']:,.6g} | "
                         f"{w['ratio']:.2f} |")
        lines.append("")
    return "\n".join(lines)


def write_forward(out_dir: Path, scored: list[Scored], title: str,
                  representable: dict[str, tuple[int, int]] | None = None) -> dict[str, Any]:
    """``forward_summary.json`` and ``forward_tables.md`` of ``scored`` in ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    tables = forward_tables(scored, representable)
    with open(out_dir / "forward_summary.json", "w", encoding="utf-8") as fh:
        json.dump(tables, fh, indent=2)
    (out_dir / "forward_tables.md").write_text(tables_markdown(tables, title) + "\n",
                                               encoding="utf-8")
    return tables


def read_scored(path: Path) -> tuple[list[Scored], dict[str, tuple[int, int]]]:
    """The predicted rows of a ``forward_predictions.csv`` (``bench/forward_before.py``):
    columns step, accelerator, accelerators, nodes, benchmark, scenario, published,
    predicted (empty when refused), group; and per step the coverage."""
    out: list[Scored] = []
    seen: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    with open(path, encoding="utf-8", newline="") as fh:
        for r in csv.DictReader(fh):
            if r.get("division", "closed") != "closed":
                continue
            seen[r["step"]][1] += 1
            if not r["predicted"]:
                continue
            seen[r["step"]][0] += 1
            out.append(Scored(r["step"], r["benchmark"], r["scenario"],
                              _family(r["accelerator"]), r["accelerator"],
                              int(r["accelerators"]), int(r["nodes"]), r["submitter"],
                              r["system_id"], float(r["published"]), float(r["predicted"]),
                              r.get("group", "")))
    return out, {k: (v[0], v[1]) for k, v in seen.items()}


@dataclass
class CalibrationReport:
    rows: list[RowResult]
    #: the shipped fit per (group..., scenario): eff, median APE, systems
    params: dict[tuple[str, str, str, str], tuple[Efficiency, float, int]]
    notes: list[str] = field(default_factory=list)
    scored_rounds: list[str] = field(default_factory=list)
    #: the shipped model levels: (model, stack, round, speed, rows); model "*": the prior
    levels: list[tuple[str, str, str, float, int]] = field(default_factory=list)

    def scored(self) -> list[Scored]:
        out = []
        for r in self.rows:
            if r.step and math.isfinite(r.predicted):
                p = r.row
                out.append(Scored(r.step, p.benchmark or p.benchmark_raw, p.scenario,
                                  _family(p.accelerator or ""), p.accelerator or "",
                                  p.accelerators_used, p.nodes, p.submitter, p.system_id,
                                  p.result, r.predicted, f"{r.deployment}; {r.binding}"))
        return out

    def representable(self) -> dict[str, tuple[int, int]]:
        """Per scored round: rows predicted, and LLM rows of the round in the closed
        division (eligible or refused for a reason other than not being an LLM)."""
        out = {}
        for rnd in self.scored_rounds:
            llm = [r for r in self.rows if r.row.round == rnd and r.row.division == "closed"
                   and "not an LLM benchmark" not in r.reason]
            out[rnd] = (sum(1 for r in llm if r.step == rnd and math.isfinite(r.predicted)),
                        len(llm))
        return out

    def tables(self) -> dict[str, Any]:
        return forward_tables(self.scored(), self.representable())

    def write(self, out_dir: Path) -> list[Path]:
        out_dir.mkdir(parents=True, exist_ok=True)
        rows_path = out_dir / "forward_rows.csv"
        with open(rows_path, "w", encoding="utf-8", newline="") as f:
            w = csv.writer(f)
            w.writerow(["source", "source_index", "round", "division", "submitter",
                        "system_id", "accelerator", "accelerators", "nodes", "benchmark",
                        "scenario", "metric", "published", "eligible", "reason", "stack",
                        "precision", "step", "group", "deployment", "binding",
                        "predicted", "ape", "offline_bound", "unbounded"])
            for r in self.rows:
                p = r.row
                w.writerow([p.source, p.index, p.round, p.division, p.submitter,
                            p.system_id, p.accelerator or p.accelerator_name,
                            p.accelerators_used, p.nodes, p.benchmark or p.benchmark_raw,
                            p.scenario, p.metric, p.result, int(r.eligible), r.reason,
                            p.stack, p.precision or "", r.step, r.group, r.deployment,
                            r.binding, _num(r.predicted), _num(r.ape),
                            _num(r.offline_bound), _num(r.unbounded)])
        written = [rows_path]
        if self.params:  # a fit's (a fixed table's evaluation ships nothing)
            written.append(out_dir / "efficiency.csv")
            write_efficiency(written[-1], self.params)
            write_levels(out_dir / "model_levels.csv", self.levels)
        tables = write_forward(out_dir, self.scored(), "Forward-in-time evaluation",
                               self.representable())
        with open(out_dir / "forward_summary.json", "w", encoding="utf-8") as fh:
            json.dump({"tables": tables, "notes": self.notes,
                       "refused": self.ineligible_reasons()}, fh, indent=2)
        return [*written, out_dir / "forward_summary.json", out_dir / "forward_tables.md"]

    def ineligible_reasons(self) -> dict[str, int]:
        out: dict[str, int] = defaultdict(int)
        for r in self.rows:
            if not r.eligible and "not an LLM benchmark" not in r.reason:
                out[r.reason.split(";")[0]] += 1
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def write_efficiency(path: Path, params: dict[tuple[str, str, str, str],
                                                tuple[Efficiency, float, int]]) -> None:
    """``params`` (a fit's :meth:`~tokenmark.sim.calibration.Fit.table`) as an
    ``efficiency.csv``."""
    with open(path, "w", encoding="utf-8", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["family", "stack", "round", "scenario", "mfu", "mbu",
                    "step_overhead_us", "seq_overhead_us", "size_exponent",
                    "serial_fraction", "rows", "median_ape", "fp4_mfu", "notes"])
        for (fam, st, rnd, sc), (eff, ape, n) in sorted(params.items()):
            w.writerow([fam, st, rnd, sc, f"{eff.mfu:.4f}", f"{eff.mbu:.4f}",
                        f"{eff.step_overhead_ns / 1000:.1f}",
                        f"{eff.seq_overhead_ns / 1000:.2f}", f"{eff.size_exponent:.2f}",
                        f"{eff.serial_fraction:.2f}", n, f"{ape:.4f}",
                        "" if eff.fp4_mfu is None else f"{eff.fp4_mfu:.4f}",
                        "fitted on the rounds up to v6.0 by bench/calibrate.py: mfu and "
                        "overheads on Offline rows (of models past their debut round, "
                        "where the architecture has enough; overheads from the next "
                        "group where the rows hold one model size), Server: one speed on "
                        "Offline's per "
                        "vendor from Server rows, Interactive: mbu and serial fraction "
                        "from Interactive rows"])


def write_levels(path: Path, levels: list[tuple[str, str, str, float, int]]) -> None:
    """A fit's model levels (:meth:`~tokenmark.sim.calibration.Fit.levels_table`) as a
    ``model_levels.csv``."""
    with open(path, "w", encoding="utf-8", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["model", "stack", "round", "speed", "rows", "notes"])
        for model, st, rnd, speed, n in levels:
            w.writerow([model, st, rnd, f"{speed:.4f}", n,
                        "new-model prior: median level of the earlier models in their "
                        "first round (n: models)" if model == "*" else
                        "fitted by bench/calibrate.py on the Offline rows of the "
                        "rounds before the newest forward step against their groups "
                        "(a debut round's: against groups its rows do not enter)"])


def _num(v: float) -> str:
    return "" if math.isnan(v) else f"{v:.6g}"
