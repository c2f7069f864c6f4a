"""tokenmark.mlperf.mllog against real logs: published results and the official LoadGen.

1. Every published log in ``tests/data/shared/mlperf/samples`` (v4.1 to v6.0) parses
   strictly; its summary agrees with its detail log line by line, and concrete published
   figures come out (the GB300 NVL72 deepseek-r1 2.49431e+06 tok/s, ...).
2. The official ``mlperf_loadgen`` 6.0.17 runs a dummy SUT (one fresh process per run:
   LoadGen reads ``mlperf.conf`` once per process) for each scenario; its logs parse and
   agree with themselves too.
3. The same runs, replayed: LoadGen's requested settings become tokenmark settings and
   its per-sample times (from its trace) become tokenmark records; tokenmark's summary,
   verdicts and log writer then reproduce LoadGen's ``mlperf_log_summary.txt`` byte for
   byte (tokenmark's note aside) and every value of its detail log except LoadGen's own
   identity and internals. SingleStream/MultiStream are exact too, except the figures
   LoadGen measures from its ``start``, which its trace does not record.

``mlperf_loadgen`` is a dev dependency, imported without ``importorskip``: a missing
LoadGen must fail here, not pass silently.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import mlperf_loadgen  # type: ignore[import-not-found]  # noqa: F401  (fail, never skip)
import numpy as np
import pytest

from tests.paths import SAMPLES
from tokenmark.errors import ConfigError
from tokenmark.metrics.stats import LOADGEN_PERCENTILES, Column
from tokenmark.metrics.summary import RunData, summarize
from tokenmark.mlperf import mllog
from tokenmark.mlperf.presets import resolve
from tokenmark.mlperf.rules import ClientStats, evaluate
from tokenmark.mlperf.scenarios import build_schedule
from tokenmark.mlperf.settings import LatencyLimits, Mode, Scenario, Seeds, TestSettings, effective
from tokenmark.output.mlperf import EMPTY_ACCURACY_LOG

PCTS = [f"{p * 100:.2f}" for p in LOADGEN_PERCENTILES]


# -- a summary and its detail log tell the same story ------------------------------------


def check_consistent(s: mllog.SummaryLog, d: mllog.DetailLog) -> None:
    """Every figure the summary prints equals the detail log's (LoadGen's own logs)."""
    assert s.complete and s.skipped == () and d.skipped == ()
    assert s.error_count == d.num_errors
    if s.scenario is None:  # accuracy mode: the summary is the trailer alone
        assert d["effective_test_mode"] == "AccuracyOnly" and not d.has_results
        return
    assert s.scenario == d["effective_scenario"]
    assert s.mode == d["effective_test_mode"]
    assert s.sut_name == d["sut_name"]
    assert s.error_count == d.num_errors
    if not d.has_results:
        return
    assert s.result_validity == d["result_validity"]
    assert s.criteria["min_duration"] == d["result_min_duration_met"]
    assert s.criteria["min_queries"] == d["result_min_queries_met"]
    assert s.criteria["early_stopping"] == d["early_stopping_met"]
    if s.scenario == "Server":
        assert s.criteria["performance_constraints"] == d["result_perf_constraints_met"]
    for name, text in s.early_stopping.items():
        key = "early_stopping_result" if name == "latency" else f"early_stopping_{name}_result"
        assert d[key] == text.replace("\n", " ")

    add = "per_query_latency" if s.scenario == "MultiStream" else "additional_stats"
    infix = "_query" if s.scenario == "MultiStream" else ""
    per_query = "_per_query" if s.scenario == "MultiStream" else ""
    assert s.number("Min latency (ns)", add) == d[f"result_min{infix}_latency_ns"]
    assert s.number("Max latency (ns)", add) == d[f"result_max{infix}_latency_ns"]
    assert s.number("Mean latency (ns)", add) == d[f"result_mean{infix}_latency_ns"]
    for p in PCTS:
        assert s.number(f"{p} percentile latency (ns)", add) == \
            d[f"result_{p}_percentile{per_query}_latency_ns"]
    if "result_first_token_mean_latency_ns" in d:
        a = "additional_stats"
        assert s.number("Min First Token latency (ns)", a) == d["result_first_token_min_latency_ns"]
        assert s.number("Mean Time per Output Token (ns)", a) == \
            d["result_time_to_output_token_mean"]
        assert s.number("Max Time per Output Token (ns)", a) == d["result_time_to_output_token_max"]
        for p in PCTS:
            assert s.number(f"{p} percentile first token latency (ns)", a) == \
                d[f"result_first_token_{p}_percentile_latency_ns"]
            assert s.number(f"{p} percentile time to output token (ns)", a) == \
                d[f"result_time_per_output_token_{p}_percentile_ns"]

    h = s.headline
    rel = pytest.approx
    if s.scenario == "Server":
        assert h["completed_samples_per_second"] == rel(
            d["result_completed_samples_per_sec"], rel=1e-5, abs=0.006)
        if "completed_tokens_per_second" in h:
            assert h["completed_tokens_per_second"] == rel(
                d["result_completed_tokens_per_second"], rel=1e-5, abs=0.006)
    elif s.scenario == "Offline":
        assert h["samples_per_second"] == d["result_samples_per_second"]
        if "tokens_per_second" in h:
            assert h["tokens_per_second"] == d["result_tokens_per_second"]
    else:
        assert s.target_percentile is not None
        assert s.target_percentile == d["effective_target_latency_percentile"]
        p = f"{s.target_percentile * 100:.2f}"
        assert h["target_latency_ns"] == d[f"result_{p}_percentile{per_query}_latency_ns"]

    params = s.fields["test_parameters"]
    assert int(params["samples_per_query"]) == d["effective_samples_per_query"]
    assert float(params["target_qps"]) == d["effective_target_qps"]
    assert int(params["min_query_count"]) == d["effective_min_query_count"]
    assert int(params["qsl_rng_seed"]) == d["effective_qsl_rng_seed"]
    assert int(params["sample_index_rng_seed"]) == d["effective_sample_index_rng_seed"]
    assert int(params["schedule_rng_seed"]) == d["effective_schedule_rng_seed"]
    assert int(params["performance_sample_count"]) == d["effective_performance_sample_count"]


# -- 1. published logs --------------------------------------------------------------------

SUMMARIES = sorted(SAMPLES.rglob("mlperf_log_summary.txt"))


def load(folder: Path) -> tuple[mllog.SummaryLog, mllog.DetailLog]:
    s_path = folder / "mlperf_log_summary.txt"
    d_path = folder / "mlperf_log_detail.txt"
    with open(d_path, encoding="utf-8") as f:
        detail = mllog.parse_detail(f, str(d_path))
    return mllog.parse_summary(s_path.read_text(encoding="utf-8"), str(s_path)), detail


def test_every_published_sample_is_here() -> None:
    assert len(SUMMARIES) == 10
    assert all((p.parent / "mlperf_log_detail.txt").exists() for p in SUMMARIES)


@pytest.mark.parametrize("summary_path", SUMMARIES,
                         ids=lambda p: "/".join(p.relative_to(SAMPLES).parts[:1] +
                                                p.relative_to(SAMPLES).parts[4:7]))
def test_published_logs_parse_and_agree(summary_path: Path) -> None:
    s, d = load(summary_path.parent)
    check_consistent(s, d)
    assert s.valid and d["result_validity"] == "VALID"
    assert s.warning_count is not None and s.tokenmark_note is None
    assert d.tokenmark_note is None and d.num_errors == 0
    folder_scenario = summary_path.parts[-4]
    assert d["effective_scenario"] == ("Server" if folder_scenario == "Interactive"
                                       else folder_scenario)


def sample(*parts: str) -> tuple[mllog.SummaryLog, mllog.DetailLog]:
    matches = [p.parent for p in SUMMARIES if all(x in p.parts for x in parts)]
    assert len(matches) == 1, (parts, matches)
    return load(matches[0])


def test_gb300_nvl72_deepseek_r1_offline():
    s, d = sample("v6.0", "GB300-NVL72_GB300-288GB_aarch64x288_TRT", "Offline")
    assert s.get("Tokens per second") == "2.49431e+06"  # printed %g
    assert s.headline["tokens_per_second"] == 2_494_310.0
    assert s.headline["samples_per_second"] == 664.711
    assert d["result_tokens_per_second"] == 2_494_310.0
    assert d["loadgen_version"] == "6.0.8 @ NA"
    assert s.get("samples_per_query", "test_parameters") == "3071600"
    assert s.notes[0] == "WARNING: sample_concatenate_permutation was set to true. "


def test_gb300_nvl72_deepseek_r1_server():
    s, d = sample("v6.0", "GB300-NVL72_GB300-288GB_aarch64x288_TRT", "Server")
    assert s.headline["completed_tokens_per_second"] == 1_555_108.58
    assert s.headline["completed_samples_per_second"] == 414.63
    assert s.early_stopping == {"ttft": " * Run successful.", "tpot": " * Run successful."}
    assert s.number("Scheduled samples per second", "additional_stats") == 429.73
    assert s.number("99.00 percentile first token latency (ns)", "additional_stats") \
        == 742_539_165
    assert d["result_completed_tokens_per_second"] == 1.55511e06
    assert d["result_overlatency_query_count"] == d["result_query_count"] == 1_053_120
    assert d["requested_server_tpot_latency"] == 80_000_000
    assert d.values("loaded_qsl_set")[0][:3] == [2589, 4032, 749]


def test_interactive_folder_logs_say_server():
    s, d = sample("v6.0", "87xMI355X_22xEPYC_9575F", "Interactive")
    assert s.scenario == "Server" and d["effective_scenario"] == "Server"
    assert s.headline["completed_tokens_per_second"] == 785_521.65
    # the Interactive limits only show as the requested TTFT/TPOT
    assert (d["requested_server_ttft_latency"], d["requested_server_tpot_latency"]) == (
        450_000_000, 40_000_000)
    assert s.get("ttft_latency (ns)", "test_parameters") == "450000000"


def test_qwen3_vl_server_is_samples_based():
    s, d = sample("v6.0", "qwen3-vl-235b-a22b", "Server")
    assert s.headline == {"completed_samples_per_second": 41.64}
    assert "completed_tokens_per_second" not in s.headline
    assert s.early_stopping == {"latency": " * Run successful."}
    assert s.get("target_latency (ns)", "test_parameters") == "12000000000"
    assert d["effective_target_latency_ns"] == 12_000_000_000
    assert d["result_99.00_percentile_latency_ns"] == 11_527_346_172
    assert d["result_overlatency_query_count"] == 325
    assert "requested_use_token_latencies" not in d


def test_jetson_thor_singlestream_p90():
    s, d = sample("v6.0", "Jetson-Thor", "SingleStream")
    assert s.target_percentile == 0.9
    assert s.headline["target_latency_ns"] == 1_357_552_837
    assert s.number("90.00 percentile latency (ns)", "additional_stats") == 1_357_552_837
    assert d["result_90.00_percentile_latency_ns"] == 1_357_552_837
    assert s.headline["target_first_token_latency_ns"] == 126_477_827
    assert s.early_stopping["ttft"].splitlines()[-1] == \
        " * Early stopping 99.0th percentile estimate: 183878879"
    # LoadGen's quirk: the SingleStream estimate logged is TTFT's (evaluated last)
    assert d["early_stopping_latency_ss"] == 132_128_483
    assert d["requested_single_stream_expected_latency_ns"] == 4.2e9
    assert s.number("QPS w/ loadgen overhead", "additional_stats") == 0.89
    # A published inconsistency, read as printed: NVIDIA's harness ran SingleStream with
    # target_duration 0, and this summary prints 0 where the detail says 600000.
    assert s.get("min_duration (ms)", "test_parameters") == "0"
    assert d["effective_min_duration_ms"] == 600_000


def test_v41_server_old_wording():
    s, d = sample("v4.1", "Server")
    assert any(ln.label == "Min Time to Output Token (ns)" for ln in s.lines)
    assert s.number("Min Time per Output Token (ns)", "additional_stats") == 27_331_448
    assert s.headline["completed_tokens_per_second"] == 21_028.23
    assert d["loadgen_version"] == "4.1 @ 379ee5345a"
    assert "num_errors" not in d and d.num_errors == 0  # counted from the lines instead
    assert "effective_accuracy_sample_count" not in d


def test_v51_deepseek_offline():
    s, d = sample("v5.1", "Offline")
    assert s.headline["tokens_per_second"] == 420_659.0
    assert d["result_tokens_per_second"] == 420_659
    assert d.values("generic_message") == [
        "Starting performance mode",
        "Ending naturally: Minimum query count and test duration met.",
    ]


# -- 2 and 3. the official LoadGen ----------------------------------------------------------

_CHILD = """
import array, json, sys
import mlperf_loadgen as lg

a = json.loads(sys.argv[1])
settings = lg.TestSettings()
assert settings.FromConfig(a["conf"], a["model"], a["scenario"]) == 0
settings.scenario = getattr(lg.TestScenario, a["scenario"])
settings.mode = getattr(lg.TestMode, a["mode"])
tokens = array.array("i", range(16))
address, _ = tokens.buffer_info()


def issue(query_samples):
    for q in query_samples:
        n = 2 + q.index % 7  # output tokens: a function of the dataset index
        if a["first_token"]:
            lg.FirstTokenComplete([lg.QuerySampleResponse(q.id, address, 4, 1)])
        lg.QuerySamplesComplete([lg.QuerySampleResponse(q.id, address, 4 * n, n)])


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

TOTAL, PERF_COUNT = 200, 50
#: The round whose preset a replayed run takes its limits from, as a tokenmark run does.
ROUND = "v6.0"


def preset_limits(case: Case) -> tuple[LatencyLimits | None, tuple[int, int] | None]:
    """The latency limits a tokenmark run of ``case`` takes from the round's preset: the
    scenario's own limits (None where the preset has no such scenario) and the token
    limits LoadGen logs for its model key (BenchmarkPreset.loadgen_token_limits);
    (None, None) for a model with no LLM preset (resnet50)."""
    try:
        bench, _ = resolve(ROUND, case.model)
    except ConfigError:
        return None, None
    if case.scenario in bench.scenarios:
        return bench.scenario(case.scenario).limits, bench.loadgen_token_limits(case.scenario)
    # a scenario the benchmark lacks (llama3_1-8b SingleStream): the model key's Server lines
    return None, bench.loadgen_token_limits(Scenario.SERVER)


@dataclass(frozen=True)
class Case:
    model: str
    scenario: Scenario
    conf: tuple[str, ...]
    mode: Mode = Mode.PERFORMANCE

    @property
    def tokens(self) -> bool:
        return self.model.startswith("llama")

    @property
    def lg_scenario(self) -> str:
        return self.scenario.loadgen.value


CASES = {
    "server-tokens": Case("llama3_1-8b", Scenario.SERVER,
                          ("min_duration = 300", "min_query_count = 10", "target_qps = 2000")),
    "server-tokens-invalid": Case("llama3_1-8b", Scenario.SERVER,
                                  ("min_duration = 300", "min_query_count = 10",
                                   "target_qps = 400")),
    "interactive-tokens": Case("llama3_1-8b-interactive", Scenario.INTERACTIVE,
                               ("min_duration = 300", "min_query_count = 10",
                                "target_qps = 2000")),
    "server-vision": Case("resnet50", Scenario.SERVER,
                          ("min_duration = 200", "target_qps = 3000")),
    "offline-tokens": Case("llama3_1-8b", Scenario.OFFLINE,
                           ("min_duration = 100", "target_qps = 2000")),
    "singlestream-tokens": Case("llama3_1-8b", Scenario.SINGLE_STREAM,
                                ("min_duration = 100", "target_latency = 1")),
    "singlestream-edge": Case("llama3_1-8b-edge", Scenario.SINGLE_STREAM,
                              ("min_duration = 100", "target_latency = 1")),
    "offline-vision": Case("resnet50", Scenario.OFFLINE,
                           ("min_duration = 100", "target_qps = 2000")),
    "singlestream-vision": Case("resnet50", Scenario.SINGLE_STREAM,
                                ("min_duration = 100", "target_latency = 1")),
    "multistream-vision": Case("resnet50", Scenario.MULTI_STREAM,
                               ("min_duration = 100", "min_query_count = 700",
                                "target_latency = 1")),
    "accuracy-server-tokens": Case("llama3_1-8b", Scenario.SERVER,
                                   ("min_duration = 100", "target_qps = 2000"), Mode.ACCURACY),
}


@dataclass
class LoadGenRun:
    case: Case
    out: Path
    summary_text: str
    summary: mllog.SummaryLog
    detail: mllog.DetailLog
    samples: list[dict[str, Any]]  # trace "Sample" begin events, by sample_seq
    ttft_by_ts: dict[int, int]  # Server: scheduled ns -> TTFT (Token_Latency counters)
    ttft_by_seq: dict[int, int]  # SingleStream/MultiStream: sample_seq -> TTFT


def _ns(ts: Decimal) -> int:
    """A trace timestamp (microseconds, 3 decimals) in integer nanoseconds."""
    return int(ts * 1000)


def run_loadgen(case: Case, out: Path) -> LoadGenRun:
    out.mkdir(parents=True, exist_ok=True)
    scen = case.lg_scenario
    lines = [f"*.{scen}.{c}" for c in case.conf]
    lines.append(f"*.{scen}.performance_sample_count_override = {PERF_COUNT}")
    (out / "user.conf").write_text("\n".join(lines) + "\n")
    args = {
        "conf": str(out / "user.conf"),
        "model": case.model,
        "scenario": scen,
        "mode": case.mode.value,
        "first_token": case.tokens and case.scenario is not Scenario.OFFLINE,
        "total": TOTAL,
        "perf_count": TOTAL,  # the QSL reports its whole dataset, as tokenmark's does
        "out": str(out),
    }
    subprocess.run([sys.executable, "-c", _CHILD, json.dumps(args)], check=True, cwd=out,
                   timeout=60)
    samples: list[dict[str, Any]] = []
    ttft_by_ts: dict[int, int] = {}
    ttft_by_seq: dict[int, int] = {}
    for line in (out / "mlperf_log_trace.json").read_text().splitlines():
        if '"ph":"b"' not in line and '"Token_Latency"' not in line:
            continue
        event = json.loads(line.rstrip().rstrip(","), parse_float=Decimal)
        if event["name"] == "Sample":
            samples.append(event)
        elif event["name"] == "Token":
            ttft_by_seq[event["args"]["sample_seq"]] = event["args"]["complete_ns"]
        elif event["name"] == "Token_Latency":
            ts, a = _ns(event["ts"]), event["args"]
            assert ts not in ttft_by_ts  # Server queries have distinct scheduled times
            ttft_by_ts[ts] = a["issue_delay"] + a["issue_to_done"]
    samples.sort(key=lambda e: e["args"]["sample_seq"])
    text = (out / "mlperf_log_summary.txt").read_text()
    with open(out / "mlperf_log_detail.txt", encoding="utf-8") as f:
        detail = mllog.parse_detail(f, str(out / "mlperf_log_detail.txt"))
    summary = mllog.parse_summary(text, str(out / "mlperf_log_summary.txt"))
    return LoadGenRun(case, out, text, summary, detail, samples, ttft_by_ts, ttft_by_seq)


@pytest.fixture(scope="module")
def loadgen_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, LoadGenRun]:
    root = tmp_path_factory.mktemp("loadgen")
    return {name: run_loadgen(case, root / name) for name, case in CASES.items()}


def test_the_loadgen_under_test_is_the_pinned_wheel() -> None:
    from importlib.metadata import version

    assert version("mlcommons-loadgen") == mllog.LOADGEN_FORMAT_VERSION


@pytest.mark.parametrize("name", CASES)
def test_loadgen_logs_parse_and_agree(name: str, loadgen_runs: dict[str, LoadGenRun]) -> None:
    run = loadgen_runs[name]
    check_consistent(run.summary, run.detail)
    d = run.detail
    assert d["loadgen_version"].startswith("6.0.17 @ ")
    if run.case.mode is Mode.PERFORMANCE:
        assert (run.out / "mlperf_log_accuracy.json").read_text() == EMPTY_ACCURACY_LOG
        assert d.has_results
    else:
        assert run.summary.scenario is None and not d.has_results
    expected = "INVALID" if name == "server-tokens-invalid" else None
    if expected:
        assert run.summary.result_validity == expected
        assert run.summary.early_stopping["ttft"] == ""
        assert run.summary.recommendations == ()


# -- 3. replay: the same situation through tokenmark -----------------------------------------

#: Keys LoadGen logs about itself, which tokenmark does not (it is not LoadGen).
LOADGEN_ONLY = {
    "loadgen_version", "loadgen_build_date_local", "loadgen_build_date_utc",
    "loadgen_git_commit_date", "loadgen_git_log_message", "loadgen_git_status_message",
    "loadgen_file_sha1", "get_sut_name_duration_ns",
}
#: Wall-clock keys: LoadGen's are its run's, tokenmark's come from RunFacts.
WALL_CLOCK = {"test_datetime", "power_begin", "power_end"}
#: LoadGen measures these from its ``start``; SingleStream's trace does not record it.
FROM_START = {
    "result_qps_with_loadgen_overhead", "result_token_throughput_with_loadgen_overhead",
    "result_completed_tokens_per_second",
}
FROM_START_LINES = ("QPS w/ loadgen overhead", "TPS w/ loadgen overhead")


def replay(run: LoadGenRun) -> tuple[str, mllog.DetailLog]:
    """tokenmark's logs for what LoadGen ran: its settings, its per-sample times."""
    case, d = run.case, run.detail
    lg = case.scenario.loadgen
    requested = TestSettings(
        round="v6.0",
        benchmark=case.model,
        scenario=case.scenario,
        mode=case.mode,
        seeds=Seeds(d["requested_qsl_rng_seed"], d["requested_sample_index_rng_seed"],
                    d["requested_schedule_rng_seed"]),
        target_qps=float(d.get("requested_server_target_qps", 1.0)),
        offline_expected_qps=float(d.get("requested_offline_expected_qps", 1.0)),
        single_stream_expected_latency_ns=int(
            d.get("requested_single_stream_expected_latency_ns", 1_000_000)),
        multi_stream_expected_latency_ns=int(
            d.get("requested_multi_stream_expected_latency_ns", 8_000_000)),
        min_duration_ms=d["requested_min_duration_ms"],
        max_duration_ms=d["requested_max_duration_ms"],
        min_query_count=d["requested_min_query_count"],
        max_query_count=d["requested_max_query_count"],
        performance_sample_count=d["requested_performance_sample_count_override"],
        sample_concatenate_permutation=d["requested_sample_concatenate_permutation"],
        use_token_latencies=d.get("requested_use_token_latencies", False),
        limits=LatencyLimits(
            ttft_ns=d.get("requested_server_ttft_latency"),
            tpot_ns=d.get("requested_server_tpot_latency"),
            e2e_ns=d.get("requested_server_target_latency_ns") or None,
        ),
        target_latency_percentile=d["effective_target_latency_percentile"],
    )
    own, token_limits = preset_limits(case)
    if own is not None and (own.ttft_ns is not None or own.e2e_ns is not None):
        requested = requested.with_(limits=own)  # the preset's, as a run takes them
    eff = effective(requested, d["qsl_reported_total_count"])
    schedule = build_schedule(eff, d["qsl_reported_total_count"])

    events = run.samples
    args = [e["args"] for e in events]
    ts = np.array([_ns(e["ts"]) for e in events], dtype=np.int64)
    start = int(ts.min())  # exact for Server and Offline; the first issue otherwise
    sched = ts - start
    complete = np.array([a["complete_ns"] for a in args], dtype=np.int64)
    if lg is Scenario.SERVER:
        ttft = np.array([run.ttft_by_ts.get(int(t), -1) for t in ts], dtype=np.int64)
    elif run.ttft_by_seq:
        ttft = np.array([run.ttft_by_seq[a["sample_seq"]] for a in args], dtype=np.int64)
    else:
        ttft = np.full(len(events), -1, dtype=np.int64)
    query_seq = np.array([a["query_seq"] for a in args], dtype=np.int64)
    n = len(events)
    data = RunData(
        seq=np.array([a["sample_seq"] for a in args], dtype=np.int64),
        query_id=query_seq - query_seq.min(),
        scheduled=sched,
        issued=sched + np.array([a["issue_start_ns"] for a in args], dtype=np.int64),
        first=np.where(ttft >= 0, sched + ttft, -1),
        done=sched + complete,
        output_tokens=np.array([2 + a["sample_idx"] % 7 for a in args], dtype=np.int64),
        input_tokens=np.zeros(n, dtype=np.int64),
        ok=np.ones(n, dtype=bool),
        measured=np.ones(n, dtype=bool),
        itl=Column(),
        errors=Counter(),
        token_disagreements=0,
        scheduled_total=n,
    )
    summary = summarize(data, eff)
    verdicts = evaluate(summary, eff, ClientStats())
    errors = [e.value for e in d.errors]
    ran_out = any(str(v).startswith("Ending early: Ran out") for v in errors)
    facts = mllog.RunFacts(
        sut_name=d["sut_name"],
        qsl_name=d["qsl_name"],
        start_wall_ns=0,
        active_duration_ns=0,
        ran_out_of_generated_queries=ran_out,
        errors=tuple(v for v in errors if not str(v).startswith("Ending early: Ran out")),
        warnings=tuple(e.value for e in d.warnings),
        # the model key's Server limits, which LoadGen logs in every scenario: from the
        # preset, as tokenmark.api.run does for a run
        server_token_limits_ns=token_limits,
    )
    text = mllog.render_summary(eff, summary, verdicts, facts)
    detail = mllog.parse_detail(mllog.render_detail(eff, summary, verdicts, schedule, facts))
    return text, detail


def _without_note(text: str) -> str:
    note = "\n" + mllog.note_text() + "\n"
    assert text.endswith(note)
    return text[: -len(note)]


@pytest.mark.parametrize("name", CASES)
def test_replay_reproduces_loadgens_summary(
    name: str, loadgen_runs: dict[str, LoadGenRun]
) -> None:
    run = loadgen_runs[name]
    ours, _ = replay(run)
    theirs = run.summary_text
    ours = _without_note(ours)
    if run.case.scenario in (Scenario.SINGLE_STREAM, Scenario.MULTI_STREAM):
        def mask(t: str) -> str:
            return "\n".join(ln for ln in t.splitlines() if not ln.startswith(FROM_START_LINES))
        theirs, ours = mask(theirs), mask(ours)
    assert ours == theirs


def _comparable(d: mllog.DetailLog, skip: set[str]) -> list[tuple[str, Any]]:
    """The entries to compare, in order. LoadGen's own logger warnings ("Logging
    allocation detected") come from its IO thread at no fixed place; they are passed to
    tokenmark as run facts and compared as a set by the caller."""
    drop = LOADGEN_ONLY | WALL_CLOCK | skip | {mllog.NOTE_KEY, "warning_generic_message"}
    return [(e.key, e.value) for e in d.entries
            if e.key not in drop and not e.key.startswith("logger_")]


@pytest.mark.parametrize("name", CASES)
def test_replay_reproduces_loadgens_detail(
    name: str, loadgen_runs: dict[str, LoadGenRun]
) -> None:
    run = loadgen_runs[name]
    _, ours = replay(run)
    skip = FROM_START if run.case.scenario is Scenario.SINGLE_STREAM else set()
    theirs_kv = _comparable(run.detail, skip)
    ours_kv = _comparable(ours, skip)
    if run.case.mode is Mode.ACCURACY:
        # LoadGen issues every loadable set in accuracy mode and logs each; a tokenmark
        # schedule holds the first, which must match LoadGen's first exactly.
        assert len(run.detail.values("loaded_qsl_set")) == TOTAL // PERF_COUNT
        theirs_kv = theirs_kv[: len(ours_kv)]
    assert [k for k, _ in ours_kv] == [k for k, _ in theirs_kv]
    for (key, ours_v), (_, theirs_v) in zip(ours_kv, theirs_kv, strict=True):
        assert ours_v == theirs_v, key
    assert sorted(ours.values("warning_generic_message")) == sorted(
        run.detail.values("warning_generic_message"))
    assert ours.tokenmark_note == mllog.note_text()
    assert "loadgen_version" not in ours


# -- 4. a native run's logs, key for key against LoadGen's ------------------------------------

#: Native runs of the LLM presets and the LoadGen runs of the same scenario and model key.
NATIVE = {
    "server-tokens": ("llama3.1-8b", Scenario.SERVER),
    "interactive-tokens": ("llama3.1-8b", Scenario.INTERACTIVE),
    "offline-tokens": ("llama3.1-8b", Scenario.OFFLINE),
    "singlestream-edge": ("llama3.1-8b-edge", Scenario.SINGLE_STREAM),
}
#: Keys a run logs or not by its outcome: its errors, an INVALID verdict's reason, and
#: LoadGen's messages ("Ending naturally ..." or an "Ending early ..." error instead).
OUTCOME_KEYS = {"error_runtime", "result_invalid_reason", "generic_message"}


@pytest.mark.parametrize("name", NATIVE)
def test_a_native_run_logs_loadgens_keys_and_limits(
    name: str, loadgen_runs: dict[str, LoadGenRun], tmp_path: Path
) -> None:
    """tokenmark's own run (settings from the preset, as `tokenmark run` builds them; a
    latency-model SUT in virtual time) logs the keys LoadGen logs for that scenario and
    model key, in LoadGen's order, and LoadGen's limits: the Interactive ones (500 ms /
    30 ms for llama3.1-8b) in an Interactive run, the Server ones elsewhere, LoadGen's
    100 ms defaults for a model key without Server lines (llama3_1-8b-edge)."""
    from tokenmark.adapters.inprocess import LatencyModel
    from tokenmark.api.run import SutSpec, default_dataset, run_benchmark
    from tokenmark.config.layering import build_settings

    bench, scenario = NATIVE[name]
    theirs = loadgen_runs[name]
    layered = build_settings(ROUND, bench, scenario, profile="demo", overrides={
        "min_duration_ms": 300, "min_query_count": 10, "target_qps": 50.0,
        "offline_expected_qps": 50.0, "performance_sample_count": PERF_COUNT,
        "total_sample_count": TOTAL})
    out = tmp_path / "run"
    run_benchmark(layered, default_dataset(layered, size=TOTAL),
                  SutSpec(model=LatencyModel(ttft_ns=5_000_000, tpot_ns=1_000_000)), out,
                  virtual_time=True)
    ours = mllog.parse_detail((out / "mlperf_log_detail.txt").read_text())
    drop = LOADGEN_ONLY | WALL_CLOCK | OUTCOME_KEYS | {mllog.NOTE_KEY, "warning_generic_message"}

    def keys(d: mllog.DetailLog) -> list[str]:
        return [e.key for e in d.entries if e.key not in drop and not e.key.startswith("logger_")]

    assert keys(ours) == keys(theirs.detail)
    for key in ("requested_server_ttft_latency", "requested_server_tpot_latency",
                "requested_server_target_latency_percentile",
                "effective_target_latency_percentile", "requested_use_token_latencies"):
        assert ours.get(key) == theirs.detail.get(key), key
    text = (out / "mlperf_log_summary.txt").read_text()
    for label in ("ttft_latency (ns)", "tpot_latency (ns)"):
        mine = [ln for ln in text.splitlines() if ln.startswith(label)]
        assert mine == [ln for ln in theirs.summary_text.splitlines() if ln.startswith(label)]
    if scenario is Scenario.INTERACTIVE:  # the limits the issue was about, stated
        assert ours["requested_server_ttft_latency"] == 500_000_000
        assert ours["requested_server_tpot_latency"] == 30_000_000
