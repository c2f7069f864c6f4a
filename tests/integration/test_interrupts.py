"""Ctrl-C, however many and however close together: the run stops once and keeps its
results.

Real signals to a real ``tokenmark run`` process, sent once records are on disk (so the
run is under way, whatever the machine's load): two SIGINTs back to back, two 50 ms
apart, five in a row, and ``timeout -s INT`` interrupted, which forwards SIGINT to its
child and then to its whole process group (two SIGINTs). Each time the exit code is 130,
results.json says the run was interrupted and holds every record, the report is written
(or, only for an interrupt that arrives while the report is being written, skipped with a
message saying how to write it), and nothing is a traceback.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration.test_durability import _wait_for_records
from tokenmark.output.records import read_records

RUN = [sys.executable, "-m", "tokenmark", "run", "-b", "llama3.1-8b", "-s", "poisson",
       "--qps", "100", "--min-duration", "60", "--sut-ttft-ms", "10", "--sut-tpot-ms", "1",
       "--output-len", "8", "--dataset-size", "64", "--no-db", "-o", "out"]


def _interrupt(tmp: Path, gaps: list[float], *, via_timeout: bool = False) -> tuple[int, str]:
    cmd = (["timeout", "-s", "INT", "600"] if via_timeout else []) + RUN
    p = subprocess.Popen(cmd, cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        _wait_for_records(tmp / "out" / "records.jsonl", 20, timeout=60.0)
        p.send_signal(signal.SIGINT)
        for gap in gaps:
            if gap:
                time.sleep(gap)
            p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    return p.returncode, err


def _kept_everything(tmp: Path, code: int, err: str, *, report_may_be_skipped: bool) -> None:
    assert code == 130, err
    assert "Traceback" not in err and "internal error" not in err, err
    doc = json.loads((tmp / "out" / "results.json").read_text())
    assert doc["run"]["interrupted"] and "Ctrl-C" in doc["run"]["interrupt_reason"]
    assert doc["verdicts"]["tokenmark"]["validity"] == "INVALID"
    recs = list(read_records(tmp / "out" / "records.jsonl"))
    assert len(recs) == doc["summary"]["counts"]["issued"] >= 20
    assert err.count("stopping (Ctrl-C)") == 1  # the run stopped once
    assert "interrupted (Ctrl-C): the run stopped early" in err
    if (tmp / "out" / "report.html").exists():
        assert "report: " in err and "skipped" not in err
    else:
        assert report_may_be_skipped, err
        assert "report.html skipped (Ctrl-C); write it with: tokenmark report" in err


@pytest.mark.parametrize(("name", "gaps"), [
    ("two at once", [0.0]),
    ("five at once", [0.0] * 4),
])
def test_interrupts_together_stop_the_run_once_and_keep_results_and_report(tmp_path, name,
                                                                           gaps):
    code, err = _interrupt(tmp_path, gaps)
    _kept_everything(tmp_path, code, err, report_may_be_skipped=False)


def test_a_second_interrupt_50_ms_later_may_only_skip_the_report(tmp_path):
    code, err = _interrupt(tmp_path, [0.05])
    _kept_everything(tmp_path, code, err, report_may_be_skipped=True)


@pytest.mark.skipif(shutil.which("timeout") is None, reason="needs coreutils timeout")
def test_timeout_interrupted_sends_two_and_the_results_are_kept(tmp_path):
    code, err = _interrupt(tmp_path, [], via_timeout=True)  # timeout forwards it twice
    _kept_everything(tmp_path, code, err, report_may_be_skipped=False)


def test_an_interrupt_while_the_report_is_written_skips_only_the_report(tmp_path, monkeypatch):
    """In-process: a Ctrl-C arriving inside the report step (the report writer raises as
    the signal handler would) leaves results.json and exit code alone."""
    import os

    from typer.testing import CliRunner

    import tokenmark.report
    from tokenmark.cli import app

    def interrupted_report(folder: Path) -> Path:
        os.kill(os.getpid(), signal.SIGINT)  # a real signal, to the guard's handler
        time.sleep(0.5)  # the handler raises at the next bytecode
        raise AssertionError("the interrupt did not reach the report step")

    # the run imports the report writer when it writes the report (its lazy run path)
    monkeypatch.setattr(tokenmark.report, "write_report", interrupted_report)
    before = signal.getsignal(signal.SIGINT)
    res = CliRunner().invoke(app, ["run", "-b", "llama3.1-8b", "-s", "constant", "--qps",
                                   "50", "--min-duration", "0.2", "--virtual-time",
                                   "--no-db", "-o", str(tmp_path / "out")])
    assert "report.html skipped (Ctrl-C)" in res.output, res.output
    assert (tmp_path / "out" / "results.json").exists()
    assert not (tmp_path / "out" / "report.html").exists()
    assert res.exit_code in (0, 1)  # the run's own verdict; the interrupt skipped a step
    assert signal.getsignal(signal.SIGINT) is before  # put back
