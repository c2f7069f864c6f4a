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
capacity limit shows there, not as silently slower steps. Past ``REBASE_NS`` of lateness
the timeline restarts from now instead of bursting to catch up.

Output text is not modelled: the HTTP front streams words of the built-in tokenizer, one
token per event, and stops at the request's ``max_tokens`` (the emulated model never
emits an end-of-sequence token, so ``ignore_eos`` changes nothing).
"""

from __future__ import annotations

import asyncio
from array import array
from dataclasses import dataclass
from typing import Protocol

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

__all__ = ["REBASE_NS", "Emulator", "EmulatorSpec", "LagStats", "Listener"]

#: Lateness of a step's delivery beyond which the timeline restarts from now.
REBASE_NS = 100_000_000
_AUTO_TP = (1, 2, 4, 8)


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
        eff = efficiency_for(acc, parse_stack(self.stack) if self.stack else None)
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
    """Where an emulated request's output goes (called on the clock's event loop)."""

    def on_first(self, t_ns: int) -> None:
        """The first output token was made at ``t_ns`` (the prefill's step ended)."""
        ...

    def on_token(self, t_ns: int) -> None:
        """One more output token (streaming emulators only)."""
        ...

    def on_done(self, t_ns: int, later: array[int] | None) -> None:
        """The request finished at ``t_ns``; without streaming, ``later`` holds the
        times of its tokens after the first (one per decode step), else None."""
        ...

    def on_rejected(self, t_ns: int, reason: str) -> None: ...


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
    in-process system under test: far fewer callbacks in virtual time).
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
        self._reqs: dict[int, tuple[Listener, int]] = {}
        self._first_step: dict[int, int] = {}
        self._ends = [array("q") for _ in range(n)]
        self._timers: dict[int, TimerHandle] = {}
        self._next = 0
        self.lag = LagStats()
        self.finished = 0
        self.rejected = 0
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
    def submit(self, prompt_tokens: int, output_tokens: int, listener: Listener) -> int:
        """Queue a request on the next replica (round-robin); returns its id."""
        rid = self._next
        self._next += 1
        e = self.cluster.route()
        self._reqs[rid] = (listener, e)
        self.cluster.engines[e].submit(rid, prompt_tokens, output_tokens)
        if not self._busy[e] and not self._kicked[e]:
            # plan the step after every callback already due now: requests that arrive
            # together (one socket read, one timer tick) are planned together
            self._kicked[e] = True
            asyncio.get_running_loop().call_soon(self._kick, e)
        return rid

    def stop(self) -> None:
        """Stop stepping (pending deliveries are dropped)."""
        self.stopped = True
        for h in self._timers.values():
            h.cancel()
        self._timers.clear()

    def _kick(self, e: int) -> None:
        self._kicked[e] = False
        if not self._busy[e]:
            self._step(e, self.clock.now_ns())

    def _step(self, e: int, start: int) -> None:
        eng = self.cluster.engines[e]
        if self.stopped or not eng.has_work:
            self._busy[e] = False
            self._timers.pop(e, None)
            return
        out = eng.advance(collect_tokens=self.stream)
        self._busy[e] = True
        cost = out.plan.cost.total_ns
        end = start + (cost if self.scale == 1.0 else int(cost * self.scale))
        self._timers[e] = self.clock.call_at(end, lambda: self._deliver(e, out, end))

    def _deliver(self, e: int, out: StepOutcome, end: int) -> None:
        now = self.clock.now_ns()
        lag = now - end
        if lag > 0:
            self.lag.add(lag)
        reqs = self._reqs
        ends = self._ends[e]
        step = len(ends)
        if not self.stream:
            ends.append(end)
        for rid in out.rejected:
            listener, _ = reqs.pop(rid)
            self.cluster.finished(e)
            self.rejected += 1
            listener.on_rejected(end, "the request's KV cache is larger than the whole cache")
        for rid in out.first:
            reqs[rid][0].on_first(end)
            if not self.stream:
                self._first_step[rid] = step
        if self.stream and out.decoded:
            for rid in out.decoded:
                reqs[rid][0].on_token(end)
        for rid in out.done:
            listener, _ = reqs.pop(rid)
            self.cluster.finished(e)
            self.finished += 1
            if self.stream:
                listener.on_done(end, None)
            else:
                first = self._first_step.pop(rid)
                listener.on_done(end, ends[first + 1:step + 1])
        base = end if lag <= REBASE_NS else now
        if lag > REBASE_NS:
            self.lag.rebases += 1
        self._step(e, base)
