"""Issue 27 item 7: records.csv and summary.csv beside results.json, read back and compared
with records.jsonl and results.json; ``tokenmark results --json/--csv``."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pandas as pd
from typer.testing import CliRunner

from tokenmark.cli import app
from tokenmark.metrics.stats import loadgen_index
from tokenmark.output.records import read_records


def run_demo(tmp_path: Path) -> Path:
    out = tmp_path / "run"
    res = CliRunner().invoke(app, [
        "run", "--profile", "demo", "--sut", "latency-model", "--sut-max-batch", "4",
        "--qps", "8", "--virtual-time", "-q", "--db", str(tmp_path / "r.db"), "-o", str(out)])
    assert res.exit_code in (0, 1), res.output
    return out


def test_csv_beside_results_json_agrees_with_the_run(tmp_path: Path) -> None:
    run = run_demo(tmp_path)
    recs = list(read_records(run / "records.jsonl"))
    with (run / "records.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(recs) > 200
    raw = [json.loads(line) for line in (run / "records.jsonl").read_text().splitlines()]
    for row, rec, line in zip(rows, recs, raw, strict=True):
        assert int(row["seq"]) == rec.seq and int(row["sample"]) == rec.sample_index
        assert int(row["scheduled_ns"]) == rec.scheduled_ns
        assert int(row["first_token_ns"]) == rec.first_token_ns
        assert int(row["done_ns"]) == rec.done_ns
        assert int(row["output_tokens"]) == rec.output_tokens
        assert row["error"] == ("" if rec.error is None else rec.error.value)
        for key in ("chunk_gaps_ns", "chunk_tokens"):  # lists as the file writes them
            assert json.loads(row[key] or "null") == line[key]
        assert list(row) == list(line)  # the file's columns, in its order
    # the summary row holds results.json's figures; TTFT p99 recomputed from the CSV with
    # LoadGen's percentile index is the run's own
    doc = json.loads((run / "results.json").read_text())
    with (run / "summary.csv").open(newline="") as f:
        (summary,) = list(csv.DictReader(f))
    assert summary["mlperf_verdict"] == doc["verdicts"]["mlperf"]["validity"]
    assert summary["benchmark"] == "llama3.1-8b" and summary["scenario"] == "Server"
    assert int(summary["counts.completed"]) == doc["summary"]["counts"]["completed"]
    p99 = float(summary["latency_ms.ttft.percentiles.99"])
    assert p99 == doc["summary"]["latency_ms"]["ttft"]["percentiles"]["99"]
    ttft = sorted(int(r["first_token_ns"]) - int(r["scheduled_ns"]) for r in rows
                  if not r["error"] and r["phase"] == "measure")
    assert ttft[loadgen_index(len(ttft), 0.99)] / 1e6 == p99
    # the README's pandas one-liner
    df = pd.read_csv(run / "records.csv")
    df["ttft_ms"] = (df.first_token_ns - df.scheduled_ns) / 1e6
    assert len(df) == len(recs) and df.ttft_ms.max() == max(ttft) / 1e6


def test_results_json_and_csv(tmp_path: Path) -> None:
    run_demo(tmp_path)
    db = str(tmp_path / "r.db")
    runner = CliRunner()
    as_json = runner.invoke(app, ["results", "--db", db, "--json"])
    as_csv = runner.invoke(app, ["results", "--db", db, "--csv"])
    assert as_json.exit_code == 0 and as_csv.exit_code == 0, as_json.output + as_csv.output
    rows = json.loads(as_json.stdout)
    table = list(csv.DictReader(io.StringIO(as_csv.stdout)))
    assert len(rows) == len(table) == 1
    j, c = rows[0], table[0]
    assert j["benchmark"] == c["benchmark"] == "llama3.1-8b"
    assert j["label"] == c["label"] == "unverified" and j["kind"] == "run"
    assert float(c["value"]) == j["value"] > 0
    both = runner.invoke(app, ["results", "--db", db, "--json", "--csv"])
    assert both.exit_code == 2 and "not both" in both.output
