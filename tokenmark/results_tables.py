"""Plain tables of the results API's answers, for the CLI and the web UI to print.

Each function turns one answer of :mod:`tokenmark.results_api` into :class:`Table`
objects (title, column names, rows of strings, notes) and decides nothing: the CLI
prints them with rich, a test reads them as text (:meth:`Table.text`). Every table that
shows a derived figure carries the note saying so, every table of rows shows the rows'
labels (official/unverified), and the note "Result not verified by MLCommons
Association." appears under any table holding an unverified row.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tokenmark.analyses import (
    Comparison,
    GainSeries,
    Leaderboard,
    ReproGroup,
    ScalingCurve,
)
from tokenmark.resultrows import Label, ResultRow, scale_label
from tokenmark.results_api import ImportReport

__all__ = [
    "UNVERIFIED_NOTE",
    "Table",
    "comparison_table",
    "gains_tables",
    "import_table",
    "leaderboard_tables",
    "reproducibility_tables",
    "rows_table",
    "scaling_table",
]

UNVERIFIED_NOTE = "Result not verified by MLCommons Association."


@dataclass(frozen=True)
class Table:
    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    notes: tuple[str, ...] = ()

    def text(self) -> str:
        """The table as aligned plain text (for tests, logs and dumb terminals)."""
        widths = [max([len(c)] + [len(r[i]) for r in self.rows])
                  for i, c in enumerate(self.columns)]
        lines = [self.title, "  ".join(c.ljust(w) for c, w in zip(self.columns, widths,
                                                                   strict=True))]
        lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True))
                  for r in self.rows]
        return "\n".join(lines + [f"note: {n}" for n in self.notes])


def _num(x: float | None, digits: int = 6) -> str:
    if x is None:
        return "-"
    return f"{x:,.{digits}g}" if abs(x) < 1e6 else f"{x:,.0f}"


def _pct(x: float) -> str:
    return f"{x * 100:+.1f}%"


def _count(r: ResultRow) -> str:
    used, total = r.accelerators_used, r.total_accelerators
    if used is None:
        return "?"
    return f"{used}" if used == total else f"{used} (of {total})"


def _notes(rows: Sequence[ResultRow], *extra: str) -> tuple[str, ...]:
    notes = list(extra)
    if any(r.label is Label.UNVERIFIED for r in rows):
        notes.append(UNVERIFIED_NOTE)
    return tuple(notes)


def rows_table(rows: Sequence[ResultRow], title: str = "results") -> Table:
    cols = ("round", "division", "submitter", "system", "benchmark", "scenario", "result",
            "unit", "accelerators", "tier", "label")
    body = tuple((r.round, r.division, r.submitter, r.system_id, r.benchmark, r.scenario,
                  _num(r.value), r.unit, _count(r), scale_label(r), r.label.value)
                 for r in rows)
    return Table(title, cols, body, _notes(rows))


def leaderboard_tables(lb: Leaderboard) -> list[Table]:
    out = []
    for name, entries in (("single node", lb.single_node),
                          ("rack-scale / multi-node", lb.multi_node)):
        cols = ("#", "submitter", "system", "accelerator", "accelerators", "nodes",
                f"result ({lb.unit})", "per accelerator (derived)", "scale", "label")
        body = tuple((str(e.rank), e.row.submitter, e.row.system_id, e.row.accelerator_model,
                      _count(e.row), str(e.row.nodes if e.row.nodes is not None else "?"),
                      _num(e.row.value), _num(e.per_accelerator), scale_label(e.row),
                      e.row.label.value) for e in entries)
        title = (f"{lb.benchmark} {lb.scenario}, {lb.division or 'any division'}, "
                 f"{lb.availability or 'any availability'}, "
                 f"{', '.join(lb.rounds) or 'no round'}: {name}")
        out.append(Table(title, cols, body, _notes([e.row for e in entries], lb.derived_note)))
    if lb.excluded:
        out.append(Table("left off the board", ("system", "reason"),
                         tuple((r.system_ref, why) for r, why in lb.excluded)))
    return out


def reproducibility_tables(groups: Sequence[ReproGroup], tolerance: float = 0.04) -> list[Table]:
    out = []
    for g in groups:
        cols = ("submitter", "system", "result", "spread vs vendor", f"within {tolerance:.0%}")
        body = [(f"{g.vendor.submitter} (vendor)", g.vendor.system_id, _num(g.vendor.value),
                 "baseline", "")]
        body += [(p.row.submitter, p.row.system_id, _num(p.row.value), _pct(p.spread),
                  "yes" if abs(p.spread) <= tolerance else "no") for p in g.partners]
        title = (f"{g.round} {g.benchmark} {g.scenario}: {g.accelerators} x {g.accelerator} "
                 f"({g.vendor.unit})")
        out.append(Table(title, cols, tuple(body),
                         _notes([g.vendor] + [p.row for p in g.partners])))
    return out


def comparison_table(c: Comparison) -> Table:
    kind = "per accelerator (derived)" if c.normalised else "result"
    cols = ("benchmark", "scenario", f"A {kind}", f"B {kind}", "B / A", "A rows", "B rows")
    body = tuple((r.benchmark, r.scenario, _num(r.a_value), _num(r.b_value), f"{r.ratio:.3f}x",
                  r.a.source_path or r.a.system_ref, r.b.source_path or r.b.system_ref)
                 for r in c.ratios)
    notes = ["B / A above 1 means B is better (for latencies, A's latency over B's)"]
    if c.normalised:
        notes.append("normalised: per-accelerator figures are derived by tokenmark, "
                     "not MLPerf results")
    if c.only_a or c.only_b:
        notes.append(f"without a counterpart: {len(c.only_a)} of A's results, "
                     f"{len(c.only_b)} of B's")
    rows = [r.a for r in c.ratios] + [r.b for r in c.ratios]
    return Table(f"A = {c.a}, B = {c.b}", cols, body, _notes(rows, *notes))


def scaling_table(s: ScalingCurve) -> Table:
    cols = ("accelerators", "submitter", "system", "result", "per accelerator (derived)",
            "efficiency")
    body = tuple((_count(p.row), p.row.submitter, p.row.system_id, _num(p.row.value),
                  _num(p.per_accelerator), f"{p.efficiency:.3f}") for p in s.points)
    note = (f"efficiency = (T_N / N) / (T_base / base), base {s.base.accelerators} "
            f"accelerators ({s.base.row.system_id}); N counts accelerators used")
    return Table(f"{s.round} {s.benchmark} {s.scenario}: {s.accelerator}", cols, body,
                 _notes([p.row for p in s.points], note))


def gains_tables(series: Sequence[GainSeries]) -> list[Table]:
    out = []
    for s in series:
        cols = ("round", "submitter", "system", "result", "gain vs first round")
        body = tuple((p.round, p.row.submitter, p.row.system_id, _num(p.row.value),
                      f"{p.gain:.3f}x") for p in s.points)
        out.append(Table(f"{s.benchmark} {s.scenario}: {s.accelerators} x {s.accelerator}",
                         cols, body, _notes([p.row for p in s.points])))
    return out


def import_table(report: ImportReport) -> Table:
    """What an import read and wrote; each per-file error is a note."""
    c = report.counts
    cols = ("read", "results", "runs", "errors", "added", "updated", "unchanged", "seconds")
    body = ((str(report.folders), str(report.rows), str(report.runs), str(len(report.errors)),
             str(c.added) if c else "-", str(c.updated) if c else "-",
             str(c.unchanged) if c else "-", f"{report.seconds:.2f}"),)
    notes = tuple(str(e) for e in report.errors)
    if not report.written:
        notes += ("nothing was written to the database",)
    return Table(f"import {report.path} -> {report.db}", cols, body, notes)
