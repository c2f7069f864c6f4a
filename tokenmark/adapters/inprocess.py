"""In-process systems under test with known timing.

:class:`LatencyModelSUT` answers every request after a modelled time to first token and a
modelled time per output token, on the run's clock (so it runs in real time or in
virtual time alike). Its batch effects are deliberately simple and documented:

- ``max_batch`` requests are served at once; the rest wait in FIFO order (queueing
  shows up in TTFT, as on a real server);
- the time per output token grows with the number of requests being served:
  ``tpot * (1 + batch_slope * (active - 1))``, fixed when a request starts;
- prefill cost: ``ttft + ttft_per_input_token * input_tokens``.

Output length is the sample's ``output_tokens``. By default the model reports the first
token when it happens and the rest, with their exact times, at completion (two timers per
request); ``stream_tokens=True`` reports every token at its own time instead.

:class:`NullSUT` answers every request at once with its sample's output length: it is
what measures the load generator's own cost.
"""

from __future__ import annotations

import functools
import random
from collections import deque
from dataclasses import dataclass

from tokenmark.clock import Clock
from tokenmark.records import Query, TokenSource
from tokenmark.sut import ResponseHandle

__all__ = ["LatencyModel", "LatencyModelSUT", "NullSUT"]


@dataclass(frozen=True, slots=True)
class LatencyModel:
    ttft_ns: int = 50_000_000
    tpot_ns: int = 10_000_000
    ttft_per_input_token_ns: float = 0.0
    batch_slope: float = 0.0
    max_batch: int = 0  # 0: unlimited
    jitter: float = 0.0  # relative, uniform in [1 - jitter, 1 + jitter], seeded
    seed: int = 0

    def describe(self) -> str:
        parts = [f"TTFT {self.ttft_ns / 1e6:g} ms", f"TPOT {self.tpot_ns / 1e6:g} ms"]
        if self.ttft_per_input_token_ns:
            parts.append(f"+{self.ttft_per_input_token_ns / 1e3:g} us/input token")
        if self.batch_slope:
            parts.append(f"TPOT x(1+{self.batch_slope:g}*(batch-1))")
        if self.max_batch:
            parts.append(f"max batch {self.max_batch}")
        if self.jitter:
            parts.append(f"jitter ±{self.jitter:.0%}")
        return ", ".join(parts)


class LatencyModelSUT:
    def __init__(
        self, clock: Clock, model: LatencyModel, *, stream_tokens: bool = False
    ) -> None:
        self._clock = clock
        self.model = model
        self._stream = stream_tokens
        self._active = 0
        self._queue: deque[tuple[Query, ResponseHandle]] = deque()
        self._rng = random.Random(model.seed)

    @property
    def name(self) -> str:
        return "tokenmark-latency-model"

    def describe(self) -> dict[str, str]:
        return {
            "kind": "in-process latency model",
            "profile": self.model.describe(),
            "note": "modelled delays, not a measurement of hardware",
        }

    async def start(self) -> None:
        return None

    async def flush(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    def issue(self, query: Query, handle: ResponseHandle) -> None:
        m = self.model
        if m.max_batch and self._active >= m.max_batch:
            self._queue.append((query, handle))
            return
        self._start(query, handle, self._clock.now_ns())

    def _factor(self) -> float:
        j = self.model.jitter
        return 1.0 + (self._rng.uniform(-j, j) if j else 0.0)

    def _start(self, query: Query, handle: ResponseHandle, now: int) -> None:
        m = self.model
        self._active += 1
        ttft = int((m.ttft_ns + m.ttft_per_input_token_ns * query.sample.input_tokens)
                   * self._factor())
        tpot = int(m.tpot_ns * (1.0 + m.batch_slope * (self._active - 1)) * self._factor())
        n = max(1, query.sample.output_tokens)
        first = now + ttft
        done = first + (n - 1) * tpot
        clock = self._clock
        if self._stream:
            for k in range(n - 1):
                t = first + k * tpot
                clock.call_at(t, functools.partial(handle.token, 1, t))
        else:
            clock.call_at(first, lambda: handle.token(1, t_ns=first))

        def finish() -> None:
            if self._stream:
                handle.token(1, t_ns=done)
            else:
                for k in range(1, n):
                    handle.token(1, t_ns=first + k * tpot)
            handle.complete(n, TokenSource.SUT, t_ns=done)
            self._active -= 1
            if self._queue:
                q, h = self._queue.popleft()
                self._start(q, h, done)

        clock.call_at(done, finish)


class NullSUT:
    """Answers at once, with the sample's output length: measures the client itself."""

    @property
    def name(self) -> str:
        return "tokenmark-null"

    def describe(self) -> dict[str, str]:
        return {"kind": "null", "note": "answers instantly; measures tokenmark's own cost"}

    async def start(self) -> None:
        return None

    async def flush(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    def issue(self, query: Query, handle: ResponseHandle) -> None:
        handle.complete(max(1, query.sample.output_tokens), TokenSource.SUT)
