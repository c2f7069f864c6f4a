"""The accuracy log against the official LoadGen (``mlcommons-loadgen`` 6.0.17).

A LoadGen child process serves a dummy SUT whose answer for sample ``i`` is the int32
ids ``[100 + i, i % 7 + 3, 2]`` (first token ``[100 + i]``, ``n_tokens`` 3), answered
inside ``IssueQuery``, so its log lists samples in sequence order. tokenmark runs the
same settings against an in-process SUT with the same answers, and the two files must be
byte-identical:

* accuracy mode, with more samples than one loadable set (every set is issued, sequence
  ids run on across sets), in Server, Offline and SingleStream;
* performance mode with LoadGen's audit settings (``accuracy_log_rng_seed``, and either
  ``accuracy_log_sampling_target`` or ``accuracy_log_probability``): the same samples are
  picked, which proves the sampling rule (the unseeded per-sample engine, the seeded
  offset, the expected-query arithmetic).
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.accuracy.support import IdsSUT, record
from tokenmark.mlperf.accuracylog import (
    AccuracyEntry,
    AccuracyLogFormat,
    decode_ids,
    encode_ids,
    parse_accuracy_log,
    render_accuracy_log,
)
from tokenmark.mlperf.settings import Mode, Scenario, Seeds, TestSettings, effective

pytest.importorskip("mlperf_loadgen")

TEST06_SEED = 720381539243781796
SEEDS = (2085463073848966840, 2747215439041700203, 16159082839903944936)

_CHILD = """
import array, json, sys
import mlperf_loadgen as lg

a = json.loads(sys.argv[1])
settings = lg.TestSettings()
assert settings.FromConfig(a["conf"], "llama3_1-8b", a["scenario"]) == 0
settings.scenario = getattr(lg.TestScenario, a["scenario"])
settings.mode = getattr(lg.TestMode, a["mode"])
settings.qsl_rng_seed, settings.sample_index_rng_seed, settings.schedule_rng_seed = a["seeds"]
settings.accuracy_log_rng_seed = a["acc_seed"]
settings.accuracy_log_probability = a["prob"]
settings.accuracy_log_sampling_target = a["target"]
keep = []

def issue(query_samples):
    for q in query_samples:
        ids = array.array("i", [100 + q.index, q.index % 7 + 3, 2])
        keep.append(ids)
        address, count = ids.buffer_info()
        if a["scenario"] != "Offline":
            lg.FirstTokenComplete([lg.QuerySampleResponse(q.id, address, 4, 1)])
        lg.QuerySamplesComplete([lg.QuerySampleResponse(q.id, address, 4 * count, count)])

sut = lg.ConstructSUT(issue, lambda: None)
qsl = lg.ConstructQSL(a["total"], a["perf_count"], lambda _: None, lambda _: None)
output = lg.LogOutputSettings()
output.outdir = a["out"]
output.copy_summary_to_stdout = False
log_settings = lg.LogSettings()
log_settings.log_output = output
lg.StartTestWithLogSettings(sut, qsl, settings, log_settings)
lg.DestroyQSL(qsl)
lg.DestroySUT(sut)
"""


@dataclass(frozen=True)
class Case:
    scenario: Scenario
    mode: Mode
    total: int = 50
    perf_count: int = 20
    min_query_count: int = 100
    min_duration_ms: int = 0
    qps: float = 2000.0
    target: int = 0
    prob: float = 0.0
    acc_seed: int = TEST06_SEED

    @property
    def lg_scenario(self) -> str:
        return self.scenario.value


def run_loadgen(case: Case, out: Path) -> str:
    out.mkdir(parents=True, exist_ok=True)
    sc = case.lg_scenario
    conf = out / "user.conf"
    lines = [f"*.{sc}.min_duration = {case.min_duration_ms}",
             f"*.{sc}.min_query_count = {case.min_query_count}",
             f"*.{sc}.performance_sample_count_override = {case.perf_count}",
             f"*.{sc}.sample_concatenate_permutation = 0"]
    if sc in ("Server", "Offline"):
        lines.append(f"*.{sc}.target_qps = {case.qps}")
    else:
        lines.append(f"*.{sc}.target_latency = {1000.0 / case.qps}")
    conf.write_text("\n".join(lines) + "\n")
    args = {"conf": str(conf), "scenario": sc, "out": str(out), "total": case.total,
            "perf_count": case.perf_count, "seeds": list(SEEDS), "acc_seed": case.acc_seed,
            "prob": case.prob, "target": case.target,
            "mode": "AccuracyOnly" if case.mode is Mode.ACCURACY else "PerformanceOnly"}
    subprocess.run([sys.executable, "-c", _CHILD, json.dumps(args)], check=True, cwd=out,
                   timeout=120)
    return (out / "mlperf_log_accuracy.json").read_text()


def settings_for(case: Case):
    r = TestSettings(
        round="v6.1", benchmark="llama3.1-8b", scenario=case.scenario,
        seeds=Seeds(*SEEDS, accuracy_log=case.acc_seed), mode=case.mode,
        target_qps=case.qps, offline_expected_qps=case.qps,
        single_stream_expected_latency_ns=round(1e9 / case.qps),
        min_duration_ms=case.min_duration_ms, min_query_count=case.min_query_count,
        performance_sample_count=case.perf_count, use_token_latencies=True,
        accuracy_log_probability=case.prob, accuracy_log_sampling_target=case.target)
    return effective(r, case.total)


CASES = [
    Case(Scenario.SERVER, Mode.ACCURACY),
    Case(Scenario.OFFLINE, Mode.ACCURACY),
    Case(Scenario.SINGLE_STREAM, Mode.ACCURACY, total=30, perf_count=30),
    Case(Scenario.SERVER, Mode.PERFORMANCE, target=10),
    Case(Scenario.SERVER, Mode.PERFORMANCE, prob=0.25, acc_seed=12345),
    Case(Scenario.OFFLINE, Mode.PERFORMANCE, target=7, min_query_count=40),
    Case(Scenario.SINGLE_STREAM, Mode.PERFORMANCE, target=20, min_query_count=60),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.lg_scenario}-{c.mode.value}-"
                         f"{c.target or c.prob}")
def test_accuracy_log_is_loadgens_byte_for_byte(case: Case, tmp_path: Path) -> None:
    theirs = run_loadgen(case, tmp_path / "loadgen")
    eff = settings_for(case)
    ours = record(eff, IdsSUT(), tmp_path / "tokenmark", case.total)
    text = ours.path.read_text()
    entries = parse_accuracy_log(theirs)
    assert entries, "LoadGen logged nothing: the case does not test sampling"
    if case.mode is Mode.ACCURACY:
        assert sorted(e["qsl_idx"] for e in entries) == list(range(case.total))
    assert text == theirs


def test_rendering_loadgens_own_entries_gives_its_file(tmp_path: Path) -> None:
    """The writer alone: LoadGen's entries, in its order, re-rendered are its bytes."""
    theirs = run_loadgen(Case(Scenario.SERVER, Mode.ACCURACY, total=12, perf_count=5),
                         tmp_path)
    fmt = AccuracyLogFormat(use_tokens=True, first_token=True)
    entries = [AccuracyEntry(e["seq_id"], e["qsl_idx"], encode_ids(decode_ids(e["data"])),
                             encode_ids(decode_ids(e["token_data"])), e["token_count"])
               for e in parse_accuracy_log(theirs)]
    assert render_accuracy_log(entries, fmt) == theirs
