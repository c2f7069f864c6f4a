"""In-sample Offline check of one forward step's fit (issue 26): fit stage 1 on the
Offline rows of the rounds before ``--step`` (as ``bench/calibrate.py`` does) and print,
for the training rows themselves, the median predicted/published ratio per accelerator
and benchmark, with each row's deployment. A forward error that is already there in
sample is the model's, not the software's progress between rounds.

    PYTHONPATH=$PWD python bench/insample_offline.py --step v5.1 --cache /tmp/cache
"""

from __future__ import annotations

import argparse
import statistics
from collections import defaultdict
from pathlib import Path

from tokenmark.sim.calibration import Lengths, fit, prepare
from tokenmark.sim.fit import predict_rate
from tokenmark.sim.plan import round_key
from tokenmark.sim.published import read_packaged


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--step", default="v5.1", help="the forward step whose fit is checked")
    ap.add_argument("--cache", type=Path, default=None, help="trace cache (bench/calibrate.py's)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--benchmark", default="", help="only benchmarks containing this")
    a = ap.parse_args()
    lengths = Lengths()
    train = []
    for row in read_packaged():
        if (not row.eligible or row.scenario != "Offline"
                or round_key(row.round) >= round_key(a.step)):
            continue
        got = prepare(row, lengths)
        if not isinstance(got, str):
            train.append(got)
    f = fit(train, server=False, workers=a.workers, cache_dir=a.cache)
    by: dict[tuple[str, str], list[tuple[float, str]]] = defaultdict(list)
    for s in f.offline:
        if a.benchmark not in (s.row.benchmark or ""):
            continue
        eff = f.offline_params(s)[0]
        rates = [predict_rate(t, eff) for t in f.traces[s.key]]
        k = max(range(len(rates)), key=rates.__getitem__)
        label = s.plans[k].deployment.label.split(",")[0].replace("emulated ", "")
        per = s.row.accelerators_used
        by[(s.row.accelerator or "", s.row.benchmark or "")].append(
            (rates[k] / s.row.result, f"{label} {rates[k] / per:,.0f}/acc "
                                      f"published {s.row.result / per:,.0f}/acc"))
    print(f"fit for the {a.step} step (size exponent {f.alpha}); in-sample Offline rows:")
    for (acc, bench), got in sorted(by.items()):
        med = statistics.median(r for r, _ in got)
        print(f"  {acc:30s} {bench:18s} n={len(got):3d} predicted/published {med:.2f}"
              f"  e.g. {got[0][1]}")


if __name__ == "__main__":
    main()
