"""Scale-out of distributed load generation: 1 vs 2 Ray workers with null in-process SUTs.

Each configuration runs the same schedule: ``N`` queries due at once (a constant rate far
above what any worker sends, so every worker issues as fast as it can), answered at once
by a null SUT on the worker, every record streamed back to the driver, written to
``records.jsonl`` and added to the metrics, exactly as ``tokenmark run --distributed ray``
does. Throughput is records merged per second of the run (first send to last record
received). Efficiency of W workers = T(W) / (W * T(1)); the goal is >= 90% per added
worker. The machine's busy cores during each run are printed beside it: on a machine
with fewer free cores than workers + driver, the figure measures the machine.

Run: ``.venv/bin/python bench/scale_out.py [N]`` (default N = 40000).
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")

import ray  # noqa: E402

from tokenmark.api import SutSpec, run_benchmark  # noqa: E402
from tokenmark.config.layering import build_settings  # noqa: E402
from tokenmark.dataset import LengthDistribution, SyntheticDataset  # noqa: E402
from tokenmark.scale_api import distributed_driver  # noqa: E402
from tokenmark.settings import Scenario  # noqa: E402


def busy() -> tuple[float, float]:
    with open("/proc/stat") as f:
        parts = [float(x) for x in f.readline().split()[1:]]
    return sum(parts) - parts[3] - parts[4], sum(parts)


def once(workers: int, n: int, folder: Path) -> tuple[float, float]:
    layered = build_settings("v6.0", "llama3.1-8b", Scenario.CONSTANT, overrides={
        "target_qps": 1e7, "min_duration_ms": 1, "min_query_count": n,
        "performance_sample_count": 1024, "total_sample_count": 1024,
        "send_lag_limit_ms": 1e9})
    ds = SyntheticDataset(1024, LengthDistribution.parse("100"),
                          LengthDistribution.parse("10"), seed=0, max_output_tokens=16)
    b0, t0 = busy()
    res = run_benchmark(layered, ds, SutSpec(kind="null"), folder,
                        driver=distributed_driver("ray", workers=workers))
    b1, t1 = busy()
    cores = os.cpu_count() or 1
    span = res.outcome.end_ns / 1e9
    return res.summary.completed / span, cores * (b1 - b0) / max(t1 - t0, 1e-9)


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 40_000
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            once(1, 2000, Path(tmp) / "warm")  # actor start-up and imports out of the way
            rates = {}
            for w in (1, 2):
                best = 0.0
                for k in range(2):
                    rate, cores = once(w, n, Path(tmp) / f"w{w}-{k}")
                    print(f"{w} worker(s), {n} queries: {rate:,.0f} records/s merged "
                          f"(machine busy {cores:.2f} of {os.cpu_count()} cores)", flush=True)
                    best = max(best, rate)
                rates[w] = best
        eff = rates[2] / (2 * rates[1])
        print(f"scale-out efficiency 1 -> 2 workers: {eff:.1%} (goal >= 90%); "
              f"best of 2 runs each: {rates[1]:,.0f} and {rates[2]:,.0f} records/s")
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
