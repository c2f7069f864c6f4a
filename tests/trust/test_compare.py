"""Run against run: intervals and verdicts from records with known latencies."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tokenmark.errors import BadInputError
from tokenmark.output.records import JsonlRecordSink
from tokenmark.output.results import ResultsDocument, RunInfo, write_results
from tokenmark.records import RequestRecord, TokenSource
from tokenmark.trust.compare import load_run, parse_share, regression, reproduction

MS = 1_000_000


def make_run(folder: Path, *, ttft_ms: float, tpot_ms: float, n: int = 2000,
             gap_ms: float = 10.0, out_tokens: int = 20, seed: int = 0,
             manifest: str = "m1") -> Path:
    """Requests every ``gap_ms``, TTFT and TPOT around the given values (±5% noise)."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True)
    sink = JsonlRecordSink(folder / "records.jsonl")
    for i in range(n):
        t = int(i * gap_ms * MS)
        ttft = int(ttft_ms * MS * rng.uniform(0.95, 1.05))
        tpot = int(tpot_ms * MS * rng.uniform(0.95, 1.05))
        chunks = [t + ttft + k * tpot for k in range(out_tokens)]
        sink.write(RequestRecord(seq=i, query_id=i, sample_index=i, scheduled_ns=t,
                                 issued_ns=t, first_token_ns=chunks[0], done_ns=chunks[-1],
                                 input_tokens=100, output_tokens=out_tokens,
                                 token_source=TokenSource.USAGE, chunk_ns=chunks,
                                 chunk_tokens=[1] * out_tokens))
    sink.close()
    write_results(folder, ResultsDocument(  # a minimal document: compare reads the manifest
        RunInfo("v6.0", "llama3.1-8b", "Server"), settings={}, summary={},
        verdicts={"mlperf": {}, "tokenmark": {}}, sections={"manifest": {"sha256": manifest}}))
    return folder


def test_identical_timing_is_reproduced(tmp_path):
    a = load_run(make_run(tmp_path / "a", ttft_ms=100, tpot_ms=10, seed=1))
    b = load_run(make_run(tmp_path / "b", ttft_ms=100, tpot_ms=10, seed=2))
    r = reproduction(a, b)
    assert r.verdict == "REPRODUCED", r.readings
    ttft = next(d for d in r.deltas if d.metric == "TTFT p50")
    assert ttft.lo < 1.0 < ttft.hi and abs(ttft.ratio - 1) < 0.01
    tput = r.deltas[0]
    assert tput.metric == "output tokens/s" and abs(tput.a - 2000) < 50  # 20 tokens / 10 ms
    assert regression(a, b, threshold=0.05).passed


def test_ten_percent_slower_is_not_reproduced_and_regresses(tmp_path):
    a = load_run(make_run(tmp_path / "a", ttft_ms=100, tpot_ms=10, seed=1))
    b = load_run(make_run(tmp_path / "b", ttft_ms=110, tpot_ms=11, seed=2))
    r = reproduction(a, b)
    assert r.verdict == "NOT REPRODUCED"
    assert r.readings["TTFT p50"] == "outside" and r.readings["TPOT p50"] == "outside"
    g = regression(a, b, threshold=0.05)
    assert not g.passed and "TTFT p50" in g.regressed and "TPOT p99" in g.regressed
    assert regression(a, b, threshold=0.15).passed  # 10% is within a 15% budget
    assert regression(b, a, threshold=0.05).passed  # faster is never a regression


def test_too_few_samples_are_inconclusive_not_passed(tmp_path):
    a = load_run(make_run(tmp_path / "a", ttft_ms=100, tpot_ms=10, n=12, seed=1))
    b = load_run(make_run(tmp_path / "b", ttft_ms=103, tpot_ms=10, n=12, seed=2))
    assert reproduction(a, b).verdict == "INCONCLUSIVE"


@pytest.mark.parametrize("command", ["gate", "compare"])  # compare DIR DIR: the old name
def test_gate_cli_and_notes(cli, tmp_path, command):
    make_run(tmp_path / "a", ttft_ms=100, tpot_ms=10, seed=1)
    make_run(tmp_path / "b", ttft_ms=120, tpot_ms=10, seed=2, manifest="m2")
    make_run(tmp_path / "c", ttft_ms=100, tpot_ms=10, seed=3)
    code, out = cli(command, tmp_path / "a", tmp_path / "b", "--max-regression", "5%")
    assert code == 1 and "FAIL: regressed" in out and "TTFT p50" in out
    assert "different workloads" in out
    code, out = cli(command, tmp_path / "a", tmp_path / "c", "--max-regression", "5%")
    assert code == 0 and "PASS" in out
    code, out = cli(command, tmp_path / "a", tmp_path / "nope", "--max-regression", "5%")
    assert code == 2 and "holds no results.json" in out
    # without --max-regression both take 5%: a 20% slower TTFT fails the gate
    code, out = cli(command, tmp_path / "a", tmp_path / "b")
    assert code == 1 and "max regression 5.0%" in out


def test_parse_share():
    assert parse_share("5%") == pytest.approx(0.05)
    assert parse_share("0.05") == pytest.approx(0.05)
    assert parse_share("5") == pytest.approx(0.05)
    with pytest.raises(BadInputError):
        parse_share("lots")
