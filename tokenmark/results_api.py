"""Python entry points for the results database, the importer and the analyses.

The CLI (``tokenmark import``, ``db``, ``results``, ``leaderboard``, ``reproducibility``,
``compare``, ``scaling``, ``software-gains``) and the web UI call these and only
format what they return (:mod:`tokenmark.results_tables` turns each answer into plain
tables). Each function opens the database named by ``db`` (a path or URL; ``None``:
``$TOKENMARK_DB`` or the default file, see :mod:`tokenmark.store.engine`), does one
thing, and closes it. Benchmark names may be LoadGen aliases (``llama3_1-8b``) and
scenarios any case; both are resolved to the checker's names first.

Errors the user can fix raise :class:`~tokenmark.errors.BadInputError` subclasses
(:class:`~tokenmark.errors.StoreError`, :class:`~tokenmark.errors.AnalysisError`);
per-file import problems are data in :class:`ImportReport`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokenmark import analyses
from tokenmark.errors import AnalysisError, BadInputError
from tokenmark.importer import FileError, Limits, canonical_benchmark, canonical_scenario, scan
from tokenmark.inputs import MIB, load_json_object
from tokenmark.resultrows import Label, ResultRow, RunRecord
from tokenmark.store import Store, WriteCounts
from tokenmark.store import engine as store_engine
from tokenmark.store.signatures import Signature, signatures_of

__all__ = [
    "DbStatus",
    "ImportReport",
    "compare",
    "db_status",
    "db_upgrade",
    "get_run",
    "import_results",
    "leaderboard",
    "list_results",
    "list_runs",
    "reproducibility",
    "resolve_benchmark",
    "resolve_scenario",
    "scaling",
    "signers",
    "software_gains",
    "store_run",
]

PathLike = str | os.PathLike[str]


@dataclass(frozen=True)
class ImportReport:
    """What an import did. ``written`` is false when nothing was stored (``strict`` and
    errors, or nothing importable); ``counts`` then is ``None``."""

    path: str
    db: str
    folders: int
    rows: int
    runs: int
    errors: tuple[FileError, ...]
    written: bool
    counts: WriteCounts | None
    seconds: float

    @property
    def ok(self) -> bool:
        return not self.errors


@dataclass(frozen=True)
class DbStatus:
    url: str
    revision: str | None
    head: str
    counts: Mapping[str, int] = field(default_factory=dict)


def resolve_benchmark(name: str) -> str:
    """The checker's name of ``name`` (a checker name or a LoadGen alias)."""
    return canonical_benchmark(name.strip())


def resolve_scenario(name: str) -> str:
    s = canonical_scenario(name)
    if s is None:
        raise BadInputError(f"unknown scenario {name!r}; choose one of: Offline, Server, "
                            "Interactive, SingleStream, MultiStream")
    return s


def _system_file(path: PathLike | None) -> Mapping[str, Any] | None:
    if path is None:
        return None
    p = Path(path)
    doc = load_json_object(p, "system description", "give a systems/<id>.json file",
                           max_bytes=16 * MIB)
    doc.setdefault("system_id", p.stem)
    return doc


def import_results(
    path: PathLike,
    *,
    db: PathLike | None = None,
    round: str | None = None,
    official: bool = True,
    strict: bool = False,
    system: PathLike | None = None,
    limits: Limits | None = None,
) -> ImportReport:
    """Import a published results tree, submission tree, run folder, ``results.json``
    or archive (``tokenmark import PATH``).

    Everything readable is stored in one transaction; each unreadable file is an error
    in the report and contributes nothing. With ``strict`` any error stores nothing.
    ``official=False`` labels published results unverified (a tree MLCommons has not
    published); ``system`` describes the hardware of imported runs.
    """
    t0 = time.perf_counter()
    found = scan(path, round=round, official=official, limits=limits,
                 system=_system_file(system))
    url = store_engine.resolve_url(db)
    counts: WriteCounts | None = None
    anything = bool(found.rows or found.runs)
    if anything and not (strict and found.errors):
        with Store.open(db) as st:
            url = st.url
            counts = st.write(found.rows, found.runs, list(found.systems.values()))
    return ImportReport(
        path=str(path), db=url, folders=found.folders, rows=len(found.rows),
        runs=len(found.runs), errors=tuple(found.errors), written=counts is not None,
        counts=counts, seconds=time.perf_counter() - t0,
    )


def store_run(results_dir: PathLike, *, db: PathLike | None = None,
              system: PathLike | None = None) -> ImportReport:
    """Store one tokenmark run (its folder or ``results.json``) as an unverified row;
    what ``tokenmark run`` calls after writing its results folder."""
    p = Path(results_dir)
    target = p / "results.json" if p.is_dir() else p
    return import_results(target, db=db, official=False, strict=True, system=system)


def db_upgrade(db: PathLike | None = None) -> DbStatus:
    """Create the database or migrate it to the newest schema (``tokenmark db upgrade``)."""
    eng = store_engine.create(store_engine.resolve_url(db))
    try:
        store_engine.upgrade(eng)
    finally:
        eng.dispose()
    return db_status(db)


def db_status(db: PathLike | None = None) -> DbStatus:
    """Where the database is, its schema revision and what it holds (``tokenmark db status``).

    Reads only: a SQLite file that does not exist is reported, not created.
    """
    url = store_engine.resolve_url(db)
    if url.startswith("sqlite:///") and not Path(url.removeprefix("sqlite:///")).exists():
        return DbStatus(url, None, store_engine.head_revision())
    eng = store_engine.create(url)
    try:
        rev = store_engine.current_revision(eng)
    finally:
        eng.dispose()
    head = store_engine.head_revision()
    if rev != head:
        return DbStatus(eng.url.render_as_string(hide_password=True), rev, head)
    with Store.open(db, create=False) as st:
        return DbStatus(st.url, rev, head, st.counts())


def _rows(db: PathLike | None, **filters: str | None) -> list[ResultRow]:
    with Store.open(db) as st:
        return st.rows(filters)


def list_results(
    *, db: PathLike | None = None, benchmark: str | None = None,
    scenario: str | None = None, round: str | None = None, division: str | None = None,
    submitter: str | None = None, system_id: str | None = None, label: str | None = None,
) -> list[ResultRow]:
    """Stored rows matching every filter given (``tokenmark results``)."""
    if label is not None and label not in {lb.value for lb in Label}:
        raise BadInputError(f"unknown label {label!r}; choose official or unverified")
    return _rows(db, benchmark=resolve_benchmark(benchmark) if benchmark else None,
                 scenario=resolve_scenario(scenario) if scenario else None, round=round,
                 division=division, submitter=submitter, system_id=system_id, label=label)


def list_runs(
    *, db: PathLike | None = None, benchmark: str | None = None,
    scenario: str | None = None, round: str | None = None, system_id: str | None = None,
) -> list[RunRecord]:
    """The user's own runs stored in the database, newest first (the web UI's runs list)."""
    filters = {"benchmark": resolve_benchmark(benchmark) if benchmark else None,
               "scenario": resolve_scenario(scenario) if scenario else None,
               "round": round, "system_id": system_id}
    with Store.open(db) as st:
        return st.runs(filters)


def get_run(run_hash: str, *, db: PathLike | None = None) -> RunRecord:
    """One stored run by its hash or an unambiguous prefix of at least 8 characters."""
    key = run_hash.strip().lower()
    if len(key) < 8 or any(c not in "0123456789abcdef" for c in key):
        raise BadInputError(f"{run_hash!r} is not a run hash; give 8 or more hex digits "
                            "(the runs list shows them)")
    with Store.open(db) as st:
        found = st.runs(run_hash=key)
    if not found:
        raise BadInputError(f"no stored run {key}; list runs with the web UI or import one "
                            "with 'tokenmark import RESULTS_FOLDER'")
    if len(found) > 1:
        raise BadInputError(f"run hash prefix {key} matches {len(found)} runs; give more digits")
    return found[0]


def signers(run_hashes: Sequence[str] | None = None, *, db: PathLike | None = None
            ) -> dict[str, list[Signature]]:
    """Who signed each run's result bundle: run hash -> signatures (verified first);
    written by ``tokenmark bundle`` and ``tokenmark verify --store``."""
    with Store.open(db) as st:
        return signatures_of(st, run_hashes)


def leaderboard(
    benchmark: str, scenario: str, *, db: PathLike | None = None,
    division: str | None = "closed", availability: str | None = "available",
    round: str | None = None, official_only: bool = False, category: str | None = None,
) -> analyses.Leaderboard:
    """The two-tier leaderboard (``tokenmark leaderboard BENCHMARK SCENARIO``)."""
    bench, scen = resolve_benchmark(benchmark), resolve_scenario(scenario)
    rows = _rows(db, benchmark=bench, scenario=scen)
    labels = (Label.OFFICIAL,) if official_only else (Label.OFFICIAL, Label.UNVERIFIED)
    return analyses.leaderboard(rows, bench, scen, division=division,
                                availability=availability, round=round, labels=labels,
                                category=category)


def reproducibility(
    *, db: PathLike | None = None, benchmark: str | None = None, scenario: str | None = None,
    accelerator: str | None = None, accelerators: int | None = None,
    division: str | None = "closed", round: str | None = None,
) -> list[analyses.ReproGroup]:
    """Partners' results against the accelerator vendor's (``tokenmark reproducibility``)."""
    bench = resolve_benchmark(benchmark) if benchmark else None
    scen = resolve_scenario(scenario) if scenario else None
    rows = _rows(db, benchmark=bench, scenario=scen, round=round)
    return analyses.reproducibility(rows, benchmark=bench, scenario=scen,
                                    accelerator=accelerator, accelerators=accelerators,
                                    division=division, round=round)


def compare(
    a: str, b: str, *, db: PathLike | None = None, benchmark: str | None = None,
    scenario: str | None = None, normalise: bool = False,
) -> analyses.Comparison:
    """System B against system A, per benchmark and scenario (``tokenmark compare A B``)."""
    bench = resolve_benchmark(benchmark) if benchmark else None
    scen = resolve_scenario(scenario) if scenario else None
    ra, rb = analyses.SystemRef.parse(a), analyses.SystemRef.parse(b)
    rows = _rows(db, system_id=ra.system_id) + (
        _rows(db, system_id=rb.system_id) if rb.system_id != ra.system_id else [])
    return analyses.compare(rows, ra, rb, benchmark=bench, scenario=scen, normalise=normalise)


def scaling(
    benchmark: str, scenario: str, *, accelerator: str, db: PathLike | None = None,
    submitter: str | None = None, round: str | None = None,
    division: str | None = "closed", base: int | None = None,
) -> analyses.ScalingCurve:
    """Scaling efficiency of a system family (``tokenmark scaling BENCHMARK SCENARIO``)."""
    bench, scen = resolve_benchmark(benchmark), resolve_scenario(scenario)
    rows = _rows(db, benchmark=bench, scenario=scen, round=round)
    return analyses.scaling(rows, bench, scen, accelerator=accelerator, submitter=submitter,
                            round=round, division=division, base=base)


def software_gains(
    benchmark: str, scenario: str, *, db: PathLike | None = None,
    accelerator: str | None = None, accelerators: int | None = None,
    submitter: str | None = None, division: str | None = "closed",
) -> list[analyses.GainSeries]:
    """The same hardware across rounds (``tokenmark software-gains BENCHMARK SCENARIO``)."""
    bench, scen = resolve_benchmark(benchmark), resolve_scenario(scenario)
    rows = _rows(db, benchmark=bench, scenario=scen)
    out = analyses.software_gains(rows, bench, scen, accelerator=accelerator,
                                  accelerators=accelerators, submitter=submitter,
                                  division=division)
    if not out and accelerator is not None:
        raise AnalysisError(f"no {bench} {scen} results of {accelerator!r} in two or more "
                            "rounds")
    return out
