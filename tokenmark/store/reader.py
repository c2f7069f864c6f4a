"""Reading result rows back, and summarising a database's content.

:func:`load_rows` turns ``results`` rows into :class:`~tokenmark.resultrows.ResultRow`
objects for the analyses, filtered in SQL (benchmark names are stored as the checker
names them; callers resolve aliases first). :func:`counts` and :func:`fingerprint` say
what a database holds: the fingerprint is a SHA-256 over every table's content in key
order, without surrogate ids, so two databases with the same results have the same
fingerprint and an import that changed nothing leaves it as it was.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

import sqlalchemy as sa

from tokenmark.findings import Finding
from tokenmark.resultrows import (
    ACCURACY_MODE,
    AccuracyScore,
    Label,
    ResultRow,
    RunRecord,
    SeriesPoint,
    SeriesRecord,
)
from tokenmark.store.schema import (
    accuracy_results,
    findings,
    results,
    runs,
    series,
    series_points,
    systems,
)

__all__ = ["Filters", "counts", "fingerprint", "load_rows", "load_runs", "load_series",
           "rows_by_key"]

#: Filters :func:`load_rows` understands: column name -> wanted value (``None``: any).
Filters = Mapping[str, "str | int | None"]
_FILTERABLE = frozenset({"round", "division", "category", "availability", "submitter",
                         "system_id", "benchmark", "scenario", "label", "kind", "unit",
                         "validity", "source"})


def _row(m: sa.RowMapping) -> ResultRow:
    return ResultRow(
        round=m["round"], division=m["division"], submitter=m["submitter"],
        system_id=m["system_id"], benchmark=m["benchmark"], scenario=m["scenario"],
        value=float(m["value"]), unit=m["unit"], metric=m["metric"],
        label=Label(m["label"]), kind=m["kind"], category=m["category"],
        availability=m["availability"], system_name=m["system_name"],
        accelerator_model=m["accelerator_model"],
        accelerators_per_node=m["accelerators_per_node"], nodes=m["nodes"],
        accelerators_stated=m["accelerators_stated"], accelerator_note=m["accelerator_note"],
        benchmark_folder=m["benchmark_folder"], summary_value=m["summary_value"],
        validity=m["validity"], inferred=bool(m["inferred"]), power_value=m["power_value"],
        power_unit=m["power_unit"], accuracy=dict(m["accuracy"] or {}),
        weight_data_types=m["weight_data_types"], framework=m["framework"],
        notes=m["notes"], source_path=m["source_path"], content_hash=m["content_hash"],
        run_hash=m["run_hash"], tokenmark_value=m["tokenmark_value"], source=m["source"],
        host_processor=m["host_processor"],
        host_processors_per_node=m["host_processors_per_node"],
        published_unit=m["published_unit"], quirks=m["quirks"], table_value=m["table_value"],
    )


def _select() -> sa.Select[Any]:
    cols = [c for c in results.columns if c.name not in ("id", "system_ref", "run_ref")]
    return (sa.select(*cols, runs.c.run_hash)
            .select_from(results.outerjoin(runs, results.c.run_ref == runs.c.id))
            .order_by(results.c.natural_key))


def rows_by_key(conn: sa.Connection, keys: Sequence[str]) -> dict[str, ResultRow]:
    """The stored rows of these natural keys (those that exist)."""
    out: dict[str, ResultRow] = {}
    for i in range(0, len(keys), 500):
        stmt = _select().where(results.c.natural_key.in_(keys[i:i + 500]))
        for m in conn.execute(stmt).mappings():
            out[m["natural_key"]] = _row(m)
    return out


def load_rows(conn: sa.Connection, filters: Filters | None = None) -> list[ResultRow]:
    """Rows matching ``filters`` (exact matches; scenario case-insensitive), in key order."""
    stmt = _select()
    for name, value in (filters or {}).items():
        if value is None:
            continue
        if name not in _FILTERABLE:
            raise ValueError(f"cannot filter results by {name!r}")
        col = results.c[name]
        if name == "scenario":
            stmt = stmt.where(sa.func.lower(col) == str(value).lower())
        else:
            stmt = stmt.where(col == value)
    return [_row(m) for m in conn.execute(stmt).mappings()]


def load_runs(conn: sa.Connection, filters: Filters | None = None,
              run_hash: str | None = None) -> list[RunRecord]:
    """The user's runs, newest first, with their result rows (none for an accuracy
    run), findings and accuracy scores.

    ``filters`` take the names of :func:`load_rows` (applied to each run's result row;
    an accuracy run has none, and matches on its ``round``, ``benchmark`` and
    ``scenario`` only); ``run_hash`` selects the runs whose hash starts with it (a full
    hash or a prefix).
    """
    wanted = {**(filters or {}), "kind": "run"}
    rows = {r.run_hash: r for r in load_rows(conn, wanted) if r.run_hash}
    stmt = sa.select(runs).order_by(runs.c.started_utc.desc(), runs.c.run_hash)
    if run_hash is not None:
        stmt = stmt.where(runs.c.run_hash.startswith(run_hash, autoescape=True))
    out: list[RunRecord] = []
    for m in conn.execute(stmt).mappings():
        row = rows.get(m["run_hash"])
        if row is None and not _accuracy_run_matches(m, filters or {}):
            continue
        found = conn.execute(sa.select(findings).where(findings.c.run_id == m["id"])
                             .order_by(findings.c.id)).mappings()
        scores = conn.execute(sa.select(accuracy_results)
                              .where(accuracy_results.c.run_id == m["id"])
                              .order_by(accuracy_results.c.metric)).mappings()
        out.append(RunRecord(
            row=row, run_hash=m["run_hash"], started_utc=m["started_utc"],
            tokenmark_version=m["tokenmark_version"], mode=m["mode"],
            mlperf_validity=m["mlperf_validity"], tokenmark_validity=m["tokenmark_validity"],
            profile_note=m["profile_note"], run=m["run"], settings=m["settings"],
            summary=m["summary"], verdicts=m["verdicts"],
            findings=tuple(Finding.from_json(dict(f)) for f in found),
            accuracy=tuple(AccuracyScore(a["metric"], float(a["value"]), a["lower_bound"],
                                         a["upper_bound"], a["passed"]) for a in scores),
            source_path=m["source_path"],
        ))
    return out


def load_series(conn: sa.Connection, series_hash: str | None = None) -> list[SeriesRecord]:
    """The user's sweeps, find-peak searches and scaling runs, newest first, with their
    points in order; ``series_hash`` selects those whose hash starts with it."""
    stmt = sa.select(series).order_by(series.c.started_utc.desc(), series.c.series_hash)
    if series_hash is not None:
        stmt = stmt.where(series.c.series_hash.startswith(series_hash, autoescape=True))
    out = []
    for m in conn.execute(stmt).mappings().all():
        pts = conn.execute(sa.select(series_points).where(series_points.c.series_id == m["id"])
                           .order_by(series_points.c.position)).mappings()
        out.append(SeriesRecord(
            series_hash=m["series_hash"], kind=m["kind"], started_utc=m["started_utc"],
            round=m["round"], benchmark=m["benchmark"], scenario=m["scenario"], doc=m["doc"],
            points=tuple(SeriesPoint(p["position"], p["run_hash"], p["data"]) for p in pts),
            source_path=m["source_path"]))
    return out


def _accuracy_run_matches(m: sa.RowMapping, filters: Filters) -> bool:
    """Whether a run without a result row is an accuracy run ``filters`` select."""
    if m["mode"] != ACCURACY_MODE:
        return False
    for name, value in filters.items():
        if value is None:
            continue
        if name not in ("round", "benchmark", "scenario"):
            return False  # the filter names a row field an accuracy run has not
        if str(m[name]).lower() != str(value).lower():
            return False
    return True


def counts(conn: sa.Connection) -> dict[str, int]:
    out = {}
    for t in (results, systems, runs, findings, accuracy_results, series):
        out[t.name] = int(conn.execute(sa.select(sa.func.count()).select_from(t)).scalar_one())
    out["official"] = int(conn.execute(sa.select(sa.func.count()).select_from(results)
                                       .where(results.c.label == Label.OFFICIAL.value))
                          .scalar_one())
    return out


def _canon(value: Any) -> Any:
    if isinstance(value, float):
        return repr(value)
    return value


def fingerprint(conn: sa.Connection) -> str:
    """A SHA-256 over the content of every table (ids replaced by natural keys)."""
    h = hashlib.sha256()
    sys_keys = dict(conn.execute(sa.select(systems.c.id, systems.c.natural_key)).all())
    run_keys = dict(conn.execute(sa.select(runs.c.id, runs.c.run_hash)).all())
    for table, order in ((systems, systems.c.natural_key), (runs, runs.c.run_hash),
                         (results, results.c.natural_key)):
        h.update(table.name.encode())
        for m in conn.execute(sa.select(table).order_by(order)).mappings():
            d = {k: _canon(v) for k, v in m.items() if k != "id"}
            if "system_ref" in d:
                d["system_ref"] = sys_keys.get(d["system_ref"])
            if "run_ref" in d:
                d["run_ref"] = run_keys.get(d["run_ref"])
            h.update(json.dumps(d, sort_keys=True, default=str).encode())
    series_keys = dict(conn.execute(sa.select(series.c.id, series.c.series_hash)).all())
    h.update(series.name.encode())
    for m in conn.execute(sa.select(series).order_by(series.c.series_hash)).mappings():
        h.update(json.dumps({k: _canon(v) for k, v in m.items() if k != "id"},
                            sort_keys=True, default=str).encode())
    h.update(series_points.name.encode())
    for line in sorted(json.dumps({**{k: _canon(v) for k, v in m.items() if k != "id"},
                                   "series_id": series_keys.get(m["series_id"])},
                                  sort_keys=True, default=str)
                       for m in conn.execute(sa.select(series_points)).mappings()):
        h.update(line.encode())
    for table in (findings, accuracy_results):
        h.update(table.name.encode())
        lines = []
        for m in conn.execute(sa.select(table)).mappings():
            d = {k: _canon(v) for k, v in m.items() if k != "id"}
            d["run_id"] = run_keys.get(d["run_id"])
            lines.append(json.dumps(d, sort_keys=True, default=str))
        for line in sorted(lines):
            h.update(line.encode())
    return h.hexdigest()
