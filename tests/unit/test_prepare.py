"""Requests prepared before their send time (issue 21, tokenmark.sut.Preparable).

Ground truth: the runner hands ``prepare`` the very query object it issues next, so a
SUT that renders ahead sends what it would have rendered at the send (the HTTP client's
body equals the renderer's body for that sample, prepared or not)."""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st

from tokenmark.adapters.inprocess import LatencyModel, LatencyModelSUT
from tokenmark.adapters.openai_http import OpenAIHttpSUT
from tokenmark.adapters.openai_target import OpenAIConfig
from tokenmark.clock import MonotonicClock
from tokenmark.config.layering import build_settings
from tokenmark.dataset import LengthDistribution, SyntheticDataset
from tokenmark.loadgen.runner import Runner
from tokenmark.mlperf.scenarios import build_schedule
from tokenmark.mlperf.settings import Scenario, effective
from tokenmark.records import Query
from tokenmark.sut import Preparable, ResponseHandle

MS = 1_000_000


class Preparing(LatencyModelSUT):
    def __init__(self, clock: MonotonicClock) -> None:
        super().__init__(clock, LatencyModel(ttft_ns=2 * MS, tpot_ns=MS))
        self.prepared: list[Query] = []
        self.issued: list[Query] = []

    def prepare(self, query: Query) -> None:
        self.prepared.append(query)

    def issue(self, query: Query, handle: ResponseHandle) -> None:
        self.issued.append(query)
        super().issue(query, handle)


def test_the_runner_prepares_the_query_it_then_issues():
    layered = build_settings("v6.0", "llama3.1-8b", Scenario.POISSON,
                             overrides={"target_qps": 100, "min_duration_ms": 300})
    ds = SyntheticDataset(16, LengthDistribution.parse("8"), LengthDistribution.parse("4"))
    sched = build_schedule(effective(layered.settings, len(ds)), len(ds))
    clock = MonotonicClock()
    sut = Preparing(clock)
    assert isinstance(sut, Preparable)
    out = asyncio.run(Runner(sched, ds, sut, clock).run())
    assert out.issued == len(sut.issued) > 20
    prepared = {id(q) for q in sut.prepared}
    # every send the runner was early for went out with the query prepared for it
    assert sum(id(q) in prepared for q in sut.issued) >= len(sut.issued) // 2
    assert [q.seq for q in sut.issued] == list(range(len(sut.issued)))
    for q in sut.issued:  # the schedule's sample and time, prepared ahead or not
        assert q.sample.prompt == ds.sample(int(sched.sample_index[q.seq])).prompt
        assert q.scheduled_ns == int(sched.scheduled_ns[q.seq])


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 15), st.booleans()), min_size=1, max_size=20),
       st.sampled_from(["chat", "completions"]))
def test_a_prepared_body_is_the_body_rendered_at_the_send(steps, api):
    ds = SyntheticDataset(16, LengthDistribution.parse("uniform:5:40"),
                          LengthDistribution.parse("3"))
    sut = OpenAIHttpSUT(MonotonicClock(), OpenAIConfig(urls=("http://127.0.0.1:9",), api=api))
    for seq, (i, prepare) in enumerate(steps):
        q = Query(seq=seq, query_id=seq, sample=ds.sample(i), scheduled_ns=0)
        if prepare:
            sut.prepare(Query(seq=seq, query_id=seq, sample=ds.sample((i + 1) % 16),
                              scheduled_ns=0))  # another query: not used for q
            sut.prepare(q)
        assert sut.body_for(q) == sut.renderer.body(ds.sample(i))
        assert sut.body_for(q) == sut.renderer.body(ds.sample(i))  # used once, then rendered
