"""The live progress view: its figures are those of the run (counts exact, percentiles over
the recent window, early stopping as LoadGen decides it), its modes, and its cost."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from rich.console import Console

from tokenmark.cli.progress import ProgressMode, ProgressView, choose_mode, progress_view
from tokenmark.config.layering import build_settings
from tokenmark.loadgen.runner import RunnerStats
from tokenmark.metrics.live import LiveLatency
from tokenmark.metrics.stats import loadgen_index
from tokenmark.mlperf.settings import EffectiveSettings, Scenario, effective
from tokenmark.output.records import read_records
from tokenmark.records import RequestRecord
from tokenmark.report import load_results


def eff_of(qps: float = 30.0) -> EffectiveSettings:
    layered = build_settings("v6.0", "llama3.1-8b", Scenario.SERVER, profile="demo",
                             overrides={"target_qps": qps})
    return effective(layered.settings, 256)


def feed(run: Path, live: LiveLatency) -> list[RequestRecord]:
    recs = list(read_records(run / "records.jsonl"))  # completion order, as the runner
    for r in recs:
        live.add(r)
    return recs


@pytest.mark.parametrize("name", ["qps030", "qps060"])
def test_live_figures_equal_the_runs(runs_root: Path, name: str) -> None:
    run = runs_root / name
    doc = load_results(run)
    live = LiveLatency(eff_of(), window=4096)
    recs = feed(run, live)
    ok = [r for r in recs if r.ok]
    lim = doc["settings"]["effective"]["limits_ns"]
    ttft = sorted(r.first_token_ns - r.scheduled_ns for r in ok)
    assert live.answered == len(ok) == doc["summary"]["counts"]["completed"]
    assert live.over["ttft"] == sum(1 for v in ttft if v > lim["ttft_ns"])
    snap = live.snapshot(doc["summary"]["counts"]["queries_issued"])
    # the whole run fits the window: the "approximate" percentile is LoadGen's exact one
    assert snap.ttft_ns == ttft[loadgen_index(len(ttft), 0.99)]
    assert snap.ttft_ns is not None and snap.tpot_ns is not None
    assert snap.ttft_ns / 1e6 == doc["summary"]["latency_ms"]["ttft"]["percentiles"]["99"]
    assert snap.tpot_ns / 1e6 == doc["summary"]["latency_ms"]["tpot"]["percentiles"]["99"]
    # early stopping: the queries LoadGen's rule asks for, as the verdict says
    es = next(f for f in doc["verdicts"]["mlperf"]["findings"] if f["rule"] == "early_stopping")
    m = re.search(r">= (\d+) queries", es["required"])
    assert m is not None
    needed = int(m.group(1))
    assert snap.early is not None and snap.early.needed == needed
    assert snap.early.satisfied == es["passed"]


def test_window_percentile_is_of_the_recent_answers() -> None:
    live = LiveLatency(eff_of(), window=100)
    for i in range(1000):
        live.add(RequestRecord(seq=i, query_id=i, sample_index=0, scheduled_ns=0,
                               issued_ns=0, first_token_ns=i * 1000, done_ns=i * 1000 + 10,
                               output_tokens=2))
    snap = live.snapshot(1000)
    assert snap.window == 100 and snap.ttft_ns == 999_000  # p99 of the last 100 (900..999)
    assert snap.answered == 1000


def test_early_stopping_does_not_apply_everywhere() -> None:
    layered = build_settings("v6.0", "llama3.1-8b", Scenario.OFFLINE, profile="demo")
    assert LiveLatency(effective(layered.settings, 256)).early(10) is None
    pattern = build_settings("v6.0", "llama3.1-8b", Scenario.POISSON, profile="demo",
                             overrides={"target_qps": 5.0})
    assert LiveLatency(effective(pattern.settings, 256)).early(10) is None


@pytest.mark.parametrize(("requested", "quiet", "json_out", "tty", "mode"), [
    ("auto", False, False, True, ProgressMode.LIVE),
    ("auto", False, False, False, ProgressMode.PLAIN),  # not a terminal: plain lines
    ("auto", True, False, False, ProgressMode.OFF),
    ("plain", False, False, True, ProgressMode.PLAIN),
    ("auto", True, False, True, ProgressMode.OFF),
    ("auto", False, True, True, ProgressMode.OFF),
    ("live", True, False, False, ProgressMode.OFF),  # never escape codes into a file
    ("jsonl", False, False, False, ProgressMode.JSONL),
    ("off", False, False, True, ProgressMode.OFF),
])
def test_choose_mode(requested: str, quiet: bool, json_out: bool, tty: bool,
                     mode: ProgressMode) -> None:
    assert choose_mode(requested, quiet=quiet, json_out=json_out, stderr_tty=tty) is mode


def stats(i: int) -> RunnerStats:
    return RunnerStats(scheduled=600, issued=10 * i, completed=9 * i, failed=1,
                       in_flight=i, output_tokens=500 * i, errors={"http_429": 1})


def test_live_mode_draws_on_a_terminal(runs_root: Path) -> None:
    buf = io.StringIO()
    con = Console(file=buf, force_terminal=True, width=140, color_system=None)
    view = ProgressView(eff_of(), ProgressMode.LIVE, con)
    feed(runs_root / "qps060", view.live_latency)  # type: ignore[arg-type]
    with view:
        for i in range(1, 5):
            view.update(stats(i), i * 0.25)
    text = buf.getvalue()
    for part in ("elapsed", "left", "output tokens/s", "issued 40/600", "in flight 4",
                 "p99 (approx., last", "TTFT", "/ 2,000 ms", "early stopping:",
                 "over the TTFT limit", "http_429 1"):
        assert part in text, part


def test_off_prints_nothing() -> None:
    buf = io.StringIO()
    view = progress_view(eff_of().requested, 256, mode="off", console=Console(file=buf))
    assert view.mode is ProgressMode.OFF
    with view:
        view.update(stats(1), 1.0)
    assert buf.getvalue() == ""


def test_not_a_terminal_gets_a_plain_line_every_five_seconds() -> None:
    out = io.StringIO()
    view = progress_view(eff_of().requested, 256, console=Console(file=io.StringIO()))
    assert view.mode is ProgressMode.PLAIN  # auto, stderr not a terminal
    view.stream = out
    with view:
        for i in range(1, 51):  # 12.5 s at 4 Hz (virtual: the elapsed times given)
            view.update(stats(i), i * 0.25)
    lines = out.getvalue().splitlines()
    # at 0.25 s, 5.25 s, 10.25 s, and the last figures (12.5 s) when the view closes
    assert [line.split("]")[0] for line in lines] == ["[0:00", "[0:05", "[0:10", "[0:12"]
    assert "\x1b" not in out.getvalue()  # no escape codes in a log
    # stats(50): issued 500 of 600, completed 450, 1 failed; tokens 500/update over the
    # last 5 s window: (25000 - 15000) / (12.5 - 7.5) = 2,000 output tokens/s
    assert lines[-1].startswith("[0:12] issued 500/600  completed 450  failed 1  in flight 50  "
                                "2,000 output tokens/s  errors: http_429 1")
    assert "left" in lines[-1]


def test_jsonl_mode_writes_a_line_a_second() -> None:
    out = io.StringIO()
    view = ProgressView(eff_of(), ProgressMode.JSONL, Console(file=io.StringIO()), out)
    with view:
        for i in range(1, 13):  # 3 s at 4 Hz
            view.update(stats(i), i * 0.25)
    lines = [json.loads(x) for x in out.getvalue().splitlines()]
    assert [x["elapsed_s"] for x in lines] == [0.25, 1.25, 2.25]
    last = lines[-1]
    assert last["issued"] == 90 and last["errors"] == {"http_429": 1}
    assert last["latency"]["approximate"] is True and "early_stopping" in last
