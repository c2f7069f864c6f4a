"""The live progress view of ``tokenmark run`` (rich), and its script-friendly forms.

``tokenmark run`` creates one with :func:`progress_view` and hands its two halves to
:func:`tokenmark.api.run.run_benchmark`: :meth:`ProgressView.update` as ``progress`` (the
runner's counters, every 0.25 s) and :meth:`ProgressView.consume` as a record consumer
(each finished request). The view shows elapsed and remaining time, issued / completed
/ in flight, output tokens/s over the last few seconds, the running percentile of TTFT
and TPOT (or end-to-end latency) against the limits, errors by class, and whether
early stopping is satisfied yet (see :mod:`tokenmark.metrics.live` for what is exact:
the percentiles are over the recent window and the screen says "approx.").

Modes (:class:`ProgressMode`): ``auto`` draws the live view when stderr is a terminal
and writes plain lines when it is not (a CI log), unless the run is ``--quiet`` or
``--json``; ``live`` draws it on a terminal whatever the output mode; ``plain`` writes
one line of text every :data:`PLAIN_EVERY_S` seconds and one at the end (elapsed time,
issued/scheduled, completed, failed, output tokens/s, errors), as tqdm does off a
terminal; ``jsonl`` writes one JSON object a second to stderr (for scripts, terminal or
not); ``off`` shows nothing.

Cost: the runner measures its own send lag, so the view never runs a thread of its
own. Rich's auto-refresh thread is off; the view renders in the event loop, only from
:meth:`~ProgressView.update` (4 Hz), a few lines of text (about 0.3 ms on the project's
machine, measured by ``tests/faces/test_progress.py``).
"""

from __future__ import annotations

import json
import sys
from collections import deque
from dataclasses import dataclass
from enum import StrEnum
from types import TracebackType
from typing import IO

from rich.console import Console, Group
from rich.live import Live
from rich.text import Text

from tokenmark.errors import BadInputError
from tokenmark.loadgen.runner import RunnerStats
from tokenmark.metrics.live import LiveLatency, LiveSnapshot
from tokenmark.mlperf.settings import EffectiveSettings, Scenario, TestSettings, effective
from tokenmark.records import RequestRecord

__all__ = ["Figures", "ProgressMode", "ProgressView", "choose_mode", "plain_line",
           "progress_view"]

#: Seconds of history behind the "current" token rate.
RATE_WINDOW_S = 5.0
#: JSON-lines mode writes at most this often (seconds).
JSONL_EVERY_S = 1.0
#: Plain mode writes a line at most this often (seconds).
PLAIN_EVERY_S = 5.0


class ProgressMode(StrEnum):
    AUTO = "auto"
    LIVE = "live"
    PLAIN = "plain"
    JSONL = "jsonl"
    OFF = "off"


def choose_mode(requested: ProgressMode | str, *, quiet: bool, json_out: bool,
                stderr_tty: bool) -> ProgressMode:
    """The mode a run gets: ``auto`` resolves to ``live`` on a terminal, ``plain`` off
    one, ``off`` when quiet or JSON; ``live`` needs a terminal (never draw escape codes
    into a log file)."""
    mode = ProgressMode(requested)
    if mode is ProgressMode.AUTO:
        if quiet or json_out:
            return ProgressMode.OFF
        return ProgressMode.LIVE if stderr_tty else ProgressMode.PLAIN
    if mode is ProgressMode.LIVE and not stderr_tty:
        return ProgressMode.OFF
    return mode


def _ms(ns: float | None) -> str:
    return "-" if ns is None else f"{ns / 1e6:,.1f} ms"


def _duration(s: float) -> str:
    s = max(0.0, s)
    m, sec = divmod(int(round(s)), 60)
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"


@dataclass(frozen=True, slots=True)
class Figures:
    """One refresh of the view. ``latency`` is ``None`` without effective settings."""

    elapsed_s: float
    remaining_s: float | None
    scheduled: int
    issued: int
    completed: int
    failed: int
    in_flight: int
    output_tokens_per_s: float
    errors: dict[str, int]
    latency: LiveSnapshot | None

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "elapsed_s": round(self.elapsed_s, 3),
            "remaining_s": None if self.remaining_s is None else round(self.remaining_s, 1),
            "scheduled": self.scheduled, "issued": self.issued, "completed": self.completed,
            "failed": self.failed, "in_flight": self.in_flight,
            "output_tokens_per_s": round(self.output_tokens_per_s, 1), "errors": self.errors,
        }
        s = self.latency
        if s is not None:
            def ms(ns: int | None) -> float | None:
                return None if ns is None else ns / 1e6

            lim = s.limits
            out["latency"] = {
                "approximate": True, "percentile": s.percentile, "window": s.window,
                "ttft_ms": ms(s.ttft_ns), "tpot_ms": ms(s.tpot_ns), "e2e_ms": ms(s.e2e_ns),
                "limits_ms": {"ttft": ms(lim.ttft_ns), "tpot": ms(lim.tpot_ns),
                              "e2e": ms(lim.e2e_ns)},
                "over_limit": s.over,
            }
            e = s.early
            out["early_stopping"] = None if e is None else {
                "satisfied": e.satisfied, "queries": e.issued, "needed": e.needed,
                "over_limit": e.over}
        return out


def _latency_line(s: LiveSnapshot) -> Text:
    """``p99 (approx., last N answers): TTFT x ms / limit ms ...``, red when over."""
    line = Text(f"p{s.percentile * 100:g} (approx., last {s.window} answers): ")
    lim = s.limits
    shown = [("TTFT", s.ttft_ns, lim.ttft_ns), ("TPOT", s.tpot_ns, lim.tpot_ns)]
    if lim.e2e_ns is not None or (lim.ttft_ns is None and lim.tpot_ns is None):
        shown.append(("E2E", s.e2e_ns, lim.e2e_ns))
    for label, value, limit in shown:
        if value is None:
            continue
        style = "" if limit is None else "red" if value > limit else "green"
        line.append(f"{label} {_ms(value)}", style=style)
        if limit is not None:
            line.append(f" / {limit / 1e6:,.0f} ms", style="dim")
        line.append("   ")
    return line


def plain_line(f: Figures) -> str:
    """One line of text for a log: ``[0:35] issued 120/512  completed 118  failed 0  ...``."""
    left = "" if f.remaining_s is None else f"  ~{_duration(f.remaining_s)} left"
    errors = ", ".join(f"{k} {v}" for k, v in f.errors.items()) or "none"
    return (f"[{_duration(f.elapsed_s)}] issued {f.issued}/{f.scheduled or '?'}  "
            f"completed {f.completed}  failed {f.failed}  in flight {f.in_flight}  "
            f"{f.output_tokens_per_s:,.0f} output tokens/s  errors: {errors}{left}")


class ProgressView:
    """Live figures of one run; see the module docstring for how it is wired."""

    def __init__(self, eff: EffectiveSettings | None, mode: ProgressMode,
                 console: Console | None = None, stream: IO[str] | None = None) -> None:
        self.eff = eff
        self.mode = mode
        self.console = console or Console(stderr=True)
        self.stream = stream or sys.stderr
        self.live_latency = LiveLatency(eff) if eff is not None else None
        self._live: Live | None = None
        self._rates: deque[tuple[float, int]] = deque()
        self._last_jsonl = -JSONL_EVERY_S
        self._last_plain = -PLAIN_EVERY_S
        self._plain_written: Figures | None = None
        self.last: Figures | None = None

    @property
    def active(self) -> bool:
        """Whether the view shows anything (if not, the run needs neither callback)."""
        return self.mode is not ProgressMode.OFF

    # -- the two callbacks ---------------------------------------------------------------

    def consume(self, record: RequestRecord) -> None:
        """A record consumer for the runner (constant time per record)."""
        if self.live_latency is not None:
            self.live_latency.add(record)

    def update(self, stats: RunnerStats, elapsed: float) -> None:
        """The ``progress`` callback of :func:`tokenmark.api.run.run_benchmark`."""
        if self.mode is ProgressMode.OFF:
            return
        figures = self.figures(stats, elapsed)
        self.last = figures
        if self.mode is ProgressMode.JSONL:
            if elapsed - self._last_jsonl >= JSONL_EVERY_S:
                self._last_jsonl = elapsed
                self.stream.write(json.dumps(figures.to_json(), separators=(",", ":")) + "\n")
                self.stream.flush()
        elif self.mode is ProgressMode.PLAIN:
            if elapsed - self._last_plain >= PLAIN_EVERY_S:
                self._last_plain = elapsed
                self._write_plain(figures)
        elif self._live is not None:
            self._live.update(self.render(figures), refresh=True)

    def _write_plain(self, f: Figures) -> None:
        self._plain_written = f
        self.stream.write(plain_line(f) + "\n")
        self.stream.flush()

    # -- figures and rendering -----------------------------------------------------------

    def _rate(self, elapsed: float, tokens: int) -> float:
        rates = self._rates
        rates.append((elapsed, tokens))
        while len(rates) > 2 and elapsed - rates[0][0] > RATE_WINDOW_S:
            rates.popleft()
        t0, k0 = rates[0]
        return (tokens - k0) / (elapsed - t0) if elapsed > t0 else 0.0

    def _remaining(self, st: RunnerStats, elapsed: float) -> float | None:
        """Seconds left, estimated: the rest of a timed schedule, else the minimum
        duration, else the in-flight requests at the recent completion rate."""
        eff = self.eff
        if eff is None:
            return None
        closed = eff.scenario in (Scenario.CLOSED_LOOP, Scenario.SINGLE_STREAM,
                                  Scenario.MULTI_STREAM)
        timed = eff.scenario.is_open_loop and eff.target_qps > 0
        left: float | None = None
        if timed and st.scheduled and st.issued < st.scheduled:
            left = (st.scheduled - st.issued) / (eff.target_qps * eff.samples_per_query)
        elif closed:
            left = max(0.0, eff.min_duration_ns / 1e9 - elapsed)
        elif st.in_flight and st.completed and elapsed > 0:
            left = st.in_flight / (st.completed / elapsed)
        if left is not None and eff.max_duration_ns:
            left = min(left, max(0.0, eff.max_duration_ns / 1e9 - elapsed))
        return left

    def figures(self, st: RunnerStats, elapsed: float) -> Figures:
        """Everything the view shows (``jsonl`` writes :meth:`Figures.to_json`)."""
        spq = self.eff.samples_per_query if self.eff is not None else 1
        snap = None
        if self.live_latency is not None:
            snap = self.live_latency.snapshot(st.issued // max(1, spq))
        return Figures(
            elapsed_s=elapsed, remaining_s=self._remaining(st, elapsed),
            scheduled=st.scheduled, issued=st.issued, completed=st.completed,
            failed=st.failed, in_flight=st.in_flight,
            output_tokens_per_s=self._rate(elapsed, st.output_tokens),
            errors=dict(sorted(st.errors.items())), latency=snap,
        )

    def render(self, f: Figures) -> Group:
        """A few lines of text (cheap to draw; no tables)."""
        head = Text(f"{_duration(f.elapsed_s)} elapsed", style="bold")
        head.append("   remaining unknown" if f.remaining_s is None
                    else f"   ~{_duration(f.remaining_s)} left", style="dim")
        head.append(f"   {f.output_tokens_per_s:,.0f} output tokens/s")
        counts = Text(f"issued {f.issued}/{f.scheduled or '?'}   completed {f.completed}   "
                      f"in flight {f.in_flight}   failed {f.failed}")
        lines = [head, counts]
        snap = f.latency
        if snap is not None:
            lines.append(_latency_line(snap))
            if snap.early is not None:
                e = snap.early
                line = Text("early stopping: ")
                line.append("satisfied" if e.satisfied else "not yet",
                            style="green" if e.satisfied else "yellow")
                line.append(f" ({e.issued} of {e.needed} queries needed"
                            + "".join(f", {v} over the {k.upper()} limit"
                                      for k, v in e.over.items()) + ")")
                lines.append(line)
        if f.errors:
            lines.append(Text("errors: " + ", ".join(f"{k} {v}" for k, v in f.errors.items()),
                              style="red"))
        return Group(*lines)

    # -- lifetime ------------------------------------------------------------------------

    def __enter__(self) -> ProgressView:
        if self.mode is ProgressMode.LIVE:
            self._live = Live(Text("starting..."), console=self.console, auto_refresh=False,
                              transient=True, redirect_stdout=False, redirect_stderr=False)
            self._live.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
        if self.mode is ProgressMode.PLAIN and self.last is not None \
                and self.last is not self._plain_written:
            self._write_plain(self.last)  # the final figures, once


def progress_view(settings: TestSettings, dataset_size: int, *, quiet: bool = False,
                  json_out: bool = False, mode: ProgressMode | str = ProgressMode.AUTO,
                  console: Console | None = None) -> ProgressView:
    """The view ``tokenmark run`` uses: the mode resolved against the terminal, and the
    run's effective settings (for limits and early stopping) computed the way the run
    will compute them; settings that cannot run leave the view without them (the run
    itself then reports the problem)."""
    con = console or Console(stderr=True)
    resolved = choose_mode(mode, quiet=quiet, json_out=json_out,
                           stderr_tty=con.is_terminal)
    try:
        eff: EffectiveSettings | None = effective(settings, dataset_size)
    except BadInputError:
        eff = None
    return ProgressView(eff, resolved, con)

