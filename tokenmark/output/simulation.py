"""The files a simulated run adds to (or writes instead of) a real run's.

- ``records.jsonl``: the same format as :mod:`tokenmark.output.records` (its encoder),
  one line per request, written from the simulator's columns in completion order. The
  simulator keeps per-request summaries, not per-token timestamps, so ``chunk_gaps_ns``
  is empty and the first-token time is the only chunk time (its inter-token latency is
  in the summary, computed from the engines' step times);
- ``simulation.json``: the deployment (accelerator, topology, parallelism, precision,
  serving policy, efficiency parameters and where they came from), the planning
  notes, the explanation (step-time split, queueing, batch sizes, binding limit) and
  the simulator's own timing;
- ``report.txt``: the same, for people.
"""

from __future__ import annotations

import json
import os
from itertools import islice, repeat
from pathlib import Path
from typing import Any

import numpy as np

from tokenmark.output.records import encode_columns

__all__ = ["REPORT_FILE", "SIMULATION_FILE", "write_report", "write_sim_records",
           "write_simulation_json"]

SIMULATION_FILE = "simulation.json"
REPORT_FILE = "report.txt"


def write_sim_records(
    path: Path,
    *,
    seq: np.ndarray,
    query: np.ndarray,
    sample: np.ndarray,
    phase: list[str],
    scheduled: np.ndarray,
    issued: np.ndarray,
    first: np.ndarray,
    done: np.ndarray,
    input_tokens: np.ndarray,
    output_tokens: np.ndarray,
    error: np.ndarray,
) -> int:
    """Write ``records.jsonl`` rows from columns (already in completion order), with the
    records file's one encoder (:func:`~tokenmark.output.records.encode_columns`); a
    failed request (``error``) is one larger than the whole KV cache."""
    failed = error.astype(bool).tolist()
    lines = encode_columns({
        "seq": seq.tolist(), "query_id": query.tolist(), "sample_index": sample.tolist(),
        "phase": phase, "scheduled_ns": scheduled.tolist(), "issued_ns": issued.tolist(),
        "first_token_ns": first.tolist(), "done_ns": done.tolist(),
        "input_tokens": input_tokens.tolist(), "output_tokens": output_tokens.tolist(),
        "token_source": repeat("sut"),
        "error": ["sut_error" if e else None for e in failed],
        "error_detail": ["larger than the whole KV cache" if e else "" for e in failed],
        "first_answer_ns": first.tolist(),
    })
    n = 0
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8", buffering=1 << 22) as f:
        while chunk := list(islice(lines, 65536)):
            f.write("".join(chunk))
            n += len(chunk)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return n


def write_simulation_json(path: Path, doc: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    os.replace(tmp, path)


def write_report(path: Path, lines: list[str]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(tmp, path)
