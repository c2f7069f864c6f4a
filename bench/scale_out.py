"""Scale-out of distributed load generation: 1 vs 2 Ray workers with null in-process SUTs.

Each configuration runs the same schedule: ``N`` queries due at once (a constant rate far
above what any worker sends, so every worker issues as fast as it can), answered at once
by a null SUT on the worker, every record streamed back to the driver, written to
``records.jsonl`` and added to the metrics, exactly as ``tokenmark run --distributed ray``
does. Throughput is records merged per second of the run: from the common start to the
moment the driver has merged the last record. Efficiency of W workers = T(W) / (W * T(1));
the goal is >= 90% per added worker. Runs alternate (1, 2, 1, 2, ...); the headline is
the median over those back-to-back pairs, so drift in the machine (a shared VM's
neighbours) cancels; the ratio of the best runs is shown beside it. Each run prints the
CPU each worker and the driver spent per record: on a machine with fewer cores than
workers + driver (the 2-core development box), the driver and Ray's own processes take
their share from the workers' cores, and the figure measures that too.

Run: ``.venv/bin/python bench/scale_out.py [N] [REPEATS]`` (defaults 400000 and 7).
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")

import ray  # noqa: E402

from tokenmark.api.run import SutSpec, run_benchmark  # noqa: E402
from tokenmark.api.scale import distributed_driver  # noqa: E402
from tokenmark.config.layering import build_settings  # noqa: E402
from tokenmark.dataset import LengthDistribution, SyntheticDataset  # noqa: E402
from tokenmark.mlperf.settings import Scenario  # noqa: E402


def once(workers: int, n: int, folder: Path) -> tuple[float, float, float]:
    """Records merged per second, and the CPU per record of a worker and of the driver."""
    layered = build_settings("v6.0", "llama3.1-8b", Scenario.CONSTANT, overrides={
        "target_qps": 1e7, "min_duration_ms": 1, "min_query_count": n,
        "performance_sample_count": 1024, "total_sample_count": 1024,
        "send_lag_limit_ms": 1e9})
    ds = SyntheticDataset(1024, LengthDistribution.parse("100"),
                          LengthDistribution.parse("10"), seed=0, max_output_tokens=16)
    res = run_benchmark(layered, ds, SutSpec(kind="null"), folder,
                        driver=distributed_driver("ray", workers=workers))
    dist = res.document["distributed"]
    span = dist["last_merge_ns"] / 1e9
    done = max(res.summary.completed, 1)
    worker_cpu = sum(w["cpu_s"] or 0.0 for w in dist["workers"])
    return done / span, 1e6 * worker_cpu / done, 1e6 * dist["driver_cpu_s"] / done


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 400_000
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 7
    cores = os.cpu_count() or 1
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            once(1, 2000, Path(tmp) / "warm")  # actor start-up and imports out of the way
            rates: dict[int, list[float]] = {1: [], 2: []}
            driver_us: list[float] = []
            for k in range(repeats):
                for w in (1, 2):
                    folder = Path(tmp) / f"w{w}-{k}"
                    rate, w_us, d_us = once(w, n, folder)
                    shutil.rmtree(folder)  # 160 MB of records each: keep writeback quiet
                    print(f"{w} worker(s), {n} queries: {rate:,.0f} records/s merged; CPU per "
                          f"record {w_us:.1f} us on the workers, {d_us:.2f} us on the driver; "
                          f"of the {cores} cores: workers {rate * w_us / 1e6:.2f}, driver "
                          f"{rate * d_us / 1e6:.2f}", flush=True)
                    rates[w].append(rate)
                    driver_us.append(d_us)
        # each 2-worker run against the 1-worker run just before it, so drift in the
        # machine (a shared VM's neighbours) cancels; the median of those pairs
        pairs = [r2 / (2 * r1) for r1, r2 in zip(rates[1], rates[2], strict=True)]
        med = {w: statistics.median(r) for w, r in rates.items()}
        best = {w: max(r) for w, r in rates.items()}
        d_us = statistics.median(driver_us)
        print(f"scale-out efficiency 1 -> 2 workers: {statistics.median(pairs):.1%} (median of "
              f"{repeats} back-to-back pairs, range {min(pairs):.1%}-{max(pairs):.1%}); "
              f"{best[2] / (2 * best[1]):.1%} of the best runs ({best[1]:,.0f} and "
              f"{best[2]:,.0f} records/s); goal >= 90%")
        print(f"one driver merges up to {1e6 / d_us:,.0f} records/s ({d_us:.2f} us each): "
              f"~{1e6 / d_us / med[1]:.0f} workers of {med[1]:,.0f} records/s before the "
              "driver, not the workers, sets the pace")
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
