"""The LoadGen-format log files of a results folder (tokenmark.output.mlperf)."""

from __future__ import annotations

from pathlib import Path

from tokenmark.api.run import SutSpec, default_dataset, run_benchmark
from tokenmark.config.layering import LayeredSettings
from tokenmark.mlperf import mllog
from tokenmark.mlperf.scenarios import build_schedule
from tokenmark.output.mlperf import (
    ACCURACY_FILE,
    DETAIL_FILE,
    EMPTY_ACCURACY_LOG,
    SUMMARY_FILE,
    write_mlperf_logs,
)


def test_writes_loadgens_three_files(demo_server: LayeredSettings, tmp_path: Path) -> None:
    dataset = default_dataset(demo_server)
    res = run_benchmark(demo_server, dataset, SutSpec(), tmp_path / "run", virtual_time=True)
    schedule = build_schedule(res.settings, len(dataset))
    facts = mllog.RunFacts("LatencyModelSUT", dataset.name, 1_770_000_000_000_000_000,
                           res.outcome.end_ns)
    out = tmp_path / "logs"
    out.mkdir()
    paths = write_mlperf_logs(out, res.settings, res.summary, res.verdicts, schedule, facts)
    assert [p.name for p in paths] == [SUMMARY_FILE, DETAIL_FILE, ACCURACY_FILE]
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in paths)  # no .tmp
    # a real LoadGen 6.0.17 performance run leaves exactly these 4 bytes
    assert (out / ACCURACY_FILE).read_bytes() == b"[\n]\n" == EMPTY_ACCURACY_LOG.encode()

    summary = mllog.parse_summary((out / SUMMARY_FILE).read_text(encoding="utf-8"))
    detail = mllog.parse_detail((out / DETAIL_FILE).read_text(encoding="utf-8"))
    assert summary.scenario == "Server" and summary.tokenmark_note == mllog.note_text()
    assert detail["result_validity"] == summary.result_validity == res.verdicts.mlperf.validity
    assert detail["result_completed_tokens_per_second"] == float(
        mllog.fmt_g(res.summary.tokens_per_second or 0.0))
    assert detail["loaded_qsl_set"] == list(schedule.loaded_set)
    assert (out / SUMMARY_FILE).read_bytes().count(b"\r") == 0
