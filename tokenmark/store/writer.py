"""Writing result rows, runs and system descriptions: one transaction, idempotent.

:func:`write` stores a whole import in a single transaction (all of it or none of it)
and is idempotent: every row has a natural key (``results.natural_key``,
``systems.natural_key``, ``runs.run_hash``) and is written with
``INSERT ... ON CONFLICT``:

* a result whose key exists is merged with the stored row
  (:func:`~tokenmark.resultrows.merge_rows`): the row from the better source is kept
  (logs over an official table; between two of one source, the newer), fields it lacks
  are kept from the other, and a table figure that differs from the logs' is reported
  (:attr:`WriteCounts.differences`). A merge that changes nothing leaves the row
  untouched (re-importing changes nothing, not even a timestamp: there is none); one
  that does (a corrected log in a newer checkout) updates it in place;
* a system whose key exists with the same content hash is left untouched;
* a run that exists is skipped with its findings (a run file never changes: its key
  is its hash); an accuracy run's scores (``accuracy_results``) are written whenever
  they are given, keyed by run and metric, so scoring a stored run and storing it again
  adds its scores (a score that changed is updated).

Two processes writing at once lose nothing: on SQLite the write transactions queue on
``BEGIN IMMEDIATE``; on PostgreSQL the conflict clauses make concurrent inserts of one
key resolve to one row, and rows are written in key order so transactions do not
deadlock. Counts of added/updated/unchanged are taken inside the transaction; under
PostgreSQL concurrency a row the other writer added in between counts as added by both.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from tokenmark.errors import StoreError
from tokenmark.resultrows import (
    SOURCE_LOGS,
    SOURCE_TABLE,
    ResultRow,
    RunRecord,
    SeriesRecord,
    SystemRecord,
    merge_all,
    merge_rows,
)
from tokenmark.store.reader import rows_by_key
from tokenmark.store.schema import (
    accuracy_results,
    findings,
    results,
    runs,
    series,
    series_points,
    systems,
)

__all__ = ["WriteCounts", "result_values", "write"]


@dataclass(frozen=True, slots=True)
class WriteCounts:
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    runs_added: int = 0
    systems_written: int = 0
    differences: tuple[str, ...] = ()
    series_added: int = 0


def _insert(conn: sa.Connection, table: sa.Table) -> Any:
    name = conn.dialect.name
    if name == "sqlite":
        return sqlite.insert(table)
    if name == "postgresql":
        return postgresql.insert(table)
    raise StoreError(f"database dialect {name!r} is not supported (SQLite or PostgreSQL)")


def result_values(row: ResultRow) -> dict[str, Any]:
    """The ``results`` columns of ``row`` (without ``id``, ``system_ref``, ``run_ref``)."""
    return {
        "natural_key": row.key, "kind": row.kind, "label": row.label.value,
        "round": row.round, "division": row.division, "category": row.category,
        "availability": row.availability, "submitter": row.submitter,
        "system_id": row.system_id, "system_name": row.system_name,
        "accelerator_model": row.accelerator_model,
        "accelerators_per_node": row.accelerators_per_node, "nodes": row.nodes,
        "total_accelerators": row.total_accelerators,
        "accelerators_stated": row.accelerators_stated,
        "accelerators_used": row.accelerators_used, "accelerator_note": row.accelerator_note,
        "benchmark": row.benchmark, "benchmark_folder": row.benchmark_folder or row.benchmark,
        "scenario": row.scenario, "metric": row.metric, "value": row.value, "unit": row.unit,
        "summary_value": row.summary_value, "validity": row.validity,
        "inferred": row.inferred, "power_value": row.power_value,
        "power_unit": row.power_unit, "accuracy": dict(row.accuracy),
        "weight_data_types": row.weight_data_types, "framework": row.framework,
        "notes": row.notes, "source_path": row.source_path,
        "content_hash": row.content_hash, "tokenmark_value": row.tokenmark_value,
        "source": row.source,
        "host_processor": row.host_processor,
        "host_processors_per_node": row.host_processors_per_node,
        "published_unit": row.published_unit, "quirks": row.quirks,
        "table_value": row.table_value,
    }


def _system_key(row: ResultRow) -> str:
    return "|".join((row.round, row.division, row.submitter, row.system_id))


def _write_systems(conn: sa.Connection, items: Sequence[SystemRecord]) -> dict[str, int]:
    if not items:
        return {}
    values = [{"natural_key": s.key, "round": s.round, "division": s.division,
               "submitter": s.submitter, "system_id": s.system_id,
               "content_hash": s.content_hash, "description": dict(s.description),
               "source_path": s.source_path} for s in sorted(items, key=lambda s: s.key)]
    ins = _insert(conn, systems)
    stmt = ins.on_conflict_do_update(
        index_elements=[systems.c.natural_key],
        set_={c: ins.excluded[c] for c in ("content_hash", "description", "source_path")},
        where=systems.c.content_hash != ins.excluded.content_hash,
    )
    conn.execute(stmt, values)
    keys = [s.key for s in items]
    out: dict[str, int] = {}
    for chunk in _chunks(keys, 500):
        for rid, key in conn.execute(sa.select(systems.c.id, systems.c.natural_key)
                                     .where(systems.c.natural_key.in_(chunk))):
            out[key] = rid
    return out


def _write_runs(conn: sa.Connection, records: Sequence[RunRecord]) -> tuple[dict[str, int], int]:
    ids: dict[str, int] = {}
    added = 0
    for rec in sorted(records, key=lambda r: r.run_hash):
        ins = _insert(conn, runs)
        got = conn.execute(ins.values(
            run_hash=rec.run_hash, started_utc=rec.started_utc,
            tokenmark_version=rec.tokenmark_version, round=rec.info("round"),
            benchmark=rec.info("benchmark"), scenario=rec.info("scenario"), mode=rec.mode,
            mlperf_validity=rec.mlperf_validity, tokenmark_validity=rec.tokenmark_validity,
            profile_note=rec.profile_note, run=dict(rec.run), settings=dict(rec.settings),
            summary=dict(rec.summary), verdicts=dict(rec.verdicts),
            source_path=rec.source_path or (rec.row.source_path if rec.row else ""),
        ).on_conflict_do_nothing(index_elements=[runs.c.run_hash]).returning(runs.c.id)).first()
        if got is not None:
            added += 1
            ids[rec.run_hash] = got[0]
            if rec.findings:
                conn.execute(findings.insert(), [
                    {"run_id": got[0], "verdict": f.verdict.value, "rule": f.rule,
                     "passed": f.passed, "observed": f.observed, "required": f.required,
                     "advice": f.advice, "detail": f.detail, "level": f.level}
                    for f in rec.findings])
        else:
            ids[rec.run_hash] = conn.execute(
                sa.select(runs.c.id).where(runs.c.run_hash == rec.run_hash)).scalar_one()
        _write_accuracy(conn, ids[rec.run_hash], rec)
    return ids, added


def _write_accuracy(conn: sa.Connection, run_id: int, rec: RunRecord) -> None:
    if not rec.accuracy:
        return
    ins = _insert(conn, accuracy_results)
    cols = ("value", "lower_bound", "upper_bound", "passed")
    conn.execute(ins.on_conflict_do_update(
        index_elements=[accuracy_results.c.run_id, accuracy_results.c.metric],
        set_={c: ins.excluded[c] for c in cols},
    ), [{"run_id": run_id, "metric": a.metric, "value": a.value, "lower_bound": a.lower_bound,
         "upper_bound": a.upper_bound, "passed": a.passed}
        for a in sorted(rec.accuracy, key=lambda a: a.metric)])


def _write_series(conn: sa.Connection, items: Sequence[SeriesRecord]) -> int:
    """Store each series not stored yet (its key is its index file's hash: a series
    that exists is left as it is, with its points)."""
    added = 0
    for rec in sorted(items, key=lambda r: r.series_hash):
        got = conn.execute(_insert(conn, series).values(
            series_hash=rec.series_hash, kind=rec.kind, started_utc=rec.started_utc,
            round=rec.round, benchmark=rec.benchmark, scenario=rec.scenario,
            doc=dict(rec.doc), source_path=rec.source_path,
        ).on_conflict_do_nothing(index_elements=[series.c.series_hash])
            .returning(series.c.id)).first()
        if got is None:
            continue
        added += 1
        if rec.points:
            conn.execute(series_points.insert(), [
                {"series_id": got[0], "position": p.position, "run_hash": p.run_hash,
                 "data": dict(p.data)} for p in rec.points])
    return added


def _chunks(items: Sequence[str], n: int) -> Iterable[Sequence[str]]:
    for i in range(0, len(items), n):
        yield items[i:i + n]


def write(
    conn: sa.Connection,
    rows: Sequence[ResultRow],
    run_records: Sequence[RunRecord] = (),
    system_items: Sequence[SystemRecord] = (),
    series_items: Sequence[SeriesRecord] = (),
) -> WriteCounts:
    """Write everything inside the caller's transaction (see the module docstring)."""
    system_ids = _write_systems(conn, system_items)
    run_ids, runs_added = _write_runs(conn, run_records)
    # rows of one key in one import merge as they would across imports
    by_key, differences = merge_all(
        [*rows, *(r.row for r in run_records if r.row is not None)])
    keys = sorted(by_key)
    existing = rows_by_key(conn, keys)
    values: list[dict[str, Any]] = []
    added = updated = unchanged = 0
    for key in keys:
        r = by_key[key]
        old = existing.get(key)
        if old is not None:
            m = merge_rows(old, r)
            differences += [m.difference] if m.difference else []
            if m.row == old:
                unchanged += 1
                continue
            r = m.row
            updated += 1
        else:
            added += 1
        v = result_values(r)
        v["system_ref"] = system_ids.get(_system_key(r))
        v["run_ref"] = run_ids.get(r.run_hash) if r.run_hash else None
        values.append(v)
    if values:
        ins = _insert(conn, results)
        changing = [c.name for c in results.columns if c.name not in ("id", "natural_key")]
        stmt = ins.on_conflict_do_update(
            index_elements=[results.c.natural_key],
            set_={c: ins.excluded[c] for c in changing},
            # a row another writer stored from the logs meanwhile is never replaced by a
            # table's row (PostgreSQL: the read above does not lock absent keys)
            where=sa.not_(sa.and_(results.c.source == SOURCE_LOGS,
                                  ins.excluded.source == SOURCE_TABLE)),
        )
        conn.execute(stmt, values)
    series_added = _write_series(conn, series_items)
    return WriteCounts(added, updated, unchanged, runs_added, len(system_ids),
                       tuple(dict.fromkeys(differences)), series_added)
