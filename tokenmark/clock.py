"""Clocks: integer nanoseconds from a monotonic source, behind one small interface.

Everything that measures or waits goes through a :class:`Clock`, so the same runner and
the same in-process systems under test run against real time (:class:`MonotonicClock`)
or virtual time (:class:`FakeClock`). Virtual time is driven by an asyncio event loop
whose notion of time *is* the fake clock (:func:`run_virtual`): when the loop has
nothing to do but wait for a timer, the clock jumps to that timer instead of sleeping,
so a ten-minute benchmark in virtual time takes as long as its bookkeeping.

Times are integers in nanoseconds. Only differences matter; each run picks its own
origin ``t0`` and records everything relative to it, with one wall-clock anchor
(:func:`wall_anchor`) for the logs.
"""

from __future__ import annotations

import asyncio
import heapq
import math
import selectors
import threading
import time
import weakref
from collections.abc import Callable, Coroutine
from typing import Any, Protocol, TypeVar

__all__ = [
    "NEVER",
    "SPIN_WINDOW_NS",
    "Clock",
    "FakeClock",
    "MonotonicClock",
    "SendGate",
    "TimerHandle",
    "run_virtual",
    "send_gate",
    "wall_anchor",
]

T = TypeVar("T")

#: How close to a deadline :class:`MonotonicClock` stops sleeping on the event loop's
#: timer and yields in a tight loop instead, so sends land within microseconds of their
#: scheduled time. The loop's epoll wake-up is rounded up to whole milliseconds and, on
#: the project's VMs, arrives another 0.1-0.3 ms late; measured at 30 queries/s, a 1.2 ms
#: window gave a send-lag p99 of ~0.9 ms, 2 ms ~0.2 ms and 3 ms ~25 us. The price: up to
#: 3 ms of spinning per send, so above ~330 sends/s the issuing loop never blocks (it
#: still runs every other callback between spins).
SPIN_WINDOW_NS = 3_000_000
#: The last stretch before a deadline is waited without yielding to the event loop: one
#: loop pass may run a burst of socket reads (each a ``recv`` and a copy, ~15 us here;
#: a decode step lands on every stream at once), which made a due send ~0.1-0.4 ms late
#: (bench/loop_stalls.py). Reads that land meanwhile wait in the kernel at most this
#: long before they are read and timed.
FINAL_SPIN_NS = 100_000


#: A deadline that never comes (``SendGate.due_ns`` when no timed send is waiting).
NEVER = 1 << 62


class CatchUp(Protocol):
    """Work held back for a due send that must be done now (a stop, a timeout)."""

    def flush(self) -> None: ...


class SendGate:
    """When the load generator's next timed send is due, on ``time.perf_counter_ns``.

    The runner publishes it before it waits for a send and clears it (:data:`NEVER`)
    when nothing is scheduled (closed loops, a full concurrency cap, the end); work that
    can wait without changing what is measured (parsing reads whose times are already
    taken: :class:`tokenmark.adapters.http1.ReadQueue`) gives way while a send is due.
    Each such queue registers itself (:meth:`register`) so a stop can make it catch up
    first (:meth:`catch_up`). One gate per thread (one event loop runs per thread); two
    runners on one loop share it: the later deadline may hide the earlier, which only
    lets parsing go on, as it did before the gate.
    """

    __slots__ = ("_queues", "due_ns")

    def __init__(self) -> None:
        self.due_ns = NEVER
        self._queues: weakref.WeakSet[Any] = weakref.WeakSet()

    def register(self, queue: CatchUp) -> None:
        self._queues.add(queue)

    def catch_up(self) -> None:
        """Do every held-back piece of work now (before a stop marks requests unanswered)."""
        for q in list(self._queues):
            q.flush()

    async def after_due_send(self, guard_ns: int) -> bool:
        """If a send is due within ``guard_ns``, yield to the loop until it is out (the
        runner publishes the next one) or ``guard_ns`` past its due time; True if it
        waited. For periodic work that must not run just before a send."""
        due = self.due_ns
        perf = time.perf_counter_ns
        if due == NEVER or due - perf() >= guard_ns:
            return False
        while self.due_ns == due and perf() < due + guard_ns:
            await asyncio.sleep(0)
        return True


_GATES = threading.local()


def send_gate() -> SendGate:
    """This thread's :class:`SendGate`."""
    gate: SendGate | None = getattr(_GATES, "gate", None)
    if gate is None:
        gate = _GATES.gate = SendGate()
    return gate


class TimerHandle(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    """A monotonic clock in integer nanoseconds that can also wait and call back."""

    def now_ns(self) -> int:
        """The current time in ns from an arbitrary, fixed origin."""
        ...

    async def sleep_until(self, t_ns: int) -> None:
        """Return as soon as possible at or after ``t_ns``; never earlier."""
        ...

    def call_at(self, t_ns: int, callback: Callable[[], None]) -> TimerHandle:
        """Run ``callback`` on the event loop at (or just after) ``t_ns``."""
        ...


def wall_anchor() -> tuple[int, int]:
    """A pair (monotonic ns, wall-clock ns since the epoch) read back to back."""
    mono = time.perf_counter_ns()
    wall = time.time_ns()
    return mono, wall


class MonotonicClock:
    """Real time: ``time.perf_counter_ns`` (CLOCK_MONOTONIC on Linux).

    ``sleep_until`` sleeps on the event loop's timer until ``SPIN_WINDOW_NS`` before the
    deadline, then yields to the loop (other callbacks still run) until ``FINAL_SPIN_NS``
    before it, and waits out the rest without yielding.
    """

    __slots__ = ()

    def now_ns(self) -> int:
        return time.perf_counter_ns()

    async def sleep_until(self, t_ns: int) -> None:
        now = time.perf_counter_ns
        while True:
            remaining = t_ns - now()
            if remaining <= 0:
                return
            if remaining > SPIN_WINDOW_NS:
                await asyncio.sleep((remaining - SPIN_WINDOW_NS) / 1e9)
            elif remaining > FINAL_SPIN_NS:
                await asyncio.sleep(0)
            else:
                while now() < t_ns:
                    pass
                return

    def call_at(self, t_ns: int, callback: Callable[[], None]) -> TimerHandle:
        loop = asyncio.get_running_loop()
        delay = (t_ns - time.perf_counter_ns()) / 1e9
        return loop.call_later(max(0.0, delay), callback)


class FakeClock:
    """Virtual time for tests and simulation.

    Outside an event loop it is a plain settable clock (``advance``/``set``). Inside
    :func:`run_virtual` the loop advances it: whenever the loop would block waiting for
    a timer, the clock jumps exactly to the earliest deadline registered through
    :meth:`sleep_until`/:meth:`call_at` (or the loop's own next timer), so waits return
    at exactly the nanosecond asked for.
    """

    __slots__ = ("_deadlines", "_now")

    def __init__(self, start_ns: int = 0) -> None:
        self._now = start_ns
        self._deadlines: list[int] = []

    def now_ns(self) -> int:
        return self._now

    def advance(self, delta_ns: int) -> None:
        if delta_ns < 0:
            raise ValueError("a clock cannot go backwards")
        self._now += delta_ns

    def set(self, t_ns: int) -> None:
        if t_ns < self._now:
            raise ValueError("a clock cannot go backwards")
        self._now = t_ns

    async def sleep_until(self, t_ns: int) -> None:
        if t_ns <= self._now:
            await asyncio.sleep(0)
            return
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        heapq.heappush(self._deadlines, t_ns)
        loop.call_at(t_ns / 1e9, _resolve, fut)
        await fut

    def call_at(self, t_ns: int, callback: Callable[[], None]) -> TimerHandle:
        loop = asyncio.get_running_loop()
        if t_ns > self._now:
            heapq.heappush(self._deadlines, t_ns)
        return loop.call_at(max(t_ns, self._now) / 1e9, callback)

    # -- used by the virtual-time loop -------------------------------------------------
    def _advance_for_timeout(self, timeout_s: float) -> None:
        """Jump forward by the loop's select timeout, landing exactly on a deadline."""
        horizon = self._now + math.ceil(timeout_s * 1e9)
        deadlines = self._deadlines
        while deadlines and deadlines[0] <= self._now:
            heapq.heappop(deadlines)
        if deadlines and deadlines[0] <= horizon:
            self._now = heapq.heappop(deadlines)
        else:
            self._now = horizon


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class _VirtualSelector(selectors.BaseSelector):
    """A selector that polls real file descriptors without blocking and, when idle,
    advances the fake clock by the timeout instead of sleeping."""

    def __init__(self, clock: FakeClock) -> None:
        self._real = selectors.DefaultSelector()
        self._clock = clock

    def register(
        self, fileobj: Any, events: int, data: Any = None
    ) -> selectors.SelectorKey:
        return self._real.register(fileobj, events, data)

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        return self._real.unregister(fileobj)

    def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._real.modify(fileobj, events, data)

    def select(
        self, timeout: float | None = None
    ) -> list[tuple[selectors.SelectorKey, int]]:
        ready = self._real.select(0)
        if ready:
            return ready
        if timeout is None:
            # Nothing is scheduled: only real I/O can wake us.
            return self._real.select(None)
        if timeout > 0:
            self._clock._advance_for_timeout(timeout)
        return []

    def close(self) -> None:
        self._real.close()

    def get_map(self) -> Any:
        return self._real.get_map()

    def get_key(self, fileobj: Any) -> selectors.SelectorKey:
        return self._real.get_key(fileobj)


class _VirtualTimeLoop(asyncio.SelectorEventLoop):
    def __init__(self, clock: FakeClock) -> None:
        super().__init__(selector=_VirtualSelector(clock))
        self._fake_clock = clock
        self._clock_resolution = 1e-9

    def time(self) -> float:
        return self._fake_clock._now / 1e9


def run_virtual(coro: Coroutine[Any, Any, T], clock: FakeClock) -> T:
    """Run ``coro`` to completion on an event loop whose time is ``clock``."""
    loop = _VirtualTimeLoop(clock)
    try:
        return loop.run_until_complete(coro)
    finally:
        try:
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()
