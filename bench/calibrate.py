"""Calibrate the performance model on published MLPerf results and report its error.

Fits the efficiency parameters (per accelerator architecture, software stack and round;
see tokenmark/sim/calibration.py) on the Offline rows of the published-results CSV,
predicts every eligible row in sample and out of sample (across rounds where both have
the accelerator and benchmark: every row of that accelerator in the row's round left
out, or with --strict-rounds the whole round; otherwise leaving the row's system out),
and writes:

- OUT/calibration_rows.csv: every row, eligible or not (and why), with its predictions
  and absolute percentage errors;
- OUT/calibration_summary.json: median errors by benchmark and scenario;
- OUT/efficiency.csv: the fitted parameters (copy it to tokenmark/data/ with --install).

    .venv/bin/python bench/calibrate.py [--csv PATH] [--out DIR] [--offline-only]
        [--workers N] [--no-per-scenario] [--cache DIR] [--install]
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import time
from pathlib import Path

from tokenmark.sim_api import calibrate

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CSV = ROOT / "tests" / "data" / "shared" / "mlperf" / "llm_results_v4.1_v5.1.csv"


def _pct(v: float) -> str:
    return "   -  " if math.isnan(v) else f"{v * 100:5.1f}%"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--csv", type=Path, default=DEFAULT_CSV)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "calibration")
    ap.add_argument("--offline-only", action="store_true",
                    help="skip the Server/Interactive simulations (minutes)")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--requests", type=int, default=1500,
                    help="requests per replica in a simulated Server run, at least (runs "
                         "are lengthened to span two request lives)")
    ap.add_argument("--strict-rounds", action="store_true",
                    help="cross-round folds leave out the whole round, not only the "
                         "row's accelerator in it (no software gain can be learnt)")
    ap.add_argument("--per-scenario", action=argparse.BooleanOptionalAction, default=True,
                    help="Server and Interactive get their own (mbu, serial) pair where "
                         "each has rows from enough systems")
    ap.add_argument("--cache", type=Path, default=None,
                    help="keep simulated searches in this folder and reuse them (valid "
                         "only while the simulator's code is unchanged)")
    ap.add_argument("--install", action="store_true",
                    help="copy the fitted efficiency.csv into tokenmark/data/")
    args = ap.parse_args()
    t = time.perf_counter()
    rep = calibrate(args.csv, args.out, server=not args.offline_only, workers=args.workers,
                    cross_round="round" if args.strict_rounds else "accelerator",
                    server_requests=args.requests, per_scenario=args.per_scenario,
                    cache_dir=args.cache,
                    progress=lambda m: print(f"[{time.perf_counter() - t:6.1f} s] {m}"))
    print(f"\n{'benchmark':<18}{'scenario':<13}{'rows':>5}  {'in-sample':>9}  "
          f"{'out-of-sample':>13}  {'published/roofline':>18}")
    for m in rep.medians():
        print(f"{m['benchmark']:<18}{m['scenario']:<13}{m['rows']:>5}  "
              f"{_pct(m['median_ape_in']):>9}  {_pct(m['median_ape_out']):>13}  "
              f"{m['median_published_over_roofline']:>18.3f}")
    print(f"\n{'held out':<22}{'scenario':<13}{'rows':>5}  {'in-sample':>9}  "
          f"{'out-of-sample':>13}")
    for m in rep.medians_by_protocol():
        print(f"{m['benchmark']:<22}{m['scenario']:<13}{m['rows']:>5}  "
              f"{_pct(m['median_ape_in']):>9}  {_pct(m['median_ape_out']):>13}")
    print("\nineligible rows by reason:")
    for reason, n in rep.ineligible_reasons().items():
        print(f"  {n:4d}  {reason}")
    for note in rep.notes:
        print(f"note: {note}")
    print(f"\nwritten to {args.out} in {time.perf_counter() - t:.0f} s")
    if args.install:
        shutil.copy(args.out / "efficiency.csv", ROOT / "tokenmark" / "data" / "efficiency.csv")
        print("installed tokenmark/data/efficiency.csv")


if __name__ == "__main__":
    main()
