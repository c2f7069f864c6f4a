"""How long a million-query benchmark takes to simulate (the issue's goal: <= 60 s).

Runs llama3.1-8b on 72 B200s (9 HGX nodes, one replica per GPU, calibrated parameters)
under the v6.0 preset's rules, through the whole pipeline: schedule (LoadGen's
generator) -> simulated cluster -> metrics -> both verdicts -> results folder
(results.json, records.jsonl, MLPerf logs, simulation.json, report.txt):

1. Offline with 1,002,600 samples (1,000,000 padded to whole datasets);
2. Server at 80% of the Offline rate just predicted, for 1,002,600 queries (the
   minimum duration set to what that takes, so LoadGen's generator stops there).

Prints the host time of every stage.

    .venv/bin/python bench/sim_million.py [OUTPUT_DIR]
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tokenmark.api.simulation import SimulationResult, simulate
from tokenmark.config.layering import build_settings
from tokenmark.mlperf.settings import Scenario
from tokenmark.sim.plan import ClusterSpec

SPEC = ClusterSpec("B200", "llama3.1-8b", nodes=9, per_node=8)
QUERIES = 1_000_000


def _run(root: Path, scenario: str, overrides: dict[str, Any]) -> SimulationResult:
    layered = build_settings("v6.0", "llama3.1-8b", Scenario(scenario), overrides=overrides)
    t = time.perf_counter()
    res = simulate(layered, SPEC, root / scenario)
    total = time.perf_counter() - t
    s = res.summary
    tm = res.timing
    print(f"{scenario}: {s.completed:,} requests on {SPEC.count} x {SPEC.accelerator} in "
          f"{total:.1f} s of host time (simulate {tm['simulate_s']:.1f} s, metrics and "
          f"verdicts {tm['summarize_s']:.1f} s, files {tm.get('write_s', 0):.1f} s); "
          f"{res.document['simulation']['virtual_duration_s']:.0f} s simulated; "
          f"{s.tokens_per_second or 0:,.0f} tokens/s predicted; MLPerf verdict "
          f"{res.verdicts.mlperf.validity.value}")
    for f in res.verdicts.mlperf.failed:
        print(f"  MLPerf rule {f.rule} failed: {f.observed} (required {f.required})")
    if total > 60:
        print(f"  over the 60 s goal by {total - 60:.1f} s")
    return res


def main() -> None:
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="tm-sim-"))
    off = _run(root, "Offline", {"min_query_count": QUERIES, "offline_expected_qps": 1.0})
    qps = 0.8 * off.summary.samples_per_second
    _run(root, "Server", {"target_qps": round(qps, 1), "min_query_count": QUERIES,
                          "min_duration_ms": int(QUERIES / qps * 1000)})
    print(f"results under {root}")


if __name__ == "__main__":
    main()
