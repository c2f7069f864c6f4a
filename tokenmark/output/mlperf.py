"""The MLPerf LoadGen log files of a run, written into its results folder.

For MLPerf scenarios only (the caller checks; :mod:`tokenmark.mlperf.mllog` refuses the
others), :func:`write_mlperf_logs` writes what LoadGen 6.0.17 writes into its output
directory, under LoadGen's default names:

- ``mlperf_log_summary.txt`` and ``mlperf_log_detail.txt``, rendered by
  :mod:`tokenmark.mlperf.mllog` (each carries one line saying tokenmark, not LoadGen, wrote it);
- ``mlperf_log_accuracy.json`` in performance mode when nothing is sampled for it:
  LoadGen's empty accuracy log, exactly ``"[\\n]\\n"`` (4 bytes). A run that logs
  responses (accuracy mode, or the audit settings ``accuracy_log_*``) writes the file
  itself as they complete (:mod:`tokenmark.output.accuracy`) and passes
  ``accuracy_written=True``, so it is not overwritten here.

LoadGen's ``mlperf_log_trace.json`` is not written. Each file is written to a temporary
name, flushed and fsynced, then renamed, so a reader never sees half a file.
"""

from __future__ import annotations

import os
from pathlib import Path

from tokenmark.metrics.summary import Summary
from tokenmark.mlperf.mllog import RunFacts, render_detail, render_summary
from tokenmark.mlperf.rules import Verdicts
from tokenmark.mlperf.scenarios import Schedule
from tokenmark.mlperf.settings import EffectiveSettings, Mode

__all__ = [
    "ACCURACY_FILE",
    "DETAIL_FILE",
    "EMPTY_ACCURACY_LOG",
    "SUMMARY_FILE",
    "write_mlperf_logs",
]

SUMMARY_FILE = "mlperf_log_summary.txt"
DETAIL_FILE = "mlperf_log_detail.txt"
ACCURACY_FILE = "mlperf_log_accuracy.json"
#: LoadGen's accuracy log with no entry: its header ``[`` and footer ``\n]\n``.
EMPTY_ACCURACY_LOG = "[\n]\n"


def write_mlperf_logs(
    output_dir: Path,
    eff: EffectiveSettings,
    summary: Summary,
    verdicts: Verdicts,
    schedule: Schedule,
    facts: RunFacts,
    *,
    accuracy_written: bool = False,
) -> list[Path]:
    """Write the LoadGen-format log files of one MLPerf-scenario run; return their paths.

    ``output_dir`` must exist. Raises :class:`~tokenmark.errors.InternalError` for a
    non-MLPerf scenario and ``OSError`` when a file cannot be written.
    """
    files = {
        SUMMARY_FILE: render_summary(eff, summary, verdicts, facts),
        DETAIL_FILE: render_detail(eff, summary, verdicts, schedule, facts),
    }
    if eff.mode is Mode.PERFORMANCE and not accuracy_written:
        files[ACCURACY_FILE] = EMPTY_ACCURACY_LOG
    written = []
    for name, text in files.items():
        path = output_dir / name
        _write_atomic(path, text)
        written.append(path)
    return written


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
