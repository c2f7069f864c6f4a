"""Load generation on Ray: the one module that imports ``ray`` (the ``ray`` extra).

:class:`RayDriver` is a :class:`~tokenmark.loadgen.remote.RunDriver`. It shards the
precomputed schedule round-robin (sample ``i`` to worker ``i mod W``, so each worker
keeps the schedule's own send times at ``1/W`` of the rate) across ``W`` Ray actors,
each running the same :class:`~tokenmark.loadgen.runner.Runner` against its own system
under test, built on the actor from the run's SUT factory. Records stream back and
reach the run's sinks and metrics as if one runner had made them, so metrics, logs and
verdicts are those of a single-process run. The driver keeps one long poll in flight per
worker; a worker answers once it holds ``_BATCH`` records, its run is over, or
``_POLL_S`` (100 ms) passed, so a finished record waits at most that long and the last
ones come without waiting. The per-record work stays on the workers, done as each record
finishes (so the record dies young): moved onto the driver's time base and numbering,
encoded as its ``records.jsonl`` line (the file's own encoder, so the lines are those a
single process writes; shipped as bytes in a uint8 array, which Ray passes without a copy
and the driver writes as they are) and packed into columns
(:mod:`tokenmark.metrics.columns`) that the metrics take in a few array operations.
Consumers without ``add_columns`` (watchers, stop conditions) also get the records
themselves, one by one. ``results.json`` states the CPU each worker and the driver spent
(``cpu_s``, ``driver_cpu_s``) and when the last records were merged (``last_merge_ns``).

Time base. Each actor stamps with its own monotonic clock. Before the run the driver
measures every actor's offset the NTP way over Ray calls
(:func:`tokenmark.adapters.clocksync.estimate`, the smallest of 24 round trips), starts
each actor at the same instant of the driver's clock translated onto the actor's, and
each worker moves every stamp onto the driver's clock before it ships (``t - offset``).
It measures again at the end (drift). Offsets, their uncertainty and the drift are stated
in ``results.json`` under ``distributed``.

A worker lost mid-run (its process or node died) makes the run INVALID with the reason;
every record already received is kept, the other workers are stopped, and what they
had in flight is recorded as unanswered.

Bad input fails before any load is sent: an unreachable address, a cluster with fewer
CPUs than the workers ask, workers that cannot start the system under test or that see
different models.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from tokenmark.adapters.clocksync import ClockSync, Exchange, boot_id, estimate
from tokenmark.clock import Clock, MonotonicClock, TimerHandle
from tokenmark.dataset import Dataset
from tokenmark.errors import ConfigError, TargetError
from tokenmark.loadgen.remote import SutFactory
from tokenmark.loadgen.runner import RecordConsumer, Runner, RunnerStats, RunOutcome
from tokenmark.metrics.columns import ColumnPacker, RecordColumns
from tokenmark.mlperf.scenarios import Schedule, ScheduleKind
from tokenmark.mlperf.settings import EffectiveSettings
from tokenmark.output.records import encode_record
from tokenmark.records import RecordSink, RequestRecord

try:
    import ray
    from ray.exceptions import RayActorError, RayError
except ImportError:  # pragma: no cover - exercised only without the extra
    ray = None  # type: ignore[assignment]

__all__ = ["OffsetClock", "RayDriver", "RayOptions"]

_PINGS = 24
_POLL_S = 0.1  # the longest a finished record waits on its worker
_BATCH = 32768  # records a worker ships without waiting
_START_LEAD_NS = 300_000_000  # time from the start command to the common t0


@dataclass(frozen=True)
class RayOptions:
    workers: int = 2
    address: str | None = None  # None: $RAY_ADDRESS, else a local instance
    cpus_per_worker: float = 1.0
    #: Added to each worker's clock (tests prove the offset correction with these).
    clock_offsets_ns: tuple[int, ...] = ()
    connect_timeout_s: float = 5.0


class OffsetClock:
    """A clock ``offset_ns`` ahead of ``base``: how another machine's clock looks."""

    __slots__ = ("_base", "_off")

    def __init__(self, base: Clock, offset_ns: int) -> None:
        self._base = base
        self._off = offset_ns

    def now_ns(self) -> int:
        return self._base.now_ns() + self._off

    async def sleep_until(self, t_ns: int) -> None:
        await self._base.sleep_until(t_ns - self._off)

    def call_at(self, t_ns: int, callback: Any) -> TimerHandle:
        return self._base.call_at(t_ns - self._off, callback)


@dataclass(frozen=True)
class _Batch:
    """What a worker ships per poll."""

    lines: np.ndarray  # the records' lines of records.jsonl, joined, UTF-8 (uint8: no copy)
    columns: RecordColumns  # what the metrics consumers need of them
    records: list[RequestRecord] | None  # only when a consumer or sink needs the objects


class _ShardWorker:
    """One Ray actor: a runner and its system under test on one client machine."""

    def __init__(self, index: int, offset_ns: int) -> None:
        self.index = index
        self.clock: Clock = (OffsetClock(MonotonicClock(), offset_ns) if offset_ns
                             else MonotonicClock())
        # what finished since the last poll, already moved, encoded and packed
        self.lines: list[str] = []
        self.packer = ColumnPacker()
        self.records: list[RequestRecord] = []
        self.positions: list[int] = []
        self.t0_local = 0
        self.full = False
        self.runner: Runner | None = None
        self._loading: Runner | None = None  # made and loaded by load(), run by run()
        self.system: Any = None
        self.dataset: Dataset | None = None
        self.done = False
        self.started = False
        self.cpu0 = 0.0
        self.wake = asyncio.Event()  # a batch is ready or the run is over

    def hello(self) -> dict[str, Any]:
        node = ray.util.get_node_ip_address()  # type: ignore[no-untyped-call]
        return {"node": node, "node_id": ray.get_runtime_context().get_node_id(),
                "host": socket.gethostname(),
                "pid": os.getpid(), "boot_id": boot_id()}

    def now(self) -> int:
        return self.clock.now_ns()

    async def prepare(self, factory: SutFactory, dataset: Dataset) -> dict[str, Any]:
        self.dataset = dataset
        self.system = factory(self.clock)
        await self.system.start()
        return {"name": self.system.name, "describe": self.system.describe()}

    def _runner(self, shard: Schedule, max_concurrency: int, drain_timeout_ns: int) -> Runner:
        assert self.dataset is not None
        return Runner(shard, self.dataset, self.system, self.clock, consumers=[self._keep],
                      max_concurrency=max_concurrency, drain_timeout_ns=drain_timeout_ns)

    async def load(self, shard: Schedule, max_concurrency: int, drain_timeout_ns: int) -> None:
        """LoadGen's ``LoadSamplesToRam`` for this worker's shard (its prompts built),
        before the driver picks the common start time. Async, so that the runner is made
        on the actor's event-loop thread, whose send gate the HTTP client reads."""
        self._loading = self._runner(shard, max_concurrency, drain_timeout_ns)
        self._loading.load()

    async def run(self, shard: Schedule, t0_local: int, max_concurrency: int,
                  drain_timeout_ns: int, positions: np.ndarray,
                  full: bool) -> dict[str, Any]:
        self.positions = positions.tolist()
        self.t0_local = t0_local
        self.full = full
        runner, self._loading = self._loading, None
        if runner is None:
            runner = self._runner(shard, max_concurrency, drain_timeout_ns)
        self.runner = runner
        await self.clock.sleep_until(t0_local)
        self.cpu0 = time.process_time()
        self.started = True  # run() sets runner.t0 before its first await
        try:
            out = await runner.run()
        finally:
            self.done = True
            self.wake.set()
        return {"t0": out.t0_ns, "issued": out.issued, "interrupted": out.interrupted,
                "reason": out.interrupt_reason}

    def _keep(self, rec: RequestRecord) -> None:
        """A finished record: onto the driver's time base and the schedule's numbering,
        encoded for the records file and packed for the metrics at once, so the record
        dies young and the per-record work stays here, on the worker."""
        assert self.runner is not None  # t0_local: the driver's t0 on this clock
        _move(rec, self.runner.t0 - self.t0_local, self.positions[rec.seq])
        lines = self.lines
        lines.append(encode_record(rec))
        self.packer.add(rec)
        if self.full:
            self.records.append(rec)
        if len(lines) >= _BATCH:
            self.wake.set()

    async def poll(self, wait_s: float) -> tuple[_Batch | None, bool]:
        """The records finished since the last poll, once there are _BATCH of them, the
        run is over, or ``wait_s`` passed; and whether the run is over (then the batch
        holds every record left)."""
        if len(self.lines) < _BATCH and not self.done:
            self.wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), wait_s)
        done = self.done
        if not self.lines:
            return None, done
        lines = np.frombuffer("".join(self.lines).encode(), np.uint8)
        self.lines = []
        records, self.records = (self.records, []) if self.full else (None, self.records)
        return _Batch(lines, self.packer.take(), records), done

    def cpu_seconds(self) -> float:
        """CPU time this worker's process used since its start time (all threads)."""
        return time.process_time() - self.cpu0

    def stop(self, reason: str) -> None:
        if self.runner is not None:
            self.runner.request_stop(reason)

    async def shutdown(self) -> dict[str, str]:
        if self.system is not None:
            await self.system.stop()
            return dict(self.system.describe())
        return {}


def _require_ray() -> Any:
    if ray is None:
        raise ConfigError("--distributed ray needs the ray extra: "
                          "pip install 'tokenmark[ray]'")
    return ray


def _check_reachable(address: str, timeout_s: float) -> None:
    """A host:port address must accept a TCP connection (fails in seconds, not minutes)."""
    if address in ("auto", "local") or "://" in address:
        return
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ConfigError(f"bad Ray address {address!r}; give HOST:PORT of the cluster's "
                          "head (GCS) such as 127.0.0.1:6379, or 'auto'")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            pass
    except OSError as e:
        raise TargetError(f"cannot reach the Ray cluster at {address} ({e.strerror or e}); "
                          "start it with 'ray start --head' or fix --ray-address / "
                          "RAY_ADDRESS") from None


class RayDriver:
    """Shards a run across Ray actors (see the module docstring)."""

    def __init__(self, options: RayOptions) -> None:
        rt = _require_ray()
        if options.workers < 1:
            raise ConfigError(f"--ray-workers must be at least 1 (got {options.workers})")
        if options.cpus_per_worker <= 0:
            raise ConfigError("--ray-cpus-per-worker must be > 0")
        offs = options.clock_offsets_ns
        if offs and len(offs) != options.workers:
            raise ConfigError("give one clock offset per worker")
        self.options = options
        self.stats = RunnerStats()
        self.t0 = 0
        self.address = options.address or os.environ.get("RAY_ADDRESS") or ""
        self._started_ray = False
        need = options.workers * options.cpus_per_worker
        if not rt.is_initialized():
            if self.address:
                _check_reachable(self.address, options.connect_timeout_s)
                try:
                    rt.init(address=self.address, logging_level=logging.WARNING,
                            log_to_driver=False)
                except (ConnectionError, RuntimeError, ValueError) as e:
                    raise TargetError(f"cannot join the Ray cluster at {self.address}: "
                                      f"{e}") from None
            else:
                rt.init(num_cpus=max(1, math.ceil(need)), include_dashboard=False,
                        logging_level=logging.WARNING, log_to_driver=False)
            self._started_ray = True
        cpus = float(rt.cluster_resources().get("CPU", 0.0))
        if cpus < need:
            self._shutdown_ray()
            raise ConfigError(f"the Ray cluster has {cpus:g} CPUs, fewer than the {need:g} "
                              f"that {options.workers} workers x {options.cpus_per_worker:g} "
                              "CPU ask for; add nodes or lower --ray-workers")
        self._actors: list[Any] = []
        self._hello: list[dict[str, Any]] = []
        self._sync: list[ClockSync] = []
        self._end_sync: list[ClockSync | None] = []
        self._received: list[int] = []
        self._worker_cpu: list[float | None] = []
        self._driver_cpu = 0.0
        self._merged_ns = 0  # driver time (from t0) when the last records were merged
        self._span = [-1, -1, 0]
        self._lost: dict[int, str] = {}
        self._stop_reason = ""
        self._stopping = False
        self._describe: dict[str, str] = {}
        self._name = "unknown"

    # -- RunDriver ------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._name

    def describe(self) -> dict[str, str]:
        d = dict(self._describe)
        d["distributed"] = f"ray, {self.options.workers} workers"
        return d

    def report(self) -> dict[str, Any]:
        workers = []
        for i, h in enumerate(self._hello):
            s = self._sync[i] if i < len(self._sync) else None
            e = self._end_sync[i] if i < len(self._end_sync) else None
            workers.append({
                "index": i, "node": h.get("node"), "node_id": h.get("node_id"),
                "host": h.get("host"), "pid": h.get("pid"),
                "clock_offset_ns": s.offset_ns if s else None,
                "clock_measured_ns": s.measured_ns if s else None,
                "clock_uncertainty_ns": s.uncertainty_ns if s else None,
                "shared_clock": s.shared if s else None,
                "clock_sync": s.describe() if s else "",
                "end_clock_measured_ns": e.measured_ns if e else None,
                "drift_ns": (e.measured_ns - s.measured_ns) if (e and s) else None,
                "records_received": self._received[i] if i < len(self._received) else 0,
                "cpu_s": _round3(self._worker_cpu[i] if i < len(self._worker_cpu) else None),
                "lost": self._lost.get(i, ""),
            })
        return {
            "backend": "ray",
            "address": self.address or "local instance",
            "workers": workers,
            "driver_cpu_s": round(self._driver_cpu, 3),
            "last_merge_ns": self._merged_ns,
            "sharding": "round-robin: sample i of the schedule to worker i mod W",
            "clock_correction": "each worker started at the driver's t0 translated onto its "
                                "clock; every worker stamp t moved to t - offset (offset "
                                "measured over 24 Ray round trips, the smallest kept)",
        }

    @property
    def stopping(self) -> bool:
        return self._stopping

    def request_stop(self, reason: str) -> None:
        if self._stopping:
            return
        self._stopping = True
        self._stop_reason = reason
        for i, a in enumerate(self._actors):
            if i not in self._lost:
                a.stop.remote(reason)

    async def run(self, eff: EffectiveSettings, schedule: Schedule, dataset: Dataset,
                  factory: SutFactory, consumers: Sequence[RecordConsumer],
                  sinks: Sequence[RecordSink]) -> RunOutcome:
        if schedule.kind is not ScheduleKind.TIMED:
            raise ConfigError(f"--distributed ray shards timed schedules (Server, Interactive, "
                              f"Offline, constant, poisson, gamma, trace), not "
                              f"{schedule.scenario.value}; use --workers for closed loops")
        try:
            return await self._run(eff, schedule, dataset, factory, consumers, sinks)
        finally:
            await self._teardown()

    async def _run(self, eff: EffectiveSettings, schedule: Schedule, dataset: Dataset,
                   factory: SutFactory, consumers: Sequence[RecordConsumer],
                   sinks: Sequence[RecordSink]) -> RunOutcome:
        w = self.options.workers
        if schedule.max_queries and len(schedule) > schedule.max_queries:
            schedule = _slice(schedule, np.arange(schedule.max_queries))
        offsets = self.options.clock_offsets_ns or (0,) * w
        actor_cls = ray.remote(_ShardWorker)
        self._actors = [
            actor_cls.options(num_cpus=self.options.cpus_per_worker,
                              scheduling_strategy="SPREAD").remote(i, offsets[i])
            for i in range(w)]
        self._received = [0] * w
        self._hello = list(await asyncio.gather(*(a.hello.remote() for a in self._actors)))
        ds_ref = ray.put(dataset)
        try:
            prepared = await asyncio.gather(
                *(a.prepare.remote(factory, ds_ref) for a in self._actors))
        except RayError as e:
            raise TargetError(f"a Ray worker could not start the system under test: "
                              f"{_cause(e)}") from None
        models = {str(p["describe"].get("model", "")) for p in prepared} - {""}
        if len(models) > 1:
            raise TargetError(f"the workers' endpoints serve different models "
                              f"({', '.join(sorted(models))}); pass --model or give "
                              "endpoints that serve one model")
        self._name = prepared[0]["name"]
        self._describe = dict(prepared[0]["describe"])
        same_boot = boot_id()
        self._sync = [await self._measure(a, h.get("boot_id") == same_boot)
                      for a, h in zip(self._actors, self._hello, strict=True)]
        positions = [np.arange(k, len(schedule), w, dtype=np.int64) for k in range(w)]
        cap = math.ceil(eff.max_concurrency / w) if eff.max_concurrency else 0
        await asyncio.gather(*(a.load.remote(_slice(schedule, positions[k]), cap, 0)
                               for k, a in enumerate(self._actors)))
        now = MonotonicClock().now_ns
        rtt = max(2 * s.uncertainty_ns for s in self._sync)
        self.t0 = t0 = now() + _START_LEAD_NS + 4 * rtt
        # Consumers and sinks that take a packed batch get one; the rest get records.
        bulk = [f for f in (_bulk(c) for c in consumers) if f is not None]
        each = [c for c in consumers if _bulk(c) is None]
        bulk_sinks = [s for s in sinks if callable(getattr(s, "write_encoded", None))]
        each.extend(s.write for s in sinks if s not in bulk_sinks)
        runs = [a.run.remote(_slice(schedule, positions[k]), t0 + self._sync[k].offset_ns,
                             cap, 0, positions[k], bool(each))
                for k, a in enumerate(self._actors)]
        self.stats = RunnerStats(scheduled=len(schedule))
        cpu0 = time.process_time()
        self._span = [-1, -1, 0]  # first send, last send, last done

        async def follow(k: int) -> None:
            """Merge worker k's batches until it is done (one poll in flight at a time;
            the worker answers as soon as it has a batch's worth, is done, or _POLL_S
            passed, so records keep flowing and the last ones come without waiting)."""
            actor = self._actors[k]
            while True:
                try:
                    batch, done = await actor.poll.remote(_POLL_S)
                except RayError as e:
                    self._lose(k, e)
                    return
                if batch is not None:
                    self._merge(k, batch, bulk_sinks, bulk, each)
                    self._merged_ns = now() - t0
                    for s in sinks:
                        s.flush()
                if done:
                    return

        await asyncio.gather(*(follow(k) for k in range(w)))
        first_send, last_send, end = self._span
        for k, ref in enumerate(runs):
            if k in self._lost:
                continue
            try:
                await ref
            except RayError as e:
                self._lose(k, e)
        self._driver_cpu = time.process_time() - cpu0
        self._end_sync = []
        self._worker_cpu = []
        for k, a in enumerate(self._actors):
            if k in self._lost:
                self._end_sync.append(None)
                self._worker_cpu.append(None)
                continue
            try:
                self._worker_cpu.append(await a.cpu_seconds.remote())
                self._end_sync.append(await self._measure(a, self._sync[k].shared))
            except RayError:
                self._end_sync.append(None)
                self._worker_cpu.append(None)
        return RunOutcome(
            t0_ns=t0, end_ns=end, scheduled=len(schedule), issued=self.stats.issued,
            interrupted=self._stopping, interrupt_reason=self._stop_reason,
            ran_out_of_queries=False,
            issue_span_ns=max(0, last_send - first_send) if first_send >= 0 else 0,
            closed_gaps_ns=np.empty(0, dtype=np.int64))

    def _merge(self, k: int, batch: _Batch, bulk_sinks: list[RecordSink],
               bulk: list[Any], each: list[RecordConsumer]) -> None:
        cols = batch.columns
        span = self._span
        issued = cols.col("issued")
        sent = issued[issued >= 0]
        if sent.size:
            lo = int(sent.min())
            span[0] = lo if span[0] < 0 else min(span[0], lo)
            span[1] = max(span[1], int(sent.max()))
        span[2] = max(span[2], int(cols.col("done").max()))
        self._count(cols)
        for s in bulk_sinks:
            s.write_encoded(batch.lines.data, len(cols))  # type: ignore[attr-defined]
        for f in bulk:
            f(cols)
        if each:
            assert batch.records is not None
            for rec in batch.records:
                for c in each:
                    c(rec)
        self._received[k] += len(cols)

    async def _measure(self, actor: Any, same: bool) -> ClockSync:
        now = MonotonicClock().now_ns
        exchanges: list[Exchange] = []
        for _ in range(_PINGS):
            t1 = now()
            t2 = await actor.now.remote()
            exchanges.append((t1, t2, now()))
        return estimate(exchanges, same_clock=same)

    def _count(self, cols: RecordColumns) -> None:
        st = self.stats
        st.issued += int((cols.col("issued") >= 0).sum())
        ok = cols.col("ok").astype(bool)
        done = int(ok.sum())
        st.completed += done
        st.output_tokens += int(cols.col("output_tokens")[ok].sum())
        st.failed += len(cols) - done
        for index in cols.col("error")[~ok].tolist():
            key = cols.error_key(index)
            st.errors[key] = st.errors.get(key, 0) + 1

    def _lose(self, k: int, e: BaseException) -> None:
        h = self._hello[k] if k < len(self._hello) else {}
        reason = (f"Ray worker {k} (node {h.get('node', '?')}, pid {h.get('pid', '?')}) was "
                  f"lost: {_cause(e)}; {self._received[k]} of its records received and kept")
        self._lost[k] = reason
        if not self._stopping:
            self.request_stop(reason)

    async def _teardown(self) -> None:
        for k, a in enumerate(self._actors):
            if k in self._lost:
                continue
            try:
                d = await a.shutdown.remote()
                if k == 0 and d:
                    self._describe = dict(d)
            except RayError:
                pass
            ray.kill(a)
        self._shutdown_ray()

    def _shutdown_ray(self) -> None:
        if self._started_ray and ray.is_initialized():
            ray.shutdown()
            self._started_ray = False


def _round3(x: float | None) -> float | None:
    return None if x is None else round(x, 3)


def _cause(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    first = next((line for line in text if line.strip()), type(e).__name__)
    if isinstance(e, RayActorError):
        return "its actor died (" + first[:200] + ")"
    return first[:300]


def _bulk(consumer: RecordConsumer) -> Any:
    """The ``add_columns`` of a consumer that is the ``add`` of a batch-capable object."""
    if getattr(consumer, "__name__", "") != "add":
        return None
    fn = getattr(getattr(consumer, "__self__", None), "add_columns", None)
    return fn if callable(fn) else None


def _slice(s: Schedule, idx: np.ndarray) -> Schedule:
    return replace(s, sample_index=s.sample_index[idx], query_id=s.query_id[idx],
                   scheduled_ns=s.scheduled_ns[idx], max_queries=0)


def _move(rec: RequestRecord, shift: int, seq: int) -> None:
    """Put a worker's record on the driver's time base and the schedule's numbering."""
    rec.seq = seq
    if shift:
        if rec.issued_ns >= 0:
            rec.issued_ns += shift
        if rec.first_token_ns >= 0:
            rec.first_token_ns += shift
        if rec.first_answer_ns >= 0:
            rec.first_answer_ns += shift
        if rec.done_ns >= 0:
            rec.done_ns += shift
        rec.chunk_ns = [t + shift for t in rec.chunk_ns]
