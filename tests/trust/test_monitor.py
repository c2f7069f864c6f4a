"""The client monitor: a blocked, saturated event loop makes the run INVALID."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from tokenmark.adapters.inprocess import NullSUT
from tokenmark.api.run import run_benchmark
from tokenmark.clock import SendGate
from tokenmark.config.layering import build_settings
from tokenmark.dataset import LengthDistribution, SyntheticDataset
from tokenmark.mlperf.settings import Scenario
from tokenmark.trust.monitor import ClientMonitor


def busy(ms: float) -> None:
    end = time.perf_counter() + ms / 1000
    while time.perf_counter() < end:
        pass


def watch(blocking_ms: float, seconds: float = 0.6) -> ClientMonitor:
    mon = ClientMonitor(interval_s=0.02)

    async def go():
        await mon.start(None)  # type: ignore[arg-type]
        t_end = time.monotonic() + seconds
        while time.monotonic() < t_end:
            if blocking_ms:
                busy(blocking_ms)  # the loop cannot run anything meanwhile
            await asyncio.sleep(0 if blocking_ms else 0.01)
        await mon.stop()

    asyncio.run(go())
    return mon


def test_a_hogged_loop_is_the_bottleneck():
    mon = watch(40)
    f = mon.figures()
    # our process held a core, or (on a machine shared with other load) the machine was full
    assert f["cpu_busy_fraction"] > 0.8 or f["machine_busy_fraction"] > 0.9
    assert f["loop_lag_ms"]["p99"] > 15  # blocked for 40 ms at a time
    finding = mon.finding()
    assert not finding.passed and finding.rule == "client_saturation"


def test_an_idle_client_is_not():
    mon = watch(0)
    f = mon.figures()
    assert f["cpu_busy_fraction"] < 0.5
    if f["machine_busy_fraction"] and f["machine_busy_fraction"] >= 0.9 and \
            f["loop_lag_ms"]["p99"] > 10:
        pytest.skip("other processes saturate this machine: even an idle client lags")
    assert mon.finding().passed


class HoggingSUT(NullSUT):
    """An in-process system whose issue() burns the client's CPU (a slow client)."""

    def issue(self, query, handle):
        busy(30)
        super().issue(query, handle)


def test_run_is_invalid_when_the_client_was_the_bottleneck(tmp_path):
    layered = build_settings("v6.0", "llama3.1-8b", Scenario.POISSON, overrides={
        "target_qps": 100.0, "min_duration_ms": 800, "min_query_count": 1,
        "max_duration_ms": 800})
    ds = SyntheticDataset(64, LengthDistribution.parse("16"), LengthDistribution.parse("4"),
                          max_output_tokens=4)
    res = run_benchmark(layered, ds, lambda clock: HoggingSUT(), tmp_path / "r",
                        watchers=[ClientMonitor(interval_s=0.02)])
    doc = json.loads((tmp_path / "r" / "results.json").read_text())
    sat = [f for f in doc["verdicts"]["tokenmark"]["findings"]
           if f["rule"] == "client_saturation"]
    assert sat and sat[0]["passed"] is False
    assert doc["verdicts"]["tokenmark"]["validity"] == "INVALID" and res.exit_code == 1
    assert doc["client_monitor"]["loop_lag_ms"]["p99"] > 10


class HeldGate(SendGate):
    """A send due from the watch's first look at it until ``release``."""

    def __init__(self) -> None:  # no queues: only due_ns is read
        self.sent = False
        self.due: int | None = None

    @property
    def due_ns(self) -> int:
        from tokenmark.clock import NEVER
        if self.sent:
            return NEVER
        if self.due is None:
            self.due = time.perf_counter_ns() + 10**9
        return self.due


def test_a_window_near_a_due_send_reads_the_cpu_after_it(monkeypatch):
    """The /proc reads give way to a due send; the lag is still where the watch woke."""
    import tokenmark.trust.monitor as monitor
    monkeypatch.setattr(monitor, "GUARD_NS", 60 * 10**9)  # only the send ends the wait
    gate = HeldGate()
    seen: list[bool] = []

    def cpu() -> float:
        seen.append(gate.sent)
        return 0.0

    mon = ClientMonitor(interval_s=0.01, cpu_s=cpu, wait_s=lambda: 0.0)

    async def go() -> None:
        await mon.start(None)  # type: ignore[arg-type]
        mon._gate = gate  # type: ignore[assignment]
        await asyncio.sleep(0.1)  # the watch woke, found the send due, and waits
        assert len(mon.lags_ns) == 0
        gate.sent = True
        await asyncio.sleep(0.05)
        await mon.stop()

    asyncio.run(go())
    # start's and the watch's first reads; the held window's only after the send
    assert seen[:2] == [False, False] and all(seen[2:]) and len(seen) >= 4
    assert mon.lags_ns[0] < 50_000_000  # woke ~on time: the 0.1 s held is not lag
