"""What the live progress view costs the run: CPU per record consumed and per refresh.

Moved here from a timed assertion in the tests (a CPU bound fails on a loaded machine).
The runner sends within max(2 ms, 1% of the inter-arrival time); the view's refresh runs
on the same event loop, so its cost per refresh is what a send can wait behind.

    .venv/bin/python bench/progress_view.py
"""

from __future__ import annotations

import io
import time

from rich.console import Console

from tokenmark.cli.progress import ProgressMode, ProgressView
from tokenmark.config.layering import build_settings
from tokenmark.loadgen.runner import RunnerStats
from tokenmark.mlperf.settings import Scenario, effective
from tokenmark.records import RequestRecord


def main() -> None:
    layered = build_settings("v6.0", "llama3.1-8b", Scenario.SERVER, profile="demo",
                             overrides={"target_qps": 30.0})
    con = Console(file=io.StringIO(), force_terminal=True, width=120)
    view = ProgressView(effective(layered.settings, 256), ProgressMode.LIVE, con)
    rec = RequestRecord(seq=1, query_id=1, sample_index=0, scheduled_ns=0, issued_ns=0,
                        first_token_ns=50_000_000, done_ns=900_000_000, output_tokens=64)
    n = 20_000
    t0 = time.process_time()
    for _ in range(n):
        view.consume(rec)
    per_record_us = (time.process_time() - t0) / n * 1e6
    refreshes = 100
    with view:
        t0 = time.process_time()
        for i in range(refreshes):
            view.update(RunnerStats(scheduled=600, issued=10 * (i + 1), completed=9 * (i + 1),
                                    failed=1, in_flight=i + 1, output_tokens=500 * (i + 1),
                                    errors={"http_429": 1}), 1.0 + i * 0.25)
        per_refresh_ms = (time.process_time() - t0) / refreshes * 1e3
    print(f"live view: consume {per_record_us:.2f} us CPU/record, "
          f"refresh {per_refresh_ms:.3f} ms CPU")


if __name__ == "__main__":
    main()
