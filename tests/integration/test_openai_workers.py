"""Worker processes: one run on several cores, records merged on one time base.

The exact server's truth is on CLOCK_MONOTONIC, like the parent's records; records made
by two workers must be causally consistent with it after the parent moved them onto the
run's clock, and a worker that dies must fail only its own requests ("worker lost").
"""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest

from tests.integration.openai_support import MS, Run, closed, truth_rows
from tokenmark.adapters.clocksync import estimate
from tokenmark.adapters.openai_target import OpenAIConfig
from tokenmark.adapters.workers import WorkerPoolSUT
from tokenmark.errors import ConfigError
from tokenmark.records import ErrorClass, TokenSource
from tokenmark.servers.process import ServerProcess


def test_two_workers_share_the_load_on_one_time_base(tmp_path):
    with ServerProcess(["--ttft-ms", "20", "--itl-ms", "4"], truth=tmp_path / "t.jsonl") as srv:
        run = Run(tmp_path / "out", closed(40, 8), OpenAIConfig(urls=(srv.url,)),
                  sut_class=WorkerPoolSUT, workers=2)
    truth = truth_rows(tmp_path / "t.jsonl")
    d = run.sut.describe()
    assert d["clock_sync"].count("shared CLOCK_MONOTONIC") == 2 and "clock_drift" in d
    errs = []
    for rid, r in run.by_rid().items():
        tr = truth[rid]
        assert r.ok and r.output_tokens == 16 and r.token_source is TokenSource.USAGE
        assert run.t0 + r.issued_ns <= tr["recv_ns"]
        assert run.t0 + r.first_token_ns >= tr["first_ns"]
        assert run.t0 + r.done_ns >= tr["done_ns"]
        errs.append((r.first_token_ns - r.issued_ns) - (tr["first_ns"] - tr["recv_ns"]))
    assert min(errs) >= 0 and np.median(errs) < 5 * MS  # loose: a shared 2-core machine
    st = run.sut.stats[0]
    assert st.requests == 40 and st.ok == 40 and st.output_tokens == 640
    assert run.result.verdicts.valid


def test_a_lost_worker_fails_only_its_requests(tmp_path):
    with ServerProcess(["--ttft-ms", "400"]) as srv:
        killed = []
        cfg = OpenAIConfig(urls=(srv.url,))

        class Killing(WorkerPoolSUT):
            def issue(self, query, handle):
                super().issue(query, handle)
                if query.seq == 5 and not killed:
                    pid = self._procs[0].pid
                    killed.append(pid)
                    os.kill(pid, signal.SIGKILL)

        run = Run(tmp_path / "out", closed(16, 4), cfg, sut_class=Killing, workers=2)
    lost = [r for r in run.records if r.error is ErrorClass.UNANSWERED]
    assert killed and 1 <= len(lost) <= 4
    assert all("worker lost" in r.error_detail for r in lost)
    assert run.result.summary.completed == 16 - len(lost)
    assert not run.result.verdicts.valid


def test_clock_offsets_are_estimated_from_the_fastest_exchange():
    # worker clock 1 ms ahead; round trips of 10, 2 and 50 us: the 2 us one wins
    ex = [(0, 1_000_000 + 5_000, 10_000), (100_000, 1_101_000, 102_000),
          (200_000, 1_230_000, 250_000)]
    other = estimate(ex, same_clock=False)
    assert other.offset_ns == 1_000_000 and other.uncertainty_ns == 1_000
    assert other.to_run(1_500_000) == 500_000
    shared = estimate([(0, 1_000, 2_000)], same_clock=True)
    assert shared.shared and shared.offset_ns == 0
    # "the same clock" that measures 1 ms apart is not believed
    assert not estimate(ex, same_clock=True).shared


def test_workers_need_a_real_clock_and_at_least_one_process():
    from tokenmark.clock import FakeClock, MonotonicClock

    cfg = OpenAIConfig(urls=("http://127.0.0.1:9",), model="m", check_models=False)
    with pytest.raises(ConfigError, match="virtual-time"):
        WorkerPoolSUT(FakeClock(), cfg)
    with pytest.raises(ConfigError, match="at least 1"):
        WorkerPoolSUT(MonotonicClock(), cfg, workers=0)
