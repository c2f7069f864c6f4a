"""The JSON API under ``/api/``: the same calls as the pages, as data.

Every route reads through :mod:`tokenmark.api.results` and answers with the models of
:mod:`tokenmark.webui.models` (the OpenAPI schema at ``/api/openapi.json``); bad input is
status 400 with ``{"detail": message}``. Filters named as the CLI names them; an empty
or absent filter means any, except ``division`` and ``availability`` whose defaults
(``closed``, ``available``) are lifted with ``any``.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request

from tokenmark.api import results as results_api
from tokenmark.report import report_data, run_report_data
from tokenmark.webui.app import UiConfig
from tokenmark.webui.models import (
    ComparisonOut,
    GainSeriesOut,
    LeaderboardOut,
    ReproGroupOut,
    RowOut,
    RunOut,
    RunSummaryOut,
    ScalingOut,
)
from tokenmark.webui.pages import run_document

__all__ = ["router"]

router = APIRouter(prefix="/api", tags=["results"])
Opt = Annotated[str | None, Query(max_length=200)]


def _db(request: Request) -> str | None:
    cfg: UiConfig = request.app.state.config
    return cfg.db


def _opt(v: str | None) -> str | None:
    v = (v or "").strip()
    return v or None


def _any(v: str | None) -> str | None:
    v = _opt(v)
    return None if v is None or v.lower() == "any" else v


@router.get("/status")
def status(request: Request) -> dict[str, Any]:
    """Where the database is, its schema revision and its row counts."""
    st = results_api.db_status(_db(request))
    return {"url": st.url, "revision": st.revision, "head": st.head, "counts": dict(st.counts)}


@router.get("/results")
def results(request: Request, benchmark: Opt = None, scenario: Opt = None, round: Opt = None,
            division: Opt = None, submitter: Opt = None, system_id: Opt = None,
            label: Opt = None) -> list[RowOut]:
    """Stored result rows matching every filter given."""
    rows = results_api.list_results(
        db=_db(request), benchmark=_opt(benchmark), scenario=_opt(scenario),
        round=_opt(round), division=_opt(division), submitter=_opt(submitter),
        system_id=_opt(system_id), label=_opt(label))
    return [RowOut.of(r) for r in rows]


@router.get("/runs")
def runs(request: Request, benchmark: Opt = None, scenario: Opt = None,
         round: Opt = None) -> list[RunSummaryOut]:
    """The user's own runs, newest first."""
    return [RunSummaryOut.of(r) for r in results_api.list_runs(
        db=_db(request), benchmark=_opt(benchmark), scenario=_opt(scenario), round=_opt(round))]


@router.get("/runs/{run_hash}")
def run(request: Request, run_hash: str) -> RunOut:
    """One run whole (hash or a prefix of at least 8 hex digits)."""
    return RunOut.of(results_api.get_run(run_hash, db=_db(request)))


@router.get("/runs/{run_hash}/report-data")
def run_plots(request: Request, run_hash: str) -> dict[str, Any]:
    """What the run page draws (``records`` false: from results.json alone)."""
    rec = results_api.get_run(run_hash, db=_db(request))
    folder = request.app.state.runs.find(rec.run_hash)
    return run_report_data(folder) if folder is not None else report_data(run_document(rec))


@router.get("/leaderboard")
def leaderboard(request: Request, benchmark: Annotated[str, Query(max_length=200)],
                scenario: Annotated[str, Query(max_length=200)], round: Opt = None,
                division: Opt = "closed", availability: Opt = "available",
                category: Opt = None, official_only: bool = False) -> LeaderboardOut:
    """The two-tier leaderboard (single node; rack-scale / multi-node)."""
    return LeaderboardOut.of(results_api.leaderboard(
        benchmark, scenario, db=_db(request), division=_any(division),
        availability=_any(availability), round=_opt(round), official_only=official_only,
        category=_opt(category)))


@router.get("/reproducibility")
def reproducibility(request: Request, benchmark: Opt = None, scenario: Opt = None,
                    accelerator: Opt = None, accelerators: int | None = None,
                    round: Opt = None, division: Opt = "closed") -> list[ReproGroupOut]:
    """Partners' results against the accelerator vendor's."""
    return [ReproGroupOut.of(g) for g in results_api.reproducibility(
        db=_db(request), benchmark=_opt(benchmark), scenario=_opt(scenario),
        accelerator=_opt(accelerator), accelerators=accelerators, division=_any(division),
        round=_opt(round))]


@router.get("/compare")
def compare(request: Request, a: Annotated[str, Query(max_length=300)],
            b: Annotated[str, Query(max_length=300)], benchmark: Opt = None,
            scenario: Opt = None, normalise: bool = False) -> ComparisonOut:
    """System B against system A (``[ROUND/][SUBMITTER/]SYSTEM_ID``)."""
    return ComparisonOut.of(results_api.compare(
        a, b, db=_db(request), benchmark=_opt(benchmark), scenario=_opt(scenario),
        normalise=normalise))


@router.get("/scaling")
def scaling(request: Request, benchmark: Annotated[str, Query(max_length=200)],
            scenario: Annotated[str, Query(max_length=200)],
            accelerator: Annotated[str, Query(max_length=200)], submitter: Opt = None,
            round: Opt = None, division: Opt = "closed", base: int | None = None) -> ScalingOut:
    """Scaling efficiency of one system family."""
    return ScalingOut.of(results_api.scaling(
        benchmark, scenario, accelerator=accelerator, db=_db(request),
        submitter=_opt(submitter), round=_opt(round), division=_any(division), base=base))


@router.get("/software-gains")
def software_gains(request: Request, benchmark: Annotated[str, Query(max_length=200)],
                   scenario: Annotated[str, Query(max_length=200)], accelerator: Opt = None,
                   accelerators: int | None = None, submitter: Opt = None,
                   division: Opt = "closed") -> list[GainSeriesOut]:
    """The same hardware across rounds."""
    return [GainSeriesOut.of(s) for s in results_api.software_gains(
        benchmark, scenario, db=_db(request), accelerator=_opt(accelerator),
        accelerators=accelerators, submitter=_opt(submitter), division=_any(division))]
