"""Layouts and figures beyond the samples: v5.x measurements, power, inferred results,
open-division model mappings and v6.1's endpoints layout (a fixture written from the
submission checker's field mapping; no published file of that layout was available)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tokenmark.importer import scan
from tokenmark.importer.checker import result_key

THOR = "v6.0/open/NVIDIA/results/Jetson-Thor/llama3.1-8b-edge/SingleStream"
NV51 = "v5.1/closed/NVIDIA"
NV51_RESULT = f"{NV51}/results/GB300-NVL72_GB300-288GB_aarch64x72_TRT/deepseek-r1/Offline"


def _row(rows, scenario):
    return next(r for r in rows if r.scenario == scenario)


def test_inferred_edge_results(samples: Path):
    thor = samples / THOR
    shutil.copytree(thor, thor.with_name("Offline"))
    shutil.copytree(thor, thor.with_name("multistream"))  # lower case, as GATEOverflow's
    s = scan(samples / "v6.0" / "open")
    assert s.errors == []
    off, ms = _row(s.rows, "Offline"), _row(s.rows, "MultiStream")
    # the SingleStream log's result_qps_without_loadgen_overhead 0.886986
    assert (off.value, off.unit, off.inferred) == (0.886986, "Samples/s", True)
    # 8 x early_stopping_latency_ms 183878879 ns
    assert ms.value == pytest.approx(183878879 * 8 / 1e6) and ms.unit == "Latency (ms)"
    assert not _row(s.rows, "SingleStream").inferred


def test_power_where_published(samples: Path):
    thor = samples / THOR
    (thor / "performance" / "power").mkdir()
    (thor / "performance" / "run_1" / "spl.txt").write_text("\n".join([
        "Time,02-07-2026 09:47:40.000,Watts,999.0,Volts,230",   # before power_begin
        "Time,02-07-2026 10:00:00.000,Watts,40.0,Volts,230",
        "Time,02-07-2026 11:00:00.000,Watts,50.0,Volts,230",
        "Time,02-07-2026 12:00:00.000,Watts,0.0,Volts,230",     # not positive
        "Time,02-07-2026 12:55:37.000,Watts,999.0,Volts,230",   # after power_end
        "Mark,2026-02-07_testing",
    ]) + "\n")
    [row] = scan(samples / "v6.0" / "open").rows
    # mean 45 W over power_begin 09:47:41.853 .. power_end 12:55:36.150 = 11274.297 s,
    # 10000 queries: 45 * 11274.297 * 1000 / 10000 mJ per query
    assert row.power_unit == "millijoules"
    assert row.power_value == pytest.approx(45 * 11274.297 * 1000 / 10000)
    (thor / "performance" / "run_1" / "spl.txt").write_text("Time,01-01-2020 00:00:00.000,"
                                                            "Watts,5.0\n")
    s = scan(samples / "v6.0" / "open")
    assert "no power samples between" in s.errors[0].reason and s.rows == []


def test_v5_measurements_folder_and_model_mapping(samples: Path):
    sub = samples / NV51
    meas = sub / "measurements/GB300-NVL72_GB300-288GB_aarch64x72_TRT/deepseek-r1/Offline"
    meas.mkdir(parents=True)
    (meas / "GB300-NVL72_GB300-288GB_aarch64x72_TRT.json").write_text(json.dumps(
        {"weight_data_types": "fp4", "input_data_types": "int32"}))
    [row] = scan(samples / "v5.1").rows
    assert row.weight_data_types == "fp4"
    # an open-division custom model folder mapped by model_mapping.json
    dell = samples / "v6.0/closed/Dell"
    (dell / "results/8xMI355X_2xEPYC_9655/llama2-70b-99").rename(
        dell / "results/8xMI355X_2xEPYC_9655/my-llama-fp4")
    (dell / "model_mapping.json").write_text('{"my-llama-fp4": "llama2-70b-99"}')
    r = next(x for x in scan(samples / "v6.0").rows if x.submitter == "Dell")
    assert (r.benchmark, r.benchmark_folder) == ("llama2-70b-99", "my-llama-fp4")


def test_endpoints_layout(samples: Path):
    res = samples / NV51_RESULT
    shutil.rmtree(res / "performance")
    (res / "performance").mkdir()
    (res / "performance" / "result_summary.json").write_text(json.dumps({
        "tps": 431234.5, "qps": 118.2, "n_samples_completed": 4388, "duration_ns": 37124e6,
        "latency": {"avg": 1.2e9, "early_stopping_percentiles": {"90.0": 2.5e9}},
    }))
    (res / "config.yaml").write_text("type: offline\n")
    [row] = scan(samples / "v5.1").rows
    assert (row.value, row.unit, row.metric) == (431234.5, "Tokens/s", "endpoints:tps")


def test_checker_key_table():
    assert result_key("v6.0", "llama2-70b-99", "Server") == "result_completed_tokens_per_second"
    assert result_key("v4.1", "gptj-99", "Offline") == "result_inferred_tokens_per_second"
    assert result_key("v6.0", "qwen3-vl-235b-a22b", "Server") == (
        "result_completed_samples_per_sec")
    assert result_key("v6.0", "llama3.1-8b-edge", "SingleStream") == (
        "result_90.00_percentile_latency_ns")
    assert result_key("v6.0", "resnet", "SingleStream") == "early_stopping_latency_ss"
    assert result_key("v7.0", "gpt-oss-120b", "Offline") == "result_tokens_per_second"
