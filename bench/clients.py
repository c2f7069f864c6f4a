"""The clients ``bench/openai_client.py`` compares, each run in its own pinned process.

``python bench/clients.py CLIENT --url URL --concurrency C --requests N --tokens T
--cpu K --out FILE`` runs ``N`` streamed completions of ``T`` tokens with ``C`` in flight
(a closed loop) against ``URL`` and writes one JSON object to ``FILE``: tokens, wall and
CPU seconds, the CPU spent before the first request, and per request the id sent as
``X-Request-Id`` with the client's TTFT, so the parent can compare it with the server's
truth. Clients:

- ``aiohttp``: the plain asyncio + aiohttp loop of vLLM's ``bench serve`` (a JSON parse
  and a timestamp per SSE line): the baseline;
- ``httpx``: the same loop on httpx;
- ``tokenmark``: the whole tokenmark pipeline (:func:`tokenmark.api.run.run_benchmark`:
  runner, records file, metrics, verdicts) with the OpenAI HTTP adapter;
- ``tokenmark-workers``: the same through ``--workers`` worker processes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any


def cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def children_cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def payload(i: int, tokens: int) -> dict[str, Any]:
    return {"model": "exact", "prompt": f"a an ar as al e en {i}", "max_tokens": tokens,
            "stream": True, "stream_options": {"include_usage": True}}


async def aiohttp_client(a: argparse.Namespace, out: dict[str, Any]) -> None:
    import aiohttp

    url = a.url + "/v1/completions"
    rows: list[tuple[str, int, int, int, int]] = []
    tokens = 0
    counter = iter(range(a.requests))
    first_cpu: list[float] = []

    async def one(session: aiohttp.ClientSession, i: int) -> None:
        nonlocal tokens
        rid = f"aio-{i}"
        st = time.perf_counter_ns()
        if not first_cpu:
            first_cpu.append(cpu_s())
        ttft = 0
        async with session.post(url, json=payload(i, a.tokens),
                                headers={"X-Request-Id": rid}) as resp:
            async for chunk_bytes in resp.content:
                chunk_bytes = chunk_bytes.strip()
                if not chunk_bytes:
                    continue
                chunk = chunk_bytes.decode("utf-8").removeprefix("data: ")
                if chunk == "[DONE]":
                    continue
                data = json.loads(chunk)
                if choices := data.get("choices"):
                    _ = choices[0].get("text")
                    ts = time.perf_counter_ns()
                    if ttft == 0:
                        ttft = ts - st
                elif usage := data.get("usage"):
                    tokens += usage.get("completion_tokens", 0)
        # aiohttp does not say when the request left: its start stands in for it
        rows.append((rid, ttft, st, st + ttft, 0))

    async def worker(session: aiohttp.ClientSession) -> None:
        for i in counter:
            await one(session, i)

    conn = aiohttp.TCPConnector(limit=0, force_close=False)
    async with aiohttp.ClientSession(connector=conn,
                                     timeout=aiohttp.ClientTimeout(total=None)) as s:
        t0 = time.perf_counter()
        c0 = cpu_s()
        await asyncio.gather(*(worker(s) for _ in range(a.concurrency)))
        out.update(wall_s=time.perf_counter() - t0, run_cpu_s=cpu_s() - c0)
    out.update(tokens=tokens, ttft=rows, cpu_before_first_s=first_cpu[0])


async def httpx_client(a: argparse.Namespace, out: dict[str, Any]) -> None:
    import httpx

    url = a.url + "/v1/completions"
    rows: list[tuple[str, int]] = []
    tokens = 0
    counter = iter(range(a.requests))
    first_cpu: list[float] = []

    async def one(client: httpx.AsyncClient, i: int) -> None:
        nonlocal tokens
        rid = f"hx-{i}"
        st = time.perf_counter_ns()
        if not first_cpu:
            first_cpu.append(cpu_s())
        ttft = 0
        async with client.stream("POST", url, json=payload(i, a.tokens),
                                 headers={"X-Request-Id": rid}) as resp:
            async for line in resp.aiter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                data = json.loads(line[6:])
                if choices := data.get("choices"):
                    _ = choices[0].get("text")
                    ts = time.perf_counter_ns()
                    if ttft == 0:
                        ttft = ts - st
                elif usage := data.get("usage"):
                    tokens += usage.get("completion_tokens", 0)
        rows.append((rid, ttft))

    async def worker(client: httpx.AsyncClient) -> None:
        for i in counter:
            await one(client, i)

    limits = httpx.Limits(max_connections=a.concurrency, max_keepalive_connections=a.concurrency)
    async with httpx.AsyncClient(limits=limits, timeout=None) as client:
        t0 = time.perf_counter()
        c0 = cpu_s()
        await asyncio.gather(*(worker(client) for _ in range(a.concurrency)))
        out.update(wall_s=time.perf_counter() - t0, run_cpu_s=cpu_s() - c0)
    out.update(tokens=tokens, ttft=rows, cpu_before_first_s=first_cpu[0])


async def scan_client(a: argparse.Namespace, out: dict[str, Any]) -> None:
    """The HTTP stacks compared under one SSE reader (tokenmark's scanner per read)."""
    from tokenmark.adapters.sse import StreamReader

    url = a.url + "/v1/completions"
    tokens = 0
    counter = iter(range(a.requests))
    stack = a.client.removesuffix("-scan")

    if stack == "aiohttp":
        import aiohttp

        async def one_aio(session: aiohttp.ClientSession, i: int) -> None:
            nonlocal tokens
            sc = StreamReader()
            async with session.post(url, json=payload(i, a.tokens)) as resp:
                async for data in resp.content.iter_any():
                    if sc.feed(data):
                        time.perf_counter_ns()
            tokens += (sc.usage or {}).get("completion_tokens", 0)

        async def worker_aio(session: aiohttp.ClientSession) -> None:
            for i in counter:
                await one_aio(session, i)

        conn = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(connector=conn) as s:
            t0 = time.perf_counter()
            await asyncio.gather(*(worker_aio(s) for _ in range(a.concurrency)))
            out["wall_s"] = time.perf_counter() - t0
    elif stack == "httpx":
        import httpx

        async def one_hx(client: httpx.AsyncClient, i: int) -> None:
            nonlocal tokens
            sc = StreamReader()
            async with client.stream("POST", url, json=payload(i, a.tokens)) as resp:
                async for data in resp.aiter_raw():
                    if sc.feed(data):
                        time.perf_counter_ns()
            tokens += (sc.usage or {}).get("completion_tokens", 0)

        async def worker_hx(client: httpx.AsyncClient) -> None:
            for i in counter:
                await one_hx(client, i)

        limits = httpx.Limits(max_connections=a.concurrency)
        async with httpx.AsyncClient(limits=limits, timeout=None) as client:
            t0 = time.perf_counter()
            await asyncio.gather(*(worker_hx(client) for _ in range(a.concurrency)))
            out["wall_s"] = time.perf_counter() - t0
    else:  # tokenmark's protocol, without the runner
        from tokenmark.adapters.pool import Endpoint

        ep = Endpoint(a.url, ssl_context=None, max_conns=0, keepalive_s=60,
                      now=time.perf_counter_ns)
        loop = asyncio.get_running_loop()

        class Ex:
            def __init__(self, fut: asyncio.Future[None]) -> None:
                self.sc = StreamReader()
                self.fut = fut

            def on_head(self, status: int, headers: dict[str, str], t: int) -> None:
                pass

            def on_body(self, data: bytes, t: int) -> None:
                self.sc.feed(data)

            def on_end(self, t: int) -> None:
                self.fut.set_result(None)

            def on_error(self, error: object, detail: str, t: int) -> None:
                self.fut.set_result(None)

        async def worker_lean() -> None:
            nonlocal tokens
            for i in counter:
                body = json.dumps(payload(i, a.tokens)).encode()
                data = (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                        b"application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
                conn = ep.take_idle() or await ep.open()
                fut = loop.create_future()
                ex = Ex(fut)
                conn.send(data, ex)  # type: ignore[arg-type]
                await fut
                tokens += (ex.sc.usage or {}).get("completion_tokens", 0)

        t0 = time.perf_counter()
        await asyncio.gather(*(worker_lean() for _ in range(a.concurrency)))
        out["wall_s"] = time.perf_counter() - t0
    out.update(tokens=tokens, ttft=[], cpu_before_first_s=0.0)


def tokenmark_client(a: argparse.Namespace, out: dict[str, Any]) -> None:
    from tokenmark.adapters.openai_http import OpenAIHttpSUT
    from tokenmark.adapters.openai_target import OpenAIConfig, check_target
    from tokenmark.api.run import run_benchmark
    from tokenmark.clock import Clock
    from tokenmark.config.layering import build_settings
    from tokenmark.dataset import LengthDistribution, SyntheticDataset
    from tokenmark.mlperf.settings import Scenario
    from tokenmark.output.records import read_records
    from tokenmark.records import Query
    from tokenmark.sut import ResponseHandle, SystemUnderTest

    cfg = check_target(OpenAIConfig(urls=(a.url,), preconnect=a.concurrency))
    layered = build_settings("v6.0", "llama3.1-8b", Scenario.CLOSED_LOOP, overrides={
        "concurrency": a.concurrency, "min_query_count": a.requests,
        "max_query_count": a.requests, "min_duration_ms": 0})
    ds = SyntheticDataset(256, LengthDistribution.parse("8"),
                          LengthDistribution.parse(str(a.tokens)))
    for i in range(len(ds)):  # prompts are built before timing starts (as runner_overhead)
        _ = ds.sample(i).prompt
    first_cpu: list[float] = []
    last_cpu: list[float] = []
    suts: list[Any] = []

    def factory(clock: Clock) -> SystemUnderTest:
        sut: Any
        if a.workers:
            from tokenmark.adapters.workers import WorkerPoolSUT

            sut = WorkerPoolSUT(clock, cfg, workers=a.workers)
        else:
            sut = OpenAIHttpSUT(clock, cfg)
        suts.append(sut)
        inner = sut.issue

        def issue(query: Query, handle: ResponseHandle) -> None:
            if not first_cpu:
                first_cpu.append(cpu_s())
            inner(query, handle)

        sut.issue = issue
        inner_stop = sut.stop

        async def stop() -> None:
            last_cpu.append(cpu_s())
            await inner_stop()

        sut.stop = stop
        return sut  # type: ignore[no-any-return]

    res = run_benchmark(layered, ds, factory, Path(a.out).with_suffix(".run"))
    recs = list(read_records(Path(a.out).with_suffix(".run") / "records.jsonl"))
    ok = [r for r in recs if r.ok]
    start = min(r.issued_ns for r in recs)
    end = max(r.done_ns for r in recs)
    sut = suts[0]
    t0 = res.outcome.t0_ns
    rows = [(sut.request_id(r.seq), r.first_token_ns - r.scheduled_ns, t0 + r.issued_ns,
             t0 + r.first_token_ns, r.issued_ns - r.scheduled_ns) for r in ok]
    out.update(tokens=sum(r.output_tokens for r in ok), wall_s=(end - start) / 1e9,
               errors=len(recs) - len(ok), ttft=rows, cpu_before_first_s=first_cpu[0],
               run_cpu_s=last_cpu[0] - first_cpu[0],
               exit_code=res.exit_code)
    if a.workers:
        out["clock_sync"] = sut.describe().get("clock_sync", "")
        out["worker_cpu_s"] = sut.worker_cpu_s


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("client", choices=("aiohttp", "httpx", "tokenmark", "aiohttp-scan",
                                      "httpx-scan", "lean-scan"))
    p.add_argument("--url", required=True)
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--requests", type=int, default=200)
    p.add_argument("--tokens", type=int, default=256)
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--cpu", default="")
    p.add_argument("--out", required=True)
    a = p.parse_args()
    if a.cpu:
        os.sched_setaffinity(0, {int(c) for c in a.cpu.split(",")})
    out: dict[str, Any] = {"client": a.client}
    c0 = cpu_s()
    t0 = time.perf_counter()
    if a.client == "aiohttp":
        asyncio.run(aiohttp_client(a, out))
    elif a.client == "httpx":
        asyncio.run(httpx_client(a, out))
    elif a.client.endswith("-scan"):
        asyncio.run(scan_client(a, out))
    else:
        tokenmark_client(a, out)
    out["total_wall_s"] = time.perf_counter() - t0
    out["total_cpu_s"] = cpu_s() - c0 + children_cpu_s()
    out["process_cpu_s"] = cpu_s()
    Path(a.out).write_text(json.dumps(out))


if __name__ == "__main__":
    sys.exit(main())
