"""Watching the client during a run: CPU saturation and event-loop lag.

A task on the run's event loop wakes every ``interval_s``; how late it wakes is the
loop's lag (a loop busy with other callbacks cannot run it on time, and neither can it
run a request's send). Each window also records how much of one core this process used
(``os.times`` user + system over wall time) and how long it waited for a CPU while
runnable (``/proc/self/schedstat``): their sum is its demand, a whole core when it always
had work, however busy the machine; and the run how busy the whole machine was
(``/proc/stat``) and how much of that was other processes' (the machine's busy time
minus tokenmark's own processes: this one and its live child processes, the client
workers). At the end, :func:`tokenmark.mlperf.rules.client_bottleneck` judges the run: the
client was the bottleneck when its own process was saturated *and* its loop lagged (the
tokenmark verdict is then INVALID with that finding); :func:`tokenmark.mlperf.rules.machine_busy`
warns when other processes used half the cores or more, which is no fault of the client.
:meth:`ClientMonitor.client_figures` hands the measured causes to the send-lag rule.

The watch reads ``/proc`` (0.1-0.25 ms a window on the project's VMs, cold caches), so a
window that ends within ``GUARD_NS`` of the runner's next timed send
(:class:`tokenmark.clock.SendGate`) takes its lag where it woke and reads the CPU after
that send is out (issue 21: a send waited behind the watch).

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

from tokenmark import cpus
from tokenmark.clock import SendGate, send_gate
from tokenmark.metrics.summary import Summary
from tokenmark.mlperf.rules import Finding, client_bottleneck, machine_busy
from tokenmark.mlperf.scenarios import Schedule
from tokenmark.mlperf.settings import EffectiveSettings
from tokenmark.records import RequestRecord
from tokenmark.trust.fingerprint import CpuSnapshot, cpu_snapshot

__all__ = ["GUARD_NS", "ClientMonitor", "MonitorLimits"]

#: A window ending this close to a due send reads the CPU after the send.
GUARD_NS = 1_000_000


def _own_cpu_s() -> float:
    t = os.times()
    return t.user + t.system


_SCHEDSTAT: list[int] = [-1, -1]  # (pid, fd) of this process's open /proc schedstat


def _runq_wait_s() -> float:
    """Seconds this process's main thread waited for a CPU while runnable
    (``/proc/self/schedstat``; 0 where it is missing). The file stays open and is read
    again from offset 0 (1.3 us against 13 us for open, read and close each window)."""
    pid, fd = _SCHEDSTAT
    try:
        if pid != os.getpid():  # first use, or a forked child: its own file
            fd = os.open(f"/proc/{os.getpid()}/schedstat", os.O_RDONLY)
            _SCHEDSTAT[:] = [os.getpid(), fd]
        return int(os.pread(fd, 256, 0).split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def children_cpu_s(pid: int | None = None) -> float:
    """CPU seconds of the live child processes of ``pid`` (default: this process), from
    ``/proc`` (0 where it is missing)."""
    pid = os.getpid() if pid is None else pid
    hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    total = 0
    try:
        names = os.listdir("/proc")
    except OSError:
        return 0.0
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 12 and int(fields[1]) == pid:
            total += int(fields[11]) + int(fields[12])
    return total / hz


@dataclass(frozen=True)
class MonitorLimits:
    busy_limit: float = 0.9  # share of one core that counts as saturated
    lag_limit_ms: float = 10.0  # p99 event-loop lag that counts as falling behind
    saturated_share: float = 0.5  # share of saturated windows that counts as saturated
    background_limit: float = 0.5  # share of the cores other processes may use (warns)


class ClientMonitor:
    """A :class:`~tokenmark.api.run.RunWatcher` filling ``client_monitor`` in results.json."""

    key = "client_monitor"

    def __init__(self, interval_s: float = 0.05, limits: MonitorLimits = MonitorLimits(),
                 *, cpu_s: Callable[[], float] = _own_cpu_s,
                 now_s: Callable[[], float] = time.monotonic,
                 wait_s: Callable[[], float] = _runq_wait_s) -> None:
        self.interval_s = interval_s
        self.limits = limits
        self._cpu_only = cpu_s
        self._wait = wait_s
        self._now = now_s
        self.lags_ns = array("q")
        self.busy = array("d")
        self._task: asyncio.Task[None] | None = None
        self._gate: SendGate | None = None
        self._t0 = 0.0
        self._c0 = 0.0
        self._t1 = 0.0
        self._c1 = 0.0
        self._due = 0.0
        self._prev = (0.0, 0.0)
        self._m0: CpuSnapshot | None = None
        self._m1: CpuSnapshot | None = None
        self._k0 = 0.0  # child processes' CPU at the start and the end
        self._k1 = 0.0
        self._w0 = 0.0  # run-queue waits at the start and the end
        self._w1 = 0.0
        self.cores = cpus.available()  # as before the emulated server's pinning

    def _cpu(self) -> float:
        """CPU seconds this process used, plus those it waited for a CPU while runnable:
        its *demand*. A process that always wanted a core demands one whole core even
        on a machine so busy that it got only part of it."""
        return self._cpu_only() + self._wait()

    def plan(self, eff: EffectiveSettings, schedule: Schedule) -> None:
        pass

    async def start(self, output_dir: Path) -> None:
        self._w0 = self._wait()
        self._t0, self._c0 = self._now(), self._cpu()
        self._m0 = cpu_snapshot()
        self._k0 = children_cpu_s()
        self._gate = send_gate()
        self._task = asyncio.ensure_future(self._watch())

    async def _watch(self) -> None:
        step = self.interval_s
        gate = self._gate
        self._prev = (self._now(), self._cpu())
        while True:
            self._due = self._prev[0] + step
            await asyncio.sleep(step)
            woke = self._now()
            if gate is not None and await gate.after_due_send(GUARD_NS):
                self._window(self._now(), self._cpu(), woke)
            else:
                self._window(woke, self._cpu())

    def _window(self, t: float, c: float, woke: float | None = None) -> None:
        """A window ending at ``t`` with ``c`` CPU seconds; the watch woke at ``woke``
        (default ``t``), which is its lag."""
        t_prev, c_prev = self._prev
        self.lags_ns.append(max(0, int(((t if woke is None else woke) - self._due) * 1e9)))
        if t > t_prev:
            self.busy.append((c - c_prev) / (t - t_prev))
        self._prev = (t, c)

    def record(self, rec: RequestRecord) -> None:
        pass

    async def stop(self) -> None:
        self._t1, self._c1 = self._now(), self._cpu()
        self._w1 = self._wait()
        self._m1 = cpu_snapshot()
        self._k1 = children_cpu_s()
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
        waited = self._w1 - self._w0
        busy = (self._c1 - self._c0) / span if span > 0 else 0.0  # demand: CPU + waits
        cpu = (self._c1 - self._c0 - waited) / span if span > 0 else 0.0
        lim = self.limits
        saturated = int(sum(1 for b in self.busy if b >= lim.busy_limit))

        def pct(q: float) -> float:
            return round(float(np.percentile(lags, q)) / 1e6, 3) if lags.size else 0.0

        machine = background = None
        own = (cpu * span + max(0.0, self._k1 - self._k0)) / span if span > 0 else 0.0
        a, b = self._m0, self._m1
        if a is not None and b is not None and a.machine_busy_s >= 0 and b.t_s > a.t_s:
            dt = b.t_s - a.t_s
            machine = round((b.machine_busy_s - a.machine_busy_s) / dt / self.cores, 4)
            other = (b.machine_busy_s - a.machine_busy_s) - (b.own_s - a.own_s) - max(
                0.0, self._k1 - self._k0)
            background = round(max(0.0, other / dt), 3)
        return {
            "interval_ms": self.interval_s * 1e3,
            "machine_busy_fraction": machine,
            "own_cores": round(own, 3),
            "background_cores": background,
            "cores_available": self.cores,
            "windows": int(lags.size),
            "cpu_busy_fraction": round(cpu, 4),
            "demand_fraction": round(busy, 4),
            "runq_wait_fraction": round(waited / span, 4) if span > 0 else 0.0,
            "saturated_windows": saturated,
            "loop_lag_ms": {"p50": pct(50), "p99": pct(99),
                            "max": round(float(lags.max()) / 1e6, 3) if lags.size else 0.0},
            "limits": {"busy_limit": lim.busy_limit, "lag_limit_ms": lim.lag_limit_ms,
                       "saturated_share": lim.saturated_share,
                       "background_limit": lim.background_limit},
        }

    def finding(self) -> Finding:
        f = self.figures()
        lim = self.limits
        return client_bottleneck(
            f["demand_fraction"], int(f["loop_lag_ms"]["p99"] * 1e6), f["windows"],
            busy_limit=lim.busy_limit, lag_limit_ns=int(lim.lag_limit_ms * 1e6),
            saturated_share=lim.saturated_share, saturated_samples=f["saturated_windows"],
            background_cores=f["background_cores"])

    def findings(self) -> list[Finding]:
        """``client_saturation``, and ``machine_busy`` where the machine's load is known."""
        f = self.figures()
        out = [self.finding()]
        if f["background_cores"] is not None:
            out.append(machine_busy(f["background_cores"], self.cores, f["own_cores"],
                                    int(f["loop_lag_ms"]["p99"] * 1e6),
                                    limit=self.limits.background_limit))
        return out

    def client_figures(self) -> dict[str, Any]:
        """The measured causes a send-lag finding names (see ``rules.ClientStats``)."""
        f = self.figures()
        return {"own_cores": f["own_cores"], "background_cores": f["background_cores"],
                "loop_lag_p99_ns": int(f["loop_lag_ms"]["p99"] * 1e6), "cores": self.cores,
                "demand_fraction": f.get("demand_fraction"),
                "runq_wait_fraction": f.get("runq_wait_fraction")}

    def finish(self, summary: Summary, output_dir: Path
               ) -> tuple[dict[str, Any], list[Finding]]:
        f = self.figures()
        if self._t1 - self._t0 < 3 * self.interval_s:  # too short a run to judge
            f["note"] = "shorter than 3 sampling intervals: not judged"
            return f, []
        return f, self.findings()
