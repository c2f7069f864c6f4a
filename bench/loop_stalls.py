"""What holds the demo's sends back: every event-loop callback that ran long, and which
of them a late send waited behind.

Runs ``tokenmark run`` in this process (the ``make run`` demo unless other options follow
``--``) with the standard library's loop timed from inside: each callback's start and
duration (``asyncio.events.Handle._run``), each garbage collection
(``gc.callbacks``) and each send (``Runner._issue``: when it was due, when it went). Then
prints, by callback (a task's coroutine, a protocol's method, a timer's function):

- the callbacks that ran longer than ``--slow`` (default 0.1 ms): count, total, p99, max;
- for every send later than ``--late`` (default 0.2 ms): the callbacks that were running
  between its due time and its send (the loop's stalls it waited behind), by name.

The timing costs about 1 us per callback, so absolute send lags here are a little worse
than in ``bench/send_lag.py``; the ranking is what this is for::

    PYTHONPATH=. python bench/loop_stalls.py [--slow 0.1] [--late 0.2] [-- --qps 20]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

DEMO = ["--benchmark", "llama3.1-8b", "--scenario", "Server", "--profile", "demo",
        "--qps", "20", "--accelerator", "H200", "--precision", "bf16"]

perf = time.perf_counter_ns
cpu = time.thread_time_ns
# (start, duration, name, CPU time) of every callback longer than the threshold
slow: list[tuple[int, int, str, int]] = []
sends: list[tuple[int, int, int]] = []  # (due, runner's issue call, sent) on perf_counter_ns
_issue_at = [0]
gcs: list[tuple[int, int, int]] = []  # (start, duration, generation)
_gc_start = [0]


def label(h: Any) -> str:
    """A readable name for a callback: a task's coroutine, a bound method's class.method."""
    if isinstance(h, str):
        return h
    cb = getattr(h, "_callback", None)
    owner = getattr(cb, "__self__", None)
    if isinstance(owner, asyncio.Task):
        coro = owner.get_coro()
        return f"task {getattr(coro, '__qualname__', coro)}"
    if owner is not None:
        name = f"{type(owner).__qualname__}.{getattr(cb, '__name__', cb)}"
        proto = getattr(owner, "_protocol", None)
        return f"{name} ({type(proto).__qualname__})" if proto is not None else name
    if isinstance(cb, asyncio.Future) or hasattr(cb, "__qualname__"):
        return str(getattr(cb, "__qualname__", cb))
    return repr(cb)[:80]


def install(threshold_ns: int) -> None:
    orig = asyncio.events.Handle._run

    def timed(self: Any) -> None:
        t = perf()
        c = cpu()
        orig(self)
        d = perf() - t
        if d >= threshold_ns:
            slow.append((t, d, label(self), cpu() - c))

    asyncio.events.Handle._run = timed  # type: ignore[method-assign]

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            _gc_start[0] = perf()
        else:
            gcs.append((_gc_start[0], perf() - _gc_start[0], info["generation"]))

    gc.callbacks.append(on_gc)

    from tokenmark.loadgen import runner as rmod
    orig_sent = rmod._Pending.sent

    def sent(self: Any, t_ns: int | None = None) -> None:
        orig_sent(self, t_ns)
        run = self._run
        if not isinstance(run.clock, rmod.FakeClock):
            sends.append((run.t0 + self.rec.scheduled_ns, _issue_at[0],
                          run.t0 + self.rec.issued_ns))

    rmod._Pending.sent = sent  # type: ignore[method-assign]
    orig_issue = rmod.Runner._issue

    def issue(self: Any, *args: Any) -> Any:
        _issue_at[0] = perf()
        return orig_issue(self, *args)

    rmod.Runner._issue = issue  # type: ignore[method-assign]


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q / 100 * len(xs)))] if xs else 0.0


def line(what: str, xs: list[int]) -> None:
    print(f"{what}: p50 {pct(xs, 50) / 1e6:.3f} p90 {pct(xs, 90) / 1e6:.3f} "
          f"p99 {pct(xs, 99) / 1e6:.3f} max {max(xs, default=0) / 1e6:.3f} ms")


def report(late_ns: int) -> None:
    by: dict[str, list[int]] = defaultdict(list)
    by_cpu: dict[str, list[int]] = defaultdict(list)
    for _, d, name, c in slow:
        by[name].append(d)
        by_cpu[name].append(c)
    print(f"\ncallbacks over the threshold: {len(slow)} (wall time; CPU: this thread's)")
    print("| callback | count | total ms | p99 ms | max ms | CPU p99 ms | CPU max ms |")
    print("|---|---|---|---|---|---|---|")
    for name, ds in sorted(by.items(), key=lambda kv: -sum(kv[1]))[:25]:
        cs = by_cpu[name]
        print(f"| {name} | {len(ds)} | {sum(ds) / 1e6:.2f} | {pct(ds, 99) / 1e6:.3f} | "
              f"{max(ds) / 1e6:.3f} | {pct(cs, 99) / 1e6:.3f} | {max(cs) / 1e6:.3f} |")
    gcd = [d for _, d, _ in gcs]
    for g in range(3):
        line(f"gc gen{g} ({sum(x == g for *_, x in gcs)})", [d for _, d, x in gcs if x == g])
    print(f"\ngarbage collections: {len(gcs)}, over 0.1 ms: {sum(d > 100_000 for d in gcd)}, "
          f"max {max(gcd, default=0) / 1e6:.3f} ms (gen2: "
          f"{sum(g == 2 for *_, g in gcs)})")
    print(f"\nsends: {len(sends)}")
    line("send lag", [s - d for d, _, s in sends])
    line("  due -> the runner issues", [i - d for d, i, _ in sends])
    line("  the runner issues -> sent", [s - i for _, i, s in sends])
    blame: dict[str, list[int]] = defaultdict(list)
    late = [(d, s) for d, _, s in sends if s - d > late_ns]
    events = [(t, dur, name) for t, dur, name, _ in slow] + [
        (t, dur, f"gc gen{g}") for t, dur, g in gcs]
    unexplained = 0
    for due, sent in late:
        hit = False
        for t, dur, name in events:
            if t < sent and t + dur > due:  # ran (partly) while the send was due
                blame[name].append(min(t + dur, sent) - max(t, due))
                hit = True
        unexplained += not hit
    print(f"sends later than {late_ns / 1e6:g} ms: {len(late)} "
          f"({unexplained} with no slow callback or collection while due)")
    print("| ran while a send was due | sends | overlap ms (sum) | max ms |")
    print("|---|---|---|---|")
    for name, ds in sorted(blame.items(), key=lambda kv: -sum(kv[1])):
        print(f"| {name} | {len(ds)} | {sum(ds) / 1e6:.2f} | {max(ds) / 1e6:.3f} |")
    for due, sent in sorted(late, key=lambda x: x[0] - x[1])[:8]:
        near = [f"{name} {dur / 1e6:.2f}ms@{(t - due) / 1e6:+.2f}"
                for t, dur, name in events if t < sent and t + dur > due - 3_000_000]
        print(f"  late {(sent - due) / 1e6:.3f} ms: {'; '.join(near) or '-'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--slow", type=float, default=0.1, help="ms a callback must run to count")
    ap.add_argument("--late", type=float, default=0.2, help="ms a send must be late to count")
    ap.add_argument("extra", nargs="*", help="tokenmark run options (after --)")
    a = ap.parse_args()
    if os.environ.get("TOKENMARK_EVENT_LOOP", "asyncio").strip().lower() != "asyncio":
        sys.exit("bench/loop_stalls.py times the standard library's loop: "
                 "unset TOKENMARK_EVENT_LOOP")
    os.environ["TOKENMARK_EVENT_LOOP"] = "asyncio"  # uvloop is the run's default
    install(int(a.slow * 1e6))
    from tokenmark.cli import main as cli
    with tempfile.TemporaryDirectory() as tmp:
        sys.argv = ["tokenmark", "run", *(a.extra or DEMO), "--no-db", "-q", "--progress",
                    "off", "-o", str(Path(tmp) / "out")]
        la = os.getloadavg()[0]
        try:
            cli()
        except SystemExit:
            pass
        print(f"load {la:.1f} -> {os.getloadavg()[0]:.1f}")
    report(int(a.late * 1e6))


if __name__ == "__main__":
    main()
