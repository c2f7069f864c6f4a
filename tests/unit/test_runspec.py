"""Issue 20 item 1: the typed run spec. The Python API runs a RunSpec (tokenmark.launch)
and gets what `tokenmark run` with the same options gets; the scale commands build their
systems under test from the same spec (tokenmark.api.suts)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokenmark.api.launch import run_spec
from tokenmark.api.suts import SutSpec, replicas_of
from tokenmark.config.runspec import (
    LoadOptions,
    RunSpec,
    SutOptions,
    TargetOptions,
    WorkloadSpec,
)
from tokenmark.errors import ConfigError


def _spec(tmp_path: Path, **sut: object) -> RunSpec:
    from tokenmark.config.runspec import OutputOptions

    return RunSpec(
        load=LoadOptions(scenario="closed", concurrency=2, min_duration=0, min_queries=8,
                         max_queries=8, dataset_size=8, virtual_time=True),
        dataset=WorkloadSpec(input_lengths="16", output_lengths="11"),
        sut=SutOptions(kind="latency-model", **sut),  # type: ignore[arg-type]
        output=OutputOptions(output=tmp_path / "out"))


def test_the_python_api_runs_a_spec_on_the_latency_model(tmp_path):
    # a latency model with no batch limit on a virtual clock: TTFT is exactly the model's
    # 40 ms and an 11-token answer takes 40 + 10 x 5 ms = 90 ms
    res = run_spec(_spec(tmp_path, ttft_ms=40.0, tpot_ms=5.0))
    s = res.summary
    assert s.completed == 8
    assert s.ttft.mean == pytest.approx(40e6)
    assert s.latency.mean == pytest.approx(90e6)
    doc = json.loads((tmp_path / "out" / "results.json").read_text())
    assert doc["run"]["sut"]["profile"] == "TTFT 40 ms, TPOT 5 ms"


def test_the_spec_layers_the_file_under_what_it_was_given():
    file = {"run": {"benchmark": "llama2-70b-99"}, "sut": {"kind": "null", "ttft_ms": 7.0},
            "target": {"headers": ["X-File: 1"]}}
    rs = RunSpec.from_options({"benchmark": "", "sut": None, "header": ["X-Flag: 2"]},
                              frozenset({"header"}), file)
    assert rs.load.benchmark == "llama2-70b-99"
    assert (rs.sut.kind, rs.sut.ttft_ms) == ("null", 7.0)
    assert rs.target.headers == ("X-Flag: 2", "X-File: 1")  # the file's add to the flags'
    assert rs.settings().preset.name == "llama2-70b-99"


def test_the_default_system_is_the_emulator_unless_a_latency_option_is_given():
    assert SutOptions().chosen == "emulated"
    assert SutOptions(max_batch=0).chosen == "latency-model"  # given, even at 0
    assert SutOptions(kind="null", ttft_ms=3.0).chosen == "null"


def test_replicas_of_a_spec(tmp_path):
    rs = _spec(tmp_path)
    layered = rs.settings()
    one = replicas_of(rs, layered)(1)
    assert isinstance(one, SutSpec) and one.kind == "latency-model"
    assert callable(replicas_of(rs, layered)(3))
    http = RunSpec(target=TargetOptions(urls=("http://127.0.0.1:9",)))
    with pytest.raises(ConfigError, match="2 replicas need 2 --url endpoints"):
        replicas_of(http, http.settings())(2)
