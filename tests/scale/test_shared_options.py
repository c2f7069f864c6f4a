"""Issue 20 item 1: find-peak, sweep and scaling-run declare the options they share with
'run' through run's own declarations (one type, flag, help text and panel per option),
and those options reach the dataset and the requests as they do in 'run'."""

from __future__ import annotations

import inspect
import json

import pytest
from typer.testing import CliRunner

from tokenmark.cli import app, scale
from tokenmark.cli import run as run_cli

RUN_GROUPS = (run_cli.LOAD, run_cli.WORKLOAD, run_cli.SYSTEM, run_cli.TARGET,
              run_cli.RUNNING, run_cli.TRUST)
#: Options the scale commands declare themselves: their meaning differs from run's (the
#: parent folder of the runs, index.json, the series' store).
OWN = {"output", "json_out", "db", "no_db"}


@pytest.mark.parametrize("command", [scale.find_peak, scale.sweep, scale.scaling_run])
def test_a_shared_option_has_runs_one_declaration(command):
    run_types = {n: a for g in RUN_GROUPS for n, a, _ in g}
    params = inspect.signature(command).parameters
    own = inspect.signature(command.__wrapped__).parameters  # --concurrency, --replicas, ...
    shared = [n for n in params if n in run_types and n not in OWN and n not in own]
    assert len(shared) >= 28
    for name in shared:
        assert params[name].annotation is run_types[name], name  # the same object
    assert OWN <= set(params)


def test_search_commands_take_their_own_defaults_of_runs_options():
    for command in (scale.find_peak, scale.scaling_run):
        p = inspect.signature(command).parameters
        assert (p["sut"].default, p["sut_ttft_ms"].default, p["sut_tpot_ms"].default) == (
            "latency-model", 50.0, 10.0)
    p = inspect.signature(scale.sweep).parameters
    assert p["sut"].default is None and p["sut_ttft_ms"].default is None  # run's


def test_find_peak_takes_runs_dataset_and_target_options(exact, tmp_path, monkeypatch):
    # a CSV file under a name that does not say so (--format), its columns renamed
    # (--columns), prompts of 3 and 5 words counted by the server's own tokenizer
    # (--tokenizer server); every request carries the header and the key, and asks for
    # 7 tokens (--max-tokens; the exact server answers max_tokens tokens)
    data = tmp_path / "prompts.txt"
    data.write_text("q,n\nalpha beta gamma,4\nalpha beta gamma delta epsilon,4\n")
    monkeypatch.setenv("PEAK_KEY", "sweep-secret")
    res = CliRunner().invoke(app, [
        "find-peak", "-s", "Server", "--profile", "demo", "--min-duration", "1",
        "--min-queries", "10", "--start-qps", "10", "--max-qps", "10", "--max-probes", "1",
        "--probe-duration", "1", "--url", exact.url, "--dataset", str(data), "--format",
        "csv", "--columns", "prompt=q,output_tokens=n", "--dataset-size", "2",
        "--tokenizer", "server", "--max-tokens", "7", "--ignore-eos", "--header",
        "X-Sweep: yes", "--api-key-env", "PEAK_KEY", "--no-db", "-o", str(tmp_path / "o")])
    assert res.exit_code in (0, 1), res.output  # a peak, or none within one probe
    probes = json.loads((tmp_path / "o" / "index.json").read_text())["probes"]
    completed = sum(p["completed"] for p in probes)
    assert probes and all(p["completed"] == p["issued"] >= 10 for p in probes)
    sent = [t for t in exact.truth if t.tokens == 7]
    assert len(sent) == completed
    assert {t.prompt_tokens for t in sent} == {3, 5}
    assert all(t.headers.get("x-sweep") == "yes" for t in exact.truth)
    # besides the run's requests only the client's one-token length probes
    assert all(t.tokens in (1, 7) for t in exact.truth)
