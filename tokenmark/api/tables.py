"""Plain tables of the results API's answers, for the CLI and the web UI to print.

Each function turns one answer of :mod:`tokenmark.api.results` into :class:`Table`
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
    AcceleratorComparison,
    Comparison,
    GainSeries,
    Leaderboard,
    ReproGroup,
    ScalingCurve,
    Top,
)
from tokenmark.api.results import ImportReport, RefreshReport
from tokenmark.hardware import Alias, accelerator
from tokenmark.importer.packaged import PublishedTable
from tokenmark.resultrows import UNVERIFIED_NOTE, Label, ResultRow, scale_label

__all__ = [
    "UNVERIFIED_NOTE",
    "Table",
    "accelerator_comparison_tables",
    "aliases_table",
    "comparison_table",
    "gains_summary_table",
    "gains_tables",
    "import_table",
    "leaderboard_tables",
    "published_table",
    "refresh_table",
    "reproducibility_tables",
    "rows_table",
    "scaling_table",
    "top_table",
]



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


def _notes(rows: Sequence[ResultRow], *extra: str,
           aliases: Sequence[Alias] = ()) -> tuple[str, ...]:
    notes = list(extra)
    notes += [f"alias: {a}" for a in aliases]
    if any(r.label is Label.UNVERIFIED for r in rows):
        notes.append(UNVERIFIED_NOTE)
    return tuple(notes)


def _hw(r: ResultRow) -> str:
    """The accelerator as a table shows it: as published, heterogeneous systems marked."""
    hw = accelerator(r.accelerator_model)
    if not hw.parts:
        return f"{r.host_processor} (CPU only)" if r.host_processor else "-"
    return f"{r.accelerator_model} (heterogeneous)" if hw.heterogeneous else r.accelerator_model


def rows_table(rows: Sequence[ResultRow], title: str = "results") -> Table:
    cols = ("round", "division", "submitter", "system", "benchmark", "scenario", "result",
            "unit", "accelerators", "tier", "label")
    body = tuple((r.round, r.division, r.submitter, r.system_id, r.benchmark, r.scenario,
                  _num(r.value), r.unit, _count(r), scale_label(r), r.label.value)
                 for r in rows)
    return Table(title, cols, body, _notes(rows))


def leaderboard_tables(lb: Leaderboard, limit: int | None = None) -> list[Table]:
    """The two tiers (at most ``limit`` places each; the rest are counted in a note)."""
    out = []
    for name, all_entries in (("single node", lb.single_node),
                              ("rack-scale / multi-node", lb.multi_node)):
        entries = all_entries[:limit] if limit is not None else all_entries
        more = (f"{len(all_entries) - len(entries)} more places not shown (--limit "
                f"{limit})",) if len(entries) < len(all_entries) else ()
        cols = ("#", "submitter", "system", "accelerator", "accelerators", "nodes",
                f"result ({lb.unit})", "per accelerator (derived)", "scale", "label")
        body = tuple((str(e.rank), e.row.submitter, e.row.system_id, _hw(e.row),
                      _count(e.row), str(e.row.nodes if e.row.nodes is not None else "?"),
                      _num(e.row.value), _num(e.per_accelerator), scale_label(e.row),
                      e.row.label.value) for e in entries)
        title = (f"{lb.benchmark} {lb.scenario}, {lb.division or 'any division'}, "
                 f"{lb.availability or 'any availability'}, "
                 f"{', '.join(lb.rounds) or 'no round'}: {name}")
        out.append(Table(title, cols, body, _notes([e.row for e in entries], lb.derived_note,
                                                   *more)))
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
                         _notes([g.vendor] + [p.row for p in g.partners],
                                aliases=g.aliases)))
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
            f"accelerators ({s.base.row.system_id}, {_num(s.base.row.value)}); N counts "
            "accelerators used")
    who = (f"submitters: {', '.join(s.submitters)}; availability: "
           f"{', '.join(s.availabilities)}")
    return Table(f"{s.round} {s.benchmark} {s.scenario}: {s.accelerator}", cols, body,
                 _notes([p.row for p in s.points], note, who, aliases=s.aliases))


def gains_tables(series: Sequence[GainSeries]) -> list[Table]:
    out = []
    for s in series:
        cols = ("round", "submitter", "system", "published as", "availability", "result",
                "gain vs first round")
        body = tuple((p.round, p.row.submitter, p.row.system_id, _hw(p.row),
                      p.row.availability or "-", _num(p.row.value), f"{p.gain:.3f}x")
                     for p in s.points)
        counted = "sockets" if s.accelerator.endswith("(CPU only)") else "accelerators"
        out.append(Table(f"{s.benchmark} {s.scenario}: {s.accelerators} x {s.accelerator}",
                         cols, body, _notes([p.row for p in s.points],
                                            f"{s.accelerators} {counted} in every round",
                                            aliases=s.aliases)))
    return out


def gains_summary_table(series: Sequence[GainSeries]) -> Table:
    """Every series in one table: each round's best result and the last against the
    first (for software gains over several benchmarks and scenarios)."""
    cols = ("benchmark", "scenario", "hardware", "submitter", "results by round",
            "availability", "gain (last / first)")
    body = []
    for s in series:
        pts = s.points
        body.append((s.benchmark, s.scenario, f"{s.accelerators} x {s.accelerator}",
                     ", ".join(dict.fromkeys(p.row.submitter for p in pts)),
                     " -> ".join(f"{p.round} {_num(p.row.value)}" for p in pts),
                     " -> ".join(p.row.availability or "-" for p in pts),
                     f"{pts[-1].gain:.3f}x"))
    aliases = list(dict.fromkeys(a for s in series for a in s.aliases))
    rows = [p.row for s in series for p in s.points]
    return Table(f"software gains: the same hardware across rounds ({len(series)} series)",
                 cols, tuple(body), _notes(rows, "each round: the best result of the "
                                           "hardware at that count; gain = last / first",
                                           aliases=aliases))


def accelerator_comparison_tables(c: AcceleratorComparison) -> list[Table]:
    kind = "per accelerator (derived)" if c.normalised else "result"
    cols = ("benchmark", "scenario", "submitter", "accelerators", f"A {kind}",
            "A availability", f"B {kind}", "B availability", "B / A", "A system", "B system")
    body = tuple((p.benchmark, p.scenario, p.submitter or "(any)",
                  _count(p.a) if p.a.accelerators_used == p.b.accelerators_used
                  else f"{_count(p.a)} / {_count(p.b)}",
                  _num(p.a_value), p.a.availability or "-", _num(p.b_value),
                  p.b.availability or "-", f"{p.ratio:.3f}x", p.a.system_id, p.b.system_id)
                 for p in c.pairs)
    notes = ["B / A above 1 means B is better (for latencies, A's latency over B's)",
             "pairs: the best result of each accelerator per benchmark, scenario, round"
             + (", submitter" if c.same_submitter else "")
             + ("" if c.normalised else " and accelerator count")
             + "; availability may differ and is shown"]
    if c.normalised:
        notes.append("normalised: per-accelerator figures are derived by tokenmark, "
                     "not MLPerf results")
    if c.unpaired:
        by: dict[str, int] = {}
        for r in c.unpaired:
            by[r.submitter] = by.get(r.submitter, 0) + 1
        notes.append(f"without a partner: {len(c.unpaired)} results ("
                     + ", ".join(f"{k} {v}" for k, v in sorted(by.items())) + ")")
    rows = [p.a for p in c.pairs] + [p.b for p in c.pairs]
    title = f"A = {c.a}, B = {c.b}" + (f", {c.round}" if c.round else "")
    return [Table(title, cols, body, _notes(rows, *notes, aliases=c.aliases))]


def top_table(t: Top) -> Table:
    one_round = len(t.rounds) == 1  # then the title names it
    cols = ("#", *(() if one_round else ("round",)), "submitter", "system", "accelerator",
            "accelerators", "nodes", "benchmark", "scenario", f"result ({t.unit})",
            "per accelerator (derived)", "availability")
    body = tuple((str(e.rank), *(() if one_round else (e.row.round,)), e.row.submitter,
                  e.row.system_id, _hw(e.row),
                  str(e.accelerators) if e.accelerators is not None else "?",
                  str(e.row.nodes if e.row.nodes is not None else "?"), e.row.benchmark,
                  e.row.scenario, _num(e.row.value), _num(e.per_accelerator),
                  e.row.availability or "-") for e in t.entries)
    what = ", ".join(f"{k} {v}" for k, v in t.filters) or "all results"
    notes = [t.derived_note] + [f"left out: {n} results {why}" for why, n in t.left_out]
    return Table(f"top results, {what}, {', '.join(t.rounds) or 'no round'}", cols, body,
                 _notes([e.row for e in t.entries], *notes, aliases=t.aliases))


def aliases_table(aliases: Sequence[Alias]) -> Table:
    """Every name alias tokenmark applies, with its reason."""
    return Table("names read as one (tokenmark.hardware)", ("published", "read as", "why"),
                 tuple((a.spelling, a.name, a.reason) for a in aliases),
                 ("spelling rules applied to every name: trademark marks ((R), (TM)) and a "
                  "leading [BOARD MAKER] tag are dropped, case, spaces and punctuation are "
                  "ignored",
                  "a system listing accelerators of two vendors ('A + B') is heterogeneous "
                  "and counts as neither vendor's"))


def published_table(t: PublishedTable | None) -> Table:
    """The published-results table in use: where, how made, rows per round."""
    if t is None:
        return Table("published results: none (TOKENMARK_PUBLISHED turns them off)",
                     ("round", "results"), ())
    return Table(f"published results: {t.path}", ("round", "results"),
                 tuple((rnd, str(n)) for rnd, n in t.per_round().items()), t.provenance)


def refresh_table(r: RefreshReport) -> Table:
    notes = list(r.provenance)
    notes += [f"skipped: {n} {why}" for why, n in sorted(r.skipped.items())]
    notes += [f"difference: {d}" for d in r.differences]
    notes += [f"error: {e}" for e in r.errors]
    return Table(f"wrote {r.path} ({r.size:,} bytes, {r.rows} results)", ("round", "results"),
                 tuple((rnd, str(n)) for rnd, n in sorted(r.per_round.items())), tuple(notes))


def import_table(report: ImportReport) -> Table:
    """What an import read and wrote; each per-file error is a note."""
    c = report.counts
    cols = ("read", "results", "runs", "errors", "added", "updated", "unchanged", "seconds")
    body = ((str(report.folders), str(report.rows), str(report.runs), str(len(report.errors)),
             str(c.added) if c else "-", str(c.updated) if c else "-",
             str(c.unchanged) if c else "-", f"{report.seconds:.2f}"),)
    notes = tuple(f"table: {t}" for t in report.tables)
    notes += tuple(f"difference: {d}" for d in report.differences)
    notes += tuple(str(e) for e in report.errors)
    if not report.written:
        notes += ("nothing was written to the database",)
    return Table(f"import {report.path} -> {report.db}", cols, body, notes)
