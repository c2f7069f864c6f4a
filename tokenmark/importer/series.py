"""Reading a sweep, find-peak search or scaling run: the ``index.json`` that
``tokenmark sweep``, ``find-peak`` and ``scale`` write beside their runs' folders.

The index is kept whole (``SeriesRecord.doc``); each of its points (a sweep's
``points``, a search's ``probes``, a scaling run's ``points``) becomes a
:class:`~tokenmark.resultrows.SeriesPoint` citing the run it measured by the SHA-256 of
that run's ``results.json`` (the key the run itself is stored under): a sweep point's
and a probe's ``folder``; a scaling point's first search (``folders``) and that search's
confirmed run. The runs are read by the scan as every ``results.json`` is.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tokenmark.importer.tree import Rejected, Tree
from tokenmark.resultrows import SERIES_KINDS, SeriesPoint, SeriesRecord

__all__ = ["INDEX_FILE", "is_series_index", "read_series"]

#: The index file of a series (``tokenmark.api.scale.INDEX_JSON``).
INDEX_FILE = "index.json"
_POINTS = {"sweep": "points", "find-peak": "probes", "scaling": "points"}


def is_series_index(tree: Tree, path: Path) -> bool:
    """Whether ``path`` looks like a series' ``index.json`` (its kind is one of ours)."""
    if path.name != INDEX_FILE:
        return False
    try:
        with open(tree.confine(path), "rb") as f:
            head = f.read(64)
    except (OSError, Rejected):
        return False
    return any(f'"kind": "{k}"'.encode() in head for k in SERIES_KINDS)


def _run_hash(tree: Tree, folder: Path) -> str | None:
    f = folder / "results.json"
    try:
        return hashlib.sha256(tree.read_bytes(f)).hexdigest() if tree.exists(f) else None
    except Rejected:
        return None


def _point_run(tree: Tree, parent: Path, kind: str, row: Mapping[str, Any]) -> str | None:
    """The run a point measured: its folder's results.json (a scaling point: its first
    search's confirmed run)."""
    if kind == "scaling":
        first = str(row.get("folders") or "").split()
        if not first:
            return None
        search = parent / first[0]
        try:
            confirmed = tree.read_json_object(search / INDEX_FILE).get("confirmed_folder")
        except Rejected:
            return None
        return _run_hash(tree, search / str(confirmed)) if confirmed else None
    folder = row.get("folder")
    return _run_hash(tree, parent / str(folder)) if folder else None


def read_series(tree: Tree, path: Path, started: Mapping[str, str]) -> SeriesRecord:
    """The series of the ``index.json`` at ``path``; ``started``: run hash -> start time
    of the runs the scan read (the series starts with its first run)."""
    rel = tree.rel(path)
    raw = tree.read_bytes(path)
    doc = tree.read_json_object(path)
    kind = str(doc.get("kind", ""))
    if kind not in SERIES_KINDS:
        raise Rejected(rel, f"is an index of kind {kind!r}, not one of "
                       f"{', '.join(SERIES_KINDS)}")
    rows = doc.get(_POINTS[kind])
    settings = doc.get("settings")
    if not isinstance(rows, list) or not isinstance(settings, dict):
        raise Rejected(rel, f"has no '{_POINTS[kind]}' list or 'settings' object (not "
                       "written by tokenmark sweep, find-peak or scale)")
    points = tuple(SeriesPoint(i + 1, _point_run(tree, path.parent, kind, r), r)
                   for i, r in enumerate(rows) if isinstance(r, dict))
    times = [started[p.run_hash] for p in points if p.run_hash and p.run_hash in started]
    return SeriesRecord(
        series_hash=hashlib.sha256(raw).hexdigest(), kind=kind,
        started_utc=min(times) if times else "", round=str(settings.get("round", "")),
        benchmark=str(settings.get("benchmark", "")),
        scenario=str(settings.get("scenario", "")), doc=doc, points=points, source_path=rel)
