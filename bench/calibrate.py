"""Calibrate the performance model on published MLPerf results, judged forward in time.

For each round R of ``--rounds`` (v5.1, v6.0, v6.1) the efficiency parameters are fitted
on the rows of the rounds before R only and every row of R the simulator can represent
is predicted with them (tokenmark/sim/calibration.py); the rows come from the packaged
table of published LLM results (tokenmark/data/published.csv.gz: the official summary
tables of v4.1-v6.1), or with --csv/--tables from the results CSV (for the rounds no
table covers) and the official summary tables given. Writes to OUT:

- forward_rows.csv: every row, eligible or not (and why), with its forward step,
  parameter groups, chosen deployment, prediction and absolute percentage error;
- forward_summary.json and forward_tables.md: per step the median, p75, p90 and the
  shares within 10% and 25%, by benchmark, scenario, accelerator family and node
  count, and the 20 worst rows;
- efficiency.csv and model_levels.csv: the parameters and model levels fitted on every
  round before the newest (v6.0 and earlier), the ones shipped (copied to
  tokenmark/data/ with --install);
  efficiency_before_<R>.csv: each step's fit, written as soon as it is made (so
  bench/seed_ratios.py --efficiency can start on the v6.1 step's fit while v6.1 is
  still being predicted).

``--tables-from DIR`` only turns DIR/forward_predictions.csv (bench/forward_before.py's
output for the code of 279d459) into the same tables in DIR.

    .venv/bin/python bench/calibrate.py [--rounds v5.1,v6.0,v6.1] [--score v5.1,v6.0]
        [--out DIR] [--offline-only] [--workers N] [--cache DIR] [--latency-rows N]
        [--cached-predictions] [--cached-inversions]
        [--latency-before ROUND] [--install] [--table DIR]
    .venv/bin/python bench/calibrate.py --tables-from bench/out/forward/before
"""

from __future__ import annotations

import argparse
import os
import shutil
import time
from pathlib import Path

from tokenmark.api.simulation import calibrate
from tokenmark.sim.calibration import LATENCY_ROWS_PER_GROUP, TableParams
from tokenmark.sim.calibration_report import read_scored, write_efficiency, write_forward
from tokenmark.sim.params import read_efficiency, read_levels
from tokenmark.sim.published import read_rounds

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "shared" / "mlperf"


def _pct(v: float) -> str:
    return f"{v * 100:5.1f}%"


def _print(tables: dict, how: str = "fitted on the rounds before it") -> None:  # type: ignore[type-arg]
    for step, t in tables.items():
        o = t["overall"]
        cov = t.get("coverage", {})
        print(f"\n{step} ({how}): {o['rows']} rows"
              + (f" of {cov['closed_llm_rows']} closed LLM rows" if cov else "")
              + f"; median {_pct(o['median'])}, p75 {_pct(o['p75'])}, p90 {_pct(o['p90'])}, "
              f"within 10% {_pct(o['within_10'])}, within 25% {_pct(o['within_25'])}")
        for part in ("benchmark", "scenario", "family", "nodes"):
            for k, s in t[f"by_{part}"].items():
                print(f"  {part:<10}{k:<26}{s['rows']:>5}  median {_pct(s['median'])}  "
                      f"p90 {_pct(s['p90'])}  signed {s['median_signed'] * 100:+6.1f}%")


def _fixed_table(d: Path | None) -> TableParams | None:
    if d is None:
        return None
    if not (d / "efficiency.csv").is_file():
        raise SystemExit(f"--table {d}: no efficiency.csv there (give the folder "
                         "bench/calibrate.py wrote, or tokenmark/data)")
    lv = d / "model_levels.csv"
    return TableParams(read_efficiency(d / "efficiency.csv"),
                       read_levels(lv) if lv.is_file() else ({}, 0.0), str(d))


def _mkdir(p: Path) -> Path:
    p.mkdir(parents=True, exist_ok=True)
    return p


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--csv", type=Path, default=None,
                    help="read the results CSV and the official tables instead of the "
                         "packaged table (e.g. tests/data/shared/mlperf/"
                         "llm_results_v4.1_v5.1.csv)")
    ap.add_argument("--tables", type=Path, nargs="*",
                    default=sorted((DATA / "summaries").glob("*.json")))
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "forward" / "after")
    ap.add_argument("--rounds", default="v5.1,v6.0,v6.1",
                    help="forward steps: fit on the rounds before each, predict it")
    ap.add_argument("--score", default=None,
                    help="the steps whose rows are predicted (default: every step; a "
                         "step left out is still fitted, so the newest fit is shipped)")
    ap.add_argument("--offline-only", action="store_true",
                    help="skip the Server/Interactive simulations")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--requests", type=int, default=1500,
                    help="requests per replica in a simulated Server run, at least (runs "
                         "are lengthened to span two request lives)")
    ap.add_argument("--cache", type=Path, default=None,
                    help="keep traces, inversions and predictions in this folder and reuse "
                         "them (valid only while the simulator's code is unchanged)")
    ap.add_argument("--latency-rows", type=int, default=LATENCY_ROWS_PER_GROUP,
                    help="stage 2 inverts at most this many systems per (architecture, "
                         "scenario), the newest rounds first (fewer: a cheaper fit)")
    ap.add_argument("--latency-before", default=None, metavar="ROUND",
                    help="stage 2 inverts only latency rows of the rounds before ROUND "
                         "(e.g. v6.0: the v6.1 step reuses the v6.0 step's inversions; "
                         "the Offline stage still fits every round before the step)")
    ap.add_argument("--cached-inversions", action="store_true",
                    help="with --cache: stage 2 uses only the inversions already cached "
                         "(a fit cut short; the log says how many latency rows it used)")
    ap.add_argument("--cached-predictions", action="store_true",
                    help="with --cache: score only the predictions already cached (an "
                         "evaluation cut short; the coverage line counts what is left out)")
    ap.add_argument("--install", action="store_true",
                    help="copy the fitted efficiency.csv and model_levels.csv into "
                         "tokenmark/data/")
    ap.add_argument("--table", type=Path, default=None, metavar="DIR",
                    help="fit nothing: predict every step with DIR/efficiency.csv and "
                         "DIR/model_levels.csv (tokenmark/data: the shipped ones), to "
                         "score a fixed table as a fit is")
    ap.add_argument("--tables-from", type=Path, default=None,
                    help="only write the tables of DIR/forward_predictions.csv into DIR")
    args = ap.parse_args()
    if args.tables_from is not None:
        scored, coverage = read_scored(args.tables_from / "forward_predictions.csv")
        _print(write_forward(args.tables_from, scored, "Forward-in-time evaluation",
                             coverage))
        return
    t = time.perf_counter()
    rounds = [r for r in args.rounds.split(",") if r]
    rows = read_rounds(args.csv, list(args.tables)) if args.csv else None
    rep = calibrate(rows, args.out, rounds_=rounds,
                    score=args.score.split(",") if args.score else None,
                    server=not args.offline_only, workers=args.workers,
                    requests=args.requests, cache_dir=args.cache,
                    latency_rows=args.latency_rows,
                    cached_predictions=args.cached_predictions,
                    latency_before=args.latency_before,
                    cached_inversions=args.cached_inversions,
                    table=_fixed_table(args.table),
                    fitted=lambda rnd, f: write_efficiency(
                        _mkdir(args.out) / f"efficiency_before_{rnd}.csv", f.table()),
                    progress=lambda m: print(f"[{time.perf_counter() - t:7.1f} s] {m}",
                                             flush=True))
    _print(rep.tables(), f"predicted with {args.table}" if args.table else
           "fitted on the rounds before it")
    print("\nrefused rows by reason (LLM rows):")
    for reason, n in rep.ineligible_reasons().items():
        print(f"  {n:4d}  {reason}")
    for note in rep.notes:
        print(f"note: {note}")
    print(f"\nwritten to {args.out} in {time.perf_counter() - t:.0f} s")
    if args.install:
        for name in ("efficiency.csv", "model_levels.csv"):
            shutil.copy(args.out / name, ROOT / "tokenmark" / "data" / name)
            print(f"installed tokenmark/data/{name}")


if __name__ == "__main__":
    main()
