"""Watching the client during a run: CPU saturation and event-loop lag.

A task on the run's event loop wakes every ``interval_s``; how late it wakes is the
loop's lag (a loop busy with other callbacks cannot run it on time, and neither can it
run a request's send). Each window also records how much of one core this process used
(``os.times`` user + system over wall time), and the run how busy the whole machine was
(``/proc/stat``, as a share of the cores this process may use). At the end,
:func:`tokenmark.rules.client_bottleneck` judges the run: the client was the bottleneck
when its process, or the machine it shares, was saturated *and* its loop lagged, and the
tokenmark verdict is then INVALID with that finding.

With worker processes (``--workers``) the parent process is the one watched: it keeps
the schedule and hands requests out, so its lag is the run's send lag.
"""

from __future__ import annotations

import asyncio
import os
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tokenmark.metrics.summary import Summary
from tokenmark.records import RequestRecord
from tokenmark.rules import Finding, client_bottleneck
from tokenmark.scenarios import Schedule
from tokenmark.settings import EffectiveSettings
from tokenmark.trust.fingerprint import CpuSnapshot, cpu_snapshot

__all__ = ["ClientMonitor", "MonitorLimits"]


def _own_cpu_s() -> float:
    t = os.times()
    return t.user + t.system


@dataclass(frozen=True)
class MonitorLimits:
    busy_limit: float = 0.9  # share of one core that counts as saturated
    lag_limit_ms: float = 10.0  # p99 event-loop lag that counts as falling behind
    saturated_share: float = 0.5  # share of saturated windows that counts as saturated


class ClientMonitor:
    """A :class:`~tokenmark.api.RunWatcher` filling ``client_monitor`` in results.json."""

    key = "client_monitor"

    def __init__(self, interval_s: float = 0.05, limits: MonitorLimits = MonitorLimits(),
                 *, cpu_s: Callable[[], float] = _own_cpu_s,
                 now_s: Callable[[], float] = time.monotonic) -> None:
        self.interval_s = interval_s
        self.limits = limits
        self._cpu = cpu_s
        self._now = now_s
        self.lags_ns = array("q")
        self.busy = array("d")
        self._task: asyncio.Task[None] | None = None
        self._t0 = 0.0
        self._c0 = 0.0
        self._t1 = 0.0
        self._c1 = 0.0
        self._due = 0.0
        self._prev = (0.0, 0.0)
        self._m0: CpuSnapshot | None = None
        self._m1: CpuSnapshot | None = None
        self.cores = max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                         else (os.cpu_count() or 1))

    def plan(self, eff: EffectiveSettings, schedule: Schedule) -> None:
        pass

    async def start(self, output_dir: Path) -> None:
        self._t0, self._c0 = self._now(), self._cpu()
        self._m0 = cpu_snapshot()
        self._task = asyncio.ensure_future(self._watch())

    async def _watch(self) -> None:
        step = self.interval_s
        self._prev = (self._now(), self._cpu())
        while True:
            self._due = self._prev[0] + step
            await asyncio.sleep(step)
            self._window(self._now(), self._cpu())

    def _window(self, t: float, c: float) -> None:
        t_prev, c_prev = self._prev
        self.lags_ns.append(max(0, int((t - self._due) * 1e9)))
        if t > t_prev:
            self.busy.append((c - c_prev) / (t - t_prev))
        self._prev = (t, c)

    def record(self, rec: RequestRecord) -> None:
        pass

    async def stop(self) -> None:
        self._t1, self._c1 = self._now(), self._cpu()
        self._m1 = cpu_snapshot()
        if self._task is not None:
            if self._due and self._t1 > self._due:
                # the loop never got back to the watcher: this window's lag counts too
                self._window(self._t1, self._c1)
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None

    def figures(self) -> dict[str, Any]:
        lags = np.frombuffer(self.lags_ns, dtype=np.int64) if len(self.lags_ns) else \
            np.zeros(0, dtype=np.int64)
        span = self._t1 - self._t0
        busy = (self._c1 - self._c0) / span if span > 0 else 0.0
        lim = self.limits
        saturated = int(sum(1 for b in self.busy if b >= lim.busy_limit))

        def pct(q: float) -> float:
            return round(float(np.percentile(lags, q)) / 1e6, 3) if lags.size else 0.0

        machine = None
        a, b = self._m0, self._m1
        if a is not None and b is not None and a.machine_busy_s >= 0 and b.t_s > a.t_s:
            machine = round((b.machine_busy_s - a.machine_busy_s) / (b.t_s - a.t_s)
                            / self.cores, 4)
        return {
            "interval_ms": self.interval_s * 1e3,
            "machine_busy_fraction": machine,
            "cores_available": self.cores,
            "windows": int(lags.size),
            "cpu_busy_fraction": round(busy, 4),
            "saturated_windows": saturated,
            "loop_lag_ms": {"p50": pct(50), "p99": pct(99),
                            "max": round(float(lags.max()) / 1e6, 3) if lags.size else 0.0},
            "limits": {"busy_limit": lim.busy_limit, "lag_limit_ms": lim.lag_limit_ms,
                       "saturated_share": lim.saturated_share},
        }

    def finding(self) -> Finding:
        f = self.figures()
        lim = self.limits
        return client_bottleneck(
            f["cpu_busy_fraction"], int(f["loop_lag_ms"]["p99"] * 1e6), f["windows"],
            busy_limit=lim.busy_limit, lag_limit_ns=int(lim.lag_limit_ms * 1e6),
            saturated_share=lim.saturated_share, saturated_samples=f["saturated_windows"],
            machine_busy_fraction=f["machine_busy_fraction"] or 0.0)

    def finish(self, summary: Summary, output_dir: Path
               ) -> tuple[dict[str, Any], list[Finding]]:
        f = self.figures()
        if self._t1 - self._t0 < 3 * self.interval_s:  # too short a run to judge
            f["note"] = "shorter than 3 sampling intervals: not judged"
            return f, []
        return f, [self.finding()]
