"""What a request costs to carry from a worker process to the parent (``--workers N``).

A worker logs each call its request makes on its handle (``sent``, one ``token`` per
socket read, ``details``, ``complete``: what the HTTP client calls), encodes the log as
one ``D`` message (:mod:`tokenmark.adapters.ipc`), and the parent replays it on the
run's handle. This prints, per request of 16, 256 and 1024 streamed reads: the worker's
CPU to log and encode, the parent's CPU to decode and replay onto the load generator's
real handle, and the message size; CPU time (``time.process_time``), median of ``--repeats`` rounds
of ``--requests`` requests, with the machine's load average (a shared machine's figures
are noisy; compare ratios measured in one invocation).

Run: ``.venv/bin/python bench/worker_ipc.py``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from tokenmark.adapters import ipc
from tokenmark.adapters.worker_child import relay_class
from tokenmark.loadgen.runner import _Pending
from tokenmark.records import RequestRecord, ResponseDetails, TokenSource


class _Run:
    """The part of a runner a handle reports to (as in a real run)."""

    t0 = 0

    def _finish(self, p: object, ids: object, text: object) -> None:
        pass


class _Socket:
    """Where a worker's relay sends its message (kept for the parent half)."""

    last = b""

    def send(self, data: bytes) -> None:
        self.last = data


def _one_round(reads: int, requests: int) -> tuple[float, float, int]:
    shape = ipc.HandleShape.of(_Pending)
    relay = relay_class(shape)
    sock = _Socket()
    msgs = []
    c0 = time.process_time()
    for seq in range(requests):  # the worker: the SUT's calls on its relay handle
        h = relay(sock, ipc.CallLog(shape, seq))
        h.sent(1000)
        for k in range(reads):
            h.token(1, 2000 + k)
        h.details(ResponseDetails(finish_reason="length", stream_tokens=reads,
                                  token_basis="events"))
        h.complete(reads, TokenSource.USAGE, t_ns=9000, input_tokens=8, alt_output_tokens=-1,
                   cached_input_tokens=-1, text=None, endpoint="http://h:1/v1")
        msgs.append(sock.last)
    c1 = time.process_time()
    run = _Run()
    for seq, m in enumerate(msgs):  # the parent: decode and replay on the real handle
        p = _Pending(run, RequestRecord(seq, seq, 0, 0))  # type: ignore[arg-type]
        ipc.replay(memoryview(m)[5:], shape, p, 0)
    c2 = time.process_time()
    return (c1 - c0) / requests * 1e6, (c2 - c1) / requests * 1e6, len(msgs[0])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    print(f"load average: {os.getloadavg()[0]:.1f} (2-core machines: figures are noisy)")
    for reads in (16, 256, 1024):
        rounds = [_one_round(reads, a.requests) for _ in range(a.repeats)]
        w = statistics.median(r[0] for r in rounds)
        p = statistics.median(r[1] for r in rounds)
        print(f"{reads:5d} reads/request: worker {w:7.1f} us, parent {p:7.1f} us "
              f"({p / reads * 1e3:.0f} ns a read), message {rounds[0][2]:,} bytes")


if __name__ == "__main__":
    main()
