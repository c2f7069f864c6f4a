"""Which JSON parser reads a streamed event fastest: the measurement behind ``adapters/sse``.

Every event of an OpenAI-style stream is parsed in full (DESIGN.md: truth before speed),
so the parser's cost per event is the client's floor per token. This script times, per
event and per server shape, each candidate doing the *whole* job the stream reader does
with one event's payload: parse it, then read every choice's ``text`` /
``delta.content`` / ``delta.reasoning_content`` / ``delta.reasoning``,
``finish_reason``, ``logprobs`` and ``token_ids`` counts, ``usage`` and ``error``:

- ``msgspec-typed``: ``msgspec.json.Decoder`` of a ``Struct`` of the chunk's shape (unknown
  keys skipped in C, no dict built for them);
- ``msgspec-dict``: ``msgspec.json.decode`` to dicts, then the same dict walk as the others;
- ``orjson``: ``orjson.loads`` and the dict walk (skipped when orjson is not installed:
  it is not a tokenmark dependency);
- ``json``: the standard library's ``json.loads`` and the dict walk.

Payloads are the event shapes of vLLM (completions and chat, ``"usage": null`` when
usage is asked), llama.cpp's server (keys sorted, ``timings`` in the last event) and an
OpenAI chat chunk with ``logprobs`` (one entry of 5 alternatives per token). Each figure
is the median of ``--repeats`` timings of ``--n`` parses (ns per event), CPU time of this
process only (``time.process_time_ns``), with the machine's background load beside it.

Run: ``.venv/bin/python bench/sse_parsers.py [--n 200000] [--repeats 7]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import msgspec

from tokenmark.adapters.sse import Chunk, StreamReader, decode_chunk

EVENTS: dict[str, bytes] = {
    "vllm-completions": (
        b'{"id":"cmpl-4f5c1e0a9b7d4c3e8a2f6b1d0c9e8f7a","object":"text_completion",'
        b'"created":1718000000,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":'
        b'[{"index":0,"text":" else","logprobs":null,"finish_reason":null,'
        b'"stop_reason":null}],"usage":null}'),
    "vllm-chat": (
        b'{"id":"chatcmpl-4f5c1e0a9b7d4c3e8a2f6b1d0c9e8f7a","object":"chat.completion.chunk",'
        b'"created":1718000000,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":'
        b'[{"index":0,"delta":{"content":" return"},"logprobs":null,"finish_reason":null}],'
        b'"usage":null}'),
    "llamacpp-chat": (
        b'{"choices":[{"finish_reason":null,"index":0,"delta":{"content":" each"}}],'
        b'"created":1718000000,"id":"chatcmpl-Yx2b7WcHn3Kq9PzL0aRtUvEs","model":"gpt-3.5-turbo",'
        b'"system_fingerprint":"b5000-1a2b3c4d","object":"chat.completion.chunk"}'),
    "openai-chat-logprobs": json.dumps({
        "id": "chatcmpl-AbC123", "object": "chat.completion.chunk", "created": 1718000000,
        "model": "gpt-4o-mini-2024-07-18", "system_fingerprint": "fp_0ba0d124f1",
        "choices": [{"index": 0, "delta": {"content": " end"}, "logprobs": {"content": [
            {"token": " end", "logprob": -0.01, "bytes": [32, 101, 110, 100],
             "top_logprobs": [{"token": t, "logprob": -float(i), "bytes": list(t.encode())}
                              for i, t in enumerate((" end", " the", " a", " and", " to"))]}],
            "refusal": None}, "finish_reason": None}]},
        separators=(",", ":")).encode(),
}


def walk(obj: Any) -> int:
    """What the reader takes from a parsed event, from plain dicts and lists."""
    if not isinstance(obj, dict):
        return -1
    n = 0
    choices = obj.get("choices")
    if isinstance(choices, list):
        for ch in choices:
            if not isinstance(ch, dict):
                continue
            d = ch.get("delta")
            src = d if isinstance(d, dict) else ch
            for key in ("text", "content", "reasoning_content", "reasoning"):
                v = src.get(key)
                if isinstance(v, str) and v:
                    n += 1
            n += ch.get("finish_reason") is not None
            lp = ch.get("logprobs")
            if isinstance(lp, dict):
                c = lp.get("content") or lp.get("tokens")
                if isinstance(c, list):
                    n += len(c)
            ids = ch.get("token_ids")
            if isinstance(ids, list):
                n += len(ids)
    return n + (obj.get("usage") is not None) + (obj.get("error") is not None)


def walk_typed(c: Chunk) -> int:
    """The same reads from the typed decoder's structs."""
    n = 0
    if c.choices:
        for ch in c.choices:
            d = ch.delta
            if d is None:
                n += bool(ch.text)
            else:
                n += bool(d.content) + bool(d.reasoning_content or d.reasoning)
            n += ch.finish_reason is not None
            lp = ch.logprobs
            if lp is not None and lp.content is not None:
                n += len(lp.content)
            if ch.token_ids is not None:
                n += len(ch.token_ids)
    return n + (c.usage is not None) + (c.error is not None)


def candidates() -> dict[str, Callable[[bytes], Any]]:
    out: dict[str, Callable[[bytes], Any]] = {
        "msgspec-typed": lambda b: walk_typed(decode_chunk(b))}
    dec = msgspec.json.decode
    out["msgspec-dict"] = lambda b: walk(dec(b))
    try:
        import orjson
    except ImportError:
        pass
    else:
        loads = orjson.loads
        out["orjson"] = lambda b: walk(loads(b))
    jl = json.loads
    out["json"] = lambda b: walk(jl(b))
    return out


def machine_busy_s() -> float:
    with open("/proc/stat") as f:
        parts = [float(x) for x in f.readline().split()[1:]]
    return (sum(parts) - parts[3] - parts[4]) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--repeats", type=int, default=7)
    a = ap.parse_args()
    cands = candidates()
    print(f"ns per event, median of {a.repeats} x {a.n:,} parses (process CPU time)")
    print(f"{'event shape':24s}" + "".join(f"{name:>15s}" for name in cands))
    b0, w0, c0 = machine_busy_s(), time.monotonic(), time.process_time()
    for shape, payload in EVENTS.items():
        row = []
        for fn in cands.values():
            fn(payload)  # warm
            times = []
            for _ in range(a.repeats):
                t0 = time.process_time_ns()
                for _ in range(a.n):
                    fn(payload)
                times.append((time.process_time_ns() - t0) / a.n)
            row.append(statistics.median(times))
        print(f"{shape:24s}" + "".join(f"{v:15.0f}" for v in row))
    print("\nthe whole reader (framing, parsing, counting), ns per event, vllm-chat events:")
    ev = b"data: " + EVENTS["vllm-chat"] + b"\n\n"
    for per_read in (1, 8, 64):
        block = ev * per_read
        reads = max(1, a.n // per_read)
        times = []
        for _ in range(a.repeats):
            r = StreamReader()
            t0 = time.process_time_ns()
            for _ in range(reads):
                r.feed(block)
            times.append((time.process_time_ns() - t0) / (reads * per_read))
            assert r.events == reads * per_read
        print(f"   {per_read:3d} events per read: {statistics.median(times):6.0f}")
    big = b'data: {"choices":[{"index":0,"text":"' + b"y" * (32 << 20) + b'"}]}\n\n'
    r = StreamReader(max_event_bytes=64 << 20)
    t0 = time.process_time_ns()
    for i in range(0, len(big), 65536):
        r.feed(big[i:i + 65536])
    print(f"one 32 MiB event in 64 KiB reads: {(time.process_time_ns() - t0) / 1e6:.0f} ms "
          f"(events read: {r.events})")
    wall = time.monotonic() - w0
    other = (machine_busy_s() - b0) - (time.process_time() - c0)
    print(f"background load: {max(0.0, other / wall):.2f} cores of {os.cpu_count()} "
          f"(loadavg {os.getloadavg()[0]:.2f})")


if __name__ == "__main__":
    main()
