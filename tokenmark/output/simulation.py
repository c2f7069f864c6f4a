"""The files a simulated run adds to (or writes instead of) a real run's.

- ``records.jsonl``: the same format as :mod:`tokenmark.output.records`, one line per
  request, written from the simulator's columns in completion order. The simulator
  keeps per-request summaries, not per-token timestamps, so ``chunk_gaps_ns`` is empty
  and the first-token time is the only chunk time (its inter-token latency is in the
  summary, computed from the engines' step times);
- ``simulation.json``: the deployment (accelerator, topology, parallelism, precision,
  serving policy, efficiency parameters and where they came from), the planning
  notes, the explanation (step-time split, queueing, batch sizes, binding limit) and
  the simulator's own timing;
- ``report.txt``: the same, for people.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

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
    """Write ``records.jsonl`` rows from columns (already in completion order)."""
    rows = zip(seq.tolist(), query.tolist(), sample.tolist(), phase, scheduled.tolist(),
               issued.tolist(), first.tolist(), done.tolist(), input_tokens.tolist(),
               output_tokens.tolist(), error.tolist(), strict=True)
    n = 0
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8", buffering=1 << 22) as f:
        lines = []
        for s, q, k, ph, sc, iss, fi, dn, it, ot, er in rows:
            err = '"sut_error"' if er else "null"
            detail = '"larger than the whole KV cache"' if er else '""'
            lines.append(
                f'{{"seq":{s},"query":{q},"sample":{k},"phase":"{ph}","scheduled_ns":{sc},'
                f'"issued_ns":{iss},"first_token_ns":{fi},"done_ns":{dn},'
                f'"input_tokens":{it},"output_tokens":{ot},"token_source":"sut",'
                f'"alt_output_tokens":-1,"error":{err},"error_detail":{detail},'
                f'"endpoint":"","reasoning_tokens":-1,"first_answer_ns":{fi},'
                f'"chunk_gaps_ns":[],"chunk_tokens":null}}\n'
            )
            n += 1
            if len(lines) >= 65536:
                f.write("".join(lines))
                lines.clear()
        f.write("".join(lines))
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
