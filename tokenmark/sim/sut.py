"""The performance model as an in-process system under test, on any clock.

:class:`PerfModelSUT` serves the load generator's queries with a
:class:`~tokenmark.sim.cluster.Cluster`, stepping each replica's engine on the run's
clock (``call_at``): in real time it behaves as the emulated server's model does, and on
a :class:`~tokenmark.clock.FakeClock` it is what the simulator's own driver must agree
with. It streams every token (``stream_tokens``) or reports the first token as it
happens and the rest at completion, and it is the bridge that proves the fast driver
equals the real runner on the same model (``tests/sim``).

Like the driver, a replica that receives a request while idle starts its next step in a
callback at the same time rather than at once, so requests sent together are planned
together.
"""

from __future__ import annotations

from tokenmark.clock import Clock
from tokenmark.perfmodel import StepOutcome
from tokenmark.records import ErrorClass, Query, TokenSource
from tokenmark.sim.cluster import Cluster
from tokenmark.sut import ResponseHandle

__all__ = ["PerfModelSUT"]


class PerfModelSUT:
    def __init__(self, clock: Clock, cluster: Cluster, *, stream_tokens: bool = False) -> None:
        if cluster.disaggregated:
            raise ValueError("PerfModelSUT serves aggregated replicas only")
        self._clock = clock
        self.cluster = cluster
        self._stream = stream_tokens
        self._handles: dict[int, tuple[ResponseHandle, int, int]] = {}
        n = len(cluster.engines)
        self._busy = [False] * n
        self._kicked = [False] * n

    @property
    def name(self) -> str:
        return "tokenmark-perfmodel"

    def describe(self) -> dict[str, str]:
        return {
            "kind": "in-process performance model",
            "profile": self.cluster.d.label,
            "note": "modelled delays, not a measurement of hardware",
        }

    async def start(self) -> None:
        return None

    async def flush(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    def issue(self, query: Query, handle: ResponseHandle) -> None:
        s = query.sample
        e = self.cluster.route()
        self._handles[query.seq] = (handle, e, max(1, s.output_tokens))
        self.cluster.engines[e].submit(query.seq, s.input_tokens, s.output_tokens)
        if not self._busy[e] and not self._kicked[e]:
            self._kicked[e] = True
            self._clock.call_at(self._clock.now_ns(), lambda: self._kick(e))

    def _kick(self, e: int) -> None:
        self._kicked[e] = False
        if not self._busy[e]:
            self._step(e, self._clock.now_ns())

    def _step(self, e: int, now: int) -> None:
        eng = self.cluster.engines[e]
        if not eng.has_work:
            self._busy[e] = False
            return
        out = eng.advance(collect_tokens=self._stream)
        self._busy[e] = True
        end = now + out.plan.cost.total_ns
        self._clock.call_at(end, lambda: self._deliver(e, out, end))

    def _deliver(self, e: int, out: StepOutcome, t: int) -> None:
        handles = self._handles
        for rid in out.first:
            handles[rid][0].token(1, t_ns=t)
        if self._stream and out.decoded:
            for rid in out.decoded:
                handles[rid][0].token(1, t_ns=t)
        for rid in out.done:
            handle, _, n = handles.pop(rid)
            self.cluster.finished(e)
            if not self._stream and n > 1:
                handle.token(n - 1, t_ns=t)  # the rest of the output, in one chunk
            handle.complete(n, TokenSource.SUT, t_ns=t)
        for rid in out.rejected:
            handle, _, _ = handles.pop(rid)
            self.cluster.finished(e)
            handle.fail(ErrorClass.SUT_ERROR, "larger than the whole KV cache", t_ns=t)
        self._step(e, t)
