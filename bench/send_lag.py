"""The demo's send lag under variants of the client, alternating in one invocation.

Runs ``tokenmark run`` exactly as ``make run`` does (the demo: llama3.1-8b Server at 20
queries/s against the built-in emulated server in its own process) ``--reps`` times per
variant, alternating them, and prints per run: the send lag p50/p99/max, the event-loop
lag p99, the CPUs the client and the server ran on (``sut.cpus``) and the 1-minute load
average before and after. The variants (``--variants``, comma-separated):

- ``deferred``: the default (reads parsed when no send is due; the server pinned to
  one CPU, the client to the others);
- ``inline``: reads parsed where they land (``TOKENMARK_DEFER_READS=0``);
- ``unpinned``: the default with ``--no-pin-cpus`` (the scheduler places both);
- ``baseline``: the default of the tokenmark checkout given by ``--baseline PATH`` (its
  code on ``PYTHONPATH``; e.g. the main branch's checkout, for a before/after).

Extra ``tokenmark run`` options go after ``--`` (e.g. ``-- --qps 60`` for a higher
rate)::

    PYTHONPATH=. python bench/send_lag.py [--reps 3] [--variants deferred,unpinned] \
        [--baseline ../main] [-- --qps 20]

On a shared machine compare the variants' medians from one invocation. To keep the rest of
the machine's load out of the comparison (root only): raise this session's scheduling
group, ``setsid bash -c 'echo -20 > /proc/self/autogroup; exec python bench/send_lag.py
...'`` (with autogroups, another session's ``nice 19`` jobs still take their fair share).
``chrt -f 1`` isolates more, but then the client and the server it starts, at one
real-time priority, never preempt each other: it hides what ``unpinned`` is about.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

DEMO = ["--benchmark", "llama3.1-8b", "--scenario", "Server", "--profile", "demo",
        "--qps", "20", "--accelerator", "H200", "--precision", "bf16"]
#: variant -> (environment, extra options)
VARIANTS: dict[str, tuple[dict[str, str], list[str]]] = {
    "inline": ({"TOKENMARK_DEFER_READS": "0"}, []),
    "deferred": ({"TOKENMARK_DEFER_READS": "1"}, []),
    "unpinned": ({"TOKENMARK_DEFER_READS": "1"}, ["--no-pin-cpus"]),
    "baseline": ({}, []),
}


def one(variant: str, extra: list[str], out: Path, baseline: str) -> dict[str, float | str]:
    env_add, opts = VARIANTS[variant]
    env = {**os.environ, **env_add}
    cwd = None
    if variant == "baseline":  # its code first on the path (``-m`` puts the cwd first)
        env["PYTHONPATH"] = cwd = baseline
    la0 = os.getloadavg()[0]
    cmd = [sys.executable, "-m", "tokenmark", "run", *DEMO, *opts, *extra, "--no-db", "-q",
           "--progress", "off", "-o", str(out)]
    p = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    la1 = os.getloadavg()[0]
    if not (out / "results.json").exists():
        sys.exit(f"{variant}: tokenmark run exited {p.returncode} without results:\n"
                 f"{p.stderr[-2000:]}")
    d = json.loads((out / "results.json").read_text())
    lag = d["summary"]["latency_ms"]["send_lag"]
    verdict = d.get("verdicts", {}).get("tokenmark", {})
    return {"variant": variant, "p50": lag["percentiles"]["50"],
            "p99": lag["percentiles"]["99"], "max": lag["max"],
            "loop_p99": d["client_monitor"]["loop_lag_ms"]["p99"],
            "cpus": str(d.get("run", {}).get("sut", {}).get("cpus", "-")),
            "verdict": str(verdict.get("verdict", verdict.get("valid", "?")))
            if isinstance(verdict, dict) else str(verdict),
            "load": f"{la0:.1f}->{la1:.1f}"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--variants", default="deferred,unpinned")
    ap.add_argument("--baseline", default="", help="a tokenmark checkout (variant baseline)")
    ap.add_argument("extra", nargs="*", help="extra tokenmark run options (after --)")
    a = ap.parse_args()
    names = a.variants.split(",")
    for v in names:
        if v not in VARIANTS:
            sys.exit(f"unknown variant {v!r}; choose from {', '.join(VARIANTS)}")
    if "baseline" in names and not Path(a.baseline, "tokenmark").is_dir():
        sys.exit("the baseline variant needs --baseline PATH (a tokenmark checkout)")
    group = Path("/proc/self/autogroup")
    print(f"load {os.getloadavg()}; scheduling: "
          f"{'real-time' if os.sched_getscheduler(0) != os.SCHED_OTHER else 'normal'}"
          f"{', ' + group.read_text().strip() if group.exists() else ''}", flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(a.reps):
            for v in names:
                r = one(v, a.extra, Path(tmp) / f"{v}{rep}", str(Path(a.baseline).resolve()))
                rows.append(r)
                print(f"rep {rep + 1} {v:>8}: send lag p50 {r['p50']:.3f} p99 {r['p99']:.3f} "
                      f"max {r['max']:.3f} ms; loop lag p99 {r['loop_p99']:.3f} ms; "
                      f"cpus {r['cpus']}; load {r['load']}", flush=True)
    print("\n| variant | send lag p99 (ms), median of runs | runs | loop lag p99 (ms) |")
    print("|---|---|---|---|")
    for v in names:
        rs = [r for r in rows if r["variant"] == v]
        p99 = [float(r["p99"]) for r in rs]
        loop = [float(r["loop_p99"]) for r in rs]
        print(f"| {v} | {statistics.median(p99):.3f} | "
              f"{', '.join(f'{x:.2f}' for x in p99)} | {statistics.median(loop):.2f} |")


if __name__ == "__main__":
    main()
