"""The importer of published MLPerf results and of tokenmark runs (an edge).

:func:`scan` reads a path (results repository, submission tree, run folder,
``results.json``, official results table or archive) into result rows, run records,
system descriptions and per-file errors, and writes nothing; the results store
(:mod:`tokenmark.store`) writes a scan in one transaction. The importer and the store do
not import each other: :mod:`tokenmark.api.results` composes them.

The names below are loaded on first use, so that a command that only resolves a
benchmark name (``canonical_benchmark``) does not pay for the log parsers.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tokenmark.importer.checker import canonical_benchmark, canonical_scenario
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

_WHERE = {
    "FileError": "tokenmark.importer.tree",
    "Limits": "tokenmark.importer.tree",
    "Scan": "tokenmark.importer.scan",
    "scan": "tokenmark.importer.scan",
    "canonical_benchmark": "tokenmark.importer.checker",
    "canonical_scenario": "tokenmark.importer.checker",
}


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'tokenmark.importer' has no attribute {name!r}")
    value = getattr(importlib.import_module(where), name)
    globals()[name] = value
    return value
