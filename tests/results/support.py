"""Helpers of the results tests: the shared CSV as result rows, and sample paths."""

from __future__ import annotations

import csv
from pathlib import Path

from tests.paths import RESULTS_CSV
from tokenmark.importer import canonical_benchmark
from tokenmark.resultrows import Label, ResultRow

__all__ = ["CSV_UNITS", "csv_records", "csv_rows", "sample_folder"]

CSV_UNITS = {"tokens/s": "Tokens/s", "samples/s": "Samples/s", "queries/s": "Queries/s",
             "latency_ms_p90": "Latency (ms)"}


def _int(text: str) -> int | None:
    return int(text) if text.strip().isdigit() else None


def csv_records() -> list[dict[str, str]]:
    with open(RESULTS_CSV, newline="") as f:
        return list(csv.DictReader(f))


def csv_rows() -> list[ResultRow]:
    """Each CSV row as a published result row (benchmarks under the checker's names)."""
    out = []
    for x in csv_records():
        out.append(ResultRow(
            round=x["round"], division=x["division"], submitter=x["submitter"],
            system_id=x["system_id"], benchmark=canonical_benchmark(x["benchmark"], x["round"]),
            scenario=x["scenario"], value=float(x["result"]), unit=CSV_UNITS[x["metric"]],
            metric=x["metric"], label=Label.OFFICIAL, category=x["system_type"],
            availability=x["availability"], system_name=x["system_name"],
            accelerator_model=x["accelerator_model_name"],
            accelerators_per_node=_int(x["accelerators_per_node"]),
            nodes=_int(x["number_of_nodes"]), benchmark_folder=x["benchmark"],
            source_path=x["source_path"],
        ))
    return out


def sample_folder(root: Path, round_: str, division: str, submitter: str, system: str,
                  benchmark: str, scenario: str) -> Path:
    return root / round_ / division / submitter / "results" / system / benchmark / scenario
