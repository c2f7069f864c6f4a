"""The client's own cost per event and per request, without a network or a busy machine.

Replays byte streams shaped like ``../shared/bench-peers/mock_server.py``'s (one SSE
event per token, chunked, a usage event and ``[DONE]`` at the end) through the path a
``tokenmark run --url`` request takes inside the process: the runner issues the query
(sample, record, body, request head) to the OpenAI HTTP client, the connection takes
each "read", strips the chunked framing, the stream reader parses every event, the
runner's handle records the tokens, and the finished record goes to the same consumers a
run has (records file, metrics accumulator, per-endpoint breakdown, length tally). Only
the socket is missing: reads are handed to the connection the way the event loop hands
them over, so event-loop and kernel costs are not in these figures (``bench/cli_peers.py``
measures the whole thing).

Two shapes, as the peers harness has them:

- ``per-token``: the head, then each token event in its own read, then the tail (a
  server streaming at 5-10 ms per token: every read wakes the client);
- ``burst``: the whole response in one read (a server answering at once, 256 in flight).

Prints CPU microseconds per request and per event (the process's CPU time, best of
``--repeat``), with the machine's load. Under ``valgrind --tool=callgrind`` the
instruction counts are the load-independent figure: run it twice with different
``--requests`` and divide the difference by the difference in requests::

    PYTHONPATH=. python bench/client_path.py [--shape per-token|burst] [--requests N]
        [--tokenizer DIR] [--repeat 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import tempfile
from pathlib import Path
from typing import Any

from tokenmark.adapters.openai_http import OpenAIHttpSUT
from tokenmark.adapters.openai_target import OpenAIConfig
from tokenmark.clock import MonotonicClock
from tokenmark.dataset import LengthDistribution, SyntheticDataset
from tokenmark.loadgen.runner import Runner
from tokenmark.metrics.endpoints import EndpointBreakdown
from tokenmark.metrics.lengths import LengthTally
from tokenmark.metrics.summary import Accumulator
from tokenmark.mlperf.scenarios import build_schedule
from tokenmark.mlperf.settings import Scenario, Seeds, TestSettings, effective
from tokenmark.output.records import JsonlRecordSink
from tokenmark.sources.hf_tokenizer import load_hf_tokenizer

#: 128 words of the bench tokenizer, each one token (mock_server.py's WORDS[:128]).
WORDS = (
    "the of and to in is was he for it with as his on be at by had are but from or have "
    "an they which one you were her all she there would their we him been has when who "
    "will more no if out so said what up its about into than them can only other new some "
    "could time these two may then do first any my now such like our over man me even most "
    "made after also did many before must through back years where much your way well down "
    "should because each just those people how too little state good very make world"
).split()

HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\n"
        b"Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n")


def _chunk(ev: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(ev), ev)


def response_reads(rid: int, tokens: int, shape: str) -> list[bytes]:
    """The reads of one streamed completion of ``tokens`` tokens, as the mock sends it."""
    ident = f'"id":"cmpl-{rid:016x}","object":"text_completion","created":1700000000'
    head = ('{' + ident + ',"model":"mock","choices":[{"index":0,"text":"').encode()
    events = []
    for i in range(tokens):
        fin = b'"length"' if i == tokens - 1 else b"null"
        word = json.dumps(" " + WORDS[i % len(WORDS)])[1:-1].encode()
        events.append(_chunk(b"data: " + head + word + b'","logprobs":null,"finish_reason":'
                             + fin + b"}]}\n\n"))
    usage = ('data: {' + ident + ',"model":"mock","choices":[],"usage":{"prompt_tokens":128,'
             f'"completion_tokens":{tokens},"total_tokens":{128 + tokens}}}}}\n\n')
    tail = _chunk(usage.encode()) + _chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n"
    if shape == "burst":
        return [HEAD + b"".join(events) + tail]
    return [HEAD, *events[:-1], events[-1] + tail]


class _Transport:
    """Stands in for the socket: writes go nowhere."""

    def write(self, data: bytes) -> None:
        pass

    def close(self) -> None:
        pass

    def abort(self) -> None:
        pass

    def is_closing(self) -> bool:
        return False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default


def cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


async def replay(a: argparse.Namespace, tmp: Path) -> tuple[float, int, int]:
    """(CPU seconds, requests, events) of one replay."""
    tok = load_hf_tokenizer(a.tokenizer) if a.tokenizer else None
    ds = SyntheticDataset(64, LengthDistribution.parse("128"),
                          LengthDistribution.parse(str(a.tokens)), tokenizer=tok)
    settings = TestSettings(round="bench", benchmark="bench", scenario=Scenario.CLOSED_LOOP,
                            seeds=Seeds(1, 2, 3), concurrency=1, min_query_count=a.requests,
                            max_query_count=a.requests, min_duration_ms=0,
                            performance_sample_count=len(ds))
    eff = effective(settings, len(ds))
    schedule = build_schedule(eff, len(ds))
    for i in range(len(ds)):
        ds.sample(i)  # prompts are built before the clock starts (as a run's prebuild)
    cfg = OpenAIConfig(urls=("http://127.0.0.1:9",), model="mock", max_tokens=a.tokens,
                       ignore_eos=True, tokenizer=a.tokenizer or "", check_models=False,
                       length_probe=False, spare_connections=0)
    sut = OpenAIHttpSUT(MonotonicClock(), cfg)
    ep = sut.endpoints[0]
    conn = ep.reserve()
    conn.connection_made(_Transport())  # type: ignore[arg-type]
    ep.release(conn)
    sink = JsonlRecordSink(tmp / "records.jsonl")
    acc, eps, lengths = Accumulator(), EndpointBreakdown(), LengthTally()
    runner = Runner(schedule, ds, sut, MonotonicClock(), sinks=[sink],
                    consumers=[acc.add, eps.add, lengths.add])
    reads = [response_reads(i, a.tokens, a.shape) for i in range(16)]
    events = 0
    c0 = cpu_s()
    for i in range(a.requests):
        runner._issue(i, int(schedule.closed_sample(i)), 0, runner.clock.now_ns())
        ex = conn.exchange
        assert ex is not None, "the request was not sent"
        for data in reads[i % 16]:
            conn.data_received(data)
        events += a.tokens
    sink.flush()
    c1 = cpu_s()
    sink.close()
    assert runner.stats.completed == a.requests, runner.stats
    return c1 - c0, a.requests, events


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", choices=("per-token", "burst"), default="per-token")
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--tokenizer", default="", help="count output with this tokenizer "
                    "(the harness passes its own)")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    best = None
    with tempfile.TemporaryDirectory() as d:
        for _ in range(a.repeat):
            cpu, n, ev = asyncio.run(replay(a, Path(d)))
            if best is None or cpu < best[0]:
                best = (cpu, n, ev)
    assert best is not None
    cpu, n, ev = best
    load = os.getloadavg()[0]
    print(f"{a.shape}: {cpu / n * 1e6:,.1f} us CPU per request, {cpu / ev * 1e6:,.2f} us per "
          f"event ({n} requests of {a.tokens} tokens, best of {a.repeat}; load {load:.1f})")


if __name__ == "__main__":
    main()
