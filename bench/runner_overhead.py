"""How fast the load generator itself is: a null SUT on one core, records to the real sink.

Prints (with the machine's background load during each measurement):

- the most queries per second the runner issues (every query answered at once by the
  null SUT, each record written to ``records.jsonl`` and added to the metrics);
- send lag (actual - scheduled send time) p50/p99/max for constant-rate schedules at
  1k, 10k and 50k queries/s.

Goals (issue "MLPerf exactness"): >= 100k queries/s issued; send-lag p99 <= 1 ms up to
10k queries/s. Run: ``make bench`` or ``.venv/bin/python bench/runner_overhead.py``.
"""

from __future__ import annotations

import asyncio
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from tokenmark.adapters.inprocess import NullSUT
from tokenmark.clock import MonotonicClock
from tokenmark.dataset import LengthDistribution, SyntheticDataset
from tokenmark.loadgen.runner import Runner
from tokenmark.metrics.summary import Accumulator
from tokenmark.mlperf.scenarios import build_schedule
from tokenmark.mlperf.settings import Scenario, Seeds, TestSettings, effective
from tokenmark.output.records import JsonlRecordSink


def cpu_times() -> tuple[float, float]:
    """(busy seconds of the whole machine, this process's CPU seconds)."""
    with open("/proc/stat") as f:
        parts = [float(x) for x in f.readline().split()[1:]]
    tick = os.sysconf("SC_CLK_TCK")
    busy = (sum(parts) - parts[3] - parts[4]) / tick  # minus idle and iowait
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return busy, ru.ru_utime + ru.ru_stime


def background_load(before: tuple[float, float], after: tuple[float, float], wall: float) -> float:
    """Cores' worth of CPU used by other processes during the interval."""
    return max(0.0, ((after[0] - before[0]) - (after[1] - before[1])) / wall)


def run_once(scenario: Scenario, qps: float, n: int, tmp: Path) -> tuple[np.ndarray, float, float]:
    settings = TestSettings(
        round="bench", benchmark="null", scenario=scenario, seeds=Seeds(1, 2, 3),
        target_qps=qps, offline_expected_qps=qps, min_duration_ms=int(n / qps * 1000),
        min_query_count=n, performance_sample_count=64,
    )
    ds = SyntheticDataset(64, LengthDistribution.parse("8"), LengthDistribution.parse("4"))
    eff = effective(settings, len(ds))
    sched = build_schedule(eff, len(ds))
    for i in range(len(ds)):
        ds.sample(i)  # prompts are built before timing starts
    sink = JsonlRecordSink(tmp / f"records-{scenario.value}-{qps:g}.jsonl")
    acc = Accumulator()
    clock = MonotonicClock()
    runner = Runner(sched, ds, NullSUT(), clock, sinks=[sink], consumers=[acc.add])
    before = cpu_times()
    t = time.perf_counter()
    out = asyncio.run(runner.run())
    wall = time.perf_counter() - t
    sink.close()
    after = cpu_times()
    data = acc.finish(out.scheduled)
    lag = (data.issued - data.scheduled)[data.issued >= 0]
    span = out.issue_span_ns / 1e9 if out.issue_span_ns else wall
    return lag, len(lag) / span, background_load(before, after, wall)


def main() -> None:
    cpus = sorted(os.sched_getaffinity(0))
    core = cpus[-1]
    os.sched_setaffinity(0, {core})
    print(f"tokenmark runner overhead: null SUT, one core (cpu {core} of {len(cpus)}), "
          "records to records.jsonl + metrics accumulator")
    print(f"python {sys.version.split()[0]}")
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        run_once(Scenario.OFFLINE, 1000.0, 5_000, tmp)  # warm-up
        _, rate, bg = run_once(Scenario.OFFLINE, 1000.0, 200_000, tmp)
        print(f"max issue rate (200k queries, Offline at t=0): {rate:,.0f} queries/s "
              f"(goal >= 100,000)  [background load {bg:.2f} cores]")
        for qps, n in ((1_000, 10_000), (10_000, 100_000), (50_000, 250_000)):
            lag, _, bg = run_once(Scenario.CONSTANT, float(qps), n, tmp)
            s = np.sort(lag)
            p50, p99, mx = s[int(s.size * 0.5)], s[int(s.size * 0.99)], s[-1]
            goal = "  (goal p99 <= 1 ms)" if qps <= 10_000 else ""
            print(f"send lag at {qps:>6,} queries/s ({n:,} queries): p50 {p50 / 1e3:8.1f} us  "
                  f"p99 {p99 / 1e3:8.1f} us  max {mx / 1e3:9.1f} us{goal}  "
                  f"[background load {bg:.2f} cores]")


if __name__ == "__main__":
    main()
