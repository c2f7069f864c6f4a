"""Parquet tables: the one module that imports pyarrow (optional: the ``parquet`` extra).

Only the schema is read when the table is opened; the first scan loads the columns a
mapping uses (memory-mapped, one Arrow copy) and walks them in record batches, so rows
become Python objects a batch at a time. A row is read again from the same Arrow
columns. MLPerf's gpt-oss-120b files (``tok_input`` / ``input_tokens`` lists) and
Hugging Face image datasets (image cells ``{"bytes", "path"}``) read as they are.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from tokenmark.errors import DatasetError

__all__ = ["ParquetTable"]

_BATCH = 1024


def _pyarrow() -> tuple[Any, Any]:
    try:
        import pyarrow as pa  # type: ignore[import-untyped,import-not-found,unused-ignore]
        import pyarrow.parquet as pq  # type: ignore[import-untyped,import-not-found,unused-ignore]
    except ImportError:
        raise DatasetError("reading Parquet needs pyarrow: pip install 'tokenmark[parquet]'"
                           ) from None
    return pa, pq


class ParquetTable:
    def __init__(self, path: Path, columns: Sequence[str] | None = None) -> None:
        pa, pq = _pyarrow()
        self._path = path
        try:
            self._schema_names = list(pq.read_schema(path).names)
        except (pa.ArrowInvalid, OSError) as e:
            raise DatasetError(f"{path}: not a readable Parquet file ({e}); give a .parquet "
                               "file, or name the real format with --format") from None
        self._want = list(columns) if columns else None
        self._table: Any = None
        self._digest = ""

    @property
    def source(self) -> str:
        return str(self._path)

    @property
    def columns(self) -> Sequence[str]:
        return self._schema_names

    @property
    def fingerprint(self) -> str:
        return self._digest

    def select(self, columns: Sequence[str]) -> None:
        """Load only ``columns`` on the next scan."""
        self._want = [c for c in dict.fromkeys(columns) if c in self._schema_names]
        self._table = None

    def _load(self) -> Any:
        if self._table is None:
            _, pq = _pyarrow()
            self._table = pq.read_table(self._path, columns=self._want, memory_map=True)
            h = hashlib.sha256()
            with open(self._path, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
            self._digest = f"parquet:{h.hexdigest()}"
        return self._table

    def scan(self) -> Iterator[tuple[dict[str, Any], str]]:
        table = self._load()
        k = 0
        for batch in table.to_batches(max_chunksize=_BATCH):
            for rec in batch.to_pylist():
                k += 1
                yield rec, f"{self._path} row {k}"

    def get(self, k: int) -> dict[str, Any]:
        table = self._load()
        return {name: table.column(name)[k].as_py() for name in table.column_names}
