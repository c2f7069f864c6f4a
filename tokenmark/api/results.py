"""Python entry points for the results database, the importer and the analyses.

The CLI (``tokenmark import``, ``db``, ``results``, ``leaderboard``, ``reproducibility``,
``compare``, ``scaling``, ``software-gains``, ``top``, ``published``) and the web UI call
these and only format what they return (:mod:`tokenmark.api.tables` turns each
answer into plain tables). Each function opens the database named by ``db`` (a path or
URL; ``None``: ``$TOKENMARK_DB`` or the default file, see :mod:`tokenmark.datadir`),
does one thing, and closes it. Benchmark names may be LoadGen aliases (``llama3_1-8b``)
and scenarios any case; both are resolved to the checker's names first.

Published results out of the box. The analyses (leaderboard, reproducibility, compare,
scaling, software gains, top) read the table of published LLM results that ships with
tokenmark (:mod:`tokenmark.importer.packaged`) together with the user's database: the
database adds to it, and where both hold one result the database's row is merged over
the table's (:func:`~tokenmark.resultrows.merge_rows`). The table read is
``$TOKENMARK_PUBLISHED`` if set (a path; ``0``/``off``: none), else the one
``tokenmark published refresh`` wrote into the user's data folder, else the packaged
one. ``published=False`` leaves it out. A database that does not exist yet is not
created by a read: the answer then comes from the table alone, and the database
driver (SQLAlchemy) is never loaded.

Errors the user can fix raise :class:`~tokenmark.errors.BadInputError` subclasses
(:class:`~tokenmark.errors.StoreError`, :class:`~tokenmark.errors.AnalysisError`);
per-file import problems are data in :class:`ImportReport`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tokenmark import __version__, analyses, datadir, hardware
from tokenmark.errors import AnalysisError, BadInputError
from tokenmark.importer.checker import canonical_benchmark, canonical_scenario
from tokenmark.importer.packaged import PublishedTable, load, packaged_path
from tokenmark.inputs import MIB, load_json_object
from tokenmark.resultrows import Label, ResultRow, RunRecord, merge_rows

if TYPE_CHECKING:
    from tokenmark.importer.tree import FileError, Limits
    from tokenmark.store import WriteCounts
    from tokenmark.store.signatures import Signature

__all__ = [
    "PUBLISHED_ENV",
    "DbStatus",
    "ImportReport",
    "RefreshReport",
    "aliases",
    "compare",
    "compare_accelerators",
    "db_status",
    "db_upgrade",
    "get_run",
    "import_results",
    "leaderboard",
    "list_results",
    "list_runs",
    "published_table",
    "refresh_published",
    "reproducibility",
    "resolve_benchmark",
    "resolve_scenario",
    "scaling_efficiency",
    "scaling_scenarios",
    "signers",
    "software_gains",
    "store_run",
    "top",
    "user_published_path",
]

PathLike = str | os.PathLike[str]
#: The published-results table to read instead of the refreshed or packaged one (a
#: path), or ``0``/``off`` for none.
PUBLISHED_ENV = "TOKENMARK_PUBLISHED"
_OFF = frozenset({"0", "off", "no", "none", "false"})


@dataclass(frozen=True)
class ImportReport:
    """What an import did. ``written`` is false when nothing was stored (``strict`` and
    errors, or nothing importable); ``counts`` then is ``None``. ``differences`` lists
    the results whose official table figure differs from their logs' (in the import or
    against the database); ``tables`` says what each official table held (entries, LLM
    and other rows kept)."""

    path: str
    db: str
    folders: int
    rows: int
    runs: int
    errors: tuple[FileError, ...]
    written: bool
    counts: WriteCounts | None
    seconds: float
    differences: tuple[str, ...] = ()
    tables: tuple[str, ...] = ()

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
    """The checker's name of ``name`` (a checker name or a LoadGen alias).

    A name the published table holds is a checker's name already (the table is written
    with them), so it is taken as it is without reading the round presets.
    """
    key = name.strip()
    table = published_table()
    if table is not None and key.lower() in table.benchmarks():
        return key.lower()
    return canonical_benchmark(key)


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
    from tokenmark.importer import scan
    from tokenmark.store import Store

    t0 = time.perf_counter()
    found = scan(path, round=round, official=official, limits=limits,
                 system=_system_file(system))
    url = datadir.resolve_db_url(db)
    counts: WriteCounts | None = None
    anything = bool(found.rows or found.runs)
    if anything and not (strict and found.errors):
        with Store.open(db) as st:
            url = st.url
            counts = st.write(found.rows, found.runs, list(found.systems.values()))
    differences = tuple(dict.fromkeys(found.differences + list(
        counts.differences if counts else ())))
    tables = tuple(f"{t.path} ({t.shape}): {t.entries} entries, {t.llm} LLM and {t.other} "
                   f"other results, {t.power} power figures" for t in found.tables)
    return ImportReport(
        path=str(path), db=url, folders=found.folders, rows=len(found.rows),
        runs=len(found.runs), errors=tuple(found.errors), written=counts is not None,
        counts=counts, seconds=time.perf_counter() - t0, differences=differences,
        tables=tables,
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
    from tokenmark.store import engine as store_engine

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
    from tokenmark.store import Store
    from tokenmark.store import engine as store_engine

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


def _stored(db: PathLike | None, filters: Mapping[str, str | None]) -> list[ResultRow]:
    """The database's rows, or none when a SQLite database does not exist (a read never
    creates one, and then never loads SQLAlchemy)."""
    url = datadir.resolve_db_url(db)
    file = datadir.sqlite_file(url)
    if file is not None and not file.exists():
        return []
    from tokenmark.store import Store

    with Store.open(db, create=False) as st:
        return st.rows(filters)


def user_published_path() -> Path:
    """Where ``tokenmark published refresh`` writes the refreshed table by default."""
    return datadir.data_dir() / "published.csv.gz"


def _published_path() -> Path | None:
    env = os.environ.get(PUBLISHED_ENV)
    if env is not None and env.strip():
        return None if env.strip().lower() in _OFF else Path(env).expanduser()
    user = user_published_path()
    return user if user.exists() else packaged_path()


@lru_cache(maxsize=4)
def _load_published(path: str, mtime_ns: int, size: int) -> PublishedTable:
    return load(path)


def published_table() -> PublishedTable | None:
    """The table of published results the analyses read (module docstring), or ``None``
    when ``$TOKENMARK_PUBLISHED`` turns it off."""
    path = _published_path()
    if path is None:
        return None
    try:
        st = path.stat()
        return _load_published(str(path), st.st_mtime_ns, st.st_size)
    except OSError as exc:
        raise BadInputError(f"cannot read the published-results table {path} "
                            f"({exc.strerror}); set {PUBLISHED_ENV} to a table, or 0 to "
                            "read the database alone") from None
    except (ValueError, EOFError) as exc:
        raise BadInputError(f"{exc}") from None


def _rows(db: PathLike | None, published: bool = True, **filters: str | None
          ) -> list[ResultRow]:
    """Rows matching ``filters``: the published table's (when ``published``) with the
    database's merged over them, by result."""
    stored = _stored(db, filters)
    table = published_table() if published else None
    if table is None:
        return stored
    by_key = {r.key: r for r in table.select(filters)}
    for r in stored:
        old = by_key.get(r.key)
        by_key[r.key] = r if old is None else merge_rows(old, r).row
    return list(by_key.values())


def list_results(
    *, db: PathLike | None = None, benchmark: str | None = None,
    scenario: str | None = None, round: str | None = None, division: str | None = None,
    submitter: str | None = None, system_id: str | None = None, label: str | None = None,
    published: bool = False,
) -> list[ResultRow]:
    """Stored rows matching every filter given (``tokenmark results``); with
    ``published``, the published table's rows too (the database's merged over them)."""
    if label is not None and label not in {lb.value for lb in Label}:
        raise BadInputError(f"unknown label {label!r}; choose official or unverified")
    rows = _rows(db, published, benchmark=resolve_benchmark(benchmark) if benchmark else None,
                 scenario=resolve_scenario(scenario) if scenario else None, round=round,
                 division=division, submitter=submitter, system_id=system_id, label=label)
    return sorted(rows, key=lambda r: r.key)


def list_runs(
    *, db: PathLike | None = None, benchmark: str | None = None,
    scenario: str | None = None, round: str | None = None, system_id: str | None = None,
) -> list[RunRecord]:
    """The user's own runs stored in the database, newest first (the web UI's runs list)."""
    from tokenmark.store import Store

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
    from tokenmark.store import Store

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
    from tokenmark.store import Store
    from tokenmark.store.signatures import signatures_of

    with Store.open(db) as st:
        return signatures_of(st, run_hashes)


def leaderboard(
    benchmark: str, scenario: str, *, db: PathLike | None = None,
    division: str | None = "closed", availability: str | None = "available",
    round: str | None = None, official_only: bool = False, category: str | None = None,
    published: bool = True,
) -> analyses.Leaderboard:
    """The two-tier leaderboard (``tokenmark leaderboard BENCHMARK SCENARIO``)."""
    bench, scen = resolve_benchmark(benchmark), resolve_scenario(scenario)
    rows = _rows(db, published, benchmark=bench, scenario=scen)
    labels = (Label.OFFICIAL,) if official_only else (Label.OFFICIAL, Label.UNVERIFIED)
    return analyses.leaderboard(rows, bench, scen, division=division,
                                availability=availability, round=round, labels=labels,
                                category=category)


def reproducibility(
    *, db: PathLike | None = None, benchmark: str | None = None, scenario: str | None = None,
    accelerator: str | None = None, accelerators: int | None = None,
    division: str | None = "closed", round: str | None = None, vendor: str | None = None,
    published: bool = True,
) -> list[analyses.ReproGroup]:
    """Partners' results against the accelerator vendor's (``tokenmark reproducibility``)."""
    bench = resolve_benchmark(benchmark) if benchmark else None
    scen = resolve_scenario(scenario) if scenario else None
    rows = _rows(db, published, benchmark=bench, scenario=scen, round=round)
    return analyses.reproducibility(rows, benchmark=bench, scenario=scen,
                                    accelerator=accelerator, accelerators=accelerators,
                                    division=division, round=round, vendor=vendor)


def compare(
    a: str, b: str, *, db: PathLike | None = None, benchmark: str | None = None,
    scenario: str | None = None, normalise: bool = False, published: bool = True,
) -> analyses.Comparison:
    """System B against system A, per benchmark and scenario (``tokenmark compare A B``)."""
    bench = resolve_benchmark(benchmark) if benchmark else None
    scen = resolve_scenario(scenario) if scenario else None
    ra, rb = analyses.SystemRef.parse(a), analyses.SystemRef.parse(b)
    rows = [r for r in _rows(db, published)
            if {ra.system_id, rb.system_id} & {r.system_id, hardware.system_key(
                r.submitter, r.system_id)}]
    return analyses.compare(rows, ra, rb, benchmark=bench, scenario=scen, normalise=normalise)


def compare_accelerators(
    a: str, b: str, *, db: PathLike | None = None, round: str | None = None,
    benchmark: str | None = None, scenario: str | None = None,
    division: str | None = "closed", same_submitter: bool = True, normalise: bool = False,
    published: bool = True,
) -> analyses.AcceleratorComparison:
    """Accelerator B against accelerator A, paired per submitter
    (``tokenmark compare A B --accelerators``)."""
    bench = resolve_benchmark(benchmark) if benchmark else None
    scen = resolve_scenario(scenario) if scenario else None
    rows = _rows(db, published, benchmark=bench, scenario=scen, round=round)
    return analyses.compare_accelerators(rows, a, b, round=round, benchmark=bench,
                                         scenario=scen, division=division,
                                         same_submitter=same_submitter, normalise=normalise)


def scaling_efficiency(
    benchmark: str, scenario: str, *, accelerator: str, db: PathLike | None = None,
    submitter: str | None = None, round: str | None = None,
    division: str | None = "closed", base: int | None = None,
    availability: str | None = None, published: bool = True,
) -> analyses.ScalingCurve:
    """Scaling efficiency of a system family (``tokenmark scaling BENCHMARK SCENARIO``);
    one submitter and one availability unless ``any`` is asked for."""
    bench, scen = resolve_benchmark(benchmark), resolve_scenario(scenario)
    rows = _rows(db, published, benchmark=bench, scenario=scen, round=round)
    return analyses.scaling_efficiency(rows, bench, scen, accelerator=accelerator,
                                       submitter=submitter, round=round, division=division,
                                       base=base, availability=availability)


def scaling_scenarios(
    benchmark: str, *, accelerator: str, db: PathLike | None = None,
    submitter: str | None = None, round: str | None = None,
    division: str | None = "closed", base: int | None = None,
    availability: str | None = None, published: bool = True,
) -> list[analyses.ScalingCurve]:
    """:func:`scaling_efficiency` for every scenario of ``benchmark`` whose family has results at
    two or more counts (``tokenmark scaling BENCHMARK`` with no scenario)."""
    bench = resolve_benchmark(benchmark)
    rows = _rows(db, published, benchmark=bench, round=round)
    curves, why = [], []
    for scen in sorted({r.scenario for r in rows}):
        try:
            c = analyses.scaling_efficiency([r for r in rows if r.scenario == scen], bench, scen,
                                 accelerator=accelerator, submitter=submitter, round=round,
                                 division=division, base=base, availability=availability)
        except AnalysisError as exc:
            why.append(f"{scen}: {exc}")
            continue
        if len({p.accelerators for p in c.points}) > 1:
            curves.append(c)
        else:
            why.append(f"{scen}: results at one count only ({c.base.accelerators})")
    if not curves:
        raise AnalysisError(f"no {bench} scenario has a family at two or more counts: "
                            + "; ".join(why or ["no results"]))
    return curves


def software_gains(
    benchmark: str | None = None, scenario: str | None = None, *,
    db: PathLike | None = None, accelerator: str | None = None,
    accelerators: int | None = None, submitter: str | None = None,
    division: str | None = "closed", published: bool = True,
) -> list[analyses.GainSeries]:
    """The same hardware across rounds (``tokenmark software-gains [BENCHMARK [SCENARIO]]``:
    every benchmark and scenario when not named); :class:`AnalysisError` when no hardware
    has results in two rounds."""
    bench = resolve_benchmark(benchmark) if benchmark else None
    scen = resolve_scenario(scenario) if scenario else None
    rows = _rows(db, published, benchmark=bench, scenario=scen)
    pairs: dict[tuple[str, str], list[ResultRow]] = {}
    for r in rows:
        pairs.setdefault((r.benchmark, r.scenario), []).append(r)
    out: list[analyses.GainSeries] = []
    for (b, sc) in sorted(pairs):
        out += analyses.software_gains(pairs[(b, sc)], b, sc, accelerator=accelerator,
                                       accelerators=accelerators, submitter=submitter,
                                       division=division)
    if not out:
        what = " ".join(x for x in (
            f"{bench or 'any benchmark'} {scen or ''}".strip(),
            f"of {accelerator!r}" if accelerator else "",
            f"at {accelerators} accelerators" if accelerators is not None else "",
            f"from {submitter}" if submitter else "",
            f"in the {division} division" if division else "") if x)
        raise AnalysisError(f"no hardware has results ({what}) in two or more rounds; widen "
                            "the filters or list results with 'tokenmark results "
                            "--published'")
    return out


def top(
    *, db: PathLike | None = None, vendor: str | None = None, accelerator: str | None = None,
    submitter: str | None = None, benchmark: str | None = None, scenario: str | None = None,
    division: str | None = "closed", availability: str | None = "available",
    round: str | None = None, unit: str = "Tokens/s", limit: int = 10,
    published: bool = True,
) -> analyses.Top:
    """The largest results across benchmarks, by accelerator vendor, accelerator or
    submitter (``tokenmark top``)."""
    if limit < 1:
        raise BadInputError(f"--limit {limit} lists nothing; give 1 or more")
    bench = resolve_benchmark(benchmark) if benchmark else None
    scen = resolve_scenario(scenario) if scenario else None
    rows = _rows(db, published, benchmark=bench, scenario=scen,
                 round=round if round not in (None, "all") else None)
    got = analyses.top(rows, vendor=vendor, accelerator=accelerator, submitter=submitter,
                       benchmark=bench, scenario=scen, division=division,
                       availability=availability, round=round, unit=unit, limit=limit)
    if not got.entries:
        raise AnalysisError("no results match " + (", ".join(
            f"{k} {v}" for k, v in got.filters) or "the filters")
            + (f" in {round}" if round and round != "all" else "") + f" in {unit}")
    return got


def aliases() -> list[hardware.Alias]:
    """Every name alias the analyses apply (:mod:`tokenmark.hardware`)."""
    return hardware.alias_table()


@dataclass(frozen=True)
class RefreshReport:
    """What ``tokenmark published refresh`` read and wrote."""

    path: str
    size: int
    rows: int
    per_round: Mapping[str, int]
    provenance: tuple[str, ...]
    skipped: Mapping[str, int]
    errors: tuple[FileError, ...]
    differences: tuple[str, ...]


def refresh_published(
    sources: Sequence[PathLike], *, out: PathLike | None = None, replace: bool = False,
    note: str = "", round: str | None = None, limits: Limits | None = None,
) -> RefreshReport:
    """Rebuild the table of published LLM results from official tables and result
    trees (``tokenmark published refresh``).

    Each source is read as ``tokenmark import`` reads it; published (official) LLM rows
    are kept, merged over the table in use (unless ``replace``: from nothing), the
    tree's row winning where a tree and a table hold one result. The table is written
    to ``out``, by default into the user's data folder, where the analyses read it
    instead of the packaged one. Nothing is written when a source cannot be read at
    all.
    """
    from tokenmark.importer import scan
    from tokenmark.importer.packaged import Source, build, source_line, write

    if not sources:
        raise BadInputError("give the tables or result folders to read, e.g. "
                            "summary_results.json or a results repository checkout")
    read: list[Source] = []
    errors: list[FileError] = []
    for src in sources:
        p = Path(src)
        found = scan(p, round=round, limits=limits)
        errors += found.errors
        if not found.rows and found.errors:
            raise BadInputError(f"{p}: nothing could be read ({found.errors[0]}); nothing "
                                "was written")
        entries = sum(t.entries for t in found.tables) or found.folders
        kind = "summary table" if found.tables and not found.folders else "result tree"
        read.append(Source(str(p), found.rows, source_line(
            p, entries, len(found.rows), sum(r.llm for r in found.rows), kind)))
    base = None if replace else published_table()
    made = build(read, base, version=__version__, note=note)
    target = Path(out) if out is not None else user_published_path()
    size = write(target, made.rows, made.provenance)
    _load_published.cache_clear()
    per_round: dict[str, int] = {}
    for r in made.rows:
        per_round[r.round] = per_round.get(r.round, 0) + 1
    return RefreshReport(str(target), size, len(made.rows), per_round,
                         tuple(made.provenance), made.skipped, tuple(errors),
                         tuple(made.differences))


# The name before issue 20 (the simulation API's ``scaling`` predicts a cluster's).
scaling = scaling_efficiency
