"""Pickled pandas DataFrames (the MLPerf reference datasets): the one module that
imports pandas, and only when the user said the file may be trusted.

Unpickling runs whatever code the file names, so a pickle is refused unless
``allow_pickle`` is given (``--allow-pickle``); the error says how to convert the file
to Parquet instead. The frame is loaded whole (pickles cannot be streamed), cut to the
mapped columns, and its rows are read from it afterwards; nothing else copies them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from tokenmark.errors import DatasetError

__all__ = ["PickleTable"]


class PickleTable:
    def __init__(self, path: Path, *, allow_pickle: bool = False,
                 columns: Sequence[str] | None = None) -> None:
        if not allow_pickle:
            raise DatasetError(
                f"{path}: a pickle can run code when it is read, so tokenmark reads one only "
                "when told the file is trusted: pass --allow-pickle, or convert it once with "
                "pandas (pd.read_pickle(p).to_parquet('data.parquet')) and use the Parquet "
                "file")
        try:
            import pandas as pd  # type: ignore[import-untyped,import-not-found,unused-ignore]
        except ImportError:
            raise DatasetError("reading a pickled DataFrame needs pandas: pip install "
                               "'tokenmark[pickle]'") from None
        try:
            with open(path, "rb") as f:
                digest = hashlib.file_digest(f, "sha256").hexdigest()
            df = pd.read_pickle(path)
        except Exception as e:  # unpickling can raise anything
            raise DatasetError(f"{path}: cannot unpickle it ({type(e).__name__}: {e}); give "
                               "the pickled DataFrame itself") from None
        if not isinstance(df, pd.DataFrame):
            raise DatasetError(f"{path}: the pickle holds a {type(df).__name__}, not a "
                               "pandas DataFrame")
        if columns:
            df = df[[c for c in dict.fromkeys(columns) if c in df.columns]]
        self._path = path
        self._df: Any = df.reset_index(drop=True)
        self._columns = [str(c) for c in df.columns]
        self._digest = f"pickle:{digest}"

    @property
    def source(self) -> str:
        return str(self._path)

    @property
    def columns(self) -> Sequence[str]:
        return self._columns

    @property
    def fingerprint(self) -> str:
        return self._digest

    def select(self, columns: Sequence[str]) -> None:
        keep = [c for c in dict.fromkeys(columns) if c in self._columns]
        self._df = self._df[keep]
        self._columns = keep

    def scan(self) -> Iterator[tuple[dict[str, Any], str]]:
        names = self._columns
        for k, values in enumerate(self._df.itertuples(index=False, name=None)):
            yield dict(zip(names, values, strict=True)), f"{self._path} row {k + 1}"

    def get(self, k: int) -> dict[str, Any]:
        return {c: self._df[c].iat[k] for c in self._columns}
