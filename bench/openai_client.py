"""How fast and how exact tokenmark's OpenAI HTTP client is, beside a plain aiohttp loop.

Starts the exact server (``tokenmark.servers``: pre-rendered bytes, exact delays, its own
per-request times as ground truth) pinned to one core, runs each client in a fresh
process pinned to another (``bench/clients.py``), and prints, each with the machine's
background load (whole-machine busy time from ``/proc/stat`` minus the server's and the
client's own CPU, in cores) and the range over ``--repeats``:

1. max streamed tokens/s, one SSE event per token, zero delays (64 in flight, 256 tokens
   per request): tokenmark vs the baseline. Goal >= 400k tokens/s (about 2.9x here);
2. TTFT p99 error against the server's truth (client TTFT - server's first write +
   server's read time) at 1, 64 and 256 in flight, 50 ms TTFT, 10 ms between tokens,
   16 tokens. Goal <= 2 ms at 256;
3. client CPU-seconds per million tokens at 16 in flight (20 ms TTFT, 5 ms between
   tokens, 128 tokens). Goal <= 15;
4. client CPU before the first request (a fresh process; the server is already up).
   Goal <= 0.5 s;
5. with ``--workers``: max tokens/s through 1 and 2 worker processes (needs cores to
   spare: on a 2-core machine the figure only shows the overhead);
6. with ``--stacks``: the HTTP stacks under one SSE reader (aiohttp, httpx, tokenmark's
   protocol), the measurement that chose the stack.

Run: ``make bench-client`` or ``.venv/bin/python bench/openai_client.py [--quick]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from tokenmark.servers.process import ServerProcess

HERE = Path(__file__).resolve().parent


def machine_busy_s() -> float:
    with open("/proc/stat") as f:
        parts = [float(x) for x in f.readline().split()[1:]]
    return (sum(parts) - parts[3] - parts[4]) / os.sysconf("SC_CLK_TCK")


def proc_cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (float(fields[11]) + float(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def wait_quiet(limit: float, max_wait_s: float) -> float:
    """Wait (bounded) until other processes use under ``limit`` cores for 1 s."""
    deadline = time.monotonic() + max_wait_s
    load = 0.0
    while True:
        b0, t0 = machine_busy_s(), time.monotonic()
        time.sleep(1.0)
        load = (machine_busy_s() - b0) / (time.monotonic() - t0)
        if load < limit or time.monotonic() > deadline:
            return load


class Bench:
    def __init__(self, args: argparse.Namespace, tmp: Path) -> None:
        self.args = args
        self.tmp = tmp
        cpus = sorted(os.sched_getaffinity(0))
        self.server_cpu = cpus[0]
        self.client_cpus = cpus[1:] or cpus[:1]
        self.n = 0

    def server(self, *extra: str) -> ServerProcess:
        self.n += 1
        return ServerProcess(["--cpu", str(self.server_cpu), *extra],
                             truth=self.tmp / f"truth{self.n}.jsonl")

    def client(self, srv: ServerProcess, client: str, *, concurrency: int, requests: int,
               tokens: int, workers: int = 0, cpus: list[int] | None = None
               ) -> dict[str, Any]:
        """Run one client process; add the background load it ran under."""
        wait_quiet(self.args.quiet_limit, self.args.max_wait)
        out = self.tmp / f"{client}-{self.n}-{time.monotonic_ns()}.json"
        cpus = cpus or self.client_cpus[:1]
        cmd = [sys.executable, str(HERE / "clients.py"), client, "--url", srv.url,
               "--concurrency", str(concurrency), "--requests", str(requests),
               "--tokens", str(tokens), "--cpu", ",".join(map(str, cpus)),
               "--out", str(out)]
        if workers:
            cmd += ["--workers", str(workers)]
        b0, s0, c0, t0 = machine_busy_s(), proc_cpu_s(srv.pid), children_cpu_s(), time.time()
        subprocess.run(cmd, check=True, timeout=600)
        wall = time.time() - t0
        own = (proc_cpu_s(srv.pid) - s0) + (children_cpu_s() - c0)
        res: dict[str, Any] = json.loads(out.read_text())
        res["background_cores"] = max(0.0, ((machine_busy_s() - b0) - own) / wall)
        return res


def rng(values: list[float], fmt: str = "{:,.0f}") -> str:
    lo, hi = min(values), max(values)
    return fmt.format(lo) if lo == hi else f"{fmt.format(lo)} - {fmt.format(hi)}"


def bg(rows: list[dict[str, Any]]) -> str:
    return rng([r["background_cores"] for r in rows], "{:.2f}") + " cores"


def repeat(n: int, fn: Callable[[], dict[str, Any]]) -> list[dict[str, Any]]:
    return [fn() for _ in range(n)]


def max_tokens_per_s(b: Bench) -> None:
    a = b.args
    reqs = 600 if a.quick else 2500
    with b.server() as srv:
        base = repeat(a.repeats, lambda: b.client(srv, "aiohttp", concurrency=64,
                                                  requests=reqs // 4, tokens=256))
        tm = repeat(a.repeats, lambda: b.client(srv, "tokenmark", concurrency=64,
                                                requests=reqs, tokens=256))
    rb = [r["tokens"] / r["wall_s"] for r in base]
    rt = [r["tokens"] / r["wall_s"] for r in tm]
    print("1. max streamed tokens/s (one SSE event per token, 64 in flight, 256 tokens):")
    print(f"   aiohttp baseline : {rng(rb)} tokens/s   (background {bg(base)})")
    print(f"   tokenmark        : {rng(rt)} tokens/s   (background {bg(tm)})")
    print(f"   ratio            : {rng([t / s for t in rt for s in rb], '{:.2f}')}x "
          "(goal: >= 400k tokens/s)")


def ttft_error(b: Bench) -> None:
    a = b.args
    print("2. TTFT p99 error vs the server's truth (50 ms TTFT, 10 ms ITL, 16 tokens; closed "
          "loop: every wave of tokens reaches all streams at once, as continuous batching "
          "sends them)")
    print("   error the client adds = send lag + (client read - server write of the first "
          "token);\n   [in brackets: client TTFT - server TTFT, which also holds the server's "
          "own queue\n   when a wave of requests arrives at once]")
    for conc in (1, 64, 256):
        reqs = conc * (8 if a.quick else 16) if conc > 1 else (30 if a.quick else 100)
        line = f"   {conc:>3} in flight:"
        for client in ("aiohttp", "tokenmark"):
            full, added, rows = [], [], []
            for _ in range(a.repeats):
                with b.server("--ttft-ms", "50", "--itl-ms", "10", "--spin-us", "1500") as srv:
                    r = b.client(srv, client, concurrency=conc, requests=reqs, tokens=16)
                    srv.stop()
                    truth = {t["rid"]: t for t in srv.truth()}
                e1, e2 = [], []
                for rid, ttft, _sent, first, lag in r["ttft"]:
                    t = truth.get(rid)
                    if t is None:
                        continue
                    e1.append(ttft - (t["first_ns"] - t["recv_ns"]))
                    e2.append(lag + first - t["first_ns"])
                full.append(p99(e1))
                added.append(p99(e2))
                rows.append(r)
            line += (f"  {client} {rng(added, '{:.2f}')} ms [{rng(full, '{:.2f}')}] "
                     f"(bg {bg(rows)});")
        print(line + ("  goal <= 2 ms (tokenmark)" if conc == 256 else ""))
    print("   (aiohttp opens its connections as the first requests go and does not say when "
          "a request left;\n   tokenmark opens its pool first: --preconnect)")


def p99(values: list[int]) -> float:
    arr = np.sort(np.asarray(values, dtype=np.int64))
    return float(arr[int(0.99 * len(arr))]) / 1e6


def cpu_per_million(b: Bench) -> None:
    a = b.args
    reqs = 16 * (4 if a.quick else 24)
    res: dict[str, list[dict[str, Any]]] = {}
    with b.server("--ttft-ms", "20", "--itl-ms", "5") as srv:
        for client in ("aiohttp", "tokenmark"):
            res[client] = repeat(a.repeats, lambda c=client: b.client(  # type: ignore[misc]
                srv, c, concurrency=16, requests=reqs, tokens=128))
    print("3. client CPU-seconds per million tokens (16 in flight, 20 ms TTFT, 5 ms ITL, "
          "128 tokens), from the first request to the last answer:")
    for client, rows in res.items():
        vals = [r["run_cpu_s"] / r["tokens"] * 1e6 for r in rows]
        print(f"   {client:<10}: {rng(vals, '{:.1f}')} CPU-s per 1M tokens "
              f"(background {bg(rows)})" + ("  goal <= 15" if client == "tokenmark" else ""))
    rows = res["tokenmark"]
    print("4. client CPU before the first request (fresh process, tokenmark.api.run + /v1/models "
          f"check): {rng([r['cpu_before_first_s'] for r in rows], '{:.3f}')} s  goal <= 0.5")


def workers_scaling(b: Bench) -> None:
    """Max tokens/s through 0 (in-process), 1 and 2 worker processes.

    Also the CPU each part spends per million tokens: the parent (schedule, records,
    metrics, one message per request) and the workers (sockets and streams). On a
    machine with cores to spare, N workers reach about min(N x worker capacity, parent
    capacity); that projection is printed beside what this machine measured.
    """
    a = b.args
    reqs = 600 if a.quick else 2500
    cpus = sorted(os.sched_getaffinity(0))
    client_cpus = cpus[1:] if len(cpus) > 2 else cpus
    print("5. worker processes, max tokens/s (64 in flight, 256 tokens):")
    cap: dict[int, float] = {}
    with b.server() as srv:
        for w in (0, 1, 2):
            rows = repeat(a.repeats, lambda w=w: b.client(  # type: ignore[misc]
                srv, "tokenmark", concurrency=64, requests=reqs, tokens=256, workers=w,
                cpus=client_cpus if w else client_cpus[-1:]))
            tps = [r["tokens"] / r["wall_s"] for r in rows]
            cap[w] = max(tps)
            line = f"   {w} worker(s): {rng(tps)} tokens/s (bg {bg(rows)})"
            if w:
                parent = [r["run_cpu_s"] / r["tokens"] * 1e6 for r in rows]
                worker = [r["worker_cpu_s"] / r["tokens"] * 1e6 for r in rows]
                line += (f"; CPU-s per 1M tokens: parent {rng(parent, '{:.2f}')}, "
                         f"workers {rng(worker, '{:.2f}')}")
                if w == 1:
                    proj = [1e6 / p for p in parent], [1e6 / x for x in worker]
            print(line)
    par, wrk = max(proj[0]), max(proj[1])
    print(f"   scaling 1 -> 2 workers here: {cap[2] / cap[1]:.2f}x on {len(cpus)} cores "
          f"(server pinned to core {cpus[0]}, client processes on {client_cpus})")
    print(f"   projection with a core each: 1 worker {min(wrk, par):,.0f}, 2 workers "
          f"{min(2 * wrk, par):,.0f} tokens/s ({min(2 * wrk, par) / min(wrk, par):.2f}x; "
          f"the parent alone handles {par:,.0f} tokens/s)")


def stacks(b: Bench) -> None:
    a = b.args
    reqs = 400 if a.quick else 1500
    print("6. HTTP stacks under one SSE reader (64 in flight, 256 tokens), tokens/s:")
    with b.server() as srv:
        for client in ("httpx-scan", "aiohttp-scan", "lean-scan", "aiohttp", "tokenmark"):
            n = reqs // 8 if client.startswith("httpx") else reqs
            rows = repeat(a.repeats, lambda c=client, n=n: b.client(  # type: ignore[misc]
                srv, c, concurrency=64, requests=n, tokens=256))
            print(f"   {client:<13}: {rng([r['tokens'] / r['wall_s'] for r in rows])} "
                  f"(background {bg(rows)})")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="fewer requests, one repeat")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--workers", action="store_true", help="also measure worker scaling")
    p.add_argument("--stacks", action="store_true", help="also compare HTTP stacks")
    p.add_argument("--only", default="", help="comma list of sections: 1,2,3,5,6")
    p.add_argument("--quiet-limit", type=float, default=0.1,
                   help="wait for other processes to use fewer cores than this")
    p.add_argument("--max-wait", type=float, default=30.0, help="seconds to wait for quiet")
    a = p.parse_args()
    if a.quick:
        a.repeats = 1
    sections = set(a.only.split(",")) if a.only else {"1", "2", "3"}
    if a.workers:
        sections.add("5")
    if a.stacks:
        sections.add("6")
    with tempfile.TemporaryDirectory(prefix="tm-bench-") as d:
        b = Bench(a, Path(d))
        print(f"cores: server {b.server_cpu}, client {b.client_cpus[0]}; "
              f"{a.repeats} repeat(s); ranges are min - max")
        if "1" in sections:
            max_tokens_per_s(b)
        if "2" in sections:
            ttft_error(b)
        if "3" in sections:
            cpu_per_million(b)
        if "5" in sections:
            workers_scaling(b)
        if "6" in sections:
            stacks(b)


if __name__ == "__main__":
    main()
