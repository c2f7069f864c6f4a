"""Several systems under test behind one: replicas for scaling runs of in-process SUTs.

HTTP targets have their replicas and routing in the client (``--url`` repeated,
:mod:`tokenmark.adapters.pool`); :class:`ReplicatedSUT` gives any in-process system
the same shape, so a scaling run can put 1, 2, 4, ... copies of a latency model (or of
any SUT a factory makes) behind round-robin or least-in-flight routing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from tokenmark.records import ErrorClass, Query, ResponseDetails, TokenSource
from tokenmark.sut import (
    DetailsHandle,
    ReasoningHandle,
    ResponseHandle,
    SystemUnderTest,
    TokenIdsHandle,
)

__all__ = ["ROUTINGS", "ReplicatedSUT"]

ROUTINGS = ("round-robin", "least-in-flight")


class _Counted:
    """Passes a replica's answers through, counting the replica's requests in flight;
    what a SUT reports beyond tokens and times (:class:`~tokenmark.sut.DetailsHandle`:
    finish reason, stream tokens, token basis; first-token ids; reasoning tokens) reaches
    the record."""

    __slots__ = ("_done", "_h", "_label")

    def __init__(self, h: ResponseHandle, done: Callable[[], None], label: str) -> None:
        self._h = h
        self._done = done
        self._label = label

    def sent(self, t_ns: int | None = None) -> None:
        self._h.sent(t_ns)

    def token(self, n: int = 1, t_ns: int | None = None) -> None:
        self._h.token(n, t_ns)

    def details(self, d: ResponseDetails) -> None:
        if isinstance(self._h, DetailsHandle):
            self._h.details(d)

    def first_token_ids(self, ids: Sequence[int]) -> None:
        if isinstance(self._h, TokenIdsHandle):
            self._h.first_token_ids(ids)

    def reasoning(self, n: int = 1, t_ns: int | None = None) -> None:
        if isinstance(self._h, ReasoningHandle):
            self._h.reasoning(n, t_ns)
        else:  # output like any other
            self._h.token(n, t_ns)

    def reasoning_usage(self, tokens: int) -> None:
        if isinstance(self._h, ReasoningHandle):
            self._h.reasoning_usage(tokens)

    def complete(self, output_tokens: int | None = None,
                 source: TokenSource = TokenSource.SUT, *, t_ns: int | None = None,
                 input_tokens: int | None = None, alt_output_tokens: int = -1,
                 cached_input_tokens: int = -1, token_ids: Sequence[int] | None = None,
                 text: str | None = None, endpoint: str = "") -> None:
        self._done()
        self._h.complete(output_tokens, source, t_ns=t_ns, input_tokens=input_tokens,
                         alt_output_tokens=alt_output_tokens,
                         cached_input_tokens=cached_input_tokens, token_ids=token_ids,
                         text=text, endpoint=endpoint or self._label)

    def fail(self, error: ErrorClass, detail: str = "", *, t_ns: int | None = None,
             endpoint: str = "") -> None:
        self._done()
        self._h.fail(error, detail, t_ns=t_ns, endpoint=endpoint or self._label)


class ReplicatedSUT:
    """``replicas`` independent systems; each query goes to one of them."""

    def __init__(self, replicas: Sequence[SystemUnderTest], routing: str = "round-robin"
                 ) -> None:
        if not replicas:
            raise ValueError("at least one replica")
        if routing not in ROUTINGS:
            raise ValueError(f"unknown routing {routing!r}")
        self.replicas = list(replicas)
        self.routing = routing
        self._in_flight = [0] * len(replicas)
        self._next = 0

    @property
    def name(self) -> str:
        return self.replicas[0].name

    def describe(self) -> dict[str, str]:
        d = dict(self.replicas[0].describe())
        d["replicas"] = str(len(self.replicas))
        d["routing"] = self.routing
        return d

    async def start(self) -> None:
        await asyncio.gather(*(r.start() for r in self.replicas))

    async def flush(self) -> None:
        await asyncio.gather(*(r.flush() for r in self.replicas))

    async def stop(self) -> None:
        await asyncio.gather(*(r.stop() for r in self.replicas))

    def _pick(self) -> int:
        n = len(self.replicas)
        i = self._next
        self._next = (i + 1) % n
        if self.routing == "least-in-flight":
            best = i
            for k in range(1, n):
                j = (i + k) % n
                if self._in_flight[j] < self._in_flight[best]:
                    best = j
            return best
        return i

    def issue(self, query: Query, handle: ResponseHandle) -> None:
        k = self._pick()
        self._in_flight[k] += 1

        def done(k: int = k) -> None:
            self._in_flight[k] -= 1

        self.replicas[k].issue(query, _Counted(handle, done, f"replica{k}"))
