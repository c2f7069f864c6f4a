"""Finding a stored run's results folder on disk, for the plots that need its records.

The database holds each run's ``results.json`` (whole), not its ``records.jsonl``; the
run pages draw the over-time plots and exact CDFs only when the folder is at hand.
``tokenmark ui --runs DIR`` names folders to look in: every ``results.json`` under them
is hashed (SHA-256 of the file, the run's key in the database) once, and again at most
every :data:`RESCAN_S` seconds when a run is not found (new runs appear as they finish).
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from tokenmark.output.results import RESULTS_FILE
from tokenmark.report import find_runs

__all__ = ["RESCAN_S", "RunFolders"]

RESCAN_S = 10.0


class RunFolders:
    """``run_hash -> results folder`` for the folders under ``roots`` (thread-safe)."""

    def __init__(self, roots: Sequence[Path]) -> None:
        self.roots = tuple(roots)
        self._index: dict[str, Path] = {}
        self._scanned = -RESCAN_S
        self._lock = threading.Lock()

    def _scan(self) -> None:
        index: dict[str, Path] = {}
        for folder in find_runs(r for r in self.roots if r.is_dir()):
            try:
                digest = hashlib.sha256((folder / RESULTS_FILE).read_bytes()).hexdigest()
            except OSError:
                continue
            index[digest] = folder
        self._index = index
        self._scanned = time.monotonic()

    def find(self, run_hash: str) -> Path | None:
        if not self.roots:
            return None
        with self._lock:
            hit = self._index.get(run_hash)
            if hit is None and time.monotonic() - self._scanned >= RESCAN_S:
                self._scan()
                hit = self._index.get(run_hash)
            return hit
