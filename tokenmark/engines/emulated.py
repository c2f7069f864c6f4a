"""The emulated server's engine: continuous batching timed by the performance model.

:class:`EmulatorSpec` names what is emulated (an accelerator and a model from the
packaged data files, a precision, tensor parallelism and replicas) and builds the
:class:`~tokenmark.perfmodel.Deployment`, with the calibrated efficiency of the
accelerator's family (:func:`tokenmark.sim.params.efficiency_for`). Impossible
combinations are one-line :class:`~tokenmark.errors.ConfigError` messages with the
numbers (memory needed against memory there).

:class:`Emulator` runs one :class:`~tokenmark.perfmodel.ReplicaEngine` per replica on a
:class:`~tokenmark.clock.Clock`: a replica with work plans its next step, waits the
step's modelled time (``clock.call_at``) and then delivers what the step produced (first
tokens, one token per decoding request, completions) to each request's
:class:`Listener`. On :class:`~tokenmark.clock.MonotonicClock` that is the emulated
server's real time; on :class:`~tokenmark.clock.FakeClock` it is virtual time, for the
in-process system under test (``--virtual-time``) and for tests, which compare the times
with the model's own step costs and, under the real runner, with the simulator's driver
(:mod:`tokenmark.sim.driver`), which must agree with it exactly. Requests go to replicas
round-robin. Only aggregated replicas are emulated (no prefill/decode disaggregation).

In real time a step is delivered when the event loop gets to it; the next step starts at
the modelled end of the previous one, so the model's timeline holds while the loop keeps
up, and each delivery's lateness is kept (:attr:`Emulator.lag`): the emulator's own
capacity limit shows there, not as silently slower steps. Steps that are already due
when the loop gets to them are run together and their tokens handed over in one call
per request (at most ``CATCH_UP_STEPS``), so a late loop catches up instead of falling
further behind. Past ``REBASE_NS`` of lateness the timeline restarts from now instead of
bursting to catch up.

A request whose client went away is aborted (:meth:`Emulator.abort`): it leaves its
replica before the next step, freeing its batch slot and KV cache.

Output text is not modelled here: the emulator knows each request's output length (the
HTTP front plans it, :mod:`tokenmark.perfmodel.outputs`: exact ``max_tokens``, or an
earlier stop, reasoning first for reasoning models) and its images' encoder work
(:mod:`tokenmark.perfmodel.vision`).
"""

from __future__ import annotations

import asyncio
import functools
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import AnyStr, Protocol, overload

from tokenmark.clock import Clock, TimerHandle
from tokenmark.errors import ConfigError
from tokenmark.perfmodel import (
    Deployment,
    Precision,
    ServingPolicy,
    StepOutcome,
    find_accelerator,
    find_model,
)
from tokenmark.sim.cluster import Cluster
from tokenmark.sim.params import efficiency_for, parse_stack
from tokenmark.tokenizer import BuiltinTokenizer

__all__ = [
    "CATCH_UP_STEPS",
    "OUTPUT_CYCLE",
    "OUTPUT_WORDS",
    "REBASE_NS",
    "Emulator",
    "EmulatorSpec",
    "LagStats",
    "Listener",
    "OutputIds",
    "cycle_slice",
    "output_text",
]

#: Lateness of a step's delivery beyond which the timeline restarts from now.
REBASE_NS = 100_000_000
#: Steps already due that are run and delivered together, at most, when the loop is late.
CATCH_UP_STEPS = 64
_AUTO_TP = (1, 2, 4, 8)

#: The emulated model's words: output token ``i`` is word ``i mod 64`` (the built-in
#: tokenizer's words 100..163, one token each), written with a leading space except the
#: first token of an answer; its id is that word's id in the built-in tokenizer.
OUTPUT_CYCLE = 64
_BUILTIN = BuiltinTokenizer()  # one: each instance builds its own vocabulary (about 5 ms)
OUTPUT_WORDS = _BUILTIN.words[100:100 + OUTPUT_CYCLE]
_IDS = tuple(_BUILTIN.encode(w)[0] for w in OUTPUT_WORDS)
_TEXT_CYCLE = "".join(" " + w for w in OUTPUT_WORDS)
_TEXT_OFFS = tuple(sum(len(w) + 1 for w in OUTPUT_WORDS[:k]) for k in range(OUTPUT_CYCLE + 1))


def cycle_slice(cycle: AnyStr, offs: Sequence[int], a: int, m: int) -> AnyStr:
    """``m`` consecutive items of a repeating cycle of :data:`OUTPUT_CYCLE` items, from
    position ``a`` (``offs[k]``: where item ``k`` starts in ``cycle``)."""
    if a + m <= OUTPUT_CYCLE:
        return cycle[offs[a]:offs[a + m]]
    head = cycle[offs[a]:]
    m -= OUTPUT_CYCLE - a
    q, r = divmod(m, OUTPUT_CYCLE)
    return head + cycle * q + cycle[:offs[r]]


def output_text(start: int, end: int) -> str:
    """The text of output tokens ``start .. end - 1``."""
    if start >= end:
        return ""
    head = OUTPUT_WORDS[0] if start == 0 else ""
    i = max(start, 1)
    if end <= i:
        return head
    return head + cycle_slice(_TEXT_CYCLE, _TEXT_OFFS, i % OUTPUT_CYCLE, end - i)


class OutputIds(Sequence[int]):
    """The ids of output tokens ``0 .. n - 1``, computed when read."""

    __slots__ = ("_n",)

    def __init__(self, n: int) -> None:
        self._n = max(0, n)

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, i: int) -> int: ...

    @overload
    def __getitem__(self, i: slice) -> list[int]: ...

    def __getitem__(self, i: int | slice) -> int | list[int]:
        if isinstance(i, slice):
            return [_IDS[k % OUTPUT_CYCLE] for k in range(*i.indices(self._n))]
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError(i)
        return _IDS[i % OUTPUT_CYCLE]

    def __iter__(self):  # type: ignore[no-untyped-def]
        ids = _IDS
        return (ids[k % OUTPUT_CYCLE] for k in range(self._n))


@dataclass(frozen=True)
class EmulatorSpec:
    """What to emulate. Zeros and empty strings choose automatically:

    - ``precision`` "": bf16, or (only when bf16 fits on no more than 8 accelerators)
      the narrowest precision the accelerator computes that makes it fit;
    - ``tp`` 0: the fewest accelerators per replica (1, 2, 4, 8) that hold the model
      with room for its KV cache;
    - ``accelerators``: the total (``tp x replicas``); with ``tp`` it sets ``replicas``.
    """

    accelerator: str = "H200"
    model: str = "llama3.1-8b"
    precision: str = ""
    tp: int = 0
    replicas: int = 0
    accelerators: int = 0
    stack: str = ""
    max_num_seqs: int = 256
    max_batched_tokens: int = 8192
    #: Multiplies every modelled step time (1: real time). Only for measuring the
    #: emulator itself; the label says so when it is not 1.
    time_scale: float = 1.0

    def deployment(self) -> Deployment:
        """The deployment, checked: ConfigError names what does not fit, with numbers."""
        acc = find_accelerator(self.accelerator)
        model = find_model(self.model)
        for name in ("tp", "replicas", "accelerators", "max_num_seqs",
                     "max_batched_tokens"):
            if getattr(self, name) < 0:
                raise ConfigError(f"--{name.replace('_', '-')} must be >= 0 "
                                  f"(got {getattr(self, name)})")
        if self.time_scale < 0:
            raise ConfigError(f"time scale must be >= 0 (got {self.time_scale:g})")
        tp, replicas = self.tp, self.replicas
        if self.accelerators:
            n = self.accelerators
            if tp and replicas and tp * replicas != n:
                raise ConfigError(f"--accelerators {n} is not --tp {tp} x --replicas "
                                  f"{replicas} = {tp * replicas}; give two of the three")
            if tp:
                if n % tp:
                    raise ConfigError(f"--tp {tp} does not divide --accelerators {n}")
                replicas = n // tp
            elif replicas:
                if n % replicas:
                    raise ConfigError(f"--replicas {replicas} does not divide "
                                      f"--accelerators {n}")
                tp = n // replicas
            else:
                tp, replicas = n, 1
        replicas = replicas or 1
        eff = efficiency_for(acc, parse_stack(self.stack) if self.stack else None,
                             model=model.name)
        policy = ServingPolicy(max_num_seqs=self.max_num_seqs or 256,
                               max_batched_tokens=self.max_batched_tokens or 8192)
        if self.precision:
            precisions = [Precision.parse(self.precision)]
        else:
            precisions = [p for p in (Precision.BF16, Precision.FP8, Precision.FP4)
                          if acc.tflops.get(p.value)]
        tps = [tp] if tp else list(_AUTO_TP)
        first_error: ConfigError | None = None
        for prec in precisions:
            for t in tps:
                d = Deployment(acc, model, prec, tp=t, replicas=replicas, efficiency=eff,
                               policy=policy)
                try:
                    d.check()
                except ConfigError as e:
                    if first_error is None:
                        first_error = e
                    if len(precisions) == 1 and len(tps) == 1:
                        raise
                    continue
                return d
        bench = model.benchmarks[0] if model.benchmarks else model.name
        raise ConfigError(
            f"{bench} does not fit on {' or '.join(map(str, tps))} x {acc.short} "
            f"at {', '.join(p.value for p in precisions)}: {first_error}")

    def label(self, d: Deployment | None = None) -> str:
        """The profile every result names, e.g. ``emulated H200 x1, llama3.1-8b, bf16``."""
        d = d or self.deployment()
        scale = f", time x{self.time_scale:g}" if self.time_scale != 1.0 else ""
        return d.label + scale


class Listener(Protocol):
    """Where an emulated request's output goes (called on the clock's event loop).

    A streaming emulator reports tokens with ``on_tokens`` (the first token included);
    one that does not stream reports ``on_first`` and, at the end, the later token
    times with ``on_done``.
    """

    def on_first(self, t_ns: int) -> None:
        """The first output token was made at ``t_ns`` (the prefill's step ended)."""
        ...

    def on_tokens(self, n: int, t_ns: int) -> None:
        """``n`` more output tokens were made by ``t_ns`` (streaming emulators only;
        ``n`` is 1 unless the emulator caught up on steps that fell due together)."""
        ...

    def on_done(self, t_ns: int, later: array[int] | None) -> None:
        """The request finished at ``t_ns``; without streaming, ``later`` holds the
        times of its tokens after the first (one per decode step), else None."""
        ...

    def on_rejected(self, t_ns: int, reason: str) -> None: ...


class _Live:
    """A streamed request that has made its first token."""

    __slots__ = ("first", "listener", "sent", "total")

    def __init__(self, listener: Listener, first: int, total: int) -> None:
        self.listener = listener
        self.first = first  # the index of the step that made its first token
        self.total = total
        self.sent = 0


@dataclass
class LagStats:
    """How late step deliveries ran against the model's timeline (real time only)."""

    count: int = 0
    total_ns: int = 0
    max_ns: int = 0
    over_1ms: int = 0
    rebases: int = 0

    def add(self, lag: int) -> None:
        self.count += 1
        self.total_ns += lag
        if lag > self.max_ns:
            self.max_ns = lag
        if lag > 1_000_000:
            self.over_1ms += 1


class Emulator:
    """Continuous batching for every replica of a deployment, on a clock.

    ``stream``: deliver every token as its step ends (the HTTP server); otherwise only
    first tokens and completions, with the later token times at completion (the
    in-process system under test: far fewer callbacks in virtual time). A request may
    opt out of streaming (a non-streamed HTTP answer).

    Tokens of a step reach each streamed request's listener when the step is delivered.
    When the event loop runs late and further steps are already due by the model's
    timeline, up to ``CATCH_UP_STEPS`` of them are run and delivered at once right after
    it, and each request gets the tokens of all of them in one more call: the emulator's
    own cost per step is then one call per request whatever the number of steps, so it
    keeps up with the model instead of falling further behind (the lateness is in
    :attr:`lag`).
    """

    def __init__(self, d: Deployment, clock: Clock, *, stream: bool = True,
                 time_scale: float = 1.0) -> None:
        self.d = d
        self.clock = clock
        self.stream = stream
        self.scale = time_scale
        self.cluster = Cluster(d)
        if self.cluster.disaggregated:
            raise ConfigError(
                f"the emulator serves aggregated replicas only; this deployment has "
                f"{d.policy.prefill_replicas} prefill-only replicas (use prefill_replicas=0, "
                f"or the simulator for prefill/decode disaggregation)")
        n = len(self.cluster.engines)
        self._busy = [False] * n
        self._kicked = [False] * n
        # rid -> (listener, replica, output tokens, streamed)
        self._reqs: dict[int, tuple[Listener, int, int, bool]] = {}
        self._live: list[dict[int, _Live]] = [{} for _ in range(n)]
        self._last = [-1] * n  # index of each replica's last delivered step
        self._last_end = [0] * n  # and when it ended
        self._first_step: dict[int, int] = {}
        self._ends = [array("q") for _ in range(n)]
        self._timers: dict[int, TimerHandle] = {}
        self._next = 0
        self.lag = LagStats()
        self.finished = 0
        self.rejected = 0
        self.aborted = 0
        self.stopped = False

    # -- state for /metrics ----------------------------------------------------------------
    @property
    def replicas(self) -> int:
        return len(self.cluster.engines)

    def running(self, e: int) -> int:
        return self.cluster.engines[e].num_running

    def waiting(self, e: int) -> int:
        return self.cluster.engines[e].num_waiting

    def kv_usage(self, e: int) -> float:
        return self.cluster.engines[e].kv_usage

    @property
    def prompt_tokens(self) -> int:
        return sum(e.prompt_tokens_in for e in self.cluster.engines)

    @property
    def generation_tokens(self) -> int:
        return sum(e.tokens_out for e in self.cluster.engines)

    @property
    def steps(self) -> int:
        return sum(e.steps for e in self.cluster.engines)

    @property
    def kv_capacity_tokens(self) -> int:
        return self.d.kv_capacity_tokens

    def fits(self, prompt_tokens: int, output_tokens: int) -> bool:
        """Whether a request can ever be admitted (its whole KV cache fits)."""
        return max(1, prompt_tokens) + max(1, output_tokens) <= self.d.kv_capacity_tokens

    # -- requests ----------------------------------------------------------------------------
    def submit(self, prompt_tokens: int, output_tokens: int, listener: Listener, *,
               encoder_flops: float = 0.0, stream: bool | None = None) -> int:
        """Queue a request on the next replica (round-robin); returns its id.
        ``encoder_flops``: its images' vision-encoder work; ``stream``: False for a
        request that only wants its end (default: the emulator's mode)."""
        rid = self._next
        self._next += 1
        e = self.cluster.route()
        streamed = self.stream if stream is None else stream and self.stream
        self._reqs[rid] = (listener, e, max(1, output_tokens), streamed)
        self.cluster.engines[e].submit(rid, prompt_tokens, output_tokens,
                                       encoder_flops=encoder_flops)
        if not self._busy[e] and not self._kicked[e]:
            # plan the step after every callback already due now: requests that arrive
            # together (one socket read, one timer tick) are planned together
            self._kicked[e] = True
            asyncio.get_running_loop().call_soon(self._kick, e)
        return rid

    def abort(self, rid: int) -> bool:
        """The request's client went away: it leaves its replica now, so the next step
        runs without it and its batch slot and KV cache serve others. False if it
        already ended."""
        entry = self._reqs.pop(rid, None)
        if entry is None:
            return False
        e = entry[1]
        self.cluster.engines[e].abort(rid)
        self.cluster.finished(e)
        self._live[e].pop(rid, None)
        self._first_step.pop(rid, None)
        self.aborted += 1
        return True

    def stop(self) -> None:
        """Stop stepping (pending deliveries are dropped)."""
        self.stopped = True
        for h in self._timers.values():
            h.cancel()
        self._timers.clear()

    def _kick(self, e: int) -> None:
        self._kicked[e] = False
        if not self._busy[e]:
            self._run(e, self.clock.now_ns(), self.clock.now_ns())

    def _run(self, e: int, start: int, now: int) -> None:
        """Plan steps of replica ``e`` from ``start``: deliver at once those already due
        at ``now`` (at most ``CATCH_UP_STEPS``), hand their tokens over in one flush, and
        wait for the next one."""
        eng = self.cluster.engines[e]
        scale = self.scale
        caught = 0
        while True:
            if self.stopped or not eng.has_work:
                self._busy[e] = False
                self._timers.pop(e, None)
                if caught:
                    self._flush(e)
                return
            out = eng.advance()
            idx = eng.steps - 1
            self._busy[e] = True
            cost = out.plan.cost.total_ns
            end = start + (cost if scale == 1.0 else int(cost * scale))
            if end > now or caught >= CATCH_UP_STEPS:
                if caught:
                    self._flush(e)
                self._timers[e] = self.clock.call_at(
                    end, functools.partial(self._deliver, e, out, end, idx))
                return
            lag = now - end
            if lag > 0:
                self.lag.add(lag)
            self._apply(e, out, end, idx)
            start = end
            caught += 1

    def _deliver(self, e: int, out: StepOutcome, end: int, idx: int) -> None:
        now = self.clock.now_ns()
        lag = now - end
        if lag > 0:
            self.lag.add(lag)
        self._apply(e, out, end, idx)
        self._flush(e)  # this step's tokens now, before any caught-up ones
        base = end if lag <= REBASE_NS else now
        if lag > REBASE_NS:
            self.lag.rebases += 1
        self._run(e, base, now)

    def _apply(self, e: int, out: StepOutcome, end: int, idx: int) -> None:
        """What step ``idx`` of replica ``e`` did, as of ``end``: rejections, first
        tokens, completions (a completed request gets its last tokens first)."""
        reqs = self._reqs
        live = self._live[e]
        self._last[e] = idx
        ends = self._ends[e]
        if not self.stream:
            ends.append(end)
        step = len(ends) - 1
        for rid in out.rejected:
            entry = reqs.pop(rid, None)
            if entry is None:
                continue
            self.cluster.finished(e)
            self.rejected += 1
            entry[0].on_rejected(end, "the request's KV cache is larger than the whole cache")
        for rid in out.first:
            entry = reqs.get(rid)
            if entry is None:
                continue
            if entry[3]:
                live[rid] = _Live(entry[0], idx, entry[2])
            elif self.stream:
                entry[0].on_first(end)
            else:
                entry[0].on_first(end)
                self._first_step[rid] = step
        for rid in out.done:
            entry = reqs.pop(rid, None)
            if entry is None:
                continue
            self.cluster.finished(e)
            self.finished += 1
            listener = entry[0]
            if entry[3]:
                lv = live.pop(rid)
                if lv.total > lv.sent:
                    listener.on_tokens(lv.total - lv.sent, end)
                listener.on_done(end, None)
            elif self.stream:
                listener.on_done(end, None)
            else:
                first = self._first_step.pop(rid)
                listener.on_done(end, ends[first + 1:step + 1])
        self._last_end[e] = end

    def _flush(self, e: int) -> None:
        """Hand each streamed request of replica ``e`` the tokens it made up to the
        last delivered step."""
        live = self._live[e]
        if not live:
            return
        last = self._last[e] + 1
        t = self._last_end[e]
        for lv in list(live.values()):
            made = last - lv.first
            if made > lv.total:
                made = lv.total
            n = made - lv.sent
            if n > 0:
                lv.sent = made
                lv.listener.on_tokens(n, t)
