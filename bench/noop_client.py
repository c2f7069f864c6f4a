"""The no-op client: what any load generator can at best reach on the peers harness.

Raw sockets on one ``selectors`` loop (no asyncio, no HTTP library, no JSON): it writes
each request's fixed bytes, stamps every read with ``time.perf_counter`` where it lands,
counts token events by a byte search (``"choices":[{``, the mock server's token events;
its usage event has empty choices) and knows a response ended by the chunked
terminator. Nothing else: no framing, no checks, no records. Its figures on the harness
(``bench/cli_peers.py --tools noop``) are the floor each of issue 21's goals is judged
against: a goal the no-op client cannot reach on this harness is reported as below the
floor, not as tokenmark's failure.

An open loop opens ``--preconnect`` connections (default 128) before its first send and
more only when none is idle, and sends a due request before it reads the next socket.
Takes floor_client.py's arguments and writes the same result file (plus its send lag)::

    python bench/noop_client.py --url URL (--concurrency C | --rate R [--arrival poisson])
        --requests N [--input-tokens 128] [--output-tokens 128] --out result.json
"""

from __future__ import annotations

import argparse
import json
import math
import random
import selectors
import socket
import time
from urllib.parse import urlsplit

perf = time.perf_counter
TOKEN = b'"choices":[{'
END = b"0\r\n\r\n"
KEEP = max(len(TOKEN), len(END)) - 1  # bytes of a read kept to find a pattern split in two


class Conn:
    __slots__ = ("busy", "first", "last", "n", "sock", "t0", "tail")

    def __init__(self, addr: tuple[str, int]) -> None:
        self.sock = socket.create_connection(addr)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.setblocking(False)
        self.busy = False
        self.t0 = self.first = self.last = 0.0
        self.n = 0
        self.tail = b""


def pct(xs: list[float], p: float) -> float | None:
    if not xs:
        return None
    xs = sorted(xs)
    k = (len(xs) - 1) * p
    lo, hi = math.floor(k), math.ceil(k)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def run(a: argparse.Namespace) -> dict[str, object]:
    u = urlsplit(a.url)
    addr = (u.hostname or "127.0.0.1", u.port or 80)
    body = json.dumps({"model": a.model, "prompt": " ".join(["hello"] * a.input_tokens),
                       "max_tokens": a.output_tokens, "ignore_eos": True, "stream": True,
                       "stream_options": {"include_usage": True}}).encode()
    req = (b"POST /v1/completions HTTP/1.1\r\nHost: %s:%d\r\nContent-Type: application/json"
           b"\r\nContent-Length: %d\r\n\r\n%s" % (addr[0].encode(), addr[1], len(body), body))
    sel = selectors.DefaultSelector()
    idle: list[Conn] = []
    rng = random.Random(a.seed)
    ttft: list[float] = []
    itl: list[float] = []
    lat: list[float] = []
    lags: list[float] = []
    tokens = ok = failed = issued = 0
    t_first_send: float | None = None
    t_last_done = 0.0

    def send(due: float) -> None:
        nonlocal issued, t_first_send
        if idle:
            c = idle.pop()
        else:
            c = Conn(addr)
            sel.register(c.sock, selectors.EVENT_READ, c)
        c.busy = True
        c.n = 0
        c.first = 0.0
        c.tail = b""
        c.t0 = perf()
        if t_first_send is None:
            t_first_send = c.t0
        if due:
            lags.append(c.t0 - due)
        c.sock.sendall(req)  # a few hundred bytes: the socket buffer takes them at once
        issued += 1

    conc = a.concurrency
    for _ in range(conc or a.preconnect):  # connected before the clock, as tokenmark does
        c = Conn(addr)
        sel.register(c.sock, selectors.EVENT_READ, c)
        idle.append(c)
    start = perf()
    nxt = start
    if conc:
        for _ in range(min(conc, a.requests)):
            send(0.0)
    done = 0
    while done < a.requests:
        timeout = None
        if not conc and issued < a.requests:
            timeout = max(0.0, nxt - perf())
            if timeout == 0.0:
                send(nxt)
                nxt += rng.expovariate(a.rate) if a.arrival == "poisson" else 1.0 / a.rate
                continue
            if timeout < 0.002:
                timeout = 0.0  # epoll sleeps whole ms: poll the last 2 ms

        for key, _ in sel.select(timeout):
            if not conc and issued < a.requests and perf() >= nxt:  # a due send goes first
                send(nxt)
                nxt += rng.expovariate(a.rate) if a.arrival == "poisson" else 1.0 / a.rate
            c = key.data
            try:
                data = c.sock.recv(262144)
            except BlockingIOError:
                continue
            t = perf()
            if not data:
                sel.unregister(c.sock)
                c.sock.close()
                if c.busy:
                    failed += 1
                    done += 1
                continue
            buf = c.tail + data
            k = buf.count(TOKEN)
            if k:
                if not c.first:
                    c.first = t
                c.last = t
                c.n += k
            if buf.endswith(END):
                c.busy = False
                done += 1
                if c.first:
                    ok += 1
                    tokens += c.n
                    ttft.append(c.first - c.t0)
                    lat.append(t - c.t0)
                    if c.n > 1:
                        itl.append((c.last - c.first) / (c.n - 1))
                    t_last_done = t
                else:
                    failed += 1
                idle.append(c)
                if conc and issued < a.requests:
                    send(0.0)
            else:
                c.tail = buf[-KEEP:]
    dur = t_last_done - (t_first_send or start)

    def ms(v: float | None) -> float | None:
        return None if v is None else v * 1e3

    return {
        "tool": "noop", "version": "bench/noop_client.py",
        "requests_completed": ok, "requests_failed": failed, "duration_s": dur,
        "request_throughput": ok / dur if dur > 0 else None,
        "output_token_throughput": tokens / dur if dur > 0 else None,
        "output_tokens": tokens,
        "ttft_ms": {"mean": ms(sum(ttft) / len(ttft)) if ttft else None,
                    "p50": ms(pct(ttft, 0.5)), "p99": ms(pct(ttft, 0.99))},
        "itl_ms": {"mean": ms(sum(itl) / len(itl)) if itl else None, "p99": ms(pct(itl, 0.99))},
        "tpot_ms": {"mean": ms(sum(itl) / len(itl)) if itl else None},
        "latency_ms": {"mean": ms(sum(lat) / len(lat)) if lat else None},
        "send_lag_ms": {"p50": ms(pct(lags, 0.5)), "p99": ms(pct(lags, 0.99))} if lags
        else None,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--url", default="http://127.0.0.1:8000")
    p.add_argument("--model", default="mock")
    p.add_argument("--concurrency", type=int, default=0)
    p.add_argument("--rate", type=float, default=0.0)
    p.add_argument("--arrival", choices=["poisson", "constant"], default="poisson")
    p.add_argument("--requests", type=int, required=True)
    p.add_argument("--input-tokens", type=int, default=128)
    p.add_argument("--output-tokens", type=int, default=128)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--preconnect", type=int, default=128,
                   help="connections opened before the first send of an open loop")
    p.add_argument("--out", required=True)
    a = p.parse_args()
    if not a.concurrency and not a.rate:
        p.error("need --concurrency or --rate")
    res = run(a)
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1)
    print(json.dumps({k: res[k] for k in ("requests_completed", "output_token_throughput",
                                           "ttft_ms", "send_lag_ms")}))


if __name__ == "__main__":
    main()
