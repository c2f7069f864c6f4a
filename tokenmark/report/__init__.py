"""Reports (an edge): one self-contained HTML file per run, and comparisons of runs.

:func:`write_report` turns a results folder (``results.json`` and ``records.jsonl``) into
``report.html``: both verdicts with every finding, the summary, TTFT/TPOT/ITL/E2E
distributions (CDF and histogram, limits drawn), throughput, requests in flight, send
lag and errors over time, and the per-endpoint breakdown. :func:`write_comparison`
puts two or more runs (or a sweep's folder) on one page: throughput against latency
with the Pareto front. Reports need no network: the plotting library (uPlot, vendored
in ``static/``) and the data are inside the file.

Jinja2 is imported only by :mod:`tokenmark.report.html`, which also gives the web UI
its template environment (:func:`environment`), so both escape the same way.
"""

from tokenmark.report.compare import comparison_data, find_runs, pareto_front
from tokenmark.report.data import load_results, report_data, run_report_data
from tokenmark.report.html import (
    REPORT_FILE,
    environment,
    render_comparison,
    render_report,
    script_json,
    write_comparison,
    write_report,
)

__all__ = [
    "REPORT_FILE",
    "comparison_data",
    "environment",
    "find_runs",
    "load_results",
    "pareto_front",
    "render_comparison",
    "render_report",
    "report_data",
    "run_report_data",
    "script_json",
    "write_comparison",
    "write_report",
]
