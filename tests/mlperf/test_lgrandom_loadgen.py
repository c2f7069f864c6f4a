"""tokenmark.mlperf.lgrandom against the official LoadGen (``mlcommons-loadgen`` 6.0.17 wheel).

Each case runs the real LoadGen for a fraction of a second with a SUT that completes
every sample at once, then checks that :mod:`tokenmark.mlperf.lgrandom` predicts what LoadGen
generated: the loaded QSL sets, ``generated_query_count`` / ``_samples_per_query`` /
``_query_duration`` from the detail log, and from the trace the dataset index of every
issued sample (in ``sample_seq`` order), its query, and for Server the scheduled times.

``mlperf_loadgen`` is a dev dependency, deliberately imported without ``importorskip``:
a missing LoadGen must fail here, not silently pass.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict
from dataclasses import dataclass
from decimal import Decimal
from importlib.metadata import version
from pathlib import Path
from typing import Any

import mlperf_loadgen  # type: ignore[import-not-found]  # noqa: F401  (fail, never skip)
import numpy as np
import pytest

from tokenmark.mlperf import lgrandom
from tokenmark.mlperf.settings import (
    EffectiveSettings,
    Mode,
    Scenario,
    Seeds,
    TestSettings,
    effective,
)

LLM = "llama3_1-8b"  # token latencies and equal issue (sample_concatenate_permutation = 1)
VISION = "resnet50"  # uniform sampling with replacement

# Seeds set on the TestSettings object after FromConfig (mlperf.conf's own seeds cannot
# be overridden from user.conf). None keeps mlperf.conf's current seeds.
SEEDS_A = (1, 2, 3)
SEEDS_B = (0x9E3779B97F4A7C15, 0xFFFF_FFFF_FFFF_FFFF, 4_294_967_296 + 12345)
SEEDS_C = (987_654_321, 123_456_789_012, 2**63 + 7)


@dataclass(frozen=True)
class Case:
    model: str
    scenario: Scenario
    mode: Mode = Mode.PERFORMANCE
    seeds: tuple[int, int, int] | None = None
    total: int = 200
    perf_count: int = 50
    min_duration_ms: int = 100
    min_query_count: int = 10
    rate: float = 2000.0  # Server/Offline: queries/s; SingleStream/MultiStream: 1/latency
    issue_unique: bool = False
    issue_same: bool = False

    @property
    def equal_issue(self) -> bool:
        return self.model.startswith(LLM)

    @property
    def loadgen_scenario(self) -> str:
        return self.scenario.loadgen.value  # Interactive runs as Server


CASES = {
    "server-llm-mlperf-seeds": Case(LLM, Scenario.SERVER),
    "server-llm-seeds-a": Case(LLM, Scenario.SERVER, seeds=SEEDS_A),
    "server-llm-seeds-b": Case(LLM, Scenario.SERVER, seeds=SEEDS_B, min_query_count=120),
    "server-llm-seeds-c": Case(LLM, Scenario.SERVER, seeds=SEEDS_C, perf_count=37, total=37),
    "server-vision": Case(VISION, Scenario.SERVER, seeds=SEEDS_B),
    "server-vision-mlperf-seeds": Case(VISION, Scenario.SERVER, rate=1500.0),
    "server-llm-unique": Case(LLM, Scenario.SERVER, seeds=SEEDS_A, issue_unique=True),
    "interactive-llm": Case(f"{LLM}-interactive", Scenario.INTERACTIVE, seeds=SEEDS_C),
    "offline-llm": Case(LLM, Scenario.OFFLINE, min_query_count=120),
    "offline-llm-seeds-c": Case(LLM, Scenario.OFFLINE, seeds=SEEDS_C, min_query_count=230),
    "offline-vision-remainder": Case(VISION, Scenario.OFFLINE, min_query_count=120),
    "offline-llm-unique": Case(LLM, Scenario.OFFLINE, seeds=SEEDS_B, issue_unique=True),
    "offline-vision-same": Case(VISION, Scenario.OFFLINE, issue_same=True),
    "singlestream-llm": Case(LLM, Scenario.SINGLE_STREAM, rate=1000.0, total=50),
    "singlestream-vision": Case(VISION, Scenario.SINGLE_STREAM, seeds=SEEDS_C, rate=500.0),
    "multistream-vision": Case(VISION, Scenario.MULTI_STREAM, rate=250.0),
    "multistream-llm": Case(LLM, Scenario.MULTI_STREAM, seeds=SEEDS_B, rate=250.0),
    "multistream-vision-same": Case(
        VISION, Scenario.MULTI_STREAM, seeds=SEEDS_A, rate=250.0, issue_same=True
    ),
    "accuracy-server-llm": Case(LLM, Scenario.SERVER, Mode.ACCURACY, total=230),
    "accuracy-server-vision": Case(VISION, Scenario.SERVER, Mode.ACCURACY, seeds=SEEDS_B),
    "accuracy-offline-llm": Case(LLM, Scenario.OFFLINE, Mode.ACCURACY, seeds=SEEDS_A, total=130),
    "accuracy-singlestream-vision": Case(VISION, Scenario.SINGLE_STREAM, Mode.ACCURACY),
    "accuracy-multistream-vision": Case(
        VISION, Scenario.MULTI_STREAM, Mode.ACCURACY, seeds=SEEDS_C, total=230
    ),
}


@dataclass
class LoadGenRun:
    detail: dict[str, list[Any]]
    samples: list[dict[str, Any]]  # trace "Sample" begin events, by sample_seq


def test_the_loadgen_under_test_is_the_pinned_wheel() -> None:
    """The expectations here (and DEFAULT_UNIFORM_METHOD) were established on 6.0.17."""
    assert version("mlcommons-loadgen") == "6.0.17"


def _user_conf(case: Case) -> str:
    scen = case.loadgen_scenario
    lines = [
        f"*.{scen}.min_duration = {case.min_duration_ms}",
        f"*.{scen}.min_query_count = {case.min_query_count}",
        f"*.{scen}.performance_sample_count_override = {case.perf_count}",
    ]
    if scen in ("Server", "Offline"):
        lines.append(f"*.{scen}.target_qps = {case.rate}")
    else:  # expected latency, in (fractional) milliseconds
        lines.append(f"*.{scen}.target_latency = {1000.0 / case.rate}")
    if case.issue_unique:
        lines.append(f"*.{scen}.performance_issue_unique = 1")
    if case.issue_same:
        lines.append(f"*.{scen}.performance_issue_same = 1")
        lines.append(f"*.{scen}.performance_issue_same_index = 3")
    return "\n".join(lines) + "\n"


# LoadGen loads mlperf.conf only on a process's first FromConfig call (later calls log
# "Multiple conf files"), so every run gets a fresh interpreter.
_CHILD = """
import array, json, sys
import mlperf_loadgen as lg

a = json.loads(sys.argv[1])
settings = lg.TestSettings()
assert settings.FromConfig(a["conf"], a["model"], a["scenario"]) == 0
settings.scenario = getattr(lg.TestScenario, a["scenario"])
settings.mode = getattr(lg.TestMode, a["mode"])
if a["seeds"] is not None:
    settings.qsl_rng_seed, settings.sample_index_rng_seed, settings.schedule_rng_seed = a["seeds"]
tokens = array.array("i", [101, 102, 103])
address, count = tokens.buffer_info()


def issue(query_samples):
    if a["first_token"]:
        lg.FirstTokenComplete([lg.QuerySampleResponse(q.id, address, 4, 1) for q in query_samples])
    lg.QuerySamplesComplete(
        [lg.QuerySampleResponse(q.id, address, 4 * count, count) for q in query_samples]
    )


sut = lg.ConstructSUT(issue, lambda: None)
qsl = lg.ConstructQSL(a["total"], a["perf_count"], lambda _: None, lambda _: None)
output = lg.LogOutputSettings()
output.outdir = a["out"]
output.copy_summary_to_stdout = False
log_settings = lg.LogSettings()
log_settings.log_output = output
log_settings.enable_trace = True
lg.StartTestWithLogSettings(sut, qsl, settings, log_settings)
lg.DestroyQSL(qsl)
lg.DestroySUT(sut)
"""


def run_loadgen(out: Path, case: Case) -> LoadGenRun:
    """Run LoadGen for ``case`` with a SUT that answers at once; read its logs back."""
    out.mkdir(parents=True, exist_ok=True)
    conf = out / "user.conf"
    conf.write_text(_user_conf(case))
    args = {
        "conf": str(conf),
        "model": case.model,
        "scenario": case.loadgen_scenario,
        "mode": "AccuracyOnly" if case.mode is Mode.ACCURACY else "PerformanceOnly",
        "seeds": case.seeds,
        "first_token": case.equal_issue and case.scenario is not Scenario.OFFLINE,
        "total": case.total,
        "perf_count": case.perf_count,
        "out": str(out),
    }
    subprocess.run(
        [sys.executable, "-c", _CHILD, json.dumps(args)], check=True, cwd=out, timeout=60
    )
    run = LoadGenRun(_read_detail(out / "mlperf_log_detail.txt"), _read_samples(out))
    assert "error_invalid_config" not in run.detail
    return run


def _read_detail(path: Path) -> dict[str, list[Any]]:
    detail: dict[str, list[Any]] = defaultdict(list)
    for line in path.read_text().splitlines():
        if line.startswith(":::MLLOG "):
            record = json.loads(line[len(":::MLLOG ") :])
            detail[record["key"]].append(record["value"])
    return detail


def _read_samples(out: Path) -> list[dict[str, Any]]:
    """The trace's sample begin events; the file as a whole is not valid JSON in 6.0.17."""
    events = []
    for line in (out / "mlperf_log_trace.json").read_text().splitlines():
        if '"name":"Sample"' in line and '"ph":"b"' in line:
            events.append(json.loads(line.rstrip().rstrip(","), parse_float=Decimal))
    return sorted(events, key=lambda e: e["args"]["sample_seq"])


def tokenmark_settings(case: Case, run: LoadGenRun) -> EffectiveSettings:
    if case.seeds is None:  # mlperf.conf's seeds, as LoadGen applied them
        seeds = Seeds(
            qsl=run.detail["effective_qsl_rng_seed"][0],
            sample_index=run.detail["effective_sample_index_rng_seed"][0],
            schedule=run.detail["effective_schedule_rng_seed"][0],
        )
    else:
        seeds = Seeds(*case.seeds)
    requested = TestSettings(
        round="v6.1",
        benchmark=case.model,
        scenario=case.scenario,
        seeds=seeds,
        mode=case.mode,
        target_qps=case.rate,
        offline_expected_qps=case.rate,
        single_stream_expected_latency_ns=round(1e9 / case.rate),
        multi_stream_expected_latency_ns=round(1e9 / case.rate),
        min_duration_ms=case.min_duration_ms,
        min_query_count=case.min_query_count,
        performance_sample_count=case.perf_count,
        total_sample_count=case.total,
        sample_concatenate_permutation=case.equal_issue,
    )
    return effective(requested, case.total)


def _check_effective(eff: EffectiveSettings, run: LoadGenRun, case: Case) -> None:
    d = run.detail
    assert d["effective_sample_concatenate_permutation"] == [case.equal_issue]
    assert d["effective_performance_sample_count"] == [eff.performance_sample_count]
    assert d["effective_min_query_count"] == [eff.min_query_count]
    assert d["effective_target_duration_ms"] == [eff.target_duration_ns // 1_000_000]
    assert d["effective_target_qps"] == [pytest.approx(eff.target_qps, rel=1e-12)]
    if not case.issue_unique:  # LoadGen resizes Offline queries for it; settings.py not
        assert d["effective_samples_per_query"] == [eff.samples_per_query]
    assert (d["effective_qsl_rng_seed"][0], d["effective_sample_index_rng_seed"][0]) == (
        eff.seeds.qsl,
        eff.seeds.sample_index,
    )
    assert d["effective_schedule_rng_seed"] == [eff.seeds.schedule]


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_matches_loadgen(case: Case, tmp_path: Path) -> None:
    run = run_loadgen(tmp_path, case)
    eff = tokenmark_settings(case, run)
    _check_effective(eff, run, case)

    pairs = lgrandom.loadable_sets_for(eff)
    assert run.detail["loaded_qsl_set"] == [s for s, _ in pairs]

    generated = [
        lgrandom.generate_queries(
            eff,
            loaded,
            end,
            performance_issue_unique=case.issue_unique,
            performance_issue_same=case.issue_same,
            performance_issue_same_index=3,
        )
        for loaded, end in pairs
    ]
    d = run.detail
    assert d["generated_query_count"] == [g.generated_query_count for g in generated]
    assert d["generated_samples_per_query"] == [g.samples_per_query for g in generated]
    assert d["generated_query_duration"] == [g.generated_query_duration_ns for g in generated]

    expected_idx = np.concatenate([g.sample_index for g in generated])
    expected_query = np.concatenate(
        [np.repeat(np.arange(g.generated_query_count), g.query_sizes) for g in generated]
    )

    issued = run.samples
    assert [e["args"]["sample_seq"] for e in issued] == list(range(len(issued)))
    stops_early = case.mode is Mode.PERFORMANCE and case.scenario in (
        Scenario.SINGLE_STREAM,
        Scenario.MULTI_STREAM,
    )
    if stops_early:  # LoadGen stops once min duration and count are met
        assert 0 < len(issued) <= expected_idx.shape[0]
    else:
        assert len(issued) == expected_idx.shape[0]
    n = len(issued)
    got_idx = np.array([e["args"]["sample_idx"] for e in issued], dtype=np.int64)
    np.testing.assert_array_equal(got_idx, expected_idx[:n])

    # query_seq runs on across loaded sets; restart it per IssueQueries call
    got_query = np.array([e["args"]["query_seq"] for e in issued], dtype=np.int64)
    starts = np.cumsum([0] + [g.generated_query_count for g in generated])
    set_of_sample = np.repeat(
        np.arange(len(generated)), [g.sample_index.shape[0] for g in generated]
    )
    np.testing.assert_array_equal(
        got_query - got_query[0] - starts[set_of_sample[:n]], expected_query[:n]
    )

    if case.loadgen_scenario == "Server" and case.mode is Mode.PERFORMANCE:
        # "ts" is the scheduled time in microseconds with 3 decimals (exact ns); only
        # Server's trace carries the generated times, the others log the issue time.
        (g,) = generated
        expected_ns = g.scheduled_ns[expected_query]
        got_ns = np.array([int(e["ts"] * 1000) for e in issued], dtype=np.int64)
        np.testing.assert_array_equal(got_ns - got_ns[0], expected_ns - expected_ns[0])


def test_default_uniform_method_is_the_wheels(tmp_path: Path) -> None:
    """The wheel draws like libstdc++ >= 11 (Lemire), not like the older scaling method.

    For small ranges the two methods almost always agree (they differ by at most
    ``range**2 / 2**32`` of a bucket), so this uses a 100k-sample set: its shuffle runs
    libstdc++'s one-position-per-element path with ranges up to 1e5, and Server's
    uniform draws span 1e5 values; both disagree between the methods within a few draws.
    """
    case = Case(VISION, Scenario.SERVER, seeds=SEEDS_A, total=100_000, perf_count=100_000)
    run = run_loadgen(tmp_path, case)
    eff = tokenmark_settings(case, run)
    got_set = run.detail["loaded_qsl_set"]
    got_idx = [e["args"]["sample_idx"] for e in run.samples]
    lemire, scaling = lgrandom.UniformIntMethod.LEMIRE, lgrandom.UniformIntMethod.SCALING
    assert lgrandom.DEFAULT_UNIFORM_METHOD is lemire

    ((loaded, end),) = lgrandom.loadable_sets_for(eff, method=lemire)
    assert got_set == [loaded]
    assert got_idx == lgrandom.generate_queries(eff, loaded, end).sample_index.tolist()

    ((other, _),) = lgrandom.loadable_sets_for(eff, method=scaling)
    assert got_set != [other]
    by_scaling = lgrandom.generate_queries(eff, loaded, end, method=scaling)
    assert got_idx != by_scaling.sample_index.tolist()
