"""A worker process of :class:`~tokenmark.adapters.workers.WorkerPoolSUT`.

Started by the parent as ``python -m tokenmark.adapters.worker_child FD`` with one end
of a socket pair as file descriptor ``FD``. It waits for its configuration, builds an
:class:`~tokenmark.adapters.openai_http.OpenAIHttpSUT` on its own event loop, and sends
the request bodies the parent rendered to the endpoints the parent chose. Its handles
keep each request's token times (its own monotonic clock) and send them in one ``D``
message when the request ends; the parent moves them onto the run's time base. The API
key is read from the environment the worker inherited, never sent over the socket.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import signal
import socket
import sys
from array import array
from collections.abc import Sequence
from time import perf_counter_ns
from typing import cast

from tokenmark.adapters import ipc
from tokenmark.adapters.clocksync import boot_id
from tokenmark.adapters.openai_http import OpenAIHttpSUT
from tokenmark.adapters.openai_target import OpenAIConfig
from tokenmark.clock import MonotonicClock
from tokenmark.records import ErrorClass, ResponseDetails, TokenSource

__all__ = ["main"]


class _Relay:
    """The handle of one request in this worker: collects, then reports at the end."""

    __slots__ = ("child", "counts", "reasoning_tokens", "sent_ns", "seq", "times")

    def __init__(self, child: _Child, seq: int) -> None:
        self.child = child
        self.seq = seq
        self.sent_ns = -1
        self.times: array[int] = array("q")
        self.counts: array[int] = array("i")
        self.reasoning_tokens = -1

    def sent(self, t_ns: int | None = None) -> None:
        self.sent_ns = perf_counter_ns() if t_ns is None else t_ns

    def token(self, n: int = 1, t_ns: int | None = None) -> None:
        self.times.append(perf_counter_ns() if t_ns is None else t_ns)
        self.counts.append(n)

    def reasoning(self, n: int = 1, t_ns: int | None = None) -> None:
        """Reasoning chunks travel as negative counts; the parent takes them apart."""
        self.times.append(perf_counter_ns() if t_ns is None else t_ns)
        self.counts.append(-n)

    def reasoning_usage(self, tokens: int) -> None:
        self.reasoning_tokens = tokens

    def details(self, d: ResponseDetails) -> None:
        """Sent at once, so it reaches the parent before the request's D or F."""
        self.child.send(ipc.details_message(self.seq, d))

    def complete(
        self,
        output_tokens: int | None = None,
        source: TokenSource = TokenSource.SUT,
        *,
        t_ns: int | None = None,
        input_tokens: int | None = None,
        alt_output_tokens: int = -1,
        cached_input_tokens: int = -1,
        token_ids: Sequence[int] | None = None,
        text: str | None = None,
        endpoint: str = "",
    ) -> None:
        t = perf_counter_ns() if t_ns is None else t_ns
        self.child.send(ipc.done_message(self.seq, self.sent_ns, t, output_tokens, source,
                                         input_tokens, alt_output_tokens,
                                         cached_input_tokens, self.reasoning_tokens,
                                         self.times, self.counts, text))

    def fail(self, error: ErrorClass, detail: str = "", *, t_ns: int | None = None,
             endpoint: str = "") -> None:
        t = perf_counter_ns() if t_ns is None else t_ns
        self.child.send(ipc.frame(b"F", ipc.FAIL.pack(
            self.seq, self.sent_ns, t, ipc.ERRORS.index(error)) + detail.encode()))


class _Child(asyncio.Protocol):
    def __init__(self, done: asyncio.Future[None]) -> None:
        self.done = done
        self.reader = ipc.FrameReader()
        self.transport: asyncio.Transport | None = None
        self.sut: OpenAIHttpSUT | None = None
        self.cpu0 = 0.0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # any loop's transport (uvloop's are not asyncio.Transport subclasses)
        self.transport = cast(asyncio.Transport, transport)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_result(None)  # the parent is gone: so are we

    def send(self, data: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    def data_received(self, data: bytes) -> None:
        for kind, payload in self.reader.feed(data):
            if kind == 73:  # "I"
                seq, ep = ipc.ISSUE.unpack_from(payload, 0)
                sut = self.sut
                assert sut is not None
                relay = _Relay(self, seq)
                try:
                    sut.send(ep, seq, bytes(payload[ipc.ISSUE.size:]), relay)
                except Exception as e:  # a bug: report it as the request's failure
                    relay.fail(ErrorClass.SUT_ERROR, f"{type(e).__name__}: {e}")
            elif kind == 83:  # "S": clock ping
                (t1,) = ipc.PING.unpack_from(payload, 0)
                self.send(ipc.frame(b"s", ipc.PONG.pack(t1, perf_counter_ns())))
            elif kind == 67:  # "C": configuration
                self.configure(json.loads(bytes(payload)))
            elif kind == 88:  # "X": stop
                asyncio.ensure_future(self.stop())

    def configure(self, msg: dict[str, object]) -> None:
        cpus = msg.get("cpus")
        if isinstance(cpus, list) and cpus:
            os.sched_setaffinity(0, {int(c) for c in cpus})
        cfg = OpenAIConfig.from_json(msg["config"])  # type: ignore[arg-type]
        self.sut = OpenAIHttpSUT(MonotonicClock(), cfg, run_id=str(msg["run_id"]))
        self.cpu0 = _cpu_s()
        ready = {"pid": os.getpid(), "boot_id": boot_id(), "clock": "perf_counter_ns"}
        self.send(ipc.frame(b"R", json.dumps(ready).encode()))

    async def stop(self) -> None:
        stats = []
        if self.sut is not None:
            await self.sut.stop()
            for st in self.sut.stats:
                stats.append({"requests": st.requests, "ok": st.ok, "errors": st.errors,
                              "output_tokens": st.output_tokens,
                              "cached_prompt_tokens": st.cached_prompt_tokens,
                              "max_in_flight": st.max_in_flight,
                              "connections": st.connections,
                              "connect_waits": st.connect_waits})
        final = {"endpoints": stats, "cpu_s": _cpu_s() - self.cpu0}
        self.send(ipc.frame(b"Z", json.dumps(final).encode()))
        if self.transport is not None:
            self.transport.close()


def _cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


async def _serve(fd: int) -> None:
    loop = asyncio.get_running_loop()
    sock = socket.socket(fileno=fd)
    done: asyncio.Future[None] = loop.create_future()
    await loop.create_connection(lambda: _Child(done), sock=sock)
    await done


def main(argv: Sequence[str] | None = None) -> None:
    # Ctrl-C in a terminal reaches the whole process group; the parent decides what it
    # means (the run stops, records are kept) and the worker ends when its socket closes.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    args = list(sys.argv[1:] if argv is None else argv)
    asyncio.run(_serve(int(args[0])))


if __name__ == "__main__":
    main()
