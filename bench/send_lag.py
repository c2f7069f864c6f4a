"""The demo's send lag, reads parsed where they land against reads parsed when no send
is due (``tokenmark.adapters.http1.ReadQueue``), alternating in one invocation.

Runs ``tokenmark run`` exactly as ``make run`` does (the demo: llama3.1-8b Server at 20
queries/s against the built-in emulated server in its own process) ``--reps`` times per
variant, alternating ``inline`` (``TOKENMARK_DEFER_READS=0``) and ``deferred`` (the
default), and prints per run: the send lag p50/p99/max, the event-loop lag p99, the
tokenmark verdict and the 1-minute load average before and after. Extra ``tokenmark run``
options go after ``--`` (e.g. ``-- --qps 60`` for a higher rate)::

    PYTHONPATH=. python bench/send_lag.py [--reps 3] [-- --qps 20]

On a shared machine compare the two variants' medians from one invocation.
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
VARIANTS = {"inline": "0", "deferred": "1"}


def one(variant: str, extra: list[str], out: Path) -> dict[str, float | str]:
    env = {**os.environ, "TOKENMARK_DEFER_READS": VARIANTS[variant]}
    la0 = os.getloadavg()[0]
    cmd = [sys.executable, "-m", "tokenmark", "run", *DEMO, *extra, "--no-db", "-q",
           "--progress", "off", "-o", str(out)]
    subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    la1 = os.getloadavg()[0]
    d = json.loads((out / "results.json").read_text())
    lag = d["summary"]["latency_ms"]["send_lag"]
    verdict = d.get("verdicts", {}).get("tokenmark", {})
    return {"variant": variant, "p50": lag["percentiles"]["50"],
            "p99": lag["percentiles"]["99"], "max": lag["max"],
            "loop_p99": d["client_monitor"]["loop_lag_ms"]["p99"],
            "verdict": str(verdict.get("verdict", verdict.get("valid", "?")))
            if isinstance(verdict, dict) else str(verdict),
            "load": f"{la0:.1f}->{la1:.1f}"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--variants", default="inline,deferred")
    ap.add_argument("extra", nargs="*", help="extra tokenmark run options (after --)")
    a = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(a.reps):
            for v in a.variants.split(","):
                r = one(v, a.extra, Path(tmp) / f"{v}{rep}")
                rows.append(r)
                print(f"rep {rep + 1} {v:>8}: send lag p50 {r['p50']:.3f} p99 {r['p99']:.3f} "
                      f"max {r['max']:.3f} ms; loop lag p99 {r['loop_p99']:.3f} ms; "
                      f"load {r['load']}", flush=True)
    print("\n| variant | send lag p99 (ms), median of runs | runs | loop lag p99 (ms) |")
    print("|---|---|---|---|")
    for v in a.variants.split(","):
        rs = [r for r in rows if r["variant"] == v]
        p99 = [float(r["p99"]) for r in rs]
        loop = [float(r["loop_p99"]) for r in rs]
        print(f"| {v} | {statistics.median(p99):.3f} | "
              f"{', '.join(f'{x:.2f}' for x in p99)} | {statistics.median(loop):.2f} |")


if __name__ == "__main__":
    main()
