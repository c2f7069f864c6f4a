"""The MLPerf log format: exact LoadGen 6.0.17 text, round trips and robust parsing.

Exact-text cases are small runs built by hand whose figures can be checked by mental
arithmetic against LoadGen's formulas (``results.cc``); the expected files follow
LoadGen's layout rules line by line. The property test renders random runs of every
MLPerf scenario, with and without token latencies, and parses them back.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import math
import re
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokenmark.errors import BadInputError, InternalError
from tokenmark.metrics.stats import LOADGEN_PERCENTILES, Column
from tokenmark.metrics.summary import RunData, Summary, summarize
from tokenmark.mlperf import mllog
from tokenmark.mlperf.rules import ClientStats, Verdicts, evaluate
from tokenmark.mlperf.scenarios import Schedule, ScheduleKind
from tokenmark.mlperf.settings import (
    EffectiveSettings,
    LatencyLimits,
    Mode,
    Scenario,
    Seeds,
    TestSettings,
    effective,
)

NOTE = mllog.note_text()
FACTS = mllog.RunFacts(
    sut_name="PySUT",
    qsl_name="PyQSL",
    start_wall_ns=1_770_000_000_123_456_789,
    active_duration_ns=1_100_000_000,
    pid=7,
)


# -- building runs ------------------------------------------------------------------------


def make_eff(scenario: Scenario, *, dataset: int = 600, **kw: Any) -> EffectiveSettings:
    kw.setdefault("seeds", Seeds(1, 2, 3))
    return effective(TestSettings(round="v6.0", benchmark="test", scenario=scenario, **kw),
                     dataset)


def run_data(
    sched: Sequence[int],
    issued: Sequence[int],
    first: Sequence[int],
    done: Sequence[int],
    tokens: Sequence[int],
    query_id: Sequence[int] | None = None,
    ok: Sequence[bool] | None = None,
) -> RunData:
    n = len(sched)

    def arr(x: Sequence[int] | range) -> np.ndarray:
        return np.asarray(x, dtype=np.int64)

    ok_arr = np.ones(n, dtype=bool) if ok is None else np.asarray(ok, dtype=bool)
    errors = Counter({"sut_error": int((~ok_arr).sum())}) if not ok_arr.all() else Counter()
    return RunData(
        seq=np.arange(n, dtype=np.int64),
        query_id=arr(range(n) if query_id is None else query_id),
        scheduled=arr(sched),
        issued=arr(issued),
        first=arr(first),
        done=np.where(ok_arr, arr(done), -1),
        output_tokens=arr(tokens),
        input_tokens=np.zeros(n, dtype=np.int64),
        ok=ok_arr,
        measured=np.ones(n, dtype=bool),
        itl=Column(),
        errors=errors,
        token_disagreements=0,
        scheduled_total=n,
    )


def schedule_for(eff: EffectiveSettings, n_queries: int, duration_ns: int) -> Schedule:
    empty = np.empty(0, dtype=np.int64)
    return Schedule(
        kind=ScheduleKind.TIMED,
        scenario=eff.scenario,
        sample_index=empty,
        query_id=empty,
        scheduled_ns=empty,
        samples_per_query=eff.samples_per_query,
        loaded_set=tuple(range(min(eff.performance_sample_count, 12))),
        generated_query_count=n_queries,
        generated_query_duration_ns=duration_ns,
    )


def judged(eff: EffectiveSettings, data: RunData) -> tuple[Summary, Verdicts]:
    summary = summarize(data, eff)
    return summary, evaluate(summary, eff, ClientStats())


# -- C formatting ----------------------------------------------------------------------------

_libc = ctypes.CDLL(ctypes.util.find_library("c"))


def c_format(fmt: str, x: float) -> str:
    buf = ctypes.create_string_buffer(512)
    _libc.snprintf(buf, 512, fmt.encode(), ctypes.c_double(x))
    return buf.value.decode()


@given(st.floats(allow_nan=False, allow_infinity=True, width=64))
@settings(max_examples=300, deadline=None)
def test_number_formats_are_the_c_librarys(x):
    """``DoubleToString`` is printf %.2f / %.1f; a streamed double is %g (glibc)."""
    assert mllog.fmt_g(x) == c_format("%g", x)
    assert mllog.fmt_fixed(x) == c_format("%.2f", x)
    assert mllog.fmt_fixed(x, 1) == c_format("%.1f", x)


def test_number_format_examples_from_published_logs():
    assert mllog.fmt_g(2494313.03) == "2.49431e+06"
    assert mllog.fmt_g(664.7113) == "664.711"
    assert mllog.fmt_g(1.92178e-08) == "1.92178e-08"
    assert mllog.fmt_g(430.0) == "430"
    assert mllog.fmt_g(1e9 / 4.2e9) == "0.238095"
    assert mllog.fmt_fixed(1555108.5849) == "1555108.58"
    assert mllog.fmt_fixed(0.999 * 100) == "99.90"
    assert mllog.fmt_fixed(0.9 * 100, 1) == "90.0"
    assert mllog.fmt_g(-math.nan) == "-nan"  # x86-64's 0.0/0.0, as glibc prints it


# -- exact text ------------------------------------------------------------------------------

SERVER_SUMMARY = """\
================================================
MLPerf Results Summary
================================================
SUT name : PySUT
Scenario : Server
Mode     : PerformanceOnly
Completed samples per second    : 454.55
Completed tokens per second: 5010.00
Result is : VALID
  Performance constraints satisfied : Yes
  Min duration satisfied : Yes
  Min queries satisfied : Yes
  Early stopping satisfied: Yes
TTFT Early Stopping Result:
 * Run successful.
TPOT Early Stopping Result:
 * Run successful.

================================================
Additional Stats
================================================
Scheduled samples per second : 500.00
Min latency (ns)                : 100000000
Max latency (ns)                : 100000000
Mean latency (ns)               : 100000000
50.00 percentile latency (ns)   : 100000000
90.00 percentile latency (ns)   : 100000000
95.00 percentile latency (ns)   : 100000000
97.00 percentile latency (ns)   : 100000000
99.00 percentile latency (ns)   : 100000000
99.90 percentile latency (ns)   : 100000000

Completed tokens per second                 : 5010.00
Min First Token latency (ns)                : 20000000
Max First Token latency (ns)                : 20000000
Mean First Token latency (ns)               : 20000000
50.00 percentile first token latency (ns)   : 20000000
90.00 percentile first token latency (ns)   : 20000000
95.00 percentile first token latency (ns)   : 20000000
97.00 percentile first token latency (ns)   : 20000000
99.00 percentile first token latency (ns)   : 20000000
99.90 percentile first token latency (ns)   : 20000000

Min Time per Output Token (ns)                : 8000000
Max Time per Output Token (ns)                : 8000000
Mean Time per Output Token (ns)               : 8000000
50.00 percentile time to output token (ns)   : 8000000
90.00 percentile time to output token (ns)   : 8000000
95.00 percentile time to output token (ns)   : 8000000
97.00 percentile time to output token (ns)   : 8000000
99.00 percentile time to output token (ns)   : 8000000
99.90 percentile time to output token (ns)   : 8000000

================================================
Test Parameters Used
================================================
samples_per_query : 1
target_qps : 500
ttft_latency (ns): 2000000000
tpot_latency (ns): 100000000
max_async_queries : 0
min_duration (ms): 1000
max_duration (ms): 0
min_query_count : 100
max_query_count : 0
qsl_rng_seed : 1
sample_index_rng_seed : 2
schedule_rng_seed : 3
accuracy_log_rng_seed : 0
accuracy_log_probability : 0
accuracy_log_sampling_target : 0
print_timestamps : 0
performance_issue_unique : 0
performance_issue_same : 0
performance_issue_same_index : 0
performance_sample_count : 600
accuracy_sample_count : 600
WARNING: sample_concatenate_permutation was set to true. 
Generated samples per query might be different as the one in the setting.
Check the generated_samples_per_query line in the detailed log for the real
samples_per_query value

No warnings encountered during test.

No errors encountered during test.

"""  # noqa: W291  (LoadGen's WARNING line ends with a space)


def server_run() -> tuple[EffectiveSettings, Summary, Verdicts]:
    """501 queries every 2 ms (last at 1.0 s), each 100 ms long, TTFT 20 ms, 11 tokens.

    Completed samples/s = 500 / 1.1 s = 454.55; tokens/s = 5511 / 1.1 s = 5010.00;
    scheduled samples/s = 500 / 1.0 s; TPOT = (100 - 20) ms / 10 = 8 ms.
    """
    eff = make_eff(
        Scenario.SERVER,
        target_qps=500.0,
        min_duration_ms=1000,
        use_token_latencies=True,
        sample_concatenate_permutation=True,
        limits=LatencyLimits(ttft_ns=2_000_000_000, tpot_ns=100_000_000),
    )
    sched = [i * 2_000_000 for i in range(501)]
    data = run_data(sched, sched, [t + 20_000_000 for t in sched],
                    [t + 100_000_000 for t in sched], [11] * 501)
    return (eff, *judged(eff, data))


def test_server_token_summary_is_loadgens_text():
    eff, summary, verdicts = server_run()
    text = mllog.render_summary(eff, summary, verdicts, FACTS)
    assert text == SERVER_SUMMARY + NOTE + "\n"


SINGLESTREAM_SUMMARY = """\
================================================
MLPerf Results Summary
================================================
SUT name : PySUT
Scenario : SingleStream
Mode     : PerformanceOnly
90.0th percentile latency (ns) : 5000000
90.0th first token percentile latency (ns) : 1000000
Result is : INVALID
  Min duration satisfied : NO
  Min queries satisfied : NO
  Early stopping satisfied: NO
Recommendations:
 * Decrease the expected latency so the loadgen pre-generates more queries.
 * The test exited early, before enough queries were issued.
   See the detailed log for why this may have occurred.
TTFT Early Stopping Result:

TPOT Early Stopping Result:
 * Only processed 10 queries.
 * Need to process at least 64 queries for early stopping.

================================================
Additional Stats
================================================
QPS w/ loadgen overhead         : 100.00
QPS w/o loadgen overhead        : 200.00

Min latency (ns)                : 5000000
Max latency (ns)                : 5000000
Mean latency (ns)               : 5000000
50.00 percentile latency (ns)   : 5000000
90.00 percentile latency (ns)   : 5000000
95.00 percentile latency (ns)   : 5000000
97.00 percentile latency (ns)   : 5000000
99.00 percentile latency (ns)   : 5000000
99.90 percentile latency (ns)   : 5000000

TPS w/ loadgen overhead         : 555.56
TPS w/o loadgen overhead        : 1000.00
Min First Token latency (ns)                : 1000000
Max First Token latency (ns)                : 1000000
Mean First Token latency (ns)               : 1000000
50.00 percentile first token latency (ns)   : 1000000
90.00 percentile first token latency (ns)   : 1000000
95.00 percentile first token latency (ns)   : 1000000
97.00 percentile first token latency (ns)   : 1000000
99.00 percentile first token latency (ns)   : 1000000
99.90 percentile first token latency (ns)   : 1000000

Min Time per Output Token (ns)                : 1000000
Max Time per Output Token (ns)                : 1000000
Mean Time per Output Token (ns)               : 1000000
50.00 percentile time to output token (ns)   : 1000000
90.00 percentile time to output token (ns)   : 1000000
95.00 percentile time to output token (ns)   : 1000000
97.00 percentile time to output token (ns)   : 1000000
99.00 percentile time to output token (ns)   : 1000000
99.90 percentile time to output token (ns)   : 1000000

================================================
Test Parameters Used
================================================
samples_per_query : 1
target_qps : 100
ttft_latency (ns): 100000000
tpot_latency (ns): 100000000
max_async_queries : 1
min_duration (ms): 10000
max_duration (ms): 0
min_query_count : 100
max_query_count : 0
qsl_rng_seed : 1
sample_index_rng_seed : 2
schedule_rng_seed : 3
accuracy_log_rng_seed : 0
accuracy_log_probability : 0
accuracy_log_sampling_target : 0
print_timestamps : 0
performance_issue_unique : 0
performance_issue_same : 0
performance_issue_same_index : 0
performance_sample_count : 10
accuracy_sample_count : 10

No warnings encountered during test.

No errors encountered during test.

"""


def singlestream_run() -> tuple[EffectiveSettings, Summary, Verdicts]:
    """10 queries every 10 ms (last issued at 90 ms), 5 ms each, TTFT 1 ms, 5 tokens.

    QPS w/ overhead = 9 / 0.09 s; w/o = 1 / 5 ms; TPS w/ = 50 / 0.09 s = 555.56;
    TPS w/o = 50 / (5 ms * 10) = 1000. Too few queries for every criterion but the
    TPOT early stopping fails first, so the TTFT text stays empty (LoadGen's ``&&``).
    """
    eff = make_eff(
        Scenario.SINGLE_STREAM,
        dataset=10,
        single_stream_expected_latency_ns=10_000_000,
        target_latency_percentile=0.9,
        use_token_latencies=True,
    )
    sched = [i * 10_000_000 for i in range(10)]
    data = run_data(sched, sched, [t + 1_000_000 for t in sched],
                    [t + 5_000_000 for t in sched], [5] * 10)
    return (eff, *judged(eff, data))


def test_singlestream_invalid_summary_is_loadgens_text():
    eff, summary, verdicts = singlestream_run()
    text = mllog.render_summary(eff, summary, verdicts, FACTS)
    assert text == SINGLESTREAM_SUMMARY + NOTE + "\n"


OFFLINE_HEAD = """\
================================================
MLPerf Results Summary
================================================
SUT name : PySUT
Scenario : Offline
Mode     : PerformanceOnly
Samples per second: 1000
Result is : VALID
  Min duration satisfied : Yes
  Min queries satisfied : Yes
  Early stopping satisfied: Yes

================================================
Additional Stats
================================================
Min latency (ns)                : 1000000
Max latency (ns)                : 4000000
Mean latency (ns)               : 2500000
50.00 percentile latency (ns)   : 3000000
90.00 percentile latency (ns)   : 4000000
95.00 percentile latency (ns)   : 4000000
97.00 percentile latency (ns)   : 4000000
99.00 percentile latency (ns)   : 4000000
99.90 percentile latency (ns)   : 4000000

================================================
Test Parameters Used
================================================
samples_per_query : 4
target_qps : 1.5
target_latency (ns): 0
max_async_queries : 1
min_duration (ms): 0
"""


def test_offline_summary_is_loadgens_text():
    """4 samples done at 1..4 ms: 4 / 4 ms = 1000 samples/s, printed %g (no decimals)."""
    eff = make_eff(Scenario.OFFLINE, dataset=4, offline_expected_qps=1.5, min_duration_ms=0,
                   min_query_count=4)
    done = [1_000_000, 2_000_000, 3_000_000, 4_000_000]
    data = run_data([0] * 4, [0] * 4, [-1] * 4, done, [0] * 4, query_id=[0] * 4)
    summary, verdicts = judged(eff, data)
    text = mllog.render_summary(eff, summary, verdicts, FACTS)
    assert text.startswith(OFFLINE_HEAD)
    assert text.endswith("accuracy_sample_count : 4\n\nNo warnings encountered during test."
                         "\n\nNo errors encountered during test.\n\n" + NOTE + "\n")


def test_offline_tokens_adds_a_blank_line_and_tokens_per_second():
    eff = make_eff(Scenario.OFFLINE, dataset=4, min_duration_ms=0, min_query_count=4,
                   use_token_latencies=True)
    done = [1_000_000, 2_000_000, 3_000_000, 4_000_000]
    data = run_data([0] * 4, [0] * 4, [-1] * 4, done, [1000, 2000, 3000, 4000],
                    query_id=[0] * 4)
    text = mllog.render_summary(eff, *judged(eff, data), FACTS)
    assert "Samples per second: 1000\nTokens per second: 2.5e+06\nResult is : VALID\n" in text
    assert "99.90 percentile latency (ns)   : 4000000\n\n\n=====" in text
    assert "ttft_latency (ns): 100000000\ntpot_latency (ns): 100000000\n" in text


def test_accuracy_mode_summary_is_the_trailer_only():
    eff = make_eff(Scenario.SERVER, mode=Mode.ACCURACY, target_qps=10.0, min_duration_ms=0)
    data = run_data([0, 1], [0, 1], [1, 2], [5, 6], [3, 3])
    text = mllog.render_summary(eff, *judged(eff, data), FACTS)
    assert text == ("\nNo warnings encountered during test.\n\n"
                    "No errors encountered during test.\n\n" + NOTE + "\n")
    parsed = mllog.parse_summary(text)
    assert parsed.scenario is None and parsed.error_count == 0 and parsed.complete


def test_trailer_counts_errors_and_warnings():
    eff, summary, verdicts = server_run()
    facts = mllog.RunFacts("PySUT", "PyQSL", 0, 0, errors=("e1", "e2"), warnings=("w",))
    text = mllog.render_summary(eff, summary, verdicts, facts)
    assert text.endswith("\n1 warning encountered. See detailed log.\n\n"
                         "2 ERRORS encountered. See detailed log.\n\n" + NOTE + "\n")
    detail = mllog.parse_detail(mllog.render_detail(eff, summary, verdicts,
                                                    schedule_for(eff, 501, 1), facts))
    assert [e.value for e in detail.errors] == ["e1", "e2"]
    assert detail["num_errors"] == 2 and detail.num_errors == 2
    assert detail.values("warning_generic_message") == ["w"]
    assert detail.warnings[0].is_warning


def test_unanswered_queries_make_the_run_invalid_and_are_logged_as_errors():
    eff = make_eff(Scenario.SERVER, target_qps=500.0, min_duration_ms=0, min_query_count=1,
                   limits=LatencyLimits(e2e_ns=10**9))
    sched = [i * 2_000_000 for i in range(500)]
    ok = [True] * 499 + [False]
    data = run_data(sched, sched, [-1] * 500, [t + 1000 for t in sched], [1] * 500, ok=ok)
    summary, verdicts = judged(eff, data)
    assert verdicts.mlperf.validity.value == "INVALID"
    text = mllog.render_summary(eff, summary, verdicts, FACTS)
    assert "Result is : INVALID\n" in text
    assert "Recommendations:\n * Not every query was answered (tokenmark): 1 failed" in text
    assert "\n1 ERROR encountered. See detailed log.\n" in text
    detail = mllog.parse_detail(mllog.render_detail(eff, summary, verdicts,
                                                    schedule_for(eff, 500, 1), FACTS))
    assert detail["result_validity"] == "INVALID"
    assert detail["num_errors"] == 1
    assert detail.errors[0].key == "error_runtime"
    assert "Not every query was answered" in detail["result_invalid_reason"]


def test_perf_constraint_recommendations_name_both_limits():
    eff = make_eff(Scenario.SERVER, target_qps=500.0, min_duration_ms=0, min_query_count=1,
                   use_token_latencies=True,
                   limits=LatencyLimits(ttft_ns=1_000_000, tpot_ns=1_000_000))
    sched = [i * 2_000_000 for i in range(10)]
    data = run_data(sched, sched, [t + 5_000_000 for t in sched],
                    [t + 50_000_000 for t in sched], [5] * 10)
    summary, verdicts = judged(eff, data)
    text = mllog.render_summary(eff, summary, verdicts, FACTS)
    assert ("Recommendations:\n"
            " * TTFT constrain not met: Reduce target QPS to improve latency.\n"
            " * TPOT constrain not met: Reduce target QPS to improve latency.\n"
            "TTFT Early Stopping Result:\n\nTPOT Early Stopping Result:\n"
            " * Run unsuccessful.\n") in text
    parsed = mllog.parse_summary(text)
    assert parsed.recommendations[0] == (
        "TTFT constrain not met: Reduce target QPS to improve latency.")
    assert parsed.early_stopping["ttft"] == ""
    detail = mllog.parse_detail(mllog.render_detail(eff, summary, verdicts,
                                                    schedule_for(eff, 10, 1), FACTS))
    assert detail["result_invalid_reason"] == (
        "TTFT constrain not met: Reduce target QPS to improve latency.  * TPOT constrain "
        "not met: Reduce target QPS to improve latency. ")
    assert detail["early_stopping_ttft_result"] == ""
    assert detail["early_stopping_tpot_result"].startswith(" * Run unsuccessful.  * Processed")


def test_detail_lines_are_loadgens():
    eff, summary, verdicts = server_run()
    text = mllog.render_detail(eff, summary, verdicts, schedule_for(eff, 501, 1_000_000_000),
                               FACTS)
    lines = text.splitlines()
    assert lines[0].startswith(':::MLLOG {"key": "tokenmark_note", "value": "Written by '
                               'tokenmark ')
    meta = ('"namespace": "mlperf::logging", "event_type": "POINT_IN_TIME", "metadata": '
            '{"is_error": false, "is_warning": false, '
            '"file": "tokenmark/mlperf/mllog/write_detail.py", '
            '"line_no": 0, "pid": 7, "tid": 7}}')
    assert f':::MLLOG {{"key": "sut_name", "value": "PySUT", "time_ms": 0.000000, {meta}' in lines
    assert (f':::MLLOG {{"key": "loaded_qsl_set", "value": [0,1,2,3,4,5,6,7,8,9,10,11], '
            f'"time_ms": 0.000000, {meta}') in lines
    end = '"time_ms": 1100.000000, '
    assert f':::MLLOG {{"key": "result_completed_samples_per_sec", "value": 454.545, {end}{meta}' \
        in lines
    assert f':::MLLOG {{"key": "result_token_throughput", "value": 1.1e-07, {end}{meta}' in lines
    assert f':::MLLOG {{"key": "requested_server_target_qps", "value": 500, "time_ms": ' \
        f'0.000000, {meta}' in lines
    detail = mllog.parse_detail(text)
    assert detail["test_datetime"] == "2026-02-02T02:40:00Z"
    assert detail["power_begin"] == "02-02-2026 02:40:00.123"
    assert detail["power_end"] == "02-02-2026 02:40:01.223"
    assert "loadgen_version" not in detail  # tokenmark claims no LoadGen version
    keys = detail.keys()
    assert keys.index("effective_sample_concatenate_permutation") < keys.index("loaded_qsl_set")
    assert keys[-1] == "num_errors"


def test_test_datetime_may_be_given():
    eff, summary, verdicts = server_run()
    facts = mllog.RunFacts("s", "q", 0, 0, test_datetime=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC))
    detail = mllog.parse_detail(mllog.render_detail(eff, summary, verdicts,
                                                    schedule_for(eff, 1, 1), facts))
    assert detail["test_datetime"] == "2026-01-02T03:04:05Z"


def test_non_mlperf_scenarios_have_no_loadgen_logs():
    eff = make_eff(Scenario.POISSON, target_qps=10.0, min_duration_ms=0)
    data = run_data([0, 1], [0, 1], [1, 2], [5, 6], [3, 3])
    summary, verdicts = judged(eff, data)
    with pytest.raises(InternalError):
        mllog.render_summary(eff, summary, verdicts, FACTS)


# -- the round trip --------------------------------------------------------------------------

MLPERF = [Scenario.OFFLINE, Scenario.SERVER, Scenario.INTERACTIVE, Scenario.SINGLE_STREAM,
          Scenario.MULTI_STREAM]


@st.composite
def runs(draw):
    scenario = draw(st.sampled_from(MLPERF))
    tokens = draw(st.booleans())
    mode = Mode.ACCURACY if draw(st.integers(0, 9)) == 0 else Mode.PERFORMANCE
    lg = scenario.loadgen
    spq = draw(st.integers(1, 4)) if lg is Scenario.MULTI_STREAM else 1
    n_queries = 1 if lg is Scenario.OFFLINE else draw(st.integers(1, 70))
    n = draw(st.integers(1, 120)) if lg is Scenario.OFFLINE else n_queries * spq
    ms = st.integers(0, 3_000_000_000)
    limits = LatencyLimits(
        ttft_ns=draw(st.none() | ms) if tokens else None,
        tpot_ns=draw(st.none() | st.integers(0, 50_000_000)) if tokens else None,
        e2e_ns=None if tokens else draw(st.none() | ms),
    )
    qps = draw(st.floats(0.5, 5000))
    min_duration = draw(st.integers(0, 3000))
    if 0 < min_duration < 1000 / qps:  # tokenmark refuses a duration shorter than a query
        min_duration = math.ceil(1000 / qps)
    eff = make_eff(
        scenario,
        dataset=draw(st.integers(1, 50)),
        mode=mode,
        target_qps=qps,
        offline_expected_qps=draw(st.floats(0.5, 5000)),
        multi_stream_samples_per_query=spq,
        min_duration_ms=min_duration,
        min_query_count=draw(st.integers(1, 80)),
        use_token_latencies=tokens,
        limits=limits,
        target_latency_percentile=0.9 if lg is Scenario.SINGLE_STREAM else 0.99,
        sample_concatenate_permutation=draw(st.booleans()),
        seeds=Seeds(draw(st.integers(0, 2**64 - 1)), 5, draw(st.integers(0, 2**64 - 1))),
    )
    gaps = draw(st.lists(st.integers(0, 50_000_000), min_size=n_queries, max_size=n_queries))
    q_sched = np.cumsum([0, *gaps[:-1]])
    sched, issued, first, done, out, qid = [], [], [], [], [], []
    for i in range(n):
        q = 0 if lg is Scenario.OFFLINE else i // spq
        s = int(q_sched[q]) if lg is not Scenario.OFFLINE else 0
        ttft = draw(st.integers(1, 2_000_000_000))
        sched.append(s)
        issued.append(s + draw(st.integers(0, 1_000_000)))
        first.append(s + ttft)
        done.append(s + ttft + draw(st.integers(0, 3_000_000_000)))
        out.append(draw(st.integers(1, 400)))
        qid.append(q)
    ok = [True] * n
    # A failed sample in SingleStream/MultiStream trips an IndexError in
    # earlystop.stream_early_stopping (fewer latencies than queries): reported, not tested.
    if n > 1 and lg in (Scenario.SERVER, Scenario.OFFLINE) and draw(st.integers(0, 9)) == 0:
        ok[draw(st.integers(0, n - 1))] = False
    data = run_data(sched, issued, first, done, out, query_id=qid, ok=ok)
    return eff, data


def _g(x: float) -> float:
    """What survives a %g round trip."""
    return float(mllog.fmt_g(x))


@given(runs())
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_render_then_parse_gives_the_same_values(case):
    eff, data = case
    summary, verdicts = judged(eff, data)
    facts = mllog.RunFacts("sut", "qsl", 1_700_000_000_000_000_000, summary.window_ns, pid=3)
    schedule = schedule_for(eff, summary.queries_issued, 123_456_789)
    lg = eff.scenario.loadgen
    perf = eff.mode is Mode.PERFORMANCE

    detail = mllog.parse_detail(mllog.render_detail(eff, summary, verdicts, schedule, facts))
    assert detail.tokenmark_note == mllog.note_text()
    assert detail["effective_scenario"] == lg.value
    assert detail["effective_test_mode"] == eff.mode.value
    assert detail["effective_samples_per_query"] == eff.samples_per_query
    assert detail["effective_qsl_rng_seed"] == eff.seeds.qsl
    assert detail["effective_schedule_rng_seed"] == eff.seeds.schedule
    assert detail["effective_target_qps"] == _g(eff.target_qps)
    assert detail["effective_min_duration_ms"] == eff.min_duration_ns // 1_000_000
    assert detail["loaded_qsl_set"] == list(schedule.loaded_set)
    assert detail["generated_query_count"] == summary.queries_issued
    assert detail["generated_query_duration"] == 123_456_789
    assert ("requested_use_token_latencies" in detail) == eff.use_token_latencies
    assert detail.has_results == perf

    text = mllog.render_summary(eff, summary, verdicts, facts)
    parsed = mllog.parse_summary(text, "summary")
    assert parsed.complete and parsed.tokenmark_note == mllog.note_text()
    assert parsed.skipped == ()
    if not perf:
        assert parsed.scenario is None
        return

    findings = {f.rule: f.passed for f in verdicts.mlperf.findings}
    validity = verdicts.mlperf.validity.value
    assert detail["result_validity"] == parsed.result_validity == validity
    assert detail["result_min_duration_met"] == parsed.criteria["min_duration"] \
        == findings["min_duration"]
    assert detail["result_min_queries_met"] == parsed.criteria["min_queries"] \
        == findings["min_queries"]
    assert detail["early_stopping_met"] == parsed.criteria["early_stopping"] \
        == findings["early_stopping"]
    if lg is Scenario.SERVER:
        assert detail["result_perf_constraints_met"] == findings["perf_constraints"]
        assert parsed.criteria["performance_constraints"] == findings["perf_constraints"]
    assert detail.num_errors == (0 if findings["all_queries_answered"] else 1)
    assert parsed.error_count == detail["num_errors"]
    assert parsed.scenario == lg.value and parsed.mode == eff.mode.value
    assert parsed.sut_name == "sut"

    # latencies: every LoadGen figure, in both files
    lat = summary.latency
    assert detail["result_min_latency_ns"] == lat.min
    assert detail["result_max_latency_ns"] == lat.max
    assert detail["result_mean_latency_ns"] == lat.mean_trunc
    assert detail["result_query_count"] == summary.queries_issued
    block = "per_query_latency" if lg is Scenario.MULTI_STREAM else "additional_stats"
    shown = summary.query_latency if lg is Scenario.MULTI_STREAM else lat
    assert parsed.get("Min latency (ns)", block) == str(shown.min)
    assert parsed.get("Mean latency (ns)", block) == str(shown.mean_trunc)
    for p in LOADGEN_PERCENTILES:
        key = f"{p * 100:.2f}"
        assert detail[f"result_{key}_percentile_latency_ns"] == lat.percentiles.get(p, 0)
        assert parsed.number(f"{key} percentile latency (ns)", block) \
            == shown.percentiles.get(p, 0)

    # headline metrics against the summary's own LoadGen formulas
    if lg is Scenario.OFFLINE:
        assert detail["result_samples_per_second"] == _g(summary.samples_per_second)
        assert parsed.headline["samples_per_second"] == _g(summary.samples_per_second)
    elif lg is Scenario.SERVER:
        if summary.final_query_done_ns > 0:  # else C++'s x/0 (inf), where tokenmark says 0
            assert parsed.headline["completed_samples_per_second"] == pytest.approx(
                summary.samples_per_second, abs=0.006)
            assert detail["result_completed_samples_per_sec"] == _g(summary.samples_per_second)
        assert detail["result_overlatency_query_count"] == int(
            (summary.sorted_latency > (eff.limits.e2e_ns or 0)).sum())
    else:
        assert parsed.target_percentile == pytest.approx(eff.target_latency_percentile)
        target = summary.latency if lg is Scenario.SINGLE_STREAM else summary.query_latency
        assert parsed.headline["target_latency_ns"] == target.percentiles.get(
            eff.target_latency_percentile, 0)
    if eff.use_token_latencies:
        assert summary.tokens_per_second is not None
        if lg is Scenario.OFFLINE:
            assert parsed.headline["tokens_per_second"] == _g(summary.tokens_per_second)
            assert detail["result_tokens_per_second"] == _g(summary.tokens_per_second)
        else:
            for p in LOADGEN_PERCENTILES:
                key = f"{p * 100:.2f}"
                assert detail[f"result_first_token_{key}_percentile_latency_ns"] \
                    == summary.ttft.percentiles.get(p, 0)
                assert detail[f"result_time_per_output_token_{key}_percentile_ns"] \
                    == summary.tpot.percentiles.get(p, 0)
            assert detail["result_time_to_output_token_mean"] == summary.tpot.mean_trunc
            # as printed: a mean LoadGen divides as unsigned can exceed a float's 53 bits
            assert parsed.get("Mean Time per Output Token (ns)", "additional_stats") \
                == str(summary.tpot.mean_trunc)
        if lg is Scenario.SERVER and summary.final_query_done_ns > 0:
            assert parsed.headline["completed_tokens_per_second"] == pytest.approx(
                summary.tokens_per_second, abs=0.006)
            assert detail["result_completed_tokens_per_second"] == _g(
                summary.tokens_per_second)
        for name in ("ttft", "tpot"):
            if name in verdicts.early_stopping:
                text_es = verdicts.early_stopping[name].text
                assert parsed.early_stopping[name] == text_es
                assert detail[f"early_stopping_{name}_result"] == text_es.replace("\n", " ")
    elif "latency" in verdicts.early_stopping:
        text_es = verdicts.early_stopping["latency"].text
        assert parsed.early_stopping["latency"] == text_es
        assert detail["early_stopping_result"] == text_es.replace("\n", " ")

    params = parsed.fields["test_parameters"]
    assert params["qsl_rng_seed"] == str(eff.seeds.qsl)
    assert params["schedule_rng_seed"] == str(eff.seeds.schedule)
    assert params["samples_per_query"] == str(eff.samples_per_query)
    assert float(params["target_qps"]) == _g(eff.target_qps)
    # every label : value line of the text was read
    n_pairs = sum(1 for ln in text.splitlines()
                  if re.match(r"^[^:]*\S\s*: ?\S", ln) and not ln.startswith((" *", "WARNING")))
    assert len(parsed.lines) == n_pairs


# -- parsing robustness ----------------------------------------------------------------------

GOOD = (':::MLLOG {"key": "a", "value": 1, "time_ms": 0.000000, "namespace": '
        '"mlperf::logging", "event_type": "POINT_IN_TIME", "metadata": {"is_error": false, '
        '"is_warning": false, "file": "x.cc", "line_no": 1, "pid": 1, "tid": 1}}')


def test_detail_garbage_line_names_file_and_line():
    with pytest.raises(mllog.MLLogError) as err:
        mllog.parse_detail([GOOD, "", "garbage here", GOOD], "run_1/detail.txt")
    assert isinstance(err.value, BadInputError)
    assert err.value.line == 3 and err.value.source == "run_1/detail.txt"
    assert str(err.value).startswith("run_1/detail.txt:3: not a :::MLLOG line")
    lenient = mllog.parse_detail([GOOD, "", "garbage here", GOOD], strict=False)
    assert lenient.values("a") == [1, 1]
    assert lenient.skipped[0][0] == 3


def test_detail_truncated_last_line():
    cut = GOOD[: len(GOOD) // 2]
    with pytest.raises(mllog.MLLogError, match=r"^d:2: the JSON after :::MLLOG does not parse"):
        mllog.parse_detail(GOOD + "\n" + cut, "d")
    assert len(mllog.parse_detail(GOOD + "\n" + cut, strict=False).entries) == 1


def test_detail_needs_entries_and_objects():
    with pytest.raises(mllog.MLLogError, match="no :::MLLOG entries"):
        mllog.parse_detail("", "empty")
    with pytest.raises(mllog.MLLogError, match="no :::MLLOG entries"):
        mllog.parse_detail("\n\n", "empty", strict=False)
    with pytest.raises(mllog.MLLogError, match="has no string 'key'"):
        mllog.parse_detail(':::MLLOG {"value": 1}')
    with pytest.raises(mllog.MLLogError, match="not a JSON object"):
        mllog.parse_detail(":::MLLOG [1, 2]")


def test_detail_reads_loadgens_non_finite_doubles():
    line = GOOD.replace('"value": 1,', '"value": -nan,')
    assert math.isnan(mllog.parse_detail([line])["a"])
    line = GOOD.replace('"value": 1,', '"value": inf,')
    assert mllog.parse_detail([line])["a"] == math.inf


def test_summary_errors():
    with pytest.raises(mllog.MLLogError, match="empty"):
        mllog.parse_summary("  \n")
    with pytest.raises(mllog.MLLogError, match="not an MLPerf LoadGen summary"):
        mllog.parse_summary("hello\nworld\n", "x", strict=False)
    eff, summary, verdicts = server_run()
    text = mllog.render_summary(eff, summary, verdicts, FACTS)
    lines = text.splitlines()
    truncated = "\n".join(lines[:30]) + "\n"
    with pytest.raises(mllog.MLLogError, match=r"^s:30: the summary stops before"):
        mllog.parse_summary(truncated, "s")
    part = mllog.parse_summary(truncated, "s", strict=False)
    assert not part.complete and part.scenario == "Server"
    assert part.headline["completed_samples_per_second"] == 454.55
    garbage = "\n".join([*lines[:8], "this is not a summary line", *lines[8:]])
    with pytest.raises(mllog.MLLogError, match=r"^s:9: expected 'label : value'"):
        mllog.parse_summary(garbage, "s")
    assert mllog.parse_summary(garbage, "s", strict=False).skipped[0][0] == 9
    binary = text.replace("Min latency (ns)", "Min\x00latency")
    with pytest.raises(mllog.MLLogError, match="control characters"):
        mllog.parse_summary(binary, "s")
    no_scenario = text.replace("Scenario : Server\n", "")
    with pytest.raises(mllog.MLLogError, match="no 'Scenario :' line"):
        mllog.parse_summary(no_scenario, "s")


def test_summary_old_wording_is_mapped():
    eff, summary, verdicts = server_run()
    old = mllog.render_summary(eff, summary, verdicts, FACTS).replace(
        "Time per Output Token", "Time to Output Token")
    parsed = mllog.parse_summary(old)
    assert parsed.number("Min Time per Output Token (ns)", "additional_stats") == 8_000_000
    assert any(ln.label == "Min Time to Output Token (ns)" for ln in parsed.lines)
