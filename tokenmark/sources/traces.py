"""Trace files: Mooncake's JSON Lines and Azure's LLM inference CSV.

- Mooncake (``FAST'25`` traces, e.g. ``conversation_trace.jsonl``): one object per line,
  ``{"timestamp": <ms>, "input_length": N, "output_length": N, "hash_ids": [...]}``;
  ``hash_ids`` (optional here) name the prompt's 512-token blocks.
- Azure LLM inference traces (2023, 2024): CSV with ``TIMESTAMP``
  (``2023-11-16 18:15:46.6805900``, or seconds as a number), ``ContextTokens`` and
  ``GeneratedTokens``.

Both stream line by line into the integer columns of a
:class:`~tokenmark.workload.traces.TraceTable` (about 32 bytes a request, plus the hash
ids), which :class:`~tokenmark.workload.traces.TraceWorkload` turns into a dataset and
send offsets. An output length of 0 (a request that generated nothing) is sent as 1,
the least a server accepts.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from tokenmark.errors import DatasetError
from tokenmark.sources.textfiles import Record, checked_file, scan_csv, scan_jsonl
from tokenmark.workload.traces import TraceTable

__all__ = ["load_trace", "read_azure", "read_mooncake"]

_AZURE = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")


def _count(v: Any, name: str, where: str, least: int) -> int:
    try:
        if isinstance(v, bool) or (isinstance(v, float) and not v.is_integer()):
            raise ValueError
        n = int(v) if isinstance(v, int | float) else int(str(v).strip())
    except (TypeError, ValueError):
        raise DatasetError(f"{where}: {name} is {v!r}, not a whole number") from None
    if n < least:
        raise DatasetError(f"{where}: {name} is {n}; it must be at least {least}")
    return n


class _Columns:
    def __init__(self) -> None:
        self.t = array("q")
        self.inp = array("q")
        self.out = array("q")
        self.line = array("q")
        self.hashes = array("q")
        self.starts = array("q", [0])

    def table(self, source: str, digest: str, with_hashes: bool) -> TraceTable:
        def a(x: array[int]) -> np.ndarray:
            return np.frombuffer(x, dtype=np.int64).copy() if len(x) else \
                np.empty(0, dtype=np.int64)

        return TraceTable(source, a(self.t), a(self.inp), a(self.out), a(self.line),
                          a(self.hashes) if with_hashes else None,
                          a(self.starts) if with_hashes else None, digest)


def read_mooncake(path: Path | str) -> TraceTable:
    p = checked_file(path, "trace")
    digest = hashlib.sha256()
    cols = _Columns()
    any_hashes = False
    for rec in scan_jsonl(p, digest):
        where = f"{p} line {rec.line}"
        f = rec.fields
        for key in ("timestamp", "input_length", "output_length"):
            if key not in f:
                raise DatasetError(f"{where}: no {key!r}; a Mooncake trace line is "
                                   '{"timestamp": ms, "input_length": N, "output_length": N, '
                                   '"hash_ids": [...]}')
        ts = f["timestamp"]
        if isinstance(ts, bool) or not isinstance(ts, int | float) or ts < 0:
            raise DatasetError(f"{where}: timestamp is {ts!r}; give milliseconds >= 0")
        cols.t.append(round(ts * 1_000_000))
        cols.inp.append(_count(f["input_length"], "input_length", where, 1))
        cols.out.append(max(1, _count(f["output_length"], "output_length", where, 0)))
        cols.line.append(rec.line)
        hs = f.get("hash_ids", [])
        if not isinstance(hs, list) or not all(isinstance(h, int) and not isinstance(h, bool)
                                               for h in hs):
            raise DatasetError(f"{where}: hash_ids must be a list of whole numbers")
        any_hashes = any_hashes or bool(hs)
        cols.hashes.extend(hs)
        cols.starts.append(len(cols.hashes))
    return cols.table(str(p), f"mooncake:{digest.hexdigest()}", any_hashes)


def _timestamp(v: str, where: str) -> int:
    """ns since the epoch of an Azure TIMESTAMP (fractions up to ns), or seconds."""
    s = v.strip()
    try:
        return round(float(s) * 1e9)
    except ValueError:
        pass
    date, _, frac = s.partition(".")
    try:
        whole = dt.datetime.strptime(date, "%Y-%m-%d %H:%M:%S").replace(tzinfo=dt.UTC)
        if frac and not frac.isdigit():
            raise ValueError
    except ValueError:
        raise DatasetError(f"{where}: TIMESTAMP {v!r} is not a time; write "
                           "YYYY-MM-DD HH:MM:SS.fffffff (as the Azure traces do) or seconds"
                           ) from None
    return int(whole.timestamp()) * 1_000_000_000 + int((frac + "000000000")[:9] or 0)


def read_azure(path: Path | str) -> TraceTable:
    p = checked_file(path, "trace")
    digest = hashlib.sha256()
    cols = _Columns()
    records: Iterator[Record] = scan_csv(p, digest)
    for rec in records:
        where = f"{p} line {rec.line}"
        f = rec.fields
        if not cols.line:
            missing = [c for c in _AZURE if c not in f]
            if missing:
                raise DatasetError(
                    f"{p} line 1: no column {missing[0]!r} (columns: {', '.join(f)}); an "
                    f"Azure LLM trace has {', '.join(_AZURE)}")
        cols.t.append(_timestamp(f["TIMESTAMP"], where))
        cols.inp.append(_count(f["ContextTokens"], "ContextTokens", where, 1))
        cols.out.append(max(1, _count(f["GeneratedTokens"], "GeneratedTokens", where, 0)))
        cols.line.append(rec.line)
    return cols.table(str(p), f"azure:{digest.hexdigest()}", False)


def load_trace(path: Path | str, fmt: str | None = None) -> TraceTable:
    """A trace by format (``mooncake`` or ``azure``; by default from the suffix)."""
    p = Path(path)
    kind = fmt or {".jsonl": "mooncake", ".json": "mooncake", ".csv": "azure"}.get(
        p.suffix.lower())
    if kind == "mooncake":
        return read_mooncake(p)
    if kind == "azure":
        return read_azure(p)
    raise DatasetError(f"{p}: cannot tell the trace format; name it (--trace-format "
                       "mooncake|azure)")
