"""Issue 27 item 8: 'tokenmark sweep' chooses its range (synchronous, throughput, N rates
between, as GuideLLM's sweep) and takes 'run''s target options."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from tokenmark.api.scale import auto_rates
from tokenmark.cli import app

# every request: 200 prompt tokens, 100 output tokens: TTFT 50 ms + 99 x 10 ms = 1.04 s
FAST = ["-s", "constant", "--min-duration", "30", "--output-len", "100", "--input-len", "200",
        "--dataset-size", "256", "--sut-max-batch", "8", "--virtual-time"]


def test_auto_rates_are_evenly_between():
    assert auto_rates(1.0, 9.0, 3) == (3.0, 5.0, 7.0)
    assert auto_rates(5.0, 5.0, 3) == ()  # the throughput run was no faster
    assert auto_rates(1.0, 2.0, 0) == ()


def test_sweep_without_points_is_automatic(tmp_path):
    res = CliRunner().invoke(app, ["sweep", *FAST, "--points", "3", "-o", str(tmp_path)])
    assert res.exit_code == 0, res.output
    pts = json.loads((tmp_path / "index.json").read_text())["points"]
    assert [p["kind"] for p in pts] == ["synchronous", "throughput", "rate", "rate", "rate"]
    sync, peak = pts[0]["requests_per_s"], pts[1]["requests_per_s"]
    # one stream, back to back: 1 / 1.04 s; 64 streams on 8 slots: at most 8 / 1.04 s
    # (the measured window also holds the start and the drain: a few % less)
    assert sync == pytest.approx(1 / 1.04, rel=0.01)
    assert 0.95 * 8 / 1.04 < peak <= 8 / 1.04 + 1e-9
    rates = [p["value"] for p in pts[2:]]
    assert rates == pytest.approx([sync + (peak - sync) * k / 4 for k in (1, 2, 3)])
    assert all(p["tokenmark_verdict"] == "VALID" for p in pts[2:])


def test_sweep_takes_runs_target_options(exact, tmp_path, monkeypatch):
    monkeypatch.setenv("SWEEP_KEY", "sweep-secret")
    res = CliRunner().invoke(app, [
        "sweep", "-s", "constant", "--rates", "20", "--min-duration", "1", "--min-queries",
        "20", "--dataset-size", "20", "--input-len", "10", "--output-len", "50",
        "--url", exact.url, "--max-tokens", "7", "--ignore-eos", "--header", "X-Sweep: yes",
        "--api-key-env", "SWEEP_KEY", "-o", str(tmp_path)])
    assert res.exit_code == 0, res.output
    (pt,) = json.loads((tmp_path / "index.json").read_text())["points"]
    assert pt["failed"] == 0 and pt["completed"] >= 20
    # the server answers max_tokens tokens; every request carried the header and the key
    # (besides the client's two one-token length probes before the run)
    assert all(t.headers.get("x-sweep") == "yes" for t in exact.truth)
    tokens = [t.tokens for t in exact.truth]
    assert tokens.count(7) == pt["completed"]
    assert tokens.count(1) == len(tokens) - tokens.count(7) <= 2


def test_sweep_default_target_is_runs(tmp_path):
    # no --url and no latency-model option: the emulated server, as 'run'
    res = CliRunner().invoke(app, ["sweep", "-s", "poisson", "--rates", "2", "--min-duration",
                                   "5", "--profile", "demo", "--virtual-time", "--json",
                                   "-o", str(tmp_path)])
    assert res.exit_code == 0, res.output
    (pt,) = json.loads((tmp_path / "index.json").read_text())["points"]
    doc = json.loads((tmp_path / pt["folder"] / "results.json").read_text())
    assert "emulated" in json.dumps(doc["run"]["sut"]).lower()
