"""Issue 21: a real-time run builds the prompts it will send before its clock starts
(LoadGen's LoadSamplesToRam), for tokenmark's own closed loops too: their samples come
from an endless shuffle of the performance set, and a synthetic prompt built at send
time cost ~1 ms of CPU per request inside the measurement."""

from __future__ import annotations

import asyncio

import pytest

from tokenmark.adapters.inprocess import NullSUT
from tokenmark.clock import MonotonicClock
from tokenmark.dataset import LengthDistribution, SyntheticDataset
from tokenmark.loadgen.runner import Runner
from tokenmark.mlperf.scenarios import build_schedule
from tokenmark.mlperf.settings import Scenario, Seeds, TestSettings, effective


class _Watched(SyntheticDataset):
    """Notes each prompt built and whether the run had sent anything by then."""

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.built: list[tuple[int, int]] = []  # (sample, requests sent before it)
        self.sut: _Counting | None = None

    def _make_prompt(self, i, *a, **k):
        self.built.append((i, self.sut.sent if self.sut else -1))
        return super()._make_prompt(i, *a, **k)


class _Counting(NullSUT):
    sent = 0

    def issue(self, query, handle):
        self.sent += 1
        super().issue(query, handle)


@pytest.mark.parametrize(("perf", "queries"), [(12, 40), (30, 7)])
def test_a_closed_loop_builds_its_prompts_before_its_first_request(perf, queries):
    ds = _Watched(perf, LengthDistribution.parse("40"), LengthDistribution.parse("3"))
    sut = _Counting()
    ds.sut = sut
    settings = TestSettings(round="t", benchmark="t", scenario=Scenario.CLOSED_LOOP,
                            seeds=Seeds(1, 2, 3), concurrency=4, min_query_count=queries,
                            max_query_count=queries, min_duration_ms=0,
                            performance_sample_count=perf)
    schedule = build_schedule(effective(settings, len(ds)), len(ds))
    assert schedule.endless and len(schedule) == 0  # samples come from the shuffle
    runner = Runner(schedule, ds, sut, MonotonicClock())
    asyncio.run(runner.run())
    assert runner.stats.completed == queries
    # every prompt the run sent was built once, before the first request
    assert all(sent == 0 for _, sent in ds.built), ds.built
    assert sorted(i for i, _ in ds.built) == sorted({schedule.order[k] for k in range(queries)})
