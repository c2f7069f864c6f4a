"""Finding and reading everything importable under a path: :func:`scan`.

``PATH`` may be a published results repository checkout (``closed/``, ``open/``,
``network/`` at its top), a folder holding several (the shared samples:
``v4.1/closed/...``, ``v6.0/...``), any single submission tree, a tokenmark run folder
or ``results.json``, a sweep, find-peak or scaling folder (its ``index.json``:
:mod:`tokenmark.importer.series`, and its runs), an official results table
(``summary_results.json``, ``summary.json``, the checker's ``summary.csv``:
:mod:`tokenmark.importer.tables`), or an archive of any of these. A table found in a
folder (a results repository has its ``summary_results.json`` at the top) is read with
the tree; where both hold one result, the tree's row is kept and a table figure that differs is
reported (:attr:`Scan.differences`). :func:`scan` reads it all into a
:class:`Scan` (rows, runs, systems, per-file errors) and writes nothing: the caller
stores the whole scan in one transaction, so nothing half-imported stays.

Discovery descends at most :data:`MAX_DEPTH` folders and never into hidden ones
(``.git``). A folder named ``closed``/``open``/``network`` is a division when one of
its children has ``results/`` or ``systems/``; its round is ``round`` if given, else
the nearest enclosing folder named like ``v5.1`` or ``inference_results_v5.1``, else
each log's ``loadgen_version``. Only ``results/`` and ``systems/`` of a submitter are
listed (never ``code/`` or ``src/``), which is what makes a 54,000-file round quick.

One process reads everything: the v5.1 round (1,449 result folders, 234 MB of detail
logs) takes about 3.5 s on one core, well inside the 60 s the issue allows, so worker
processes would add start-up cost and fragility (spawned workers cannot re-import an
interactive ``__main__``) for no gain.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from tokenmark.importer.archives import extract, is_archive
from tokenmark.importer.published import DIVISIONS, SubmitterReader
from tokenmark.importer.runs import is_results_file, read_run
from tokenmark.importer.series import is_series_index, read_series
from tokenmark.importer.tables import TABLE_NAMES, TableRead, is_table, read_table
from tokenmark.importer.tree import FileError, Limits, Rejected, Tree
from tokenmark.resultrows import (
    Label,
    ResultRow,
    RunRecord,
    SeriesRecord,
    SystemRecord,
    merge_all,
)

__all__ = ["MAX_DEPTH", "Scan", "scan"]

MAX_DEPTH: Final = 8
_ROUND_DIR = re.compile(r"(?:^|inference_results_)v?(\d+)\.(\d+)$")


@dataclass
class Scan:
    """What :func:`scan` read: rows and runs to store, systems they cite, errors.

    ``folders`` counts the result folders and run files seen (read or not); ``tables``
    the official tables read, with their counts; ``differences`` the results whose table
    figure differs from their logs' (one line each).
    """

    root: str
    rows: list[ResultRow] = field(default_factory=list)
    runs: list[RunRecord] = field(default_factory=list)
    series: list[SeriesRecord] = field(default_factory=list)
    systems: dict[str, SystemRecord] = field(default_factory=dict)
    errors: list[FileError] = field(default_factory=list)
    folders: int = 0
    tables: list[TableRead] = field(default_factory=list)
    differences: list[str] = field(default_factory=list)

    def extend(self, other: Scan) -> None:
        self.rows += other.rows
        self.runs += other.runs
        self.series += other.series
        self.systems.update(other.systems)
        self.errors += other.errors
        self.folders += other.folders
        self.tables += other.tables
        self.differences += other.differences

    def add_table(self, table: TableRead) -> None:
        self.tables.append(table)
        self.rows += table.rows
        self.errors += table.errors

    def merge_duplicates(self) -> None:
        """One row per result: rows of one key merged (:func:`merge_all`), in order."""
        by_key, differences = merge_all(self.rows)
        self.rows = list(by_key.values())
        self.differences += differences


def _round_from(path: Path, stop: Path) -> str | None:
    for p in (path, *path.parents):
        m = _ROUND_DIR.search(p.name)
        if m:
            return f"v{m.group(1)}.{m.group(2)}"
        if p == stop.parent:
            break
    return None


def _is_division(tree: Tree, path: Path) -> bool:
    if path.name not in DIVISIONS:
        return False
    try:
        return any((s / "results").is_dir() or (s / "systems").is_dir()
                   for s in tree.subdirs(path))
    except Rejected:
        return False


def _walk(tree: Tree, path: Path, depth: int, found: dict[str, list[Path]],
          errors: list[FileError]) -> None:
    if _is_division(tree, path):
        found["divisions"].append(path)
        return
    for f in tree.files(path):
        if is_results_file(tree, f):
            found["runs"].append(f)
        elif f.name in TABLE_NAMES and is_table(tree, f):
            found["tables"].append(f)
        elif is_series_index(tree, f):
            found["series"].append(f)
    if depth >= MAX_DEPTH:
        return
    try:
        children = list(tree.subdirs(path))
    except Rejected as r:
        errors.append(r.error)
        return
    for child in children:
        _walk(tree, child, depth + 1, found, errors)


def _read_submitter(tree: Tree, submitter: Path, division: str, round_: str | None,
                    label: Label) -> Scan:
    """One submitter's rows, systems and errors."""
    reader = SubmitterReader(tree, submitter, division, round_, label)
    out = Scan(root=str(tree.root))
    err = reader.load_mapping()
    if err is not None:
        out.errors.append(err)
    folders = reader.result_folders(out.errors)
    skipped: dict[str, int] = {}
    for folder in folders:
        out.folders += 1
        try:
            row = reader.read_result(folder)
        except Rejected as r:
            bad = reader.systems.get(folder.parent.parent.name)
            if isinstance(bad, FileError) and bad.path == r.error.path:
                skipped[bad.path] = skipped.get(bad.path, 0) + 1
            else:
                out.errors.append(r.error)
            continue
        out.rows.append(row)
    for system in reader.systems.values():
        if isinstance(system, SystemRecord):
            out.systems[system.key] = system
    for path, n in skipped.items():
        reason = next(s.reason for s in reader.systems.values()
                      if isinstance(s, FileError) and s.path == path)
        out.errors.append(FileError(path, f"{reason}; its {n} result(s) were not imported"))
    return out


def _submitters(tree: Tree, division: Path) -> Iterator[Path]:
    for s in tree.subdirs(division):
        if (s / "results").is_dir() or (s / "systems").is_dir():
            yield s


def scan(
    path: str | os.PathLike[str],
    *,
    round: str | None = None,
    official: bool = True,
    limits: Limits | None = None,
    system: Mapping[str, Any] | None = None,
) -> Scan:
    """Read everything importable under ``path`` (see the module docstring).

    ``official`` labels published results :attr:`Label.OFFICIAL` (pass ``False`` for a
    submission tree MLCommons has not published); results whose logs tokenmark wrote,
    and all runs, are :attr:`Label.UNVERIFIED` whatever it says. ``system`` is a system
    description for runs (MLPerf ``systems/<id>.json`` fields).
    """
    lim = limits or Limits()
    p = Path(path)
    if not os.path.lexists(p):
        return Scan(root=str(p), errors=[FileError(str(p), "does not exist")])
    if is_archive(p):
        with tempfile.TemporaryDirectory(prefix="tokenmark-import-") as tmp:
            unpacked = Path(tmp) / "tree"
            unpacked.mkdir()
            errors = extract(p, unpacked, lim)
            # the archive's name (inference_results_v5.1.tar.gz) stands in for the checkout
            stem = Path(re.sub(r"(\.tar)?\.[a-z0-9]+$", "", p.name))
            out = _scan_dir(unpacked, f"{p.name}!", round, official, lim, system,
                            quiet_if_empty=bool(errors), fallback_round=_round_from(stem, stem))
            out.root = str(p)
            out.errors[:0] = errors
            out.merge_duplicates()
            return out
    if p.is_file():
        tree = Tree(p.parent, lim)
        out = Scan(root=str(p))
        if is_table(tree, p):
            out.add_table(read_table(tree, p, round, _label(official)))
            out.merge_duplicates()
            return out
        if p.name != "results.json":
            out.errors.append(FileError(p.name, "is not a folder, a results.json, an official "
                                        "results table (summary_results.json, summary.json, "
                                        "summary.csv) or an archive (.tar, .tar.gz, .tgz, "
                                        ".tar.bz2, .tar.xz, .zip)"))
            return out
        _read_runs(tree, [p], system, out)
        return out
    out = _scan_dir(p, "", round, official, lim, system)
    out.merge_duplicates()
    return out


def _label(official: bool) -> Label:
    return Label.OFFICIAL if official else Label.UNVERIFIED


def _read_runs(tree: Tree, paths: list[Path], system: Mapping[str, Any] | None,
               out: Scan) -> None:
    for f in paths:
        out.folders += 1
        try:
            out.runs.append(read_run(tree, f, system))
        except Rejected as r:
            out.errors.append(r.error)


def _scan_dir(root: Path, label: str, round_: str | None, official: bool, limits: Limits,
              system: Mapping[str, Any] | None, *, quiet_if_empty: bool = False,
              fallback_round: str | None = None) -> Scan:
    tree = Tree(root, limits, label=label)
    out = Scan(root=str(root))
    found: dict[str, list[Path]] = {"divisions": [], "runs": [], "tables": [], "series": []}
    _walk(tree, tree.root, 0, found, out.errors)
    submitters = 0
    lab = _label(official)
    for division in found["divisions"]:
        rnd = round_ or _round_from(division, tree.root) or fallback_round
        for sub in _submitters(tree, division):
            submitters += 1
            out.extend(_read_submitter(tree, sub, division.name, rnd, lab))
    _read_runs(tree, found["runs"], system, out)
    started = {r.run_hash: r.started_utc for r in out.runs}
    for index in found["series"]:
        try:
            out.series.append(read_series(tree, index, started))
        except Rejected as r:
            out.errors.append(r.error)
    for table in found["tables"]:
        out.add_table(read_table(tree, table, round_, lab,
                                 fallback_round=_round_from(table.parent, tree.root)
                                 or fallback_round))
    if (not submitters and not found["runs"] and not found["tables"] and not out.errors
            and not quiet_if_empty):
        out.errors.append(FileError(label or str(root), "holds no closed/, open/ or network/ "
                                    "submission tree and no tokenmark results.json: an unknown "
                                    "layout"))
    return out
