"""tokenmark's figures from its records beside the official LoadGen's, for one short run
that the mlcommons-loadgen package drives against the in-process latency-model SUT.

LoadGen times every sample from its own scheduled time; tokenmark's records start when
LoadGen's IssueQuery reaches tokenmark. The throughputs should agree closely; LoadGen's
latencies are larger by its issue delay and the callback hops (GIL contention included).

Run: .venv/bin/python bench/official_loadgen_compare.py [QPS] [SECONDS]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from tokenmark.adapters.inprocess import LatencyModel
from tokenmark.api.run import SutSpec, default_dataset
from tokenmark.api.submission import run_official_loadgen
from tokenmark.config.layering import build_settings
from tokenmark.mlperf.settings import Scenario


def main() -> None:
    qps = float(sys.argv[1]) if len(sys.argv) > 1 else 100.0
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 5.0
    layered = build_settings("v6.0", "llama3.1-8b", Scenario.SERVER, profile="demo",
                             overrides={"target_qps": qps, "min_duration_ms": int(seconds * 1000),
                                        "min_query_count": 1, "performance_sample_count": 200,
                                        "total_sample_count": 200})
    ds = default_dataset(layered, size=200, output_lengths="uniform:16:64")
    sut = SutSpec(kind="latency-model", model=LatencyModel(ttft_ns=20_000_000, tpot_ns=2_000_000))
    with tempfile.TemporaryDirectory() as tmp:
        res = run_official_loadgen(layered, ds, sut, Path(tmp) / "run")
    cmp = res.document["loadgen"]["comparison"]
    print(f"official LoadGen {res.document['loadgen']['version']}, Server {qps:g} QPS, "
          f"{seconds:g} s, latency model TTFT 20 ms / TPOT 2 ms")
    print(f"{'figure':<20}{'LoadGen':>16}{'tokenmark':>16}{'difference':>12}")
    for name, v in cmp.items():
        lg, tm, rel = v["loadgen"], v["tokenmark"], v["relative_difference"]
        print(f"{name:<20}{lg:>16,.1f}{tm:>16,.1f}{'' if rel is None else f'{rel:+.2%}':>12}")


if __name__ == "__main__":
    main()
