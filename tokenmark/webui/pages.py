"""The web UI's HTML pages. Each handler reads through :mod:`tokenmark.api.results` (the
same calls as the CLI's commands), keeps no state between requests, and renders an
autoescaped template; bad input (an unknown benchmark, an analysis that has nothing to
show) becomes the page again with the message, status 400.

Filters arrive as query parameters from plain GET forms, so every view has a URL that
can be shared; an empty field means "any". ``division`` and ``availability`` default to
``closed`` and ``available`` as the CLI's leaderboard does; ``any`` lifts them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from tokenmark.api import results as results_api
from tokenmark.api import tables as results_tables
from tokenmark.errors import BadInputError
from tokenmark.output.results import SCHEMA, ResultsDocument
from tokenmark.report import comparison_data, report_data, run_report_data, script_json
from tokenmark.resultrows import (
    Label,
    ResultRow,
    RunRecord,
    Tier,
    accelerator_key,
    round_order,
)
from tokenmark.webui.app import UiConfig, page

__all__ = ["MAX_ROWS", "router", "run_document"]

router = APIRouter(include_in_schema=False)
MAX_ROWS = 500
Opt = Annotated[str | None, Query(max_length=200)]


def _opt(v: str | None) -> str | None:
    v = (v or "").strip()
    return v or None


def _any(v: str | None) -> str | None:
    """``any`` (or empty) lifts a filter that has a default."""
    v = _opt(v)
    return None if v is None or v.lower() == "any" else v


def _cfg(request: Request) -> UiConfig:
    cfg: UiConfig = request.app.state.config
    return cfg


@dataclass(frozen=True)
class Choices:
    """Values the database holds, for the filters' drop-down lists."""

    rounds: list[str]
    divisions: list[str]
    availabilities: list[str]
    benchmarks: list[str]
    scenarios: dict[str, list[str]]
    accelerators: list[str]
    submitters: list[str]

    @classmethod
    def of(cls, rows: Sequence[ResultRow]) -> Choices:
        scen: dict[str, set[str]] = {}
        for r in rows:
            scen.setdefault(r.benchmark, set()).add(r.scenario)
        accs: dict[str, str] = {}
        for r in rows:
            if r.accelerator_model:
                accs.setdefault(accelerator_key(r.accelerator_model), r.accelerator_model)
        return cls(
            rounds=sorted({r.round for r in rows}, key=round_order, reverse=True),
            divisions=sorted({r.division for r in rows}),
            availabilities=sorted({r.availability for r in rows if r.availability}),
            benchmarks=sorted(scen),
            scenarios={b: sorted(s) for b, s in sorted(scen.items())},
            accelerators=sorted(accs.values(), key=str.lower),
            submitters=sorted({r.submitter for r in rows}, key=str.lower),
        )

    def all_scenarios(self) -> list[str]:
        return sorted({s for v in self.scenarios.values() for s in v})


@router.get("/", response_class=HTMLResponse)
def home(request: Request) -> HTMLResponse:
    db = _cfg(request).db
    status = results_api.db_status(db)
    rows = results_api.list_results(db=db)
    runs = results_api.list_runs(db=db)[:10]
    return page(request, "home.html.j2", status=status, choices=Choices.of(rows),
                runs=runs, rows=len(rows))


@router.get("/runs", response_class=HTMLResponse)
def runs(request: Request, benchmark: Opt = None, scenario: Opt = None) -> HTMLResponse:
    db = _cfg(request).db
    items = results_api.list_runs(db=db, benchmark=_opt(benchmark), scenario=_opt(scenario))
    return page(request, "runs.html.j2", runs=items, benchmark=_opt(benchmark) or "",
                scenario=_opt(scenario) or "",
                signed=results_api.signers([r.run_hash for r in items], db=db))


def run_document(rec: RunRecord) -> dict[str, Any]:
    """The ``results.json`` document of a stored run, as the report templates read it:
    what the database kept of the file, read by the one reader (a run stored by an
    earlier version comes back in the current form)."""
    return ResultsDocument.from_json({
        "schema": SCHEMA, "tokenmark_version": rec.tokenmark_version,
        "label": Label.UNVERIFIED.value, "profile_note": rec.profile_note,
        "run": dict(rec.run), "settings": dict(rec.settings), "summary": dict(rec.summary),
        "verdicts": dict(rec.verdicts)}, f"stored run {rec.run_hash[:12]}").to_json()


@router.get("/runs/compare", response_class=HTMLResponse)
def runs_compare(request: Request,
                 run: Annotated[list[str] | None, Query(max_length=64)] = None) -> HTMLResponse:
    db = _cfg(request).db
    hashes = list(dict.fromkeys(run or []))
    if len(hashes) < 2:
        raise BadInputError("choose two or more runs to compare (tick them in the runs list)")
    recs = [results_api.get_run(h, db=db) for h in hashes]
    cmp = comparison_data([(f"{r.info('system_id')} {r.run_hash[:10]}", f"/runs/{r.run_hash}",
                            run_document(r)) for r in recs])
    return page(request, "run_compare.html.j2", cmp=cmp,
                data_json=script_json({"comparison": cmp}))


@router.get("/runs/{run_hash}", response_class=HTMLResponse)
def run_page(request: Request, run_hash: str) -> HTMLResponse:
    rec = results_api.get_run(run_hash, db=_cfg(request).db)
    doc = run_document(rec)
    folder = request.app.state.runs.find(rec.run_hash)
    data = run_report_data(folder) if folder is not None else report_data(doc)
    signed = results_api.signers([rec.run_hash], db=_cfg(request).db).get(rec.run_hash, [])
    return page(request, "run.html.j2", rec=rec, doc=doc, data=data, signed=signed,
                data_json=script_json(data),
                records_hint="start tokenmark ui with --runs naming the folder that holds "
                "this run's results folder")


@router.get("/results", response_class=HTMLResponse)
def results(request: Request, benchmark: Opt = None, scenario: Opt = None, round: Opt = None,
            division: Opt = None, submitter: Opt = None, label: Opt = None) -> HTMLResponse:
    db = _cfg(request).db
    choices = Choices.of(results_api.list_results(db=db))
    rows = results_api.list_results(
        db=db, benchmark=_opt(benchmark), scenario=_opt(scenario), round=_opt(round),
        division=_opt(division), submitter=_opt(submitter), label=_opt(label))
    table = results_tables.rows_table(rows[:MAX_ROWS], f"{len(rows)} results")
    return page(request, "results.html.j2", choices=choices, rows=rows[:MAX_ROWS],
                total=len(rows), table=table, f={
                    "benchmark": _opt(benchmark) or "", "scenario": _opt(scenario) or "",
                    "round": _opt(round) or "", "division": _opt(division) or "",
                    "submitter": _opt(submitter) or "", "label": _opt(label) or ""})


TIERS = {"both": None, Tier.SINGLE_NODE.value: Tier.SINGLE_NODE,
         Tier.MULTI_NODE.value: Tier.MULTI_NODE}


@router.get("/leaderboard", response_class=HTMLResponse)
def leaderboard(request: Request, benchmark: Opt = None, scenario: Opt = None,
                round: Opt = None, division: Opt = "closed", availability: Opt = "available",
                accelerator: Opt = None, tier: Opt = "both",
                view: Opt = "result") -> HTMLResponse:
    db = _cfg(request).db
    choices = Choices.of(results_api.list_results(db=db))
    bench = _opt(benchmark) or (choices.benchmarks[0] if choices.benchmarks else None)
    scen = _opt(scenario) or (choices.scenarios.get(bench or "", [None])[0] if bench else None)
    f = {"benchmark": bench or "", "scenario": scen or "", "round": _opt(round) or "",
         "division": _opt(division) or "any", "availability": _opt(availability) or "any",
         "accelerator": _opt(accelerator) or "", "tier": tier if tier in TIERS else "both",
         "view": "per-accelerator" if view == "per-accelerator" else "result"}
    if bench is None or scen is None:
        return page(request, "leaderboard.html.j2", choices=choices, f=f, board=None,
                    tiers=[], error="the database holds no results yet")
    board = results_api.leaderboard(bench, scen, db=db, division=_any(division),
                                    availability=_any(availability), round=_opt(round))
    needle = accelerator_key(f["accelerator"]) if f["accelerator"] else ""
    tiers = []
    for t, title, entries in ((Tier.SINGLE_NODE, "single node", board.single_node),
                              (Tier.MULTI_NODE, "rack-scale / multi-node", board.multi_node)):
        if TIERS[f["tier"]] not in (None, t):
            continue
        shown = [e for e in entries
                 if not needle or needle in accelerator_key(e.row.accelerator_model)]
        if f["view"] == "per-accelerator":
            shown.sort(key=lambda e: (e.per_accelerator is None, -(e.per_accelerator or 0.0)))
        tiers.append({"id": t.value, "title": title, "entries": shown})
    return page(request, "leaderboard.html.j2", choices=choices, f=f, board=board,
                tiers=tiers, error=None)


def _tables_page(request: Request, template: str, f: dict[str, str],
                 build: Any) -> HTMLResponse:
    """A form, and the analysis' tables (``build()`` -> tables) or its error message."""
    choices = Choices.of(results_api.list_results(db=_cfg(request).db))
    ready = all(f.get(k) for k in f.get("_required", "").split(",") if k)
    tables: list[results_tables.Table] = []
    error = None
    if ready:
        try:
            tables = build()
        except BadInputError as exc:
            error = str(exc)
    shown = {k: v for k, v in f.items() if not k.startswith("_")}
    return page(request, template, status_code=400 if error else 200, choices=choices, f=shown,
                tables=tables, error=error, ready=ready)


@router.get("/reproducibility", response_class=HTMLResponse)
def reproducibility(request: Request, benchmark: Opt = None, scenario: Opt = None,
                    accelerator: Opt = None, accelerators: Opt = None, round: Opt = None,
                    division: Opt = "closed") -> HTMLResponse:
    n = _opt(accelerators)
    if n is not None and not n.isdigit():
        raise BadInputError(f"accelerators must be a whole number, not {n!r}")
    f = {"benchmark": _opt(benchmark) or "", "scenario": _opt(scenario) or "",
         "accelerator": _opt(accelerator) or "", "accelerators": n or "",
         "round": _opt(round) or "", "division": _opt(division) or "any", "_required": ""}
    return _tables_page(request, "reproducibility.html.j2", f, lambda: (
        results_tables.reproducibility_tables(results_api.reproducibility(
            db=_cfg(request).db, benchmark=_opt(benchmark), scenario=_opt(scenario),
            accelerator=_opt(accelerator), accelerators=int(n) if n else None,
            division=_any(division), round=_opt(round)))))


@router.get("/compare", response_class=HTMLResponse)
def compare(request: Request, a: Opt = None, b: Opt = None, benchmark: Opt = None,
            scenario: Opt = None, normalise: Opt = None) -> HTMLResponse:
    f = {"a": _opt(a) or "", "b": _opt(b) or "", "benchmark": _opt(benchmark) or "",
         "scenario": _opt(scenario) or "", "normalise": "1" if _opt(normalise) else "",
         "_required": "a,b"}
    return _tables_page(request, "compare.html.j2", f, lambda: [results_tables.comparison_table(
        results_api.compare(f["a"], f["b"], db=_cfg(request).db, benchmark=_opt(benchmark),
                            scenario=_opt(scenario), normalise=bool(f["normalise"])))])


@router.get("/scaling", response_class=HTMLResponse)
def scaling(request: Request, benchmark: Opt = None, scenario: Opt = None,
            accelerator: Opt = None, submitter: Opt = None, round: Opt = None,
            division: Opt = "closed", base: Opt = None) -> HTMLResponse:
    b = _opt(base)
    if b is not None and not b.isdigit():
        raise BadInputError(f"base must be a whole number of accelerators, not {b!r}")
    f = {"benchmark": _opt(benchmark) or "", "scenario": _opt(scenario) or "",
         "accelerator": _opt(accelerator) or "", "submitter": _opt(submitter) or "",
         "round": _opt(round) or "", "division": _opt(division) or "any", "base": b or "",
         "_required": "benchmark,scenario,accelerator"}
    return _tables_page(request, "scaling.html.j2", f, lambda: [results_tables.scaling_table(
        results_api.scaling(f["benchmark"], f["scenario"], accelerator=f["accelerator"],
                            db=_cfg(request).db, submitter=_opt(submitter),
                            round=_opt(round), division=_any(division),
                            base=int(b) if b else None))])


@router.get("/software-gains", response_class=HTMLResponse)
def software_gains(request: Request, benchmark: Opt = None, scenario: Opt = None,
                   accelerator: Opt = None, accelerators: Opt = None, submitter: Opt = None,
                   division: Opt = "closed") -> HTMLResponse:
    n = _opt(accelerators)
    if n is not None and not n.isdigit():
        raise BadInputError(f"accelerators must be a whole number, not {n!r}")
    f = {"benchmark": _opt(benchmark) or "", "scenario": _opt(scenario) or "",
         "accelerator": _opt(accelerator) or "", "accelerators": n or "",
         "submitter": _opt(submitter) or "", "division": _opt(division) or "any",
         "_required": "benchmark,scenario"}
    return _tables_page(request, "gains.html.j2", f, lambda: results_tables.gains_tables(
        results_api.software_gains(f["benchmark"], f["scenario"], db=_cfg(request).db,
                                   accelerator=_opt(accelerator),
                                   accelerators=int(n) if n else None,
                                   submitter=_opt(submitter), division=_any(division))))


@router.get("/upload", response_class=HTMLResponse)
def upload_page(request: Request) -> HTMLResponse:
    return page(request, "upload.html.j2", max_mb=_cfg(request).max_upload_bytes / 2**20)
