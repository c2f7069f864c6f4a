"""A worker process of :class:`~tokenmark.adapters.workers.WorkerPoolSUT`.

Started by the parent as ``python -m tokenmark.adapters.worker_child FD`` with one end
of a socket pair as file descriptor ``FD``. It waits for its configuration, builds an
:class:`~tokenmark.adapters.openai_http.OpenAIHttpSUT` on its own event loop, and sends
the request bodies the parent rendered to the endpoints the parent chose. Its handles
have the methods of the parent's handles and log every call (times on its own monotonic
clock); a request's log goes to the parent in one ``D`` message when the request ends,
and the parent replays it on its handle, on the run's time base (:mod:`.ipc`). The API
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
from collections.abc import Callable, Sequence
from dataclasses import fields
from time import perf_counter_ns
from typing import Any, cast

from tokenmark.adapters import eventloop, ipc
from tokenmark.adapters.clocksync import boot_id
from tokenmark.adapters.openai_http import OpenAIHttpSUT
from tokenmark.adapters.openai_target import OpenAIConfig
from tokenmark.clock import MonotonicClock
from tokenmark.records import ErrorClass

__all__ = ["main"]


_MISSING: Any = object()  # an argument the caller left out


class _Relay:
    """The handle of one request in this worker: logs its calls, sends them at the end."""

    __slots__ = ("child", "log")

    def __init__(self, child: _Child, log: ipc.CallLog) -> None:
        self.child = child
        self.log = log


def relay_class(shape: ipc.HandleShape) -> type[_Relay]:
    """A handle class with exactly the methods of the parent's (``hasattr`` and protocol
    checks answer as they would in the parent), each logging its call; ``complete`` and
    ``fail`` also send the log."""

    def method(index: int, name: str) -> Callable[..., None]:
        if name in ipc.TERMINAL:
            def end(self: _Relay, *args: Any, **kwargs: Any) -> None:
                self.log.call(index, args, kwargs, perf_counter_ns)
                self.child.send(self.log.encode())
            end.__name__ = name
            return end

        def log(self: _Relay, *args: Any, **kwargs: Any) -> None:
            self.log.call(index, args, kwargs, perf_counter_ns)
        log.__name__ = name
        if shape.time_at[index] != 1:
            return log

        def packed(self: _Relay, n: Any = _MISSING, t_ns: Any = None, *rest: Any,
                   **kwargs: Any) -> None:
            """``name(n, t_ns)``, one per streamed read: straight into the arrays."""
            if type(n) is int and type(t_ns) is int and not rest and not kwargs:
                lg = self.log
                times = lg.times
                try:
                    times.append(t_ns)  # first: if it does not fit, nothing was added
                    try:
                        lg.args.append(n)
                    except OverflowError:
                        times.pop()
                        raise
                except OverflowError:
                    pass
                else:
                    lg.methods.append(index)
                    return
            args: tuple[Any, ...] = () if n is _MISSING else (n,)
            if n is _MISSING:
                if t_ns is not None:
                    kwargs["t_ns"] = t_ns
            elif t_ns is not None or rest:
                args += (t_ns, *rest)
            self.log.call(index, args, kwargs, perf_counter_ns)
        packed.__name__ = name
        return packed

    ns: dict[str, Any] = {"__slots__": ()}
    for i, name in enumerate(shape.methods):
        ns[name] = method(i, name)
    return type("Relay", (_Relay,), ns)


class _Child(asyncio.Protocol):
    def __init__(self, done: asyncio.Future[None]) -> None:
        self.done = done
        self.reader = ipc.FrameReader()
        self.transport: asyncio.Transport | None = None
        self.sut: OpenAIHttpSUT | None = None
        self.cpu0 = 0.0
        self.shapes: list[tuple[ipc.HandleShape, type[_Relay]]] = []

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
                seq, ep, kind_of_handle = ipc.ISSUE.unpack_from(payload, 0)
                sut = self.sut
                assert sut is not None
                shape, cls = self.shapes[kind_of_handle]
                relay: Any = cls(self, ipc.CallLog(shape, seq))  # the parent's methods
                try:
                    sut.send(ep, seq, bytes(payload[ipc.ISSUE.size:]), relay)
                except Exception as e:  # a bug: report it as the request's failure
                    relay.fail(ErrorClass.SUT_ERROR, f"{type(e).__name__}: {e}")
            elif kind == 72:  # "H": the shape of a kind of handle, numbered in order
                shape = ipc.HandleShape.from_json(bytes(payload))
                self.shapes.append((shape, relay_class(shape)))
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
        stats: list[dict[str, Any]] = []
        if self.sut is not None:
            await self.sut.stop()
            # every field, whatever they are (shallow: asdict would mangle a Counter)
            stats = [{f.name: getattr(st, f.name) for f in fields(st)} for st in self.sut.stats]
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
    eventloop.run(_serve(int(args[0])))


if __name__ == "__main__":
    main()
