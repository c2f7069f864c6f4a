"""In-sample Offline check of one forward step's fit (issue 26): fit stage 1 on the
Offline rows of the rounds before ``--step`` (as ``bench/calibrate.py`` does) and print,
for the training rows themselves, the median predicted/published ratio per accelerator
and benchmark, with each row's deployment. A forward error that is already there in
sample is the model's, not the software's progress between rounds.

With ``--rows ARCH`` it prints instead each training row of that architecture: its
model, round and system, the group it takes, whether it fits the group's parameters (a
debut round's rows do not, on an anchored architecture), its model's level, its
published/predicted ratio against the group alone and at its level, and the share of its
steps that are compute-bound; then the parameters of the groups those rows take, and the
root-mean-square log error of each group's rows refitted with ``mbu`` held at 0.3-0.9
(flat: the rows do not bind ``mbu``).

    PYTHONPATH=$PWD python bench/insample_offline.py --step v5.1 --cache /tmp/cache
    PYTHONPATH=$PWD python bench/insample_offline.py --step v6.0 --rows "Blackwell Ultra"
"""

from __future__ import annotations

import argparse
import math
import statistics
from collections import defaultdict
from pathlib import Path

from tokenmark.perfmodel import Efficiency
from tokenmark.sim.calibration import Fit, Lengths, fit, model_of, prepare
from tokenmark.sim.fit import fit_efficiency, predict_rate
from tokenmark.sim.plan import round_key
from tokenmark.sim.published import read_packaged

#: The bandwidth efficiencies at which --rows refits each group (the rows' rms log error).
MBU_PROFILE = (0.3, 0.45, 0.6, 0.75, 0.9)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--step", default="v5.1", help="the forward step whose fit is checked")
    ap.add_argument("--cache", type=Path, default=None, help="trace cache (bench/calibrate.py's)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--benchmark", default="", help="only benchmarks containing this")
    ap.add_argument("--rows", default="", metavar="ARCH",
                    help="print each training row of this architecture and its groups")
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
    if a.rows:
        _rows(f, a.rows)
        return
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


def _rows(f: Fit, arch: str) -> None:
    print(f"{arch} Offline training rows (anchored: "
          f"{arch in f.anchored}; debut rounds {f.debut_round})")
    groups = set()
    fitting = {id(s) for s in f.group_rows}
    for s in sorted((s for s in f.offline if s.arch == arch),
                    key=lambda s: (s.row.round, model_of(s), s.row.system_key)):
        eff, used = f._offline(s)
        groups.add(used)
        alone = max(predict_rate(t, eff) for t in f.traces[s.key])
        final = f.offline_params(s)[0]
        rates = [predict_rate(t, final) for t in f.traces[s.key]]
        k = max(range(len(rates)), key=rates.__getitem__)
        print(f"  {s.row.round} {model_of(s):15s} {s.row.system_key[1][:24]:24s} "
              f"x{s.row.accelerators_used:<3d} group {used:28s} "
              f"{'fits it' if id(s) in fitting else 'level only'}  level "
              f"x{f.speed(s)[0]:.3f}  published/group {s.row.result / alone:.3f}  "
              f"published/predicted {s.row.result / rates[k]:.3f}  compute-bound "
              f"{f.traces[s.key][k].compute_bound_share(eff):.2f}")
    for g in sorted(groups):
        got = f.stage1(tuple(g.split("/")))  # type: ignore[arg-type]
        if got is not None:
            e, ape, n = got
            print(f"  group {g}: mfu {e.mfu:.3f} mbu {e.mbu:.3f} step "
                  f"{e.step_overhead_ns / 1e3:.0f} us seq {e.seq_overhead_ns / 1e3:.2f} us, "
                  f"{n} systems, in-sample median error {ape:.3f}")
            # how well its rows bind mbu: refitted with mbu held at each value
            pairs = f._pairs([s for s in f.group_rows if f._matches(s, tuple(g.split("/")))])
            prof = []
            for mbu in MBU_PROFILE:
                ef, _ = fit_efficiency(pairs, Efficiency(), g, f.alpha, mbu=mbu)
                err = [math.log(max(predict_rate(t, ef) for t in ts) / r) ** 2
                       for ts, r in pairs]
                prof.append(f"{mbu:.2f}: mfu {ef.mfu:.3f} rms {math.sqrt(sum(err) / len(err)):.4f}")
            print("    mbu held at " + "; ".join(prof))


if __name__ == "__main__":
    main()
