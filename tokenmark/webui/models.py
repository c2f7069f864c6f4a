"""The JSON API's response shapes (pydantic models: they are the OpenAPI schema).

Each model is built from what :mod:`tokenmark.api.results` returns by one ``of``
function, so the JSON carries exactly the analyses' figures (the same floats, never
re-rounded) plus the derived fields the pages show (tier, scale label, accelerator
counts, per-accelerator figure, marked derived).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from tokenmark.analyses import (
    DERIVED_NOTE,
    Comparison,
    GainSeries,
    Leaderboard,
    LeaderboardEntry,
    ReproGroup,
    ScalingCurve,
)
from tokenmark.api.results import ImportReport
from tokenmark.resultrows import ResultRow, RunRecord, scale_label

__all__ = [
    "ComparisonOut",
    "EntryOut",
    "GainSeriesOut",
    "LeaderboardOut",
    "ReproGroupOut",
    "RowOut",
    "RunOut",
    "RunSummaryOut",
    "ScalingOut",
    "UploadOut",
]


class RowOut(BaseModel):
    """One result row. ``per_accelerator`` is derived by tokenmark (not an MLPerf figure)."""

    round: str
    division: str
    submitter: str
    system_id: str
    system_name: str
    benchmark: str
    scenario: str
    value: float
    unit: str
    metric: str
    label: str
    kind: str
    validity: str
    category: str | None
    availability: str | None
    accelerator_model: str
    accelerators_per_node: int | None
    nodes: int | None
    total_accelerators: int | None
    accelerators_used: int | None
    tier: str
    scale: str
    per_accelerator: float | None
    source_path: str
    run_hash: str | None

    @classmethod
    def of(cls, r: ResultRow) -> RowOut:
        return cls(
            round=r.round, division=r.division, submitter=r.submitter, system_id=r.system_id,
            system_name=r.system_name, benchmark=r.benchmark, scenario=r.scenario,
            value=r.value, unit=r.unit, metric=r.metric, label=r.label.value, kind=r.kind,
            validity=r.validity, category=r.category, availability=r.availability,
            accelerator_model=r.accelerator_model,
            accelerators_per_node=r.accelerators_per_node, nodes=r.nodes,
            total_accelerators=r.total_accelerators, accelerators_used=r.accelerators_used,
            tier=r.tier.value, scale=scale_label(r), per_accelerator=r.per_accelerator,
            source_path=r.source_path, run_hash=r.run_hash,
        )


class EntryOut(BaseModel):
    rank: int
    row: RowOut
    per_accelerator: float | None

    @classmethod
    def of(cls, e: LeaderboardEntry) -> EntryOut:
        return cls(rank=e.rank, row=RowOut.of(e.row), per_accelerator=e.per_accelerator)


class LeaderboardOut(BaseModel):
    benchmark: str
    scenario: str
    division: str | None
    availability: str | None
    rounds: list[str]
    unit: str
    single_node: list[EntryOut]
    multi_node: list[EntryOut] = Field(description="rack-scale / multi-node tier")
    excluded: list[tuple[RowOut, str]]
    derived_note: str = DERIVED_NOTE

    @classmethod
    def of(cls, lb: Leaderboard) -> LeaderboardOut:
        return cls(
            benchmark=lb.benchmark, scenario=lb.scenario, division=lb.division,
            availability=lb.availability, rounds=list(lb.rounds), unit=lb.unit,
            single_node=[EntryOut.of(e) for e in lb.single_node],
            multi_node=[EntryOut.of(e) for e in lb.multi_node],
            excluded=[(RowOut.of(r), why) for r, why in lb.excluded],
        )


class ReproductionOut(BaseModel):
    row: RowOut
    spread: float = Field(description="partner against vendor; positive is better")


class ReproGroupOut(BaseModel):
    round: str
    benchmark: str
    scenario: str
    accelerator: str
    accelerators: int
    vendor: RowOut
    partners: list[ReproductionOut]
    max_abs_spread: float

    @classmethod
    def of(cls, g: ReproGroup) -> ReproGroupOut:
        return cls(
            round=g.round, benchmark=g.benchmark, scenario=g.scenario,
            accelerator=g.accelerator, accelerators=g.accelerators, vendor=RowOut.of(g.vendor),
            partners=[ReproductionOut(row=RowOut.of(p.row), spread=p.spread) for p in g.partners],
            max_abs_spread=g.max_abs_spread,
        )


class RatioOut(BaseModel):
    benchmark: str
    scenario: str
    a: RowOut
    b: RowOut
    a_value: float
    b_value: float
    ratio: float = Field(description="B against A; above 1 means B is better")
    normalised: bool


class ComparisonOut(BaseModel):
    a: str
    b: str
    normalised: bool
    ratios: list[RatioOut]
    only_a: list[RowOut]
    only_b: list[RowOut]

    @classmethod
    def of(cls, c: Comparison) -> ComparisonOut:
        return cls(
            a=c.a, b=c.b, normalised=c.normalised,
            ratios=[RatioOut(benchmark=r.benchmark, scenario=r.scenario, a=RowOut.of(r.a),
                             b=RowOut.of(r.b), a_value=r.a_value, b_value=r.b_value,
                             ratio=r.ratio, normalised=r.normalised) for r in c.ratios],
            only_a=[RowOut.of(r) for r in c.only_a], only_b=[RowOut.of(r) for r in c.only_b],
        )


class ScalingPointOut(BaseModel):
    row: RowOut
    accelerators: int
    per_accelerator: float
    efficiency: float = Field(description="(T_N / N) / (T_base / base)")


class ScalingOut(BaseModel):
    benchmark: str
    scenario: str
    round: str
    accelerator: str
    base: ScalingPointOut
    points: list[ScalingPointOut]

    @classmethod
    def of(cls, s: ScalingCurve) -> ScalingOut:
        def pt(p: Any) -> ScalingPointOut:
            return ScalingPointOut(row=RowOut.of(p.row), accelerators=p.accelerators,
                                   per_accelerator=p.per_accelerator, efficiency=p.efficiency)

        return cls(benchmark=s.benchmark, scenario=s.scenario, round=s.round,
                   accelerator=s.accelerator, base=pt(s.base), points=[pt(p) for p in s.points])


class GainPointOut(BaseModel):
    round: str
    row: RowOut
    gain: float = Field(description="against the first round; above 1 is better")


class GainSeriesOut(BaseModel):
    benchmark: str
    scenario: str
    accelerator: str
    accelerators: int
    points: list[GainPointOut]

    @classmethod
    def of(cls, s: GainSeries) -> GainSeriesOut:
        return cls(benchmark=s.benchmark, scenario=s.scenario, accelerator=s.accelerator,
                   accelerators=s.accelerators,
                   points=[GainPointOut(round=p.round, row=RowOut.of(p.row), gain=p.gain)
                           for p in s.points])


class RunSummaryOut(BaseModel):
    """One stored run in the runs list."""

    run_hash: str
    started_utc: str
    round: str
    benchmark: str
    scenario: str
    system_id: str
    value: float | None  # None: an accuracy run (no performance figure)
    unit: str
    tokenmark_validity: str
    mlperf_validity: str
    tokenmark_version: str
    mode: str

    @classmethod
    def of(cls, r: RunRecord) -> RunSummaryOut:
        return cls(run_hash=r.run_hash, started_utc=r.started_utc, round=r.info("round"),
                   benchmark=r.info("benchmark"), scenario=r.info("scenario"),
                   system_id=r.info("system_id"),
                   value=r.row.value if r.row is not None else None,
                   unit=r.row.unit if r.row is not None else "",
                   tokenmark_validity=r.tokenmark_validity, mlperf_validity=r.mlperf_validity,
                   tokenmark_version=r.tokenmark_version, mode=r.mode)


class RunOut(RunSummaryOut):
    """A stored run whole: its ``results.json`` sections as they were imported."""

    profile_note: str
    run: dict[str, Any]
    settings: dict[str, Any]
    summary: dict[str, Any]
    verdicts: dict[str, Any]
    row: RowOut | None  # None: an accuracy run
    accuracy: list[dict[str, Any]]

    @classmethod
    def of(cls, r: RunRecord) -> RunOut:
        base = RunSummaryOut.of(r).model_dump()
        return cls(**base, profile_note=r.profile_note, run=dict(r.run),
                   settings=dict(r.settings), summary=dict(r.summary),
                   verdicts=dict(r.verdicts),
                   row=RowOut.of(r.row) if r.row is not None else None,
                   accuracy=[{"metric": a.metric, "value": a.value,
                              "lower_bound": a.lower_bound, "upper_bound": a.upper_bound,
                              "passed": a.passed} for a in r.accuracy])


class UploadOut(BaseModel):
    """What an upload stored (``written`` false: nothing, see ``errors``)."""

    written: bool
    rows: int
    runs: int
    added: int
    updated: int
    unchanged: int
    errors: list[str]

    @classmethod
    def of(cls, rep: ImportReport) -> UploadOut:
        c = rep.counts
        return cls(written=rep.written, rows=rep.rows, runs=rep.runs,
                   added=c.added if c else 0, updated=c.updated if c else 0,
                   unchanged=c.unchanged if c else 0, errors=[str(e) for e in rep.errors])
