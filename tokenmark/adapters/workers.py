"""One run on every core: the OpenAI HTTP client spread over worker processes.

:class:`WorkerPoolSUT` is a system under test like any other, so the load generator, the
records and the rules do not change: the parent process keeps the schedule, the routing,
the records and the metrics, and hands each query to one of ``workers`` processes
(:mod:`tokenmark.adapters.worker_child`), each running its own
:class:`~tokenmark.adapters.openai_http.OpenAIHttpSUT` and event loop. Reading sockets and
scanning streams, the work that grows with tokens, happens in the workers; the parent
handles one message per request.

Time base. Workers stamp with their own monotonic clock; before the run the parent
measures each worker's clock against the run's clock (:mod:`tokenmark.adapters.clocksync`)
and moves every stamp onto the run's clock as it arrives, so records from all workers
share one time base. On one machine the offset is exactly 0 (one ``CLOCK_MONOTONIC`` per
boot, checked by boot id and by measurement); the measured offset and its uncertainty,
at the start and again at the end (drift), are reported with the run, which is the
design the multi-machine (Ray) runner reuses.

Routing: the parent picks the endpoint (round-robin or least-in-flight over all
workers' requests, exactly as in one process) and the worker with the fewest requests
in flight. A worker that dies fails its requests in flight as ``unanswered``
("worker lost") and gets no more; the run goes on with the others.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import fields, replace
from typing import Any, cast

from tokenmark.adapters import ipc
from tokenmark.adapters.clocksync import ClockSync, boot_id, estimate
from tokenmark.adapters.openai_http import (
    BodyRenderer,
    EndpointStats,
    measure_prompt,
    request_id,
)
from tokenmark.adapters.openai_target import OpenAIConfig, api_key, http_name, probe
from tokenmark.adapters.pool import parse_base_url
from tokenmark.clock import Clock, FakeClock, MonotonicClock
from tokenmark.errors import ConfigError, TargetError
from tokenmark.records import ErrorClass, Query, ResponseDetails
from tokenmark.sut import ResponseHandle

__all__ = ["WorkerPoolSUT"]

_PINGS = 24


class _Link(asyncio.Protocol):
    """The parent's end of one worker's socket."""

    def __init__(self, pool: WorkerPoolSUT, index: int) -> None:
        self.pool = pool
        self.index = index
        self.reader = ipc.FrameReader()
        self.transport: asyncio.Transport | None = None
        self.in_flight = 0
        self.alive = True
        self.sync = ClockSync(0, 0, 0, True)
        self.ready: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.pong: asyncio.Future[tuple[int, int, int]] | None = None
        self.final: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # any loop's transport (uvloop's are not asyncio.Transport subclasses)
        self.transport = cast(asyncio.Transport, transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self.alive = False
        self.pool._lost(self)

    def send(self, data: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    def data_received(self, data: bytes) -> None:
        pool = self.pool
        for kind, payload in self.reader.feed(data):
            if kind == 68:  # "D"
                pool._done(self, payload)
            elif kind == 115:  # "s"
                t3 = pool._now()
                t1, t2 = ipc.PONG.unpack_from(payload, 0)
                if self.pong is not None and not self.pong.done():
                    self.pong.set_result((t1, t2, t3))
            elif kind == 82:  # "R"
                if not self.ready.done():
                    self.ready.set_result(json.loads(bytes(payload)))
            elif kind == 90 and not self.final.done():  # "Z"
                self.final.set_result(json.loads(bytes(payload)))


class WorkerPoolSUT:
    """:class:`OpenAIHttpSUT` in ``workers`` processes, records on the run's clock."""

    def __init__(self, clock: Clock, config: OpenAIConfig, *, workers: int = 2,
                 cpus: Sequence[Sequence[int]] = (), start_timeout_s: float = 60.0) -> None:
        if isinstance(clock, FakeClock):
            raise ConfigError("an HTTP target runs in real time; drop --virtual-time")
        if workers < 1:
            raise ConfigError(f"--workers must be at least 1 (got {workers})")
        self.config = config.validated()
        api_key(config)  # fail now if a named key variable is unset
        self.workers = workers
        self._cpus = [list(c) for c in cpus]
        self._clock = clock
        self._now = clock.now_ns
        self._start_timeout_s = start_timeout_s
        self.labels = [parse_base_url(u).label for u in config.urls]
        self.stats = [EndpointStats(label) for label in self.labels]
        self._in_flight = [0] * len(self.labels)
        self._rr = 0
        self._wrr = 0
        self._least = config.routing == "least-in-flight"
        self._run_id = os.urandom(4).hex()
        self._links: list[_Link] = []
        self._procs: list[subprocess.Popen[bytes]] = []
        self._pending: dict[int, tuple[ResponseHandle, int, _Link, ipc.HandleShape]] = {}
        self._shapes: dict[type, tuple[int, ipc.HandleShape]] = {}
        self._end_sync: list[ClockSync] = []
        self._renderer = BodyRenderer(self.config)
        self._stopping = False
        #: CPU seconds the workers spent from their start to the stop (all together).
        self.worker_cpu_s = 0.0

    # -- the SystemUnderTest contract ------------------------------------------------------
    @property
    def name(self) -> str:
        return http_name(self.config)

    def describe(self) -> dict[str, str]:
        cfg = self.config
        d = {
            "kind": "OpenAI-compatible HTTP",
            "api": cfg.api,
            "stream": str(cfg.stream).lower(),
            "model": cfg.model,
            "served_model": cfg.model,
            "server_software": cfg.served_by or "not said",
            "urls": " ".join(self.labels),
            "routing": cfg.routing,
            "tokenizer": cfg.tokenizer or "none",
            "headers": " ".join(name for name, _ in cfg.headers),
            "workers": str(self.workers),
            "worker_cpu_s": f"{self.worker_cpu_s:.3f}",
            "clock_sync": "; ".join(f"worker {link.index}: {link.sync.describe()}"
                                    for link in self._links),
        }
        if self._end_sync:
            drift = max(abs(e.measured_ns - link.sync.measured_ns)
                        for e, link in zip(self._end_sync, self._links, strict=False))
            d["clock_drift"] = f"offsets moved by at most {drift / 1e3:.1f} us during the run"
        for i, st in enumerate(self.stats):
            d[f"endpoint{i}"] = f"{st.label}: {st.line()}"
        return d

    async def start(self) -> None:
        cfg = self.config
        if cfg.check_models:
            target = await probe(cfg, api_key(cfg))
            cfg = replace(cfg, model=target.model, served_by=cfg.served_by or target.software)
        self.config = cfg
        self._renderer = BodyRenderer(cfg)
        loop = asyncio.get_running_loop()
        child_cfg = replace(cfg, check_models=False).to_json()
        for i in range(self.workers):
            ours, theirs = socket.socketpair()
            proc = subprocess.Popen(
                [sys.executable, "-m", "tokenmark.adapters.worker_child", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),))
            theirs.close()
            self._procs.append(proc)
            link = _Link(self, i)
            await loop.create_connection(lambda link=link: link, sock=ours)  # type: ignore[misc]
            self._links.append(link)
            msg = {"config": child_cfg, "run_id": self._run_id,
                   "cpus": self._cpus[i % len(self._cpus)] if self._cpus else []}
            link.send(ipc.frame(b"C", json.dumps(msg).encode()))
        try:
            async with asyncio.timeout(self._start_timeout_s):
                for link in self._links:
                    info = await link.ready
                    link.sync = await self._measure(link, info.get("boot_id") == boot_id())
        except TimeoutError:
            await self.stop()
            raise TargetError(f"the worker processes did not start within "
                              f"{self._start_timeout_s:g} s; try fewer --workers") from None

    async def _measure(self, link: _Link, same_boot: bool) -> ClockSync:
        same = same_boot and isinstance(self._clock, MonotonicClock)
        exchanges = []
        for _ in range(_PINGS):
            link.pong = asyncio.get_running_loop().create_future()
            link.send(ipc.frame(b"S", ipc.PING.pack(self._now())))
            exchanges.append(await link.pong)
        return estimate(exchanges, same_clock=same)

    async def flush(self) -> None:
        return None

    async def stop(self) -> None:
        if self._stopping:
            return
        self._stopping = True
        live = [link for link in self._links if link.alive]
        try:
            async with asyncio.timeout(10):
                self._end_sync = [await self._measure(link, link.sync.shared)
                                  for link in live]
                for link in live:
                    link.send(ipc.frame(b"X"))
                for link in live:
                    self._merge(await link.final)
        except (TimeoutError, ConnectionError):
            pass
        for link in self._links:
            if link.transport is not None:
                link.transport.close()
        for proc in self._procs:
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def issue(self, query: Query, handle: ResponseHandle) -> None:
        links = [link for link in self._links if link.alive]
        if not links:
            handle.fail(ErrorClass.UNANSWERED, "no worker process left (worker lost)")
            return
        ep = self._route()
        k = self._wrr % len(links)
        self._wrr += 1
        link = links[k]
        for other in links:  # the least busy worker, ties in turn
            if other.in_flight < link.in_flight:
                link = other
        renderer = self._renderer
        if renderer.exact_output and hasattr(handle, "details"):  # a DetailsHandle
            handle.details(ResponseDetails(
                demanded_output_tokens=renderer.output_tokens(query.sample)))
        known = self._shapes.get(type(handle))
        if known is None:  # a new kind of handle: every worker learns its methods
            known = self._shapes[type(handle)] = (len(self._shapes),
                                                  ipc.HandleShape.of(type(handle)))
            for each in self._links:
                each.send(ipc.frame(b"H", known[1].to_json()))
        self._pending[query.seq] = (handle, ep, link, known[1])
        link.in_flight += 1
        self._in_flight[ep] += 1
        st = self.stats[ep]
        if self._in_flight[ep] > st.max_in_flight:
            st.max_in_flight = self._in_flight[ep]
        link.send(ipc.frame(b"I", ipc.ISSUE.pack(query.seq, ep, known[0])
                            + self._renderer.body(query.sample)))

    def request_id(self, seq: int) -> str:
        return request_id(self._run_id, seq)

    @property
    def length_probe(self) -> bool:
        """Whether :meth:`prompt_overhead` may send its probe requests."""
        return self.config.length_probe

    async def prompt_overhead(self, text: str, planned: int) -> int | None:
        """The tokens the server adds to a prompt (``tokenmark.sut.PromptProbe``)."""
        served = await measure_prompt(self.config, text)
        return None if served is None else served - planned

    # -- answers -----------------------------------------------------------------------------
    def _route(self) -> int:
        n = len(self.labels)
        i = self._rr
        self._rr = (i + 1) % n if n > 1 else 0
        if self._least and n > 1:
            best = i
            for k in range(1, n):
                j = (i + k) % n
                if self._in_flight[j] < self._in_flight[best]:
                    best = j
            return best
        return i

    def _take(self, link: _Link, seq: int) -> tuple[ResponseHandle, int,
                                                    ipc.HandleShape] | None:
        entry = self._pending.pop(seq, None)
        if entry is None:
            return None
        handle, ep, _, shape = entry
        link.in_flight -= 1
        self._in_flight[ep] -= 1
        return handle, ep, shape

    def _done(self, link: _Link, payload: memoryview) -> None:
        """A request ended in a worker: its handle calls, replayed on the parent's handle."""
        got = self._take(link, ipc.done_seq(payload))
        if got is not None:
            ipc.replay(payload, got[2], got[0], link.sync.offset_ns)

    def _lost(self, link: _Link) -> None:
        """A worker's socket closed: fail what it had in flight (unless we are stopping)."""
        for seq, (handle, ep, owner, _) in list(self._pending.items()):
            if owner is link:
                self._take(link, seq)
                handle.fail(ErrorClass.UNANSWERED,
                            f"worker process {link.index} exited (worker lost)",
                            endpoint=self.labels[ep])
                self.stats[ep].errors[ErrorClass.UNANSWERED.value] += 1

    def _merge(self, final: dict[str, Any]) -> None:
        """Add a worker's per-endpoint counters (every field; the peak in flight is the
        parent's own, over all workers)."""
        self.worker_cpu_s += float(final.get("cpu_s", 0.0))
        for st, row in zip(self.stats, final.get("endpoints", []), strict=False):
            for f in fields(st):
                value = row.get(f.name)
                if f.name in ("label", "max_in_flight") or value is None:
                    continue
                mine = getattr(st, f.name)
                if isinstance(mine, Counter):
                    mine.update(Counter(value))
                elif isinstance(mine, int | float):
                    setattr(st, f.name, mine + value)
