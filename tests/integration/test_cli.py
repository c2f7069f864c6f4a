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
    # the emulated H200 (the default target) holds ~24 queries/s of llama3.1-8b Server
    res = tm("run", "-b", "llama3.1-8b", "-s", "Server", "--profile", "demo", "--qps", "20",
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


def test_run_against_an_http_target_through_the_cli(tmp_path):
    """The whole path a user takes: flags -> model check -> HTTP client -> verdicts."""
    from tokenmark.servers.process import ServerProcess

    with ServerProcess(["--ttft-ms", "20", "--itl-ms", "2"]).start() as server:
        res = tm("run", "-b", "llama3.1-8b", "-s", "poisson", "--qps", "40",
                 "--min-duration", "2", "--output-len", "8", "--dataset-size", "32",
                 "--url", server.url, "--api", "chat", "--json", "-o", str(tmp_path / "o"))
        assert res.returncode in (0, 1), res.stderr
        doc = json.loads(res.stdout)
        assert doc["run"]["sut"]["kind"] == "OpenAI-compatible HTTP"
        assert doc["summary"]["counts"]["failed"] == 0
        ttft = doc["summary"]["latency_ms"]["ttft"]["percentiles"]["50"]
        assert 20 <= ttft < 60
        bad = tm("run", "-s", "poisson", "--qps", "5", "--url", server.url, "--model",
                 "no-such-model", "-o", str(tmp_path / "o2"))
        assert bad.returncode == 2 and "no-such-model" in bad.stderr
    dead = tm("run", "-s", "poisson", "--qps", "5", "--url", "http://127.0.0.1:9",
              "-o", str(tmp_path / "o3"))
    assert dead.returncode == 2 and "Traceback" not in dead.stderr


def test_run_with_a_trace_and_a_dataset_file(tmp_path):
    trace = tmp_path / "trace.jsonl"
    trace.write_text("".join(
        json.dumps({"timestamp": 100 * i, "input_length": 64, "output_length": 4,
                    "hash_ids": [i % 3]}) + "\n" for i in range(30)))
    res = tm("run", "-b", "llama3.1-8b", "--trace", str(trace), "--trace-speedup", "2",
             "--virtual-time", "--json", "-o", str(tmp_path / "t"))
    assert res.returncode in (0, 1), res.stderr
    doc = json.loads(res.stdout)
    assert doc["run"]["scenario"] == "trace"
    assert doc["summary"]["counts"]["issued"] == 30
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"ka lo {i}", "max_tokens": 5}) + "\n"
                            for i in range(12)))
    res = tm("run", "-b", "llama3.1-8b", "-s", "poisson", "--qps", "20", "--min-duration",
             "1", "--dataset", str(data), "--virtual-time", "--json", "-o", str(tmp_path / "d"))
    assert res.returncode in (0, 1), res.stderr
    assert json.loads(res.stdout)["run"]["dataset"]["size"] == 12
    bad = tm("run", "-s", "poisson", "--dataset", str(tmp_path / "missing.jsonl"))
    assert bad.returncode == 2 and "missing.jsonl" in bad.stderr


def test_pool_size_caps_the_connections_to_the_emulated_server(tmp_path):
    """An Offline query issues every sample at once: without a cap the client opens a
    connection per sample (a 26,736-sample official-LoadGen run passed the machine's
    20,000 open files); --pool-size caps them against the built-in emulated server too."""
    out = tmp_path / "run"
    res = tm("run", "-b", "llama3.1-8b", "-s", "Offline", "--profile", "demo",
             "--dataset-size", "32", "--qps", "100", "--min-duration", "0.2",
             "--pool-size", "3", "--no-db", "-q", "-o", str(out))
    assert res.returncode in (0, 1), res.stderr
    doc = json.loads((out / "results.json").read_text())
    line = doc["run"]["sut"]["endpoint0"]
    assert f"{doc['summary']['counts']['completed']} ok" in line
    assert "; 3 connections (" in line  # 256 requests in flight at once, over 3 connections
