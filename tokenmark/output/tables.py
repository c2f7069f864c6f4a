"""CSV beside ``results.json`` (issue 27): ``records.csv``, one row per request, and
``summary.csv``, one row with the run's figures, for spreadsheets and pandas::

    import pandas as pd
    df = pd.read_csv("results/RUN/records.csv")
    df["ttft_ms"] = (df.first_token_ns - df.scheduled_ns) / 1e6

``records.csv`` has the columns of ``records.jsonl`` in its order (see
:mod:`tokenmark.output.records`; times in integer ns from the run's start, -1 or empty
where a record has none); the per-chunk lists (``chunk_gaps_ns``, ``chunk_tokens``) are
JSON arrays in one cell. ``summary.csv`` has the run's identity (``benchmark``,
``scenario``, ``round``, ``profile``, ``sut``), both verdicts, then every figure of
``results.json``'s ``summary`` under its dotted path (``latency_ms.ttft.percentiles.99``,
``throughput.output_tokens_per_second``, ...). Both are written from the files, so
they always agree with them; :func:`write_csv` rewrites them for any results folder.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any

from tokenmark.output.records import RECORDS_FILE
from tokenmark.output.results import RESULTS_FILE

__all__ = ["RECORDS_CSV", "SUMMARY_CSV", "cell", "flatten", "write_csv", "write_rows",
           "write_table"]

RECORDS_CSV = "records.csv"
SUMMARY_CSV = "summary.csv"


def cell(value: Any) -> Any:
    """A CSV cell: empty for None, JSON for a list or mapping, the value otherwise."""
    if value is None:
        return ""
    if isinstance(value, list | tuple | dict):
        return json.dumps(value, separators=(",", ":"))
    return value


def flatten(doc: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}`` (lists stay one cell)."""
    out: dict[str, Any] = {}
    for key, value in doc.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, name + "."))
        else:
            out[name] = value
    return out


def write_table(stream: IO[str], columns: list[str], rows: Iterable[Mapping[str, Any]]
                ) -> None:
    """Write ``rows`` (mappings; a missing column is an empty cell) to ``stream`` as CSV."""
    w = csv.writer(stream)
    w.writerow(columns)
    for row in rows:
        w.writerow([cell(row.get(c)) for c in columns])


def write_rows(path: Path, columns: list[str], rows: Iterable[Mapping[str, Any]]) -> Path:
    """:func:`write_table` into ``path``, through a temporary file renamed into place."""
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", newline="", encoding="utf-8") as f:
        write_table(f, columns, rows)
    tmp.replace(path)
    return path


def _lines(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def write_csv(run_dir: Path) -> tuple[Path, Path]:
    """Write ``records.csv`` and ``summary.csv`` into ``run_dir`` from its
    ``records.jsonl`` and ``results.json``; returns their paths."""
    doc = json.loads((run_dir / RESULTS_FILE).read_text(encoding="utf-8"))
    records = run_dir / RECORDS_FILE
    columns: dict[str, None] = {}
    if records.is_file():
        for rec in _lines(records):  # every line has the same keys; a union to be sure
            columns.update(dict.fromkeys(rec))
    rec_path = write_rows(run_dir / RECORDS_CSV, list(columns),
                          _lines(records) if records.is_file() else ())
    run = doc.get("run", {})
    sut = run.get("sut", {})
    head = {"benchmark": run.get("benchmark"), "scenario": run.get("scenario"),
            "round": run.get("round"), "profile": doc.get("settings", {}).get(
                "requested", {}).get("profile"),
            "sut": sut.get("profile", sut.get("name")) if isinstance(sut, Mapping) else sut,
            "mlperf_verdict": doc.get("verdicts", {}).get("mlperf", {}).get("validity"),
            "tokenmark_verdict": doc.get("verdicts", {}).get("tokenmark", {}).get("validity")}
    row = {**head, **flatten(doc.get("summary", {}))}
    return rec_path, write_rows(run_dir / SUMMARY_CSV, list(row), [row])
