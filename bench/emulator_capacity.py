"""How much the emulated server can serve on this machine, and where to run it.

1. Capacity. The emulated server runs in its own process with ``time_scale`` 0 (every
   modelled step takes no time), so what limits it is its own Python: the HTTP
   front, the engine's bookkeeping and one SSE event per token. tokenmark's client
   drives it with a closed loop; the run's completed requests/s and streamed
   tokens/s are the server's capacity (the client follows several times more on one
   core, ``bench/openai_client.py``).
2. Long outputs. 20,000-token answers (DeepSeek-R1's maximum) streamed at model time
   zero: the server's events/s, read by a plain socket reader (the server's own
   capacity) and by tokenmark's client (what a run gets).
3. Placement. The same Server-style load (Poisson, llama3.1-8b on the emulated H200,
   real model timing) against the server in its own process and in the client's
   process, beside the in-process engine on a virtual clock (the model's own
   figures): the client's send lag and how far TTFT/TPOT drift from the model say
   which placement keeps the client honest.
4. Published lengths. DeepSeek-R1 Server at 1 query/s for 30 s with its published output
   lengths (mean 3886 tokens, up to 20000: not the demo's cap), in real time and on the
   virtual clock: the real run's wall time against the model's length of the run (its
   last answer's end), and its TTFT/TPOT/TTFAT percentiles beside the model's own, say
   whether the emulator kept up (wall-clock speed) or fell behind.
5. Demos. The wall time of ``tokenmark run -b deepseek-r1 -s Server --profile demo`` and
   ``-b qwen3-vl-235b-a22b -s Server --profile demo --images-per-request 1`` (goal: 2
   minutes each here), their verdicts, and the model time of the same runs on the
   virtual clock (``--virtual-time``): what of the wall time is the model's.

Every section prints the machine's load average beside its figures (the machine is
shared). Run: ``.venv/bin/python bench/emulator_capacity.py [--quick] [--only NAME]``.
Numbers, not assertions.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tokenmark.adapters.openai_target import OpenAIConfig
from tokenmark.api.run import SutSpec, run_benchmark
from tokenmark.config.layering import build_settings
from tokenmark.dataset import LengthDistribution, SyntheticDataset
from tokenmark.engines.emulated import EmulatorSpec
from tokenmark.mlperf.settings import Scenario
from tokenmark.output.records import read_records
from tokenmark.servers.emulated import EmulatedServer


def load() -> str:
    a, b, c = os.getloadavg()
    return f"load average {a:.1f} {b:.1f} {c:.1f} on {os.cpu_count()} cores"


def capacity(concurrency: int, output: int, n: int, stream: bool,
             model: str = "llama3.1-8b") -> None:
    spec = SutSpec(kind="emulated", emulator=EmulatorSpec(model=model, time_scale=0.0),
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
    print(f"capacity  stream={str(stream):5}  concurrency {concurrency:4}  output {output:5}: "
          f"{s.requests_per_second:8,.0f} requests/s  {s.output_tokens_per_second:10,.0f} "
          f"tokens/s  (failed {s.failed}; {load()})", flush=True)


async def _raw_stream(host: str, port: int, output: int) -> int:
    """One streamed completion read by a plain socket reader; returns its events."""
    r, w = await asyncio.open_connection(host, port)
    body = json.dumps({"prompt": "hello", "max_tokens": output, "stream": True}).encode()
    w.write(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
            b"\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    n = 0
    tail = b""
    while True:
        data = await r.read(1 << 20)
        if not data:
            break
        both = tail + data
        n += both.count(b"data: {") - tail.count(b"data: {")
        tail = both[-16:]
        if both.endswith(b"0\r\n\r\n"):
            break
    w.close()
    await w.wait_closed()
    return n


def long_outputs(streams: int, output: int) -> None:
    """Events/s of 20k-token answers: the server's own (plain reader, server in this
    process) and through tokenmark's client (server in its own process)."""

    async def raw() -> tuple[int, float, float]:
        server = EmulatedServer(EmulatorSpec(time_scale=0.0))
        await server.start()
        try:
            t0, c0 = time.perf_counter(), time.process_time()
            counts = await asyncio.gather(*(_raw_stream(server.host, server.port, output)
                                            for _ in range(streams)))
            return sum(counts), time.perf_counter() - t0, time.process_time() - c0
        finally:
            await server.stop()

    events, wall, cpu = asyncio.run(raw())
    print(f"long outputs  {streams} streams x {output:,} tokens, plain reader: {events:,} "
          f"events in {wall:.2f} s = {events / wall:,.0f} events/s (server and reader share "
          f"one process: {cpu:.2f} s CPU; {load()})", flush=True)
    capacity(streams, output, streams * 2, True)



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


DEMOS = (
    ("deepseek-r1", ["-b", "deepseek-r1", "-s", "Server", "--profile", "demo"]),
    ("qwen3-vl", ["-b", "qwen3-vl-235b-a22b", "-s", "Server", "--profile", "demo",
                  "--images-per-request", "1"]),
)


def _figures(folder: Path) -> str:
    """The run's length by its own clock (the last answer's end) and its latencies."""
    doc = json.loads((folder / "results.json").read_text())
    s = doc["summary"]
    lat = s["latency_ms"]
    done = max(r.done_ns for r in read_records(folder / "records.jsonl")) / 1e9
    out = [f"last answer at {done:6.1f} s"]
    for k in ("ttft", "tpot", "ttfat"):
        if lat.get(k):
            p = lat[k]["percentiles"]
            out.append(f"{k.upper()} p50/p99 {p['50']:,.1f}/{p['99']:,.1f} ms")
    r = s.get("reasoning") or {}
    out.append(f"{s['throughput']['output_tokens']:,} tokens "
               f"({r.get('reasoning_tokens', 0):,} reasoning)")
    return ", ".join(out)


def published() -> None:
    """DeepSeek-R1 at a rate the emulated 8 x H200 holds, with published output lengths:
    real time against the model's own timeline."""
    args = ["-b", "deepseek-r1", "-s", "Server", "--qps", "1", "--min-duration", "30",
            "--min-queries", "30", "--dataset-size", "64", "--no-db", "-q"]
    for virtual in (True, False):
        with tempfile.TemporaryDirectory() as tmp:
            before = load()
            t0 = time.perf_counter()
            res = subprocess.run([sys.executable, "-m", "tokenmark", "run", *args, "-o",
                                  str(Path(tmp) / "run")]
                                 + (["--virtual-time"] if virtual else []),
                                 capture_output=True, text=True, check=False)
            wall = time.perf_counter() - t0
            figures = _figures(Path(tmp) / "run")
        kind = "virtual clock" if virtual else "real time    "
        print(f"published lengths, deepseek-r1 at 1 query/s, {kind}: {wall:6.1f} s wall "
              f"(exit {res.returncode}); {figures}; {before}", flush=True)


def demos() -> None:
    """Wall time and verdicts of the two demo commands (each in a fresh process, as a
    user runs them), and the same runs' model time on the virtual clock."""
    for name, args in DEMOS:
        for virtual in (False, True):
            with tempfile.TemporaryDirectory() as tmp:
                cmd = [sys.executable, "-m", "tokenmark", "run", *args, "--no-db", "-o",
                       str(Path(tmp) / "run")] + (["--virtual-time"] if virtual else [])
                before = load()
                t0 = time.perf_counter()
                res = subprocess.run(cmd, capture_output=True, text=True, check=False)
                wall = time.perf_counter() - t0
                verdicts = re.findall(r"^(mlperf verdict|tokenmark verdict): (\S+)",
                                      res.stderr + res.stdout, re.M)
                doc = Path(tmp) / "run" / "results.json"
                extra = ""
                if doc.is_file():
                    d = json.loads(doc.read_text())
                    s = d["summary"]
                    lat = s["latency_ms"]
                    r = s.get("reasoning") or {}
                    extra = (f"; {s['counts']['completed']} completed, TTFT p50 "
                             f"{lat['ttft']['percentiles']['50']:,.0f} ms")
                    if lat.get("ttfat"):
                        extra += (f", TTFAT p50 {lat['ttfat']['percentiles']['50']:,.0f} ms, "
                                  f"{r.get('reasoning_tokens', 0):,} reasoning + "
                                  f"{r.get('answer_tokens', 0):,} answer tokens")
            kind = "virtual clock" if virtual else "real time    "
            shown = ", ".join(f"{k} {v}" for k, v in verdicts) or f"exit {res.returncode}"
            print(f"demo {name:12} {kind}: {wall:6.1f} s wall (exit {res.returncode}; "
                  f"{shown}{extra}; {before})", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", choices=["capacity", "long", "placement", "published",
                                       "demos"])
    args = ap.parse_args()
    n = 400 if args.quick else 2000
    if args.only in (None, "capacity"):
        capacity(64, 256, n, True)
        capacity(256, 256, n, True)
        capacity(64, 16, n, True)
        capacity(256, 64, n, False)
    if args.only in (None, "long"):
        long_outputs(16 if args.quick else 32, 20_000)
    if args.only in (None, "placement"):
        placement(20.0, 10.0 if args.quick else 30.0)
    if args.only in (None, "published"):
        published()
    if args.only in (None, "demos"):
        demos()


if __name__ == "__main__":
    main()
