"""``tokenmark run`` is the Python API's ``run_spec`` (tokenmark.api.launch): the same
spec, run once through the command line and once from Python against the exact server,
writes the same results.json: the same keys everywhere, and the same values but for what
measures time or load (latencies, rates, clocks, durations, this machine's load) and
where the run was written."""

from __future__ import annotations

import json
from typing import Any

from typer.testing import CliRunner

import tokenmark.cli.run  # noqa: F401  (registers `run`)
from tests.fixtures.servers import exact_server
from tokenmark.api.launch import run_spec
from tokenmark.cli.app import app
from tokenmark.config.runspec import (
    LoadOptions,
    OutputOptions,
    RunSpec,
    TargetOptions,
    WorkloadSpec,
)
from tokenmark.servers.exact import ExactConfig


def _flatten(doc: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(doc, dict):
        out: dict[str, Any] = {}
        for k, v in doc.items():
            out.update(_flatten(v, f"{prefix}/{k}"))
        return out or {prefix: {}}
    if isinstance(doc, list) and doc and all(isinstance(v, dict) for v in doc):
        out = {}
        for i, v in enumerate(doc):
            out.update(_flatten(v, f"{prefix}[{i}]"))
        return out
    return {prefix: doc}


#: The client monitor's rules judge this machine's load while the run ran: the two runs
#: can differ there on a busy machine.
MONITOR_RULES = {"client_saturation", "machine_busy"}


def _steady(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` without what depends on this machine's load as it ran: the client
    monitor's section (its figures, or a note when the run was too short for them) and
    findings, and the tokenmark verdict they may turn."""
    doc = {**doc, "client_monitor": {}}
    tm = dict(doc["verdicts"]["tokenmark"])
    tm["findings"] = [f for f in tm["findings"] if f["rule"] not in MONITOR_RULES]
    tm["failed_rules"] = [r for r in tm["failed_rules"] if r not in MONITOR_RULES]
    tm["validity"] = ""
    doc["verdicts"] = {**doc["verdicts"], "tokenmark": tm}
    return doc


def test_the_cli_and_the_python_api_write_the_same_results(tmp_path):
    with exact_server(ExactConfig(ttft_ns=2_000_000, itl_ns=1_000_000)) as server:
        url = f"http://{server.host}:{server.port}"
        args = ["run", "-b", "llama3.1-8b", "-s", "closed", "--concurrency", "2",
                "--min-duration", "0", "--min-queries", "24", "--max-queries", "24",
                "--dataset-size", "24", "--seed", "5", "--input-len", "32",
                "--output-len", "8", "--url", url, "--no-db", "-q",
                "-o", str(tmp_path / "cli")]
        res = CliRunner().invoke(app, args)
        assert res.exit_code in (0, 1), res.output
        spec = RunSpec(
            load=LoadOptions(benchmark="llama3.1-8b", scenario="closed", concurrency=2,
                             min_duration=0, min_queries=24, max_queries=24,
                             dataset_size=24, seed=5),
            dataset=WorkloadSpec(input_lengths="32", output_lengths="8"),
            target=TargetOptions(urls=(url,)),
            output=OutputOptions(output=tmp_path / "api", no_db=True))
        result = run_spec(spec)
    cli = json.loads((tmp_path / "cli" / "results.json").read_text())
    api = json.loads((tmp_path / "api" / "results.json").read_text())
    assert set(cli) == set(api)
    if cli["verdicts"]["tokenmark"]["failed_rules"] == api["verdicts"]["tokenmark"][
            "failed_rules"]:
        assert result.exit_code == res.exit_code
    a, b = _flatten(_steady(cli)), _flatten(_steady(api))
    assert set(a) == set(b), set(a) ^ set(b)
    timed = ("_ns", "_ms", "_s", "/time", "utc", "duration", "rate", "per_s", "qps",
             "ttft", "tpot", "itl", "latency", "e2e", "lag", "/mean", "/p", "/std",
             "/min", "/max", "/output_dir", "/path", "cpu", "rss", "loop", "seconds",
             "/client_monitor/", "/background_load/", "/observed", "/scrapes")
    same = {k for k in a if not any(t in k.lower() for t in timed)}
    differ = {k: (a[k], b[k]) for k in sorted(same) if a[k] != b[k]}
    assert not differ, "\n".join(f"{k}: {v}" for k, v in differ.items())
    # what proves the same workload and load: the manifest and the requests sent
    assert cli["manifest"]["sha256"] == api["manifest"]["sha256"]
    assert cli["manifest"]["issued_sha256"] == api["manifest"]["issued_sha256"]
    assert cli["settings"] == api["settings"]
    assert len(same) > 100, len(same)
