"""find-peak, sweep and scaling from the command line (virtual time)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import tokenmark.cli.scale  # noqa: F401  (registers the commands until cli/__init__ does)
from tokenmark.cli.app import app

FAST = ["-s", "constant", "--ttft-ms", "500", "--min-duration", "30", "--output-len", "100",
        "--input-len", "200", "--dataset-size", "256", "--sut-max-batch", "8",
        "--virtual-time"]


@pytest.mark.parametrize("cmd", ["find-peak", "sweep", "scaling-run"])
def test_help_has_an_example(cmd):
    res = CliRunner().invoke(app, [cmd, "--help"])
    assert res.exit_code == 0 and "Example:" in res.output


def test_find_peak_prints_and_indexes(tmp_path):
    res = CliRunner().invoke(app, ["find-peak", *FAST, "--start-qps", "4", "--tolerance",
                                   "0.05", "-o", str(tmp_path), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads((tmp_path / "index.json").read_text())
    assert 7.0 < doc["peak_qps"] < 8.0  # capacity 7.69/s, D/D/8 threshold 7.77/s at 30 s
    assert doc["probes"][-1]["kind"] == "confirm"


def test_sweep_and_scaling(tmp_path):
    r = CliRunner().invoke(app, ["sweep", *FAST, "--rates", "2,4", "-o", str(tmp_path / "s")])
    assert r.exit_code == 0, r.output
    assert "unverified" in r.output and (tmp_path / "s" / "index.csv").is_file()
    r = CliRunner().invoke(app, ["scaling-run", *FAST, "--replicas", "1,2", "--start-qps", "4",
                                 "-o", str(tmp_path / "c"), "--json"])
    assert r.exit_code == 0, r.output
    pts = json.loads((tmp_path / "c" / "index.json").read_text())["points"]
    assert pts[1]["efficiency"] == pytest.approx(1.0, abs=0.06)


@pytest.mark.parametrize(("args", "needle"), [
    (["find-peak", "-s", "Offline"], "not Offline"),
    (["find-peak", "-s", "poisson"], "needs latency limits"),
    (["sweep", "--rates", "a,b"], "bad --rates"),
    (["sweep", "--rates", "1", "--concurrency", "2"], "not both"),
    (["scaling-run", "--replicas", "0,1"], "every point must be > 0"),
])
def test_bad_input_exits_2(args, needle, tmp_path):
    res = CliRunner().invoke(app, [*args, "-o", str(tmp_path / "o")])
    assert res.exit_code == 2, res.output
    assert needle in res.output and "Traceback" not in res.output
