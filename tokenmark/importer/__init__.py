"""The importer of published MLPerf results and of tokenmark runs (an edge).

:func:`scan` reads a path (results repository, submission tree, run folder,
``results.json`` or archive) into result rows, run records, system descriptions and
per-file errors, and writes nothing; the results store (:mod:`tokenmark.store`) writes
a scan in one transaction. The importer and the store do not import each other:
:mod:`tokenmark.results_api` composes them.
"""

from __future__ import annotations

from tokenmark.importer.checker import canonical_scenario
from tokenmark.importer.published import canonical_benchmark
from tokenmark.importer.scan import Scan, scan
from tokenmark.importer.tree import FileError, Limits

__all__ = [
    "FileError",
    "Limits",
    "Scan",
    "canonical_benchmark",
    "canonical_scenario",
    "scan",
]
