"""The system-under-test contract: as small as LoadGen's.

A system under test (SUT) receives one :class:`~tokenmark.records.Query` at a time
through :meth:`SystemUnderTest.issue`, which must return at once (start the work, do not
wait for it). It answers through the :class:`ResponseHandle` it was given: ``token`` for
each streamed chunk of output, then exactly one of ``complete`` or ``fail``. The handle
takes the timestamps (from the run's clock) unless the SUT passes its own, which
in-process models with known timing do.

HTTP clients, in-process engines, the emulated server's client and the simulator all sit
behind this contract; the load generator never learns what a model, a token or a
network is beyond these calls.

Reasoning models: a handle that is also a :class:`ReasoningHandle` (the runner's is)
takes reasoning chunks apart from answer chunks, so results can count reasoning tokens
and time the first *answer* token beside the first token. A SUT checks once per request
(``isinstance(handle, ReasoningHandle)``) and otherwise reports reasoning chunks with
``token`` as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from tokenmark.records import ErrorClass, Query, ResponseDetails, TokenSource

__all__ = ["DetailsHandle", "PromptProbe", "ReasoningHandle", "ResponseHandle",
           "SystemUnderTest", "TokenIdsHandle"]


class ResponseHandle(Protocol):
    """How a SUT reports one request. All methods must be called on the event loop."""

    def sent(self, t_ns: int | None = None) -> None:
        """Optional: the moment the request actually left (default: just before issue)."""
        ...

    def token(self, n: int = 1, t_ns: int | None = None) -> None:
        """``n`` output tokens arrived in one chunk. The first call is the first token."""
        ...

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
        """The request finished. ``output_tokens=None`` counts the streamed tokens."""
        ...

    def fail(
        self,
        error: ErrorClass,
        detail: str = "",
        *,
        t_ns: int | None = None,
        endpoint: str = "",
    ) -> None:
        """The request failed; whatever streamed before is kept in the record."""
        ...


@runtime_checkable
class ReasoningHandle(ResponseHandle, Protocol):
    """A :class:`ResponseHandle` that also takes reasoning output apart.

    - ``reasoning(n, t_ns)``: ``n`` reasoning tokens (``delta.reasoning_content``, or
      ``delta.reasoning``) arrived in one chunk. They are output like any other: the first
      chunk of either kind is the first token (TTFT) and every chunk counts for ITL; they
      are summed as the request's reasoning tokens. ``token`` remains the call for answer
      (``delta.content``) chunks, and its first call marks the first answer token. One
      socket read that carried both kinds is reported as ``reasoning(r, t)`` then
      ``token(a, t)`` with the same ``t``: they make one chunk of ``r + a`` tokens.
    - ``reasoning_usage(tokens)``: the server's own count
      (``usage.completion_tokens_details.reasoning_tokens``), which replaces the streamed
      sum; call it before ``complete``. ``complete``'s ``output_tokens`` stays the whole
      output (reasoning and answer), as ``usage.completion_tokens`` is.
    """

    def reasoning(self, n: int = 1, t_ns: int | None = None) -> None: ...

    def reasoning_usage(self, tokens: int) -> None: ...


@runtime_checkable
class TokenIdsHandle(ResponseHandle, Protocol):
    """A :class:`ResponseHandle` that also takes the first chunk's token ids.

    ``first_token_ids(ids)``: the ids of the first streamed chunk, reported when that
    chunk arrives (what an MLPerf harness passes to LoadGen's ``FirstTokenComplete``).
    The accuracy log writes them as ``token_data`` and TEST06 compares them with the
    start of the completed output, so a SUT must report what it actually streamed first,
    not a copy of the final answer. SUTs that know token ids (in-process engines) call
    it before or with their first ``token``; others never do.
    """

    def first_token_ids(self, ids: Sequence[int]) -> None: ...


@runtime_checkable
class DetailsHandle(ResponseHandle, Protocol):
    """A :class:`ResponseHandle` that also keeps what the SUT learned about the answer.

    ``details(d)``: the finish reason, the tokens counted from the streamed events and
    how they were counted, the output length the request demanded
    (:class:`~tokenmark.records.ResponseDetails`); fields left at their defaults are not
    changed, so a SUT may call it at issue and again before ``complete`` or ``fail``.
    When ``token_basis`` is ``usage``, ``complete`` spreads ``output_tokens`` over the
    streamed chunks. SUTs check once per request (``isinstance``) and otherwise skip it.
    """

    def details(self, d: ResponseDetails) -> None: ...


@runtime_checkable
class PromptProbe(Protocol):
    """A SUT that can measure the tokens a server adds to a prompt (a chat template's
    role markers, a BOS token): ``prompt_overhead(text, planned)`` sends one request
    of ``text`` (``planned`` tokens by the dataset's tokenizer) asking for one token, and
    returns the server's ``prompt_tokens`` minus ``planned`` (``None``: not reported)."""

    async def prompt_overhead(self, text: str, planned: int) -> int | None: ...


@runtime_checkable
class Preparable(Protocol):
    """A SUT that can do a query's work before its send time: the runner calls
    ``prepare(query)`` before it waits for a timed send and then ``issue`` with that
    same query object (issue 21: the demo rendered each request body, ~30 us, between
    the due time and the send's time stamp). ``issue`` of any other query works as
    before; a prepared query may never be issued (a stop)."""

    def prepare(self, query: Query) -> None: ...


class SystemUnderTest(Protocol):
    @property
    def name(self) -> str:
        """Shown in logs (LoadGen's ``SUT name``)."""
        ...

    def describe(self) -> dict[str, str]:
        """Labels that say what was measured (e.g. the emulated profile)."""
        ...

    async def start(self) -> None: ...

    def issue(self, query: Query, handle: ResponseHandle) -> None:
        """Start serving ``query``; return immediately."""
        ...

    async def flush(self) -> None:
        """No more queries will come (LoadGen's ``FlushQueries``)."""
        ...

    async def stop(self) -> None: ...
