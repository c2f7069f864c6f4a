"""The load generator: walks a precomputed :class:`~tokenmark.mlperf.scenarios.Schedule` against a
system under test and turns its answers into :class:`~tokenmark.records.RequestRecord`.

Rules it keeps (LoadGen's, plus tokenmark's bookkeeping):

- sends at *absolute* times ``t0 + offset`` (never drifting relative sleeps); a send that
  is late stays late and its lag is recorded;
- never retries; a failure is a record with an error class;
- latency is measured from the scheduled time (closed schedules: from the send, as
  LoadGen's SingleStream/MultiStream do);
- every finished record goes at once to the consumers (the on-disk sink, the metrics
  accumulator, progress); the sink is flushed at least every ``FLUSH_INTERVAL_NS``, so a
  crash or Ctrl-C loses at most that window;
- a stop request (Ctrl-C) stops issuing, marks what is in flight as unanswered, and ends
  the run as interrupted: the verdicts say INVALID and why;
- a timed loop publishes when its next send is due (:class:`tokenmark.clock.SendGate`),
  so the client's parsing of reads already timed gives way to it (issue 21), and so do
  the periodic flush of the records and Python's garbage collector (:class:`GcPoints`:
  collections happen right after a send, not in the middle of the next one).
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tokenmark.clock import NEVER, Clock, FakeClock, SendGate, send_gate
from tokenmark.dataset import Dataset, Loadable
from tokenmark.mlperf.scenarios import Schedule, ScheduleKind
from tokenmark.records import (
    ErrorClass,
    Phase,
    Query,
    RecordSink,
    RequestRecord,
    ResponseDetails,
    Sample,
    TokenSource,
)
from tokenmark.sut import Preparable, SystemUnderTest

__all__ = ["FLUSH_INTERVAL_NS", "GcPoints", "RunOutcome", "Runner", "RunnerStats"]

#: The on-disk sink is flushed at least this often.
FLUSH_INTERVAL_NS = 50_000_000
#: Prompt text a real-time run builds before its clock starts (see ``Runner._load_samples``).
LOAD_TEXT_CHARS = 256 << 20
#: A timed loop that is behind schedule yields to the event loop after this many sends,
#: so responses keep being read while it catches up.
_YIELD_EVERY = 32

#: A collection is started after a send only when the next one is at least this far off.
GC_MARGIN_NS = 2_000_000
#: What a collection of each generation is assumed to take before one has been timed.
GC_FIRST_COST_NS = (500_000, 3_000_000, 40_000_000)
#: The periodic flush waits for a send due within this long (and until it is out).
FLUSH_GUARD_NS = 1_000_000

RecordConsumer = Callable[[RequestRecord], None]


class GcPoints:
    """Python's cyclic garbage collector, run where it delays no send (issue 21).

    Left to itself the collector runs inside whatever allocates past its threshold: in
    the demo ~7% of sends (each send allocates ~50 containers of the 700 that start a
    young collection), which then waited 0.1-0.7 ms for it, and a middle collection
    (every tenth) took ~2 ms (bench/loop_stalls.py); at 1 in flight it ran in the
    quiet wait for a first token and delayed its read. While a run issues (timed or
    closed) the automatic collector is off; :meth:`after_send` runs the collections it
    would have run (the
    same thresholds, ``gc.get_threshold()``; the oldest generation every ``threshold2``
    middle ones, which is as far as Python sees CPython's own rule) right after a send,
    when the next send is further off than ``GC_MARGIN_NS`` plus twice what the last
    collection of that generation took (else a younger one that fits, or none yet); a
    closed loop collects right after each send (its answers are a round trip away).
    :meth:`overdue` lets a periodic task collect anyway when sends stop coming (a full
    concurrency cap) or leave no room and ten times the usual garbage piles up: what fits
    before the next send, at least the young generation. Objects made before the
    clock (the loaded samples, imports) are frozen out of every collection for the run
    (``gc.freeze``). Nothing measured depends on when garbage is collected.
    """

    __slots__ = ("_active", "_cost", "thresholds")

    def __init__(self) -> None:
        self._active = False
        # ns the last collection of each generation took; until one has run, what they
        # took in the demo on the project's 2-core VM, rounded up (bench/loop_stalls.py)
        self._cost = list(GC_FIRST_COST_NS)
        self.thresholds = gc.get_threshold()

    @property
    def active(self) -> bool:
        return self._active

    def start(self) -> None:
        """Take over from the automatic collector (unless it is off: then nothing)."""
        if not gc.isenabled() or self.thresholds[0] <= 0:
            return
        self._active = True
        gc.freeze()
        gc.disable()

    def stop(self) -> None:
        if self._active:
            self._active = False
            gc.unfreeze()
            gc.enable()

    def due(self, factor: int = 1) -> int:
        """The generation a collection is due for (-1: none), as the automatic
        collector would pick it, with a young threshold ``factor`` times its own."""
        if not self._active:
            return -1
        c0, c1, c2 = gc.get_count()
        t0, t1, t2 = self.thresholds
        if c0 <= t0 * factor:
            return -1
        if t1 and c1 >= t1:
            return 2 if t2 and c2 >= t2 else 1
        return 0

    def collect(self, gen: int) -> None:
        t = time.perf_counter_ns()
        gc.collect(gen)
        self._cost[gen] = time.perf_counter_ns() - t

    def _fit(self, gen: int, margin_ns: int) -> int:
        """The oldest generation up to ``gen`` whose collection fits before a send
        ``margin_ns`` away (-1: none)."""
        cost = self._cost
        while gen >= 0 and margin_ns < GC_MARGIN_NS + 2 * cost[gen]:
            gen -= 1
        return gen

    def after_send(self, margin_ns: int) -> None:
        """Collect what is due, the next send being ``margin_ns`` away."""
        if margin_ns < GC_MARGIN_NS:
            return
        gen = self._fit(self.due(), margin_ns)
        if gen >= 0:
            self.collect(gen)

    def overdue(self, margin_ns: int = NEVER) -> None:
        """Collect when ten times the usual garbage piled up (no send came for long, or
        none left room): the oldest due generation that fits before the next send
        (``margin_ns`` away), else the young one alone (garbage never piles up without
        bound, and an older collection, 1.5-40 ms, never lands on a due send)."""
        gen = self.due(10)
        if gen >= 0:
            self.collect(max(0, self._fit(gen, margin_ns)))


@dataclass
class RunnerStats:
    """Live counters, read by progress displays while the run goes on."""

    scheduled: int = 0
    issued: int = 0
    completed: int = 0
    failed: int = 0
    in_flight: int = 0
    output_tokens: int = 0
    errors: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class RunOutcome:
    t0_ns: int  # the run's origin on the clock
    end_ns: int  # when the last record finished, relative to t0
    scheduled: int  # samples the schedule holds (closed loops: issued)
    issued: int
    interrupted: bool
    interrupt_reason: str
    ran_out_of_queries: bool  # closed MLPerf schedules: LoadGen's "Ending early"
    issue_span_ns: int  # first to last send (Offline's client figure)
    closed_gaps_ns: np.ndarray  # (next send - previous completion) per closed stream


class _Pending:
    """The :class:`~tokenmark.sut.ResponseHandle` of one request in flight."""

    __slots__ = ("_reasoned_at", "_run", "first_ids", "rec", "waiter")

    def __init__(self, run: Runner, rec: RequestRecord) -> None:
        self._run = run
        self.rec = rec
        self.waiter: asyncio.Future[None] | None = None
        self._reasoned_at = -1  # time of the last reasoning chunk
        self.first_ids: tuple[int, ...] | None = None

    def first_token_ids(self, ids: Sequence[int]) -> None:
        """The ids the first chunk carried (:class:`~tokenmark.sut.TokenIdsHandle`)."""
        if self.first_ids is None and self.rec.done_ns < 0 and self.rec.error is None:
            self.first_ids = tuple(ids)

    def _t(self, t_ns: int | None) -> int:
        run = self._run
        return (run.clock.now_ns() if t_ns is None else t_ns) - run.t0

    def sent(self, t_ns: int | None = None) -> None:
        self.rec.issued_ns = self._t(t_ns)

    def token(self, n: int = 1, t_ns: int | None = None) -> None:
        rec = self.rec
        if rec.done_ns >= 0 or rec.error is not None:
            return
        t = self._t(t_ns)
        if rec.first_token_ns < 0:
            rec.first_token_ns = t
        if rec.first_answer_ns < 0:
            rec.first_answer_ns = t
        if t == self._reasoned_at:  # the same read carried reasoning, then answer tokens
            rec.chunk_tokens[-1] += n
            return
        rec.chunk_ns.append(t)
        rec.chunk_tokens.append(n)

    def reasoning(self, n: int = 1, t_ns: int | None = None) -> None:
        """A chunk of ``n`` reasoning tokens (:class:`~tokenmark.sut.ReasoningHandle`)."""
        rec = self.rec
        if rec.done_ns >= 0 or rec.error is not None:
            return
        t = self._t(t_ns)
        if rec.first_token_ns < 0:
            rec.first_token_ns = t
        rec.chunk_ns.append(t)
        rec.chunk_tokens.append(n)
        rec.reasoning_tokens = max(rec.reasoning_tokens, 0) + n
        self._reasoned_at = t

    def reasoning_usage(self, tokens: int) -> None:
        """The server's reasoning-token count; it replaces the streamed sum."""
        if self.rec.done_ns < 0 and self.rec.error is None:
            self.rec.reasoning_tokens = tokens

    def details(self, d: ResponseDetails) -> None:
        """What the SUT learned about the answer (:class:`~tokenmark.sut.DetailsHandle`)."""
        rec = self.rec
        if rec.done_ns < 0 and rec.error is None:
            d.apply_to(rec)

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
        rec = self.rec
        if rec.done_ns >= 0 or rec.error is not None:
            return  # a second answer for one request is ignored
        t = self._t(t_ns)
        if not rec.chunk_ns:
            # Not streamed: everything arrived at once.
            n = output_tokens if output_tokens is not None else 0
            rec.first_token_ns = t
            rec.first_answer_ns = t
            rec.chunk_ns.append(t)
            rec.chunk_tokens.append(n)
        if output_tokens is None:
            rec.output_tokens = sum(rec.chunk_tokens)
            rec.token_source = TokenSource.CHUNKS
        else:
            rec.output_tokens = output_tokens
            rec.token_source = source
            if rec.token_basis == "usage":
                spread(rec.chunk_tokens, output_tokens)
        if input_tokens is not None:
            rec.server_input_tokens = input_tokens
        rec.alt_output_tokens = alt_output_tokens
        rec.cached_input_tokens = cached_input_tokens
        if endpoint:
            rec.endpoint = endpoint
        rec.done_ns = t
        self._run._finish(self, token_ids, text)

    def fail(
        self,
        error: ErrorClass,
        detail: str = "",
        *,
        t_ns: int | None = None,
        endpoint: str = "",
    ) -> None:
        rec = self.rec
        if rec.done_ns >= 0 or rec.error is not None:
            return
        rec.error = error
        rec.error_detail = detail[:500]
        rec.done_ns = self._t(t_ns)
        rec.output_tokens = sum(rec.chunk_tokens)
        if endpoint:
            rec.endpoint = endpoint
        self._run._finish(self, None, None)


def spread(chunk_tokens: list[int], total: int) -> None:
    """Scale ``chunk_tokens`` in place so they add up to ``total`` (> their sum): each
    chunk keeps its share, rounded so that running sums stay exact and no chunk drops
    below what it carried. Events of a server that streams several tokens per event
    (vLLM's stream interval, speculative decoding) then weigh what they held."""
    have = sum(chunk_tokens)
    if have <= 0 or total <= have:
        return
    run = 0
    prev = 0
    for i, k in enumerate(chunk_tokens):
        run += k
        cum = run * total // have
        chunk_tokens[i] = max(k, cum - prev) if i < len(chunk_tokens) - 1 else total - prev
        prev += chunk_tokens[i]


#: Receives every finished record with its output: the token ids and text the SUT gave
#: at completion, and the ids its first chunk carried (LoadGen's ``FirstTokenComplete``
#: data), each ``None`` when the SUT did not give it.
OutputConsumer = Callable[
    [RequestRecord, Sequence[int] | None, str | None, Sequence[int] | None], None]


class Runner:
    """Runs one schedule against one SUT. Single use."""

    def __init__(
        self,
        schedule: Schedule,
        dataset: Dataset,
        sut: SystemUnderTest,
        clock: Clock,
        *,
        consumers: Sequence[RecordConsumer] = (),
        sinks: Sequence[RecordSink] = (),
        outputs: OutputConsumer | None = None,
        max_concurrency: int = 0,
        drain_timeout_ns: int = 0,
    ) -> None:
        self.schedule = schedule
        self.dataset = dataset
        self.sut = sut
        self.clock = clock
        self._consumers = [*(s.write for s in sinks), *consumers]
        self._sinks = list(sinks)
        self._outputs = outputs
        self._cap = max_concurrency
        self._drain_timeout_ns = drain_timeout_ns
        self.stats = RunnerStats(scheduled=len(schedule))
        self.t0 = 0
        self._pending: dict[int, _Pending] = {}
        self._loaded: dict[int, Sample] = {}  # samples built before a real-time run
        self._samples_loaded = False
        self._slot_waiters: list[asyncio.Future[None]] = []
        self._idle: asyncio.Future[None] | None = None
        self._stop = asyncio.Event()
        self._issuer: asyncio.Task[Any] | None = None
        self._stop_reason = ""
        self._last_flush = 0
        self._end = 0
        self._seq = 0
        self._sends = (-1, -1)
        self._gate = send_gate()
        self._gc = GcPoints()

    # -- control --------------------------------------------------------------------
    def request_stop(self, reason: str) -> None:
        """Stop issuing; what is in flight is marked unanswered at once. Idempotent."""
        if self._stop.is_set():
            return
        self._stop_reason = reason
        self._stop.set()
        self._gate.due_ns = NEVER
        self._gate.catch_up()  # answers already read are not unanswered
        if self._issuer is not None and not self._issuer.done():
            self._issuer.cancel()
        self._abandon(ErrorClass.UNANSWERED, reason)

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    # -- the run ----------------------------------------------------------------------
    def _load_samples(self) -> None:
        """LoadGen's ``LoadSamplesToRam``: the loaded set (or, for schedules without one,
        the samples in the order they will be sent; for tokenmark's own closed loops, the
        first shuffle of the performance set, as many as the run may send) is built
        before the clock starts.

        A dataset whose samples are costly to make (generated images) makes them itself
        (:class:`~tokenmark.dataset.Loadable`). In real time the runner also builds each
        sample's prompt and keeps it (at most ``LOAD_TEXT_CHARS`` of text; later ones are
        built when sent): a synthetic prompt is made from its token ids when first asked
        for, ~1 ms of CPU for the demo's prompts (profiled at 0.6-1.1 ms per request),
        which at send time delayed the sends behind it. Virtual time skips that: there a
        send costs no measured time."""
        s = self.schedule
        if s.loaded_set:
            order: Sequence[int] = s.loaded_set
        elif s.order is not None and not len(s):  # an own closed loop: its first shuffle
            count = s.order.period if not s.max_queries else min(s.order.period, s.max_queries)
            order = s.order.take(count).tolist()
        else:
            used, first = np.unique(s.sample_index, return_index=True)
            order = used[np.argsort(first, kind="stable")].tolist()
        if isinstance(self.dataset, Loadable):
            self.dataset.load_samples(order)
        if isinstance(self.clock, FakeClock):
            return
        chars = 0
        for i in order:
            sample = self.dataset.sample(i)
            chars += len(sample.prompt)  # builds the text (and a chat sample's messages)
            if chars > LOAD_TEXT_CHARS:
                break
            self._loaded[i] = sample

    def load(self) -> None:
        """Build the samples before the clock starts (:meth:`_load_samples`); :meth:`run`
        does it when the caller has not (a distributed worker loads before the driver
        picks the common start time)."""
        if not self._samples_loaded:
            self._load_samples()
            self._samples_loaded = True

    async def run(self) -> RunOutcome:
        self.load()
        flusher = asyncio.ensure_future(self._flush_loop())
        self.t0 = self.clock.now_ns()
        ran_out = False
        gaps: list[int] = []
        first_send = last_send = -1
        try:
            if self.schedule.kind is ScheduleKind.TIMED:
                self._issuer = asyncio.ensure_future(self._run_timed())
            else:
                self._issuer = asyncio.ensure_future(self._run_closed(gaps))
            try:
                result = await self._issuer
                if self.schedule.kind is ScheduleKind.TIMED:
                    first_send, last_send = result
                else:
                    ran_out = result
            except asyncio.CancelledError:
                if not self.stopping:
                    raise
                first_send, last_send = self._sends
            if not self.stopping:
                await self.sut.flush()
                await self._drain()
        finally:
            if self.stopping:
                self._abandon(ErrorClass.UNANSWERED, self._stop_reason)
            flusher.cancel()
            for sink in self._sinks:
                sink.flush()
        closed = self.schedule.kind is ScheduleKind.CLOSED
        return RunOutcome(
            t0_ns=self.t0,
            end_ns=self._end,
            scheduled=self.stats.issued if closed else len(self.schedule),
            issued=self.stats.issued,
            interrupted=self.stopping,
            interrupt_reason=self._stop_reason,
            ran_out_of_queries=ran_out,
            issue_span_ns=max(0, last_send - first_send) if first_send >= 0 else 0,
            closed_gaps_ns=np.asarray(gaps, dtype=np.int64),
        )

    def _phase(self, offset: int) -> Phase:
        s = self.schedule
        if offset < s.warmup_end_ns:
            return Phase.WARMUP
        if s.cooldown_start_ns >= 0 and offset > s.cooldown_start_ns:
            return Phase.COOLDOWN
        return Phase.MEASURE

    def _query(self, query_id: int, sample_index: int, offset: int) -> Query:
        """The query the next send will carry (its ``seq`` is taken when it is issued)."""
        sample = self._loaded.get(sample_index)
        if sample is None:
            sample = self.dataset.sample(sample_index)
        return Query(seq=self._seq, query_id=query_id, sample=sample, scheduled_ns=offset)

    def _issue(self, query_id: int, sample_index: int, offset: int, now: int,
               query: Query | None = None) -> _Pending:
        """Issue a query (``query``: the one built and prepared ahead for this send)."""
        if query is None or query.seq != self._seq:
            query = self._query(query_id, sample_index, offset)
        sample = query.sample
        seq = query.seq
        self._seq = seq + 1
        rec = RequestRecord(
            seq=seq,
            query_id=query_id,
            sample_index=sample_index,
            scheduled_ns=offset,
            issued_ns=now - self.t0,
            input_tokens=sample.input_tokens,
            phase=self._phase(offset),
        )
        pending = _Pending(self, rec)
        self._pending[seq] = pending
        st = self.stats
        st.issued += 1
        st.in_flight += 1
        try:
            self.sut.issue(query, pending)
        except Exception as exc:  # a broken SUT is data, not a crash of the run
            pending.fail(ErrorClass.SUT_ERROR, f"{type(exc).__name__}: {exc}")
        return pending

    async def _run_timed(self) -> tuple[int, int]:
        gate = self._gate
        collector = self._gc
        if not isinstance(self.clock, FakeClock):
            collector.start()
        try:
            return await self._timed(gate)
        finally:
            gate.due_ns = NEVER
            collector.stop()

    async def _timed(self, gate: SendGate) -> tuple[int, int]:
        s = self.schedule
        perf = time.perf_counter_ns
        offsets = s.scheduled_ns.tolist()
        samples = s.sample_index.tolist()
        qids = s.query_id.tolist()
        now = self.clock.now_ns
        t0 = self.t0
        cap = self._cap
        stop = self._stop
        max_q = s.max_queries
        max_d = s.max_duration_ns
        first_send = last_send = -1
        behind = 0
        after_send = self._gc.after_send
        sut = self.sut
        # a SUT that renders a request ahead does it before the wait, not after the due time
        prepare = sut.prepare if isinstance(sut, Preparable) and not isinstance(
            self.clock, FakeClock) else None
        query: Query | None = None
        n = len(offsets)
        for i in range(n):
            if stop.is_set():
                break
            off = offsets[i]
            target = t0 + off
            t = now()
            gate.due_ns = perf() + (target - t)  # on the gate's time base
            query = None
            if t < target:
                behind = 0
                if prepare is not None:
                    query = self._query(qids[i], samples[i], off)
                    try:
                        prepare(query)
                    except Exception:  # issue meets the fault again and records it
                        query = None
                await self.clock.sleep_until(target)
                if stop.is_set():
                    break
                t = now()
            else:
                behind += 1
                if behind >= _YIELD_EVERY:
                    behind = 0
                    await asyncio.sleep(0)
                    if stop.is_set():
                        break
                    t = now()
            if cap and self.stats.in_flight >= cap:
                gate.due_ns = NEVER  # the slot comes from an answer: let it be parsed
                await self._wait_slot()
                if stop.is_set():
                    break
                t = now()
            if max_d and t - t0 > max_d:
                break
            self._issue(qids[i], samples[i], off, t, query)
            if first_send < 0:
                first_send = t - t0
            last_send = t - t0
            self._sends = (first_send, last_send)
            if max_q and self.stats.issued >= max_q:
                break
            if i + 1 < n:
                after_send(t0 + offsets[i + 1] - now())
        return first_send, last_send

    async def _run_closed(self, gaps: list[int]) -> bool:
        s = self.schedule
        spq = s.samples_per_query
        ran_out = False
        next_query = 0
        queries_issued = 0
        stop = self._stop
        loop = asyncio.get_running_loop()
        done_flag = False

        async def stream() -> None:
            nonlocal next_query, queries_issued, ran_out, done_flag
            prev_done = -1
            while not stop.is_set() and not done_flag:
                q = next_query
                first = q * spq
                if not s.endless and first + spq > len(s):
                    ran_out = True
                    done_flag = True
                    return
                next_query += 1
                t = self.clock.now_ns()
                if prev_done >= 0:
                    gaps.append(t - prev_done)
                off = t - self.t0
                waiters: list[asyncio.Future[None]] = []
                for j in range(spq):
                    p = self._issue(q, s.closed_sample(first + j), off, t)
                    if p.rec.done_ns < 0 and p.rec.error is None:
                        fut: asyncio.Future[None] = loop.create_future()
                        p.waiter = fut
                        waiters.append(fut)
                queries_issued += 1
                # the answers are at least a round trip away: the collector's moment
                after_send(NEVER)
                # LoadGen ends "naturally" right after the query that meets both minimums.
                if queries_issued >= s.min_queries and off >= s.min_duration_ns:
                    done_flag = True
                if s.max_queries and queries_issued >= s.max_queries:
                    done_flag = True
                if s.max_duration_ns and off > s.max_duration_ns:
                    done_flag = True
                if waiters:
                    await asyncio.gather(*waiters)
                else:
                    await asyncio.sleep(0)  # a SUT that answers at once must not starve the loop
                prev_done = self.clock.now_ns()

        collector = self._gc
        after_send = collector.after_send
        if not isinstance(self.clock, FakeClock):
            collector.start()
        try:
            await asyncio.gather(*(stream() for _ in range(max(1, s.streams))))
        finally:
            collector.stop()
        return ran_out

    async def _wait_slot(self) -> None:
        while self.stats.in_flight >= self._cap and not self._stop.is_set():
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._slot_waiters.append(fut)
            await fut

    async def _drain(self) -> None:
        if not self._pending:
            return
        loop = asyncio.get_running_loop()
        idle: asyncio.Future[None] = loop.create_future()
        self._idle = idle
        timer: asyncio.TimerHandle | None = None
        if self._drain_timeout_ns:
            timer = loop.call_later(self._drain_timeout_ns / 1e9, _resolve, idle)
        try:
            await idle
        finally:
            if timer is not None:
                timer.cancel()
        if self._pending and not self.stopping:
            secs = self._drain_timeout_ns / 1e9
            self.request_stop(f"{len(self._pending)} requests still in flight {secs:g} s "
                              "after the last send (drain timeout)")

    def _abandon(self, error: ErrorClass, reason: str) -> None:
        for p in list(self._pending.values()):
            p.fail(error, reason)

    # -- completion path ----------------------------------------------------------------
    def _finish(
        self, p: _Pending, token_ids: Sequence[int] | None, text: str | None
    ) -> None:
        rec = p.rec
        self._pending.pop(rec.seq, None)
        st = self.stats
        st.in_flight -= 1
        if rec.error is None:
            st.completed += 1
            st.output_tokens += rec.output_tokens
        else:
            st.failed += 1
            st.errors[rec.error.value] = st.errors.get(rec.error.value, 0) + 1
        if rec.done_ns > self._end:
            self._end = rec.done_ns
        for consume in self._consumers:
            consume(rec)
        if self._outputs is not None:
            self._outputs(rec, token_ids, text, p.first_ids)
        if p.waiter is not None and not p.waiter.done():
            p.waiter.set_result(None)
        if self._slot_waiters:
            _resolve(self._slot_waiters.pop(0))
        if not self._pending and self._idle is not None:
            _resolve(self._idle)
        now = self.clock.now_ns()
        if now - self._last_flush >= FLUSH_INTERVAL_NS:
            self._last_flush = now
            for sink in self._sinks:
                sink.flush()

    async def _flush_loop(self) -> None:
        """Flush the sinks every ``FLUSH_INTERVAL_NS``, after the send that is due (if
        one is due within ``FLUSH_GUARD_NS``: at most ~1 ms later), and collect garbage
        that piled up while no send came (:meth:`GcPoints.overdue`)."""
        gate = self._gate
        real = not isinstance(self.clock, FakeClock)
        while True:
            await asyncio.sleep(FLUSH_INTERVAL_NS / 1e9)
            if real:
                await gate.after_due_send(FLUSH_GUARD_NS)
            self._last_flush = self.clock.now_ns()
            for sink in self._sinks:
                sink.flush()
            self._gc.overdue(gate.due_ns - time.perf_counter_ns() if real else NEVER)


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
