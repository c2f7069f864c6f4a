"""How much the emulated server can serve on this machine, and where to run it.

1. Capacity. The emulated server runs in its own process with ``time_scale`` 0 (every
   modelled step takes no time), so what limits it is its own Python: the HTTP
   front, the engine's bookkeeping and one SSE event per token. tokenmark's client
   drives it with a closed loop; the run's completed requests/s and streamed
   tokens/s are the server's capacity (the client follows several times more on one
   core, ``bench/openai_client.py``).
2. Placement. The same Server-style load (Poisson, llama3.1-8b on the emulated H200,
   real model timing) against the server in its own process and in the client's
   process, beside the in-process engine on a virtual clock (the model's own
   figures): the client's send lag and how far TTFT/TPOT drift from the model say
   which placement keeps the client honest.

Run: ``.venv/bin/python bench/emulator_capacity.py [--quick]``. Numbers, not assertions.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from tokenmark.adapters.openai_target import OpenAIConfig
from tokenmark.api import SutSpec, run_benchmark
from tokenmark.config.layering import build_settings
from tokenmark.dataset import LengthDistribution, SyntheticDataset
from tokenmark.engines.emulated import EmulatorSpec
from tokenmark.settings import Scenario


def capacity(concurrency: int, output: int, n: int, stream: bool) -> None:
    spec = SutSpec(kind="emulated", emulator=EmulatorSpec(time_scale=0.0),
                   client=OpenAIConfig(urls=("http://unused",), stream=stream,
                                       preconnect=concurrency))
    layered = build_settings("v6.0", "llama3.1-8b", Scenario.CLOSED_LOOP, overrides={
        "concurrency": concurrency, "min_query_count": n, "max_query_count": n,
        "min_duration_ms": 0})
    ds = SyntheticDataset(256, LengthDistribution.parse("64"),
                          LengthDistribution.parse(str(output)))

    with tempfile.TemporaryDirectory() as tmp:
        res = run_benchmark(layered, ds, spec, Path(tmp), drain_timeout_s=60)
    s = res.summary
    print(f"capacity  stream={str(stream):5}  concurrency {concurrency:4}  output {output:4}: "
          f"{s.requests_per_second:8,.0f} requests/s  {s.output_tokens_per_second:10,.0f} "
          f"tokens/s  (failed {s.failed})", flush=True)


def placement(qps: float, seconds: float) -> None:
    layered = build_settings("v6.0", "llama3.1-8b", Scenario.SERVER, profile="demo",
                             overrides={"target_qps": qps,
                                        "min_duration_ms": int(seconds * 1000),
                                        "min_query_count": 1})
    ds = SyntheticDataset(256, LengthDistribution.parse("normal:800:200"),
                          LengthDistribution.parse("uniform:64:128"))
    rows = []
    for name, kw, virtual in (("model (virtual clock)", {}, True),
                              ("own process (HTTP)", {}, False),
                              ("same process (HTTP)", {"emulator_in_process": True}, False)):
        spec = SutSpec(kind="emulated", emulator=EmulatorSpec(), **kw)  # type: ignore[arg-type]
        with tempfile.TemporaryDirectory() as tmp:
            res = run_benchmark(layered, ds, spec, Path(tmp), virtual_time=virtual,
                                drain_timeout_s=60)
        s = res.summary
        rows.append((name, s))
    ref = rows[0][1]
    print(f"placement at {qps:g} queries/s for {seconds:g} s (llama3.1-8b on the emulated "
          "H200):")
    print(f"  {'':22} {'send lag p99':>13} {'TTFT p50':>9} {'TTFT p99':>9} {'TPOT p50':>9} "
          f"{'TPOT p99':>9} {'ITL p50':>8}")
    for name, s in rows:
        print(f"  {name:22} {s.send_lag.percentiles.get(0.99, 0) / 1e6:10.2f} ms "
              f"{s.ttft.percentiles.get(0.5, 0) / 1e6:6.1f} ms "
              f"{s.ttft.percentiles.get(0.99, 0) / 1e6:6.1f} ms "
              f"{s.tpot.percentiles.get(0.5, 0) / 1e6:6.2f} ms "
              f"{s.tpot.percentiles.get(0.99, 0) / 1e6:6.2f} ms "
              f"{s.itl.percentiles.get(0.5, 0) / 1e6:5.2f} ms")
    for name, s in rows[1:]:
        d_ttft = (s.ttft.percentiles.get(0.5, 0) - ref.ttft.percentiles.get(0.5, 0)) / 1e6
        d_tpot = (s.tpot.percentiles.get(0.5, 0) - ref.tpot.percentiles.get(0.5, 0)) / 1e6
        print(f"  {name}: TTFT p50 {d_ttft:+.2f} ms, TPOT p50 {d_tpot:+.3f} ms against "
              "the model")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    n = 400 if args.quick else 2000
    capacity(64, 256, n, True)
    capacity(256, 256, n, True)
    capacity(64, 16, n, True)
    capacity(256, 64, n, False)
    placement(20.0, 10.0 if args.quick else 30.0)


if __name__ == "__main__":
    main()
