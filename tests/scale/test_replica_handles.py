"""Handles that wrap the runner's keep what a SUT reports beyond tokens and times: a
replica's answers (scale.replicas._Counted) and a compliance probe's (compliance.own
._Probe) carry issue 19's finish reason and stream tokens, first-token ids and reasoning
tokens (before issue 20 both dropped ``details``; the records of a replicated run had
no finish reason)."""

from __future__ import annotations

import asyncio

from tokenmark.compliance.own import _Probe
from tokenmark.records import ResponseDetails
from tokenmark.scale.replicas import _Counted
from tokenmark.sut import DetailsHandle, ReasoningHandle, TokenIdsHandle


class _Full:
    """A handle with every optional method, recording the calls it gets."""

    def __init__(self) -> None:
        self.calls: list[tuple[object, ...]] = []

    def sent(self, t_ns=None):
        self.calls.append(("sent", t_ns))

    def token(self, n=1, t_ns=None):
        self.calls.append(("token", n, t_ns))

    def reasoning(self, n=1, t_ns=None):
        self.calls.append(("reasoning", n, t_ns))

    def reasoning_usage(self, tokens):
        self.calls.append(("reasoning_usage", tokens))

    def first_token_ids(self, ids):
        self.calls.append(("ids", tuple(ids)))

    def details(self, d):
        self.calls.append(("details", d))

    def complete(self, output_tokens=None, source=None, **kw):
        self.calls.append(("complete", output_tokens, kw["endpoint"]))

    def fail(self, error, detail="", **kw):
        self.calls.append(("fail", error))


def test_a_replica_forwards_every_report():
    inner, done = _Full(), []
    h = _Counted(inner, lambda: done.append(1), "replica-1")
    assert isinstance(h, DetailsHandle) and isinstance(h, ReasoningHandle)
    assert isinstance(h, TokenIdsHandle)
    d = ResponseDetails(finish_reason="length", stream_tokens=7, token_basis="usage",
                        demanded_output_tokens=8)
    h.first_token_ids([5, 6])
    h.reasoning(3, 10)
    h.reasoning_usage(4)
    h.details(d)
    h.token(2, 20)
    h.complete(8)
    assert inner.calls == [("ids", (5, 6)), ("reasoning", 3, 10), ("reasoning_usage", 4),
                           ("details", d), ("token", 2, 20), ("complete", 8, "replica-1")]
    assert done == [1]


def test_a_replica_over_a_plain_handle_counts_reasoning_as_output():
    inner = _Full()
    plain = _Counted(_Only(inner), lambda: None, "r")
    plain.details(ResponseDetails(finish_reason="stop"))
    plain.first_token_ids([1])
    plain.reasoning_usage(3)
    plain.reasoning(3, 10)
    assert inner.calls == [("token", 3, 10)]


class _Only:
    """Only the base ResponseHandle methods of ``h``."""

    def __init__(self, h):
        self.sent, self.token, self.complete, self.fail = h.sent, h.token, h.complete, h.fail


def test_a_compliance_probe_keeps_the_finish_reason():
    async def go():
        p = _Probe(0)
        assert isinstance(p, DetailsHandle)
        p.details(ResponseDetails(finish_reason="length", stream_tokens=12))
        p.details(ResponseDetails())  # a later call without them changes nothing
        p.complete(12)
        return p.answer

    a = asyncio.run(go())
    assert (a.finish_reason, a.stream_tokens, a.tokens) == ("length", 12, 12)
