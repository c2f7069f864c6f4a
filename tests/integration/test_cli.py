"""The command line as a user meets it: real processes, exit codes, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def tm(*args: str, cwd=None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tokenmark", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=120)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["run", "-b", "llama9"], "unknown benchmark 'llama9'"),
        (["run", "-r", "v0.1"], "unknown MLPerf round"),
        (["run", "-s", "Sideways"], "unknown scenario 'Sideways'"),
        (["run", "-s", "Server", "--qps", "-3"], "target_qps must be > 0"),
        (["run", "-s", "Server", "--qps", "0.1", "--min-duration", "1"],
         "shorter than one query"),
        (["run", "--config", "/nonexistent/run.toml"], "does not exist"),
        (["run", "--profile", "fast"], "unknown profile"),
        (["run", "-s", "poisson", "--input-len", "normal:abc"], "cannot read the length"),
        (["run", "-b", "llama3.1-8b-edge"], "no scenario given"),
        (["presets", "v1.0"], "unknown MLPerf round"),
    ],
)
def test_bad_input_exits_2_with_one_line(args, needle, tmp_path):
    res = tm(*args, "-o", str(tmp_path / "o")) if args[0] == "run" else tm(*args)
    assert res.returncode == 2, res.stderr
    assert needle in res.stderr
    assert "Traceback" not in res.stderr
    assert len([line for line in res.stderr.splitlines() if line.strip()]) <= 2


def test_malformed_config_file(tmp_path):
    cfg = tmp_path / "run.toml"
    cfg.write_text("[settings]\ntarget_qps = 'fast'\n")
    res = tm("run", "--config", str(cfg), "-o", str(tmp_path / "o"))
    assert res.returncode == 2 and "target_qps must be a number" in res.stderr


def test_valid_run_exit_code_and_json(tmp_path):
    res = tm("run", "-b", "llama3.1-8b", "-s", "Server", "--profile", "demo", "--qps", "30",
             "--virtual-time", "--json", "-o", str(tmp_path / "o"))
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["verdicts"]["mlperf"]["validity"] == "VALID"
    assert doc["run"]["clock"] == "virtual"


def test_invalid_run_exit_code(tmp_path):
    res = tm("run", "-b", "llama3.1-8b", "-s", "Server", "--profile", "demo", "--qps", "30",
             "--sut-tpot-ms", "300", "--virtual-time", "-q", "-o", str(tmp_path / "o"))
    assert res.returncode == 1
    assert "MLPerf verdict: INVALID" in res.stdout


def test_presets_and_version():
    res = tm("presets", "v6.0")
    assert res.returncode == 0 and "gpt-oss-120b" in res.stdout
    assert "tokenmark" in tm("version").stdout
