"""The official MLPerf LoadGen (``mlcommons-loadgen``) driving tokenmark's systems under test.

``tokenmark run --loadgen official`` hands the schedule, the timing and the MLPerf log files
to LoadGen itself, so a submitter's ``mlperf_log_*`` files are LoadGen's own, while every
request still goes through a tokenmark :class:`~tokenmark.sut.SystemUnderTest` (the HTTP
client, the emulator's client, an in-process engine) and tokenmark still writes its
records. This module is the one place that imports ``mlperf_loadgen`` (the optional
``loadgen`` extra).

How the two meet:

- LoadGen's QSL is the tokenmark dataset (``ConstructQSL(len(dataset), performance count)``;
  samples are built on demand). Loading waits until LoadGen's log thread has written the
  loaded set (:class:`_LoadedSetLogged`): LoadGen 6.0.17's ``LoadSamplesToRam`` hands that
  thread a lambda holding the set *by reference*, and a test that ends within the thread's
  10 ms poll (an in-process SUT that answers at once) frees the set before the lambda runs;
  the lambda then reads freed memory and the process dies of a segmentation fault (seen in
  gdb: ``ArgValueTransform`` in ``Logger::IOThread`` while ``StartTest`` is in
  ``StopLogging``). Waiting costs one poll (~10 ms) per load, before LoadGen's clock.
- LoadGen's ``IssueQuery`` arrives on LoadGen's own thread; each sample becomes a
  :class:`~tokenmark.records.Query` handed to the SUT on tokenmark's event loop
  (``call_soon_threadsafe``), with a response handle that reports back to LoadGen:
  ``FirstTokenComplete`` at the first streamed token (with the ids of that first chunk when
  the SUT knows them), ``QuerySamplesComplete`` at completion with the output token ids
  (little-endian int32, as the reference harnesses send) and ``n_tokens``.
- A failed request is still completed towards LoadGen (LoadGen waits for every query),
  with ``n_tokens = 0``: LoadGen then logs an error, so the run's logs say it failed.
- tokenmark's record of each request is timed from the moment LoadGen's ``IssueQuery``
  reached tokenmark (LoadGen times from its own scheduled time, so its latencies are
  larger by its issue delay); the records go to the given sinks as they finish.

``FindPeakPerformance`` (``LoadGenMode.FIND_PEAK`` here) is LoadGen's own Server search; its
trials all go through the same SUT and records.

Compliance audits (TEST06, TEST07, TEST09) run as LoadGen runs them: LoadGen applies the
``audit.config`` file named in ``StartTest`` over every other setting. With
``LoadGenRequest.audit_config`` set, :func:`run_official` writes that text to
``audit.config`` in the run's own log folder, names that file to LoadGen, and afterwards
puts the folder back as it was (an ``audit.config`` already there is restored, else the
file is removed; the text is in the caller's results). Without it LoadGen is given a name
that does not exist, so no ``audit.config`` anywhere (the user's working directory
included) can silently change a run.
"""

from __future__ import annotations

import array
import asyncio
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from tokenmark.clock import Clock
from tokenmark.dataset import Dataset
from tokenmark.errors import ConfigError
from tokenmark.loadgen.runner import spread
from tokenmark.mlperf.settings import Scenario, Seeds
from tokenmark.records import (
    ErrorClass,
    Query,
    RecordSink,
    RequestRecord,
    ResponseDetails,
    TokenSource,
)
from tokenmark.sut import SystemUnderTest

__all__ = [
    "AUDIT_CONFIG_FILE",
    "INSTALL_HINT",
    "LoadGenMode",
    "LoadGenRequest",
    "OfficialOutcome",
    "loadgen_available",
    "loadgen_version",
    "run_official",
]

INSTALL_HINT = "pip install 'tokenmark[loadgen]' (mlcommons-loadgen)"
#: The file LoadGen applies over every setting in a compliance audit (its default name).
AUDIT_CONFIG_FILE = "audit.config"
#: What LoadGen is pointed at when there is no audit: a name that never exists.
_NO_AUDIT = "tokenmark-no-audit.config"
#: What LoadGen's detail log says of each loaded set (MLPerf's log format; the old text form).
_LOADED_SET_KEYS = (b'"loaded_qsl_set"', b"Loading QSL")


class _LoadedSetLogged:
    """LoadGen's QSL ``load`` callback: returns once LoadGen's log thread has written the
    set just loaded to ``mlperf_log_detail.txt`` (see the module docstring), at most
    ``timeout_s`` later. Reads only what the log gained since the last look."""

    def __init__(self, detail_log: Path, timeout_s: float = 5.0, poll_s: float = 0.002) -> None:
        self.path = detail_log
        self.timeout_s = timeout_s
        self.poll_s = poll_s
        self.loads = 0
        self.seen = 0
        self._offset = 0
        self._tail = b""

    def _count_new(self) -> None:
        try:
            with self.path.open("rb") as f:
                f.seek(self._offset)
                data = f.read()
        except OSError:
            return
        self._offset += len(data)
        text = self._tail + data
        cut = max(len(k) for k in _LOADED_SET_KEYS) - 1
        # a key is counted where it ends inside the new bytes, so none is counted twice
        for key in _LOADED_SET_KEYS:
            start = 0
            while (i := text.find(key, start)) >= 0:
                if i + len(key) > len(self._tail):
                    self.seen += 1
                start = i + 1
        self._tail = text[-cut:] if cut else b""

    def __call__(self, _indices: Any) -> None:
        self.loads += 1
        deadline = time.monotonic() + self.timeout_s
        while True:
            self._count_new()
            if self.seen >= self.loads or time.monotonic() >= deadline:
                return
            time.sleep(self.poll_s)

RecordConsumer = Callable[[RequestRecord], None]


class LoadGenMode(StrEnum):
    PERFORMANCE = "performance"
    ACCURACY = "accuracy"
    FIND_PEAK = "find-peak"
    SUBMISSION = "submission"  # accuracy, then performance, in one LoadGen test


def _lg() -> Any:
    try:
        import mlperf_loadgen  # type: ignore[import-not-found]  # optional extra
    except ImportError:
        raise ConfigError(f"--loadgen official needs the official LoadGen: {INSTALL_HINT}"
                          ) from None
    return mlperf_loadgen


def loadgen_available() -> bool:
    try:
        _lg()
    except ConfigError:
        return False
    return True


def loadgen_version() -> str:
    """The installed ``mlcommons-loadgen`` version ("" when absent)."""
    from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415

    try:
        return version("mlcommons-loadgen")
    except PackageNotFoundError:
        return ""


@dataclass(frozen=True)
class LoadGenRequest:
    """What LoadGen is asked to run.

    ``user_conf`` is read with ``TestSettings.FromConfig(user_conf, loadgen_model,
    scenario)`` after LoadGen's compiled-in ``mlperf.conf``. ``overrides`` are then set on
    the ``TestSettings`` by attribute name (LoadGen's Python names: ``ttft_latency``,
    ``performance_sample_count_override``, ...), for values the compiled-in ``mlperf.conf``
    of the installed LoadGen lacks or has from another round; ``seeds`` likewise (LoadGen's
    config files cannot set seeds from ``user.conf``).
    """

    loadgen_model: str
    scenario: Scenario  # the LoadGen scenario (Interactive runs as Server)
    mode: LoadGenMode
    user_conf: Path
    overrides: dict[str, int | float | bool] = field(default_factory=dict)
    seeds: Seeds | None = None
    sut_name: str = ""
    #: ``audit.config`` text LoadGen applies over everything else ("": no audit).
    audit_config: str = ""


@dataclass(frozen=True)
class OfficialOutcome:
    t0_ns: int
    end_ns: int  # last completion, relative to t0
    issued: int
    completed: int
    failed: int
    #: What LoadGen was finally set to, by attribute (read back after the overrides).
    applied: dict[str, Any]
    #: Overrides whose value differed from what mlperf.conf + user.conf gave LoadGen.
    changed: dict[str, tuple[Any, Any]]


_TEST_SETTING_NAMES = (
    "scenario", "mode", "server_target_qps", "offline_expected_qps", "min_duration_ms",
    "max_duration_ms", "min_query_count", "max_query_count", "qsl_rng_seed",
    "sample_index_rng_seed", "schedule_rng_seed", "ttft_latency", "tpot_latency",
    "server_target_latency_ns", "server_target_latency_percentile", "use_token_latencies",
    "sample_concatenate_permutation", "performance_sample_count_override",
    "accuracy_sample_count_override", "single_stream_expected_latency_ns",
    "multi_stream_expected_latency_ns", "multi_stream_samples_per_query",
    "server_find_peak_qps_decimals_of_precision", "server_find_peak_qps_boundary_step_size",
)


def _settings(lg: Any, req: LoadGenRequest) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    ts = lg.TestSettings()
    scen = {Scenario.OFFLINE: lg.TestScenario.Offline, Scenario.SERVER: lg.TestScenario.Server,
            Scenario.SINGLE_STREAM: lg.TestScenario.SingleStream,
            Scenario.MULTI_STREAM: lg.TestScenario.MultiStream}
    if req.scenario not in scen:
        raise ConfigError(f"LoadGen runs Offline, Server, SingleStream and MultiStream, not "
                          f"{req.scenario.value}")
    ts.scenario = scen[req.scenario]
    if not req.user_conf.is_file():
        raise ConfigError(f"{req.user_conf}: no such user.conf")
    rc = ts.FromConfig(str(req.user_conf), req.loadgen_model, req.scenario.value)
    if rc != 0:
        raise ConfigError(f"LoadGen could not read {req.user_conf} for {req.loadgen_model} "
                          f"{req.scenario.value}; check its 'model.scenario.key = value' lines")
    ts.mode = {LoadGenMode.PERFORMANCE: lg.TestMode.PerformanceOnly,
               LoadGenMode.ACCURACY: lg.TestMode.AccuracyOnly,
               LoadGenMode.FIND_PEAK: lg.TestMode.FindPeakPerformance,
               LoadGenMode.SUBMISSION: lg.TestMode.SubmissionRun}[req.mode]
    changes: dict[str, Any] = dict(req.overrides)
    if req.seeds is not None:
        changes.update(qsl_rng_seed=req.seeds.qsl, sample_index_rng_seed=req.seeds.sample_index,
                       schedule_rng_seed=req.seeds.schedule)
    changed: dict[str, Any] = {}
    for name, value in changes.items():
        if not hasattr(ts, name):
            raise ConfigError(f"LoadGen's TestSettings has no setting {name!r}")
        before = getattr(ts, name)
        if before != value:
            setattr(ts, name, value)
            changed[name] = (before, getattr(ts, name))
    applied = {n: _plain(getattr(ts, n)) for n in _TEST_SETTING_NAMES if hasattr(ts, n)}
    return ts, applied, changed


def _plain(v: Any) -> Any:
    if isinstance(v, bool | int | float | str):
        return v
    return str(getattr(v, "name", v))


class _Bridge:
    """Owns the QSL/SUT callbacks and the handles of requests in flight."""

    def __init__(self, lg: Any, sut: SystemUnderTest, dataset: Dataset, clock: Clock,
                 loop: asyncio.AbstractEventLoop, consumers: Sequence[RecordConsumer],
                 token_latencies: bool) -> None:
        self.lg = lg
        self.sut = sut
        self.dataset = dataset
        self.clock = clock
        self.loop = loop
        self.consumers = consumers
        self.token_latencies = token_latencies
        self.t0 = clock.now_ns()
        self.seq = 0
        self.query = 0
        self.issued = 0
        self.completed = 0
        self.failed = 0
        self.end = 0
        self.lock = threading.Lock()
        self.flushes: list[asyncio.Future[None]] = []

    # LoadGen's threads --------------------------------------------------------------
    def issue_query(self, samples: list[Any]) -> None:
        items = [(int(s.id), int(s.index)) for s in samples]
        now = self.clock.now_ns()
        self.loop.call_soon_threadsafe(self._issue, items, now)

    def flush_queries(self) -> None:
        self.loop.call_soon_threadsafe(self._flush)

    # the event loop -----------------------------------------------------------------
    def _issue(self, items: list[tuple[int, int]], now: int) -> None:
        qid = self.query
        self.query += 1
        for lg_id, index in items:
            seq = self.seq
            self.seq += 1
            sched = now - self.t0
            rec = RequestRecord(seq=seq, query_id=qid, sample_index=index,
                                scheduled_ns=sched, issued_ns=sched)
            sample = self.dataset.sample(index)
            rec.input_tokens = sample.input_tokens
            handle = _Handle(self, rec, lg_id)
            self.issued += 1
            try:
                self.sut.issue(Query(seq, qid, sample, now), handle)
            except Exception as exc:  # an in-process SUT raised: LoadGen still needs an answer
                handle.fail(ErrorClass.SUT_ERROR, f"{type(exc).__name__}: {exc}")

    def _flush(self) -> None:
        self.flushes.append(asyncio.ensure_future(self.sut.flush()))

    def finish(self, handle: _Handle, token_ids: Sequence[int] | None) -> None:
        rec = handle.rec
        if rec.error is not None:
            self.failed += 1
        else:
            self.completed += 1
        self.end = max(self.end, rec.done_ns)
        for c in self.consumers:
            c(rec)
        ids = array.array("i", token_ids or ())
        if sys.byteorder != "little":
            ids.byteswap()
        ptr, n = ids.buffer_info()
        n_tokens = rec.output_tokens if rec.error is None else 0
        resp = self.lg.QuerySampleResponse(handle.lg_id, ptr if n else 0,
                                           n * ids.itemsize, int(n_tokens))
        self.lg.QuerySamplesComplete([resp])

    def first_token(self, handle: _Handle) -> None:
        if not self.token_latencies:
            return
        ids = array.array("i", handle.first_ids or ())
        if sys.byteorder != "little":
            ids.byteswap()
        ptr, n = ids.buffer_info()
        resp = self.lg.QuerySampleResponse(handle.lg_id, ptr if n else 0, n * ids.itemsize)
        self.lg.FirstTokenComplete([resp])


class _Handle:
    """The response handle of one sample: tokenmark's record and LoadGen's calls."""

    __slots__ = ("_bridge", "_reasoned_at", "first_ids", "lg_id", "rec", "sent_first")

    def __init__(self, bridge: _Bridge, rec: RequestRecord, lg_id: int) -> None:
        self._bridge = bridge
        self.rec = rec
        self.lg_id = lg_id
        self.first_ids: tuple[int, ...] | None = None
        self.sent_first = False
        self._reasoned_at = -1  # time of the last reasoning chunk

    def _t(self, t_ns: int | None) -> int:
        b = self._bridge
        return (b.clock.now_ns() if t_ns is None else t_ns) - b.t0

    def _open(self) -> bool:
        return self.rec.done_ns < 0 and self.rec.error is None

    def sent(self, t_ns: int | None = None) -> None:
        self.rec.issued_ns = self._t(t_ns)

    def first_token_ids(self, ids: Sequence[int]) -> None:
        if self.first_ids is None and self._open():
            self.first_ids = tuple(ids)

    def _first(self) -> None:
        if not self.sent_first:
            self.sent_first = True
            self._bridge.first_token(self)

    def token(self, n: int = 1, t_ns: int | None = None) -> None:
        if not self._open():
            return
        rec = self.rec
        t = self._t(t_ns)
        if rec.first_token_ns < 0:
            rec.first_token_ns = t
            self._first()
        if rec.first_answer_ns < 0:  # the first answer token may follow reasoning
            rec.first_answer_ns = t
        if t == self._reasoned_at:  # the same read carried reasoning, then answer tokens
            rec.chunk_tokens[-1] += n
            return
        rec.chunk_ns.append(t)
        rec.chunk_tokens.append(n)

    def reasoning(self, n: int = 1, t_ns: int | None = None) -> None:
        if not self._open():
            return
        rec = self.rec
        t = self._t(t_ns)
        if rec.first_token_ns < 0:
            rec.first_token_ns = t
            self._first()
        rec.chunk_ns.append(t)
        rec.chunk_tokens.append(n)
        rec.reasoning_tokens = max(rec.reasoning_tokens, 0) + n
        self._reasoned_at = t

    def reasoning_usage(self, tokens: int) -> None:
        if self._open():
            self.rec.reasoning_tokens = tokens

    def details(self, d: ResponseDetails) -> None:
        """As the native runner's handle: what the SUT learned about the answer."""
        if self._open():
            d.apply_to(self.rec)

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
        if not self._open():
            return
        rec = self.rec
        t = self._t(t_ns)
        if not rec.chunk_ns:
            rec.first_token_ns = rec.first_answer_ns = t
            rec.chunk_ns.append(t)
            rec.chunk_tokens.append(output_tokens or 0)
            self._first()
        if output_tokens is None:
            rec.output_tokens = sum(rec.chunk_tokens)
            rec.token_source = TokenSource.CHUNKS
        else:
            rec.output_tokens = output_tokens
            rec.token_source = source
            if rec.token_basis == "usage":
                spread(rec.chunk_tokens, output_tokens)
        if input_tokens is not None:
            # the server's count; the planned length stays in input_tokens (issue 19)
            rec.server_input_tokens = input_tokens
        rec.alt_output_tokens = alt_output_tokens
        rec.cached_input_tokens = cached_input_tokens
        rec.endpoint = endpoint or rec.endpoint
        rec.done_ns = t
        self._bridge.finish(self, token_ids)

    def fail(self, error: ErrorClass, detail: str = "", *, t_ns: int | None = None,
             endpoint: str = "") -> None:
        if not self._open():
            return
        rec = self.rec
        rec.error = error
        rec.error_detail = detail[:500]
        rec.done_ns = self._t(t_ns)
        rec.output_tokens = sum(rec.chunk_tokens)
        rec.endpoint = endpoint or rec.endpoint
        self._first()
        self._bridge.finish(self, None)


async def run_official(
    request: LoadGenRequest,
    sut: SystemUnderTest,
    dataset: Dataset,
    clock: Clock,
    log_dir: Path,
    *,
    sinks: Sequence[RecordSink] = (),
    consumers: Sequence[RecordConsumer] = (),
    performance_sample_count: int | None = None,
) -> OfficialOutcome:
    """Run one LoadGen test against ``sut``; LoadGen writes its logs into ``log_dir``.

    Must be awaited on the event loop the SUT runs on; LoadGen's blocking ``StartTest``
    runs in a worker thread. Records reach ``sinks`` and ``consumers`` as requests finish.
    """
    lg = _lg()
    ts, applied, changed = _settings(lg, request)
    log_dir.mkdir(parents=True, exist_ok=True)
    out = lg.LogOutputSettings()
    out.outdir = str(log_dir)
    out.copy_summary_to_stdout = False
    log_settings = lg.LogSettings()
    log_settings.log_output = out
    log_settings.enable_trace = False
    loop = asyncio.get_running_loop()
    all_consumers = [*(s.write for s in sinks), *consumers]
    bridge = _Bridge(lg, sut, dataset, clock, loop, all_consumers,
                     bool(getattr(ts, "use_token_latencies", True)))
    perf_count = performance_sample_count or len(dataset)
    qsl = lg.ConstructQSL(len(dataset), min(perf_count, len(dataset)),
                          _LoadedSetLogged(log_dir / "mlperf_log_detail.txt"), lambda _ids: None)
    lsut = lg.ConstructSUT(bridge.issue_query, bridge.flush_queries)
    flusher = asyncio.ensure_future(_flush_sinks(sinks))
    audit = log_dir / AUDIT_CONFIG_FILE if request.audit_config else log_dir / _NO_AUDIT
    kept = audit.read_bytes() if request.audit_config and audit.is_file() else None
    await sut.start()
    try:
        if request.audit_config:
            audit.write_text(request.audit_config, encoding="utf-8")
        bridge.t0 = clock.now_ns()
        await asyncio.to_thread(_start, lg, lsut, qsl, ts, log_settings, audit)
        for f in bridge.flushes:
            await f
    finally:
        if request.audit_config:
            if kept is None:
                audit.unlink(missing_ok=True)
            else:
                audit.write_bytes(kept)
        flusher.cancel()
        for s in sinks:
            s.flush()
        await sut.stop()
        lg.DestroySUT(lsut)
        lg.DestroyQSL(qsl)
    return OfficialOutcome(bridge.t0, bridge.end, bridge.issued, bridge.completed,
                           bridge.failed, applied, changed)


def _start(lg: Any, lsut: Any, qsl: Any, ts: Any, log_settings: Any, audit: Path) -> None:
    # LoadGen reads the audit config file named here (its default: audit.config in the
    # working directory); see the module docstring.
    lg.StartTestWithLogSettings(lsut, qsl, ts, log_settings, str(audit))


async def _flush_sinks(sinks: Sequence[RecordSink]) -> None:
    while True:
        await asyncio.sleep(0.05)
        for s in sinks:
            s.flush()
