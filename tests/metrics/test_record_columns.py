"""Packed record batches (``run --distributed ray``) give the metrics exactly what the
records one by one give: same columns, ITL, error counts and their order, per endpoint."""

from __future__ import annotations

import random

import numpy as np

from tokenmark.metrics.columns import pack
from tokenmark.metrics.endpoints import EndpointBreakdown
from tokenmark.metrics.stats import Column
from tokenmark.metrics.summary import Accumulator
from tokenmark.records import ErrorClass, Phase, RequestRecord, TokenSource


def _records(n: int, seed: int) -> list[RequestRecord]:
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        sched = rnd.randrange(0, 10**9)
        issued = sched + rnd.randrange(0, 10**6) if rnd.random() > 0.05 else -1
        kind = rnd.random()
        err = None
        first = done = -1
        chunks: list[int] = []
        toks: list[int] = []
        if issued >= 0 and kind < 0.8:
            first = issued + rnd.randrange(1, 10**7)
            t = first
            for _ in range(rnd.randrange(1, 6)):
                chunks.append(t)
                toks.append(rnd.choice((1, 1, 2, 5)))
                t += rnd.randrange(0, 10**6)
            done = chunks[-1]
        elif kind < 0.9:
            err = rnd.choice(list(ErrorClass))
        # else: unanswered without an error class (done -1, error None)
        out.append(RequestRecord(
            seq=i, query_id=i // 2, sample_index=rnd.randrange(100), scheduled_ns=sched,
            issued_ns=issued, first_token_ns=first, done_ns=done,
            input_tokens=rnd.randrange(1, 500), output_tokens=sum(toks),
            token_source=TokenSource.USAGE, chunk_ns=chunks, chunk_tokens=toks, error=err,
            phase=rnd.choice((Phase.MEASURE, Phase.MEASURE, Phase.WARMUP)),
            endpoint=rnd.choice(("http://a", "http://b", "")),
            alt_output_tokens=rnd.choice((-1, sum(toks), sum(toks) + 1)),
            reasoning_tokens=rnd.choice((-1, 0, 3)),
            first_answer_ns=rnd.choice((-1, first))))
    return out


def test_add_columns_equals_add_record_by_record():
    recs = _records(3000, seed=7)
    one, bulk = Accumulator(itl_cap=64), Accumulator(itl_cap=64)
    ep_one, ep_bulk = EndpointBreakdown(), EndpointBreakdown()
    for r in recs:
        one.add(r)
        ep_one.add(r)
    i = 0
    rnd = random.Random(1)
    while i < len(recs):  # batches of uneven sizes, one of them empty
        k = rnd.choice((0, 1, 17, 250, 900))
        cols = pack(recs[i:i + k])
        assert len(cols) == len(recs[i:i + k])
        bulk.add_columns(cols)
        ep_bulk.add_columns(cols)
        i += k
    a = one.finish(len(recs))
    b = bulk.finish(len(recs))
    for name in ("seq", "query_id", "scheduled", "issued", "first", "done", "output_tokens",
                 "input_tokens", "ok", "measured", "first_answer", "reasoning_tokens"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert list(a.errors.items()) == list(b.errors.items())
    assert a.errors["unanswered"] > 0 and len(a.errors) > 3
    assert a.token_disagreements == b.token_disagreements > 0
    assert (one.completed, one.failed, one.output_tokens) == (
        bulk.completed, bulk.failed, bulk.output_tokens)
    assert a.itl.spilled and len(a.itl) > 1000
    assert np.array_equal(a.itl.to_numpy(), b.itl.to_numpy())
    assert a.itl.distribution() == b.itl.distribution()
    assert list(ep_one.to_json().items()) == list(ep_bulk.to_json().items())
    assert ep_one.endpoints == ep_bulk.endpoints
    assert set(ep_one.endpoints) == {"http://a", "http://b", ""}


def test_column_extend_spills_where_appends_do():
    # squares above 2**53: the float sum of squares depends on where the spills fall
    rnd = random.Random(3)
    values = [rnd.randrange(10**9, 10**10) for _ in range(1000)]
    appended, extended = Column(cap=16), Column(cap=16)
    for v in values:
        appended.append(v)
    for start in range(0, len(values), 37):
        extended.extend(values[start:start + 37])
    assert np.array_equal(appended.to_numpy(), extended.to_numpy())
    assert appended.spilled
    assert appended.distribution() == extended.distribution()
