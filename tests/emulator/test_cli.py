"""``tokenmark run`` with no target (the emulated server over real HTTP, started and
stopped by the run) and ``tokenmark serve``."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
import urllib.request

import pytest
from typer.testing import CliRunner

import tokenmark.cli.serve  # noqa: F401  (registers the command until cli/__init__ does)
from tokenmark.cli import app
from tokenmark.dataset import LengthDistribution, SyntheticDataset
from tokenmark.engines.emulated import output_text
from tokenmark.mlperf.accuracylog import decode_ids
from tokenmark.output.records import read_records
from tokenmark.tokenizer import BuiltinTokenizer

LABEL = "emulated H200 x1, llama3.1-8b, bf16"


def test_run_with_no_target_starts_the_emulated_server_and_stops_it(tmp_path):
    out = tmp_path / "o"
    t = time.monotonic()
    res = CliRunner().invoke(app, [
        "run", "-b", "llama3.1-8b", "-s", "poisson", "--qps", "20", "--min-duration", "2",
        "--output-len", "16", "--dataset-size", "32", "--no-db", "-o", str(out)])
    wall = time.monotonic() - t
    assert res.exit_code in (0, 1), res.output
    assert wall < 20
    doc = json.loads((out / "results.json").read_text())
    sut = doc["run"]["sut"]
    assert sut["profile"] == LABEL and sut["emulated"] == "true"
    assert sut["kind"] == "emulated server over HTTP" and sut["server"] == "own process"
    assert "not a measurement of hardware" in sut["note"]
    assert sut["url"].startswith("http://127.0.0.1:")
    assert doc["run"]["clock"] == "monotonic"
    assert LABEL in res.output  # named on screen too (the summary line)
    recs = list(read_records(out / "records.jsonl"))
    assert len(recs) >= 40 and all(r.ok and r.output_tokens == 16 for r in recs)
    # the run stopped its server: nothing listens there any more
    with pytest.raises(OSError):
        urllib.request.urlopen(sut["url"] + "/health", timeout=2)


def test_virtual_time_runs_the_same_engine_in_process(tmp_path):
    res = CliRunner().invoke(app, [
        "run", "-b", "llama3.1-8b", "-s", "Server", "--profile", "demo", "--qps", "20",
        "--virtual-time", "--accelerator", "H100", "--no-db", "--json",
        "-o", str(tmp_path / "o")])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["run"]["sut"]["profile"] == "emulated H100 x1, llama3.1-8b, bf16"
    assert doc["run"]["sut"]["kind"] == "in-process emulated server"
    assert doc["verdicts"]["mlperf"]["validity"] == "VALID"


@pytest.mark.parametrize("args,message", [
    (["--accelerator", "H900"], "unknown accelerator 'H900'; choose one of: H100, H200"),
    (["--model", "llama9"], "unknown model 'llama9'; choose a benchmark name"),
    (["--model", "llama2-70b-99", "--tp", "1"],
     "needs 138 GB of weights; 1 x H200 give 127 GB usable"),
    (["--precision", "fp2"], "unknown precision 'fp2'"),
    (["--accelerators", "6", "--tp", "4"], "--tp 4 does not divide --accelerators 6"),
    (["--fault", "bogus=0.1"], "unknown fault 'bogus'"),
    (["--fault", "status:500"], "write it as KIND[:N]=FRACTION"),
    (["--fault", "reset=0.7", "--fault", "stall=0.5"], "add up to 1.2, over 1"),
    (["--engine", "hf"], "give --model-dir DIR"),
    (["--engine", "vllm"], "unknown engine 'vllm'"),
    (["--stop-lengths", "published"], "no published output-length distribution for"),
    (["--stop-lengths", "lognormal:x:y"], "cannot read the length distribution"),
])
def test_serve_refuses_bad_input_in_one_line(args, message):
    res = CliRunner().invoke(app, ["serve", *args])
    assert res.exit_code == 2
    assert message in " ".join(res.output.split()), res.output
    assert "Traceback" not in res.output


def test_run_refuses_a_model_that_does_not_fit(tmp_path):
    res = CliRunner().invoke(app, ["run", "-b", "llama2-70b-99", "-s", "Offline", "--tp", "1",
                                   "--precision", "bf16", "-o", str(tmp_path / "o")])
    assert res.exit_code == 2
    assert "needs 138 GB of weights" in " ".join(res.output.split())


def test_serve_listens_until_sigterm():
    code = "import tokenmark.cli.serve; from tokenmark.cli import main; main()"
    p = subprocess.Popen([sys.executable, "-c", code, "serve", "--port", "0",
                          "--replicas", "2"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None
        ready, _, _ = select.select([p.stdout], [], [], 30)
        assert ready, "the server did not start"
        line = p.stdout.readline()
        assert line.startswith("READY http://127.0.0.1:")
        url = line.split()[1]
        with urllib.request.urlopen(url + "/v1/models", timeout=5) as r:
            assert r.headers["x-tokenmark-profile"] == (
                "emulated H200 x1 x2 replicas, llama3.1-8b, bf16")
            models = json.loads(r.read())
        assert models["data"][0]["id"] == "llama3.1-8b"
        with urllib.request.urlopen(url + "/metrics", timeout=5) as r:
            text = r.read().decode()
        assert 'vllm:num_requests_running{engine="1",model_name="llama3.1-8b"} 0' in text
        p.send_signal(signal.SIGTERM)
        assert p.wait(10) == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        for f in (p.stdout, p.stderr):
            if f is not None:
                f.close()


def test_help_has_an_example():
    res = CliRunner().invoke(app, ["serve", "--help"], env={"COLUMNS": "200"})
    assert res.exit_code == 0 and "Example: tokenmark serve" in res.output
    assert os.environ.get("TOKENMARK_DB")  # runs stay out of the user's database


# -- the seed's workloads ------------------------------------------------------------------
DEMOS = [
    ["-b", "deepseek-r1", "-s", "Server", "--profile", "demo"],
    ["-b", "qwen3-vl-235b-a22b", "-s", "Server", "--profile", "demo",
     "--images-per-request", "1"],
]


def _verdicts(output: str) -> list[str]:
    return [line.split(":", 1)[0] for line in output.splitlines()
            if line.startswith(("mlperf verdict:", "tokenmark verdict:"))]


@pytest.mark.parametrize("args", DEMOS, ids=["deepseek-r1", "qwen3-vl"])
def test_the_demo_commands_finish_with_both_verdicts(args, tmp_path):
    """The demo commands as a user types them, on the virtual clock (the same engine
    and planning as the emulated server; make bench-emulator times them in real time)."""
    out = tmp_path / "o"
    res = CliRunner().invoke(app, ["run", *args, "--virtual-time", "--no-db", "-o", str(out)])
    assert res.exit_code in (0, 1), res.output
    assert _verdicts(res.output) == ["mlperf verdict", "tokenmark verdict"]
    assert "outputs capped at 512 tokens" in res.output
    doc = json.loads((out / "results.json").read_text())
    assert "outputs capped at 512 tokens" in doc["profile_note"]
    recs = list(read_records(out / "records.jsonl"))
    assert recs and all(r.ok and r.output_tokens <= 512 for r in recs)
    if "deepseek-r1" in args:
        r = doc["summary"]["reasoning"]
        assert r["reasoning_tokens"] > 0 and r["answer_tokens"] > 0
        assert r["no_answer_requests"] == 0
        lat = doc["summary"]["latency_ms"]
        assert lat["ttfat"]["percentiles"]["50"] > lat["ttft"]["percentiles"]["50"]
    else:  # every prompt carries one 512 x 512 image: 256 image tokens and 2 markers
        ds = SyntheticDataset(256, LengthDistribution.parse("normal:800:200"),
                              LengthDistribution.parse("uniform:64:128"), seed=0)
        assert all(r.server_input_tokens == ds.sample(r.sample_index).input_tokens + 258
                   for r in recs)


@pytest.mark.parametrize("args", DEMOS, ids=["deepseek-r1", "qwen3-vl"])
def test_the_demo_workloads_over_http(args, tmp_path):
    """The same benchmarks over real HTTP at a light load: chat is chosen for images
    and reasoning, both verdicts are shown, reasoning and image tokens are counted."""
    out = tmp_path / "o"
    res = CliRunner().invoke(app, [
        "run", *args[:4], *args[6:], "--qps", "4", "--min-duration", "1",
        "--min-queries", "4", "--dataset-size", "8", "--output-len", "12", "--no-db",
        "-o", str(out)])
    assert res.exit_code in (0, 1), res.output
    assert _verdicts(res.output) == ["mlperf verdict", "tokenmark verdict"]
    doc = json.loads((out / "results.json").read_text())
    assert doc["run"]["sut"]["api"] == "chat"
    recs = list(read_records(out / "records.jsonl"))
    assert recs and all(r.ok and r.output_tokens == 12 for r in recs)
    if "deepseek-r1" in args:
        assert all(0 < r.reasoning_tokens < 12 for r in recs)
        assert all(r.first_answer_ns >= r.first_token_ns for r in recs)
    else:
        assert all(r.input_tokens > 258 for r in recs)  # the server's usage counts images


def test_accuracy_and_test06_against_the_emulated_server(tmp_path):
    """No target: the emulated server over HTTP. The accuracy log holds each answer's
    token ids (the built-in tokenizer's ids of the streamed words, what the server's
    return_token_ids gives), so TEST06's checks pass."""
    acc = tmp_path / "acc"
    res = CliRunner().invoke(app, [
        "run", "-b", "llama3.1-8b", "-s", "Server", "--mode", "accuracy", "--qps", "8",
        "--dataset-size", "8", "--output-len", "6", "--no-db", "-o", str(acc)])
    assert res.exit_code in (0, 1), res.output
    entries = json.loads((acc / "mlperf_log_accuracy.json").read_text())
    assert len(entries) == 8
    want = BuiltinTokenizer().encode(output_text(0, 6))
    for e in entries:
        assert decode_ids(e["data"]) == want and e["token_count"] == 6
        first = decode_ids(e["token_data"])  # the ids of the first chunk as it arrived
        assert first and first == want[:len(first)]
    log = json.loads((acc / "results.json").read_text())["accuracy_log"]
    assert log["logged"] == 8 and log["derived_first_tokens"] == 0
    t06 = tmp_path / "t06"
    res = CliRunner().invoke(app, [
        "run", "-b", "llama3.1-8b", "-s", "Server", "--audit", "TEST06", "--qps", "10",
        "--min-duration", "2", "--dataset-size", "16", "--output-len", "6", "--no-db",
        "-o", str(t06)])
    assert res.exit_code in (0, 1), res.output
    assert "TEST06: PASS" in res.output
    assert (t06 / "TEST06" / "verify_accuracy.txt").read_text() == (
        "First token check pass: True\nEOS check pass: True\n"
        "Sample length check pass: True\nTEST06 verification complete\n")
