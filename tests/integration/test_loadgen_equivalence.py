"""tokenmark's metrics and MLPerf verdicts against the official LoadGen (the oracle).

Each case runs ``mlperf_loadgen`` 6.0.17 in its own process against a dummy SUT of
known, seeded behaviour (:mod:`tests.loadgen_oracle`), reads LoadGen's per-sample view
back from its trace, rebuilds tokenmark :class:`~tokenmark.records.RequestRecord` s from
it (token counts from the SUT's own record), and checks that tokenmark's
:func:`~tokenmark.metrics.summary.summarize` and :func:`~tokenmark.mlperf.rules.evaluate`
reproduce what LoadGen logged in ``mlperf_log_detail.txt`` and ``mlperf_log_summary.txt``:
integers exactly, floats to the 6 significant digits LoadGen prints (SingleStream's
"QPS with loadgen overhead" to 1e-3 relative only: LoadGen's start time is not in a
SingleStream trace, see :mod:`tests.loadgen_oracle`).

Every expectation comes from LoadGen's own logs; nothing is hard-coded that LoadGen can
be asked. The runs start in one module fixture, :data:`PROCESSES` at a time.

LoadGen runs in real time, and its latencies include its own issue delay and the dummy
SUT's wake-up lag, so the cases that must land on one side of a limit keep a wide margin:
the normal samples' TTFT (2-20 ms), TPOT (0.2-1 ms; from 4 tokens, so a late completion
is divided by at least 3) and end-to-end latency (1-10 ms) sit far below the limits (500,
150, 500 ms) and the deliberately slow samples (1500 ms TTFT, 400 ms TPOT, 1500-2000 ms)
far above them. Measured with two CPU burners on top of the machine's own load (load
average 9-11 on 2 cores), the normal samples' latencies exceeded their plan by at most
50 ms with 2 runs at a time, 73 ms with 4 and 142 ms with all 15 at once.
"""

from __future__ import annotations

import re
import time
from decimal import Decimal
from importlib.metadata import version
from typing import Any

import mlperf_loadgen  # type: ignore[import-not-found]  # noqa: F401  (fail, never skip)
import numpy as np
import pytest

from tests import loadgen_oracle as oracle
from tests.loadgen_oracle import LoadGenRun, Plan, RunSpec
from tokenmark.metrics.stats import Distribution
from tokenmark.metrics.summary import Accumulator, Summary, summarize
from tokenmark.mlperf import lgrandom
from tokenmark.mlperf.earlystop import MinPassingQueriesFinder
from tokenmark.mlperf.rules import ClientStats, Finding, Verdicts, evaluate
from tokenmark.mlperf.settings import (
    EffectiveSettings,
    LatencyLimits,
    Scenario,
    Seeds,
    TestSettings,
    effective,
)
from tokenmark.records import RequestRecord, TokenSource

LLM = "llama3_1-8b"  # token latencies (TTFT/TPOT) and equal issue
VISION = "resnet50"  # end-to-end latency, uniform sampling

# Dataset (QSL) size, all of it loaded (QSL performance count = override = size, as in
# the MLPerf LLM harnesses): equal issue makes LLM runs whole multiples of it, and 97
# keeps n * p off the integers, so floor(n * p) indexing is told apart from rounding.
DATASET = 97
TTFT_LIMIT_MS = 500  # user.conf limits, well clear of the SUT's normal 2-20 ms TTFT ...
TPOT_LIMIT_MS = 150  # ... and 0.2-1 ms TPOT, so scheduling jitter cannot cross them
SLOW_TTFT_MS = 1500.0
SLOW_TPOT_MS = 400.0
E2E_LIMIT_MS = 500  # non-token models: normal 1-10 ms, slow samples 1500 and 2000 ms
#: LoadGen processes running at once (each a LoadGen and a Python SUT thread): more at a
#: time add their own scheduling lag to each other's latencies.
PROCESSES = 3


def _spec(model: str, scenario: str, plan: Plan, **conf: object) -> RunSpec:
    conf = {"performance_sample_count_override": DATASET, **conf}
    return RunSpec(
        model,
        scenario,
        {k: str(v) for k, v in conf.items()},
        plan,
        total=DATASET,
        perf_count=DATASET,
    )


def _e2e_plan(seed: int, ms: tuple[float, float], slow: dict[int, float] | None = None) -> Plan:
    """A SUT for a non-token model: each sample completes ``U(ms)`` after issue."""
    return Plan(
        seed=seed,
        ttft_ms=ms,
        first_token=False,
        tokens=(0, 0),
        one_token_fraction=0.0,
        ttft_override=slow or {},
    )


def _ordinals(t: int) -> list[int]:
    """Issue ordinals of the ``t`` deliberately slow samples, spread over the run."""
    return [37 + 61 * i for i in range(t)]


def _server(qps: int, *, ttft_over: int = 0, tpot_over: int = 0, seed: int = 1) -> RunSpec:
    plan = Plan(
        seed=seed,
        tokens=(4, 64),
        ttft_override={k: SLOW_TTFT_MS for k in _ordinals(ttft_over)},
        tpot_override={k: SLOW_TPOT_MS for k in _ordinals(tpot_over)},
    )
    return _spec(
        LLM,
        "Server",
        plan,
        target_qps=qps,
        min_duration=2000,
        ttft_latency=TTFT_LIMIT_MS,
        tpot_latency=TPOT_LIMIT_MS,
    )


# Early-stopping tables: runs of 679 queries where exactly t samples exceed a limit.
TTFT_TABLE = (0, 1, 2, 5, 10)
TPOT_TABLE = (1, 2, 8)

RUNS: dict[str, RunSpec] = {
    **{f"server-ttft-{t}": _server(300, ttft_over=t, seed=10 + t) for t in TTFT_TABLE},
    **{f"server-tpot-{t}": _server(300, tpot_over=t, seed=20 + t) for t in TPOT_TABLE},
    # 194 queries: early stopping needs 459 even with no query over the limits
    "server-short": _server(100, seed=3),
    "offline": _spec(
        LLM,
        "Offline",
        Plan(seed=4, ttft_ms=(50.0, 600.0), first_token=False),
        target_qps=200,
        min_duration=500,
        min_query_count=100,
    ),
    "singlestream": _spec(
        LLM,
        "SingleStream",
        Plan(seed=5, ttft_ms=(0.3, 2.0), tpot_ms=(0.01, 0.05)),
        target_latency=5,
        min_duration=500,
    ),
    # End-to-end latency (no tokens): two queries over the target among ~900
    "vision-server": _spec(
        VISION,
        "Server",
        _e2e_plan(6, (1.0, 10.0), slow={101: 1500.0, 555: 2000.0}),
        target_qps=450,
        min_duration=2000,
        target_latency=E2E_LIMIT_MS,
    ),
    # Too few queries for the stream scenarios' early stopping (64 at p90, 662 at p99)
    "vision-singlestream-short": _spec(
        VISION,
        "SingleStream",
        _e2e_plan(7, (0.5, 1.5)),
        target_latency=2,
        min_duration=50,
        min_query_count=30,
    ),
    "vision-multistream-short": _spec(
        VISION,
        "MultiStream",
        _e2e_plan(8, (0.2, 1.0)),
        target_latency=20,
        min_duration=50,
        min_query_count=100,
    ),
}

# A dataset larger than the loaded set (user.conf override < the QSL's own performance
# count). LoadGen pads SingleStream's equal-issue min_query_count to a multiple of the
# QSL's count, not of the override; so does tokenmark, whose QSL is the whole dataset.
QSL_PAD_RUN = "singlestream-override-below-dataset"
RUNS[QSL_PAD_RUN] = RunSpec(
    LLM,
    "SingleStream",
    {"performance_sample_count_override": "97", "target_latency": "5", "min_duration": "100"},
    Plan(seed=9, ttft_ms=(0.3, 1.0), tpot_ms=(0.01, 0.02)),
    total=200,
    perf_count=200,
)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, LoadGenRun]:
    base = tmp_path_factory.mktemp("loadgen")
    pending = list(RUNS)
    running: dict[str, oracle.Running] = {}
    out: dict[str, LoadGenRun] = {}
    while pending or running:
        while pending and len(running) < PROCESSES:
            name = pending.pop(0)
            running[name] = oracle.start(RUNS[name], base / name)
        done = [n for n, r in running.items() if r.proc.poll() is not None]
        for name in done:
            out[name] = oracle.wait(running.pop(name))
        if not done:
            time.sleep(0.02)
    return out


# -- tokenmark's view of a LoadGen run -------------------------------------------------------


def tokenmark_settings(run: LoadGenRun) -> EffectiveSettings:
    """LoadGen's requested settings (from its detail log) as a tokenmark TestSettings."""
    d, get = run.one, run.get
    scenario = Scenario(d("effective_scenario"))
    tokens = bool(get("requested_use_token_latencies", False))
    ttft, tpot = get("requested_server_ttft_latency"), get("requested_server_tpot_latency")
    limits = LatencyLimits(
        ttft_ns=ttft if tokens else None,
        tpot_ns=tpot if tokens else None,
        e2e_ns=None if tokens else d("effective_target_latency_ns"),
    )
    defaults = TestSettings("", "", scenario, Seeds(0, 0, 0))
    requested = TestSettings(
        round="loadgen-6.0.17",
        benchmark=run.spec.model,
        scenario=scenario,
        seeds=Seeds(
            d("effective_qsl_rng_seed"),
            d("effective_sample_index_rng_seed"),
            d("effective_schedule_rng_seed"),
        ),
        target_qps=float(get("requested_server_target_qps", defaults.target_qps)),
        offline_expected_qps=float(
            get("requested_offline_expected_qps", defaults.offline_expected_qps)
        ),
        single_stream_expected_latency_ns=int(
            get(
                "requested_single_stream_expected_latency_ns",
                defaults.single_stream_expected_latency_ns,
            )
        ),
        multi_stream_expected_latency_ns=int(
            get(
                "requested_multi_stream_expected_latency_ns",
                defaults.multi_stream_expected_latency_ns,
            )
        ),
        multi_stream_samples_per_query=get(
            "requested_multi_stream_samples_per_query", defaults.multi_stream_samples_per_query
        ),
        min_duration_ms=d("requested_min_duration_ms"),
        max_duration_ms=d("requested_max_duration_ms"),
        min_query_count=d("requested_min_query_count"),
        max_query_count=d("requested_max_query_count"),
        performance_sample_count=d("effective_performance_sample_count"),
        sample_concatenate_permutation=bool(d("requested_sample_concatenate_permutation")),
        use_token_latencies=tokens,
        limits=limits,
        target_latency_percentile=float(d("effective_target_latency_percentile")),
    )
    return effective(requested, run.spec.total)


def records_from_loadgen(run: LoadGenRun) -> list[RequestRecord]:
    """One record per sample, times as LoadGen measured them (ns from LoadGen's start)."""
    origin, _ = oracle.run_origin_ns(run)
    samples, sut, first = run.trace.samples, run.sut, run.trace.first_token_ns
    assert [s.seq for s in samples] == list(range(len(samples)))
    # The SUT records samples in issue order, which is sample_seq order.
    assert [s.index for s in samples] == [r["index"] for r in sut]
    if run.spec.plan.first_token:  # LoadGen saw every first token the SUT sent
        assert set(first) == {s.seq for s in samples}
    out = []
    for s, r in zip(samples, sut, strict=True):
        sched = s.sched_ns - origin
        out.append(
            RequestRecord(
                seq=s.seq,
                query_id=s.query,
                sample_index=s.index,
                scheduled_ns=sched,
                issued_ns=sched + s.issue_ns,
                first_token_ns=sched + first[s.seq] if s.seq in first else -1,
                done_ns=sched + s.complete_ns,
                output_tokens=r["n_tokens"],
                token_source=TokenSource.SUT,
            )
        )
    return out


def tokenmark_view(run: LoadGenRun) -> tuple[EffectiveSettings, Summary, Verdicts]:
    eff = tokenmark_settings(run)
    acc = Accumulator()
    records = records_from_loadgen(run)
    for record in records:
        acc.add(record)
    summary = summarize(acc.finish(len(records)), eff)
    return eff, summary, evaluate(summary, eff, ClientStats())


# -- comparing with what LoadGen logged -----------------------------------------------------


def logged_float(value: Decimal, ours: float) -> None:
    """LoadGen prints doubles with C++ stream defaults: 6 significant digits (%g)."""
    assert Decimal(f"{ours:.6g}") == value, (ours, value)


def pct_key(p: float) -> str:
    return f"{p * 100:.2f}"  # LoadGen's DoubleToString(p * 100): "99.90"


def check_distribution(d: dict[str, list[Any]], dist: Distribution, keys: dict[str, str]) -> None:
    got = {"min": dist.min, "max": dist.max, "mean": dist.mean_trunc}
    for what, key in keys.items():
        if what == "pct":
            for p in (0.50, 0.90, 0.95, 0.97, 0.99, 0.999):
                (logged,) = d[key.format(pct_key(p))]
                assert dist.percentiles[p] == logged, (key, p)
        else:
            (logged,) = d[key]
            assert got[what] == logged, key


def summary_es_texts(summary_txt: str) -> dict[str, str]:
    """The early-stopping blocks of mlperf_log_summary.txt, keyed latency/ttft/tpot."""
    heads = {
        "Early Stopping Result:": "latency",
        "TTFT Early Stopping Result:": "ttft",
        "TPOT Early Stopping Result:": "tpot",
    }
    out: dict[str, str] = {}
    current: str | None = None
    lines: list[str] = []
    for line in summary_txt.splitlines():
        if line in heads or (current is not None and line.startswith("=====")):
            if current is not None:
                if line.startswith("=====") and lines and lines[-1] == "":
                    lines.pop()  # the blank line that opens "Additional Stats"
                out[current] = "\n".join(lines)
            current, lines = heads.get(line), []
        elif current is not None:
            lines.append(line)
    return out


def finding(verdicts: Verdicts, rule: str) -> Finding:
    (f,) = [f for f in verdicts.mlperf.findings if f.rule == rule]
    return f


def check_against_loadgen(run: LoadGenRun) -> tuple[Summary, Verdicts]:
    eff, s, v = tokenmark_view(run)
    d = run.detail
    scenario = run.one("effective_scenario")
    tokens = eff.use_token_latencies
    _, exact_origin = oracle.run_origin_ns(run)

    # settings: tokenmark normalises them as LoadGen did
    assert eff.min_query_count == run.one("effective_min_query_count")
    assert eff.min_sample_count == run.one("effective_min_sample_count")
    assert eff.samples_per_query == run.one("effective_samples_per_query")
    assert eff.min_duration_ns == run.one("effective_min_duration_ms") * 1_000_000

    # counts and latencies (integers, exact)
    assert s.queries_issued == run.one("result_query_count")
    assert s.sample_count == len(run.trace.samples)
    check_distribution(
        d,
        s.latency,
        {
            "min": "result_min_latency_ns",
            "max": "result_max_latency_ns",
            "mean": "result_mean_latency_ns",
            "pct": "result_{}_percentile_latency_ns",
        },
    )
    if tokens and scenario != "Offline":
        check_distribution(
            d,
            s.ttft,
            {
                "min": "result_first_token_min_latency_ns",
                "max": "result_first_token_max_latency_ns",
                "mean": "result_first_token_mean_latency_ns",
                "pct": "result_first_token_{}_percentile_latency_ns",
            },
        )
        check_distribution(
            d,
            s.tpot,
            {
                "min": "result_time_to_output_token_min",
                "max": "result_time_to_output_token_max",
                "mean": "result_time_to_output_token_mean",
                "pct": "result_time_per_output_token_{}_percentile_ns",
            },
        )
    if scenario == "MultiStream":
        check_distribution(
            d,
            s.query_latency,
            {
                "min": "result_min_query_latency_ns",
                "max": "result_max_query_latency_ns",
                "mean": "result_mean_query_latency_ns",
                "pct": "result_{}_percentile_per_query_latency_ns",
            },
        )

    # throughput (doubles, to the digits logged)
    n_tokens_le_1 = sum(1 for r in run.sut if r["n_tokens"] <= 1)
    if scenario == "Server":
        logged_float(run.one("result_completed_samples_per_sec"), s.samples_per_second)
        assert s.scheduled_samples_per_second is not None
        logged_float(run.one("result_scheduled_samples_per_sec"), s.scheduled_samples_per_second)
        over = int(np.count_nonzero(s.sorted_latency > run.one("effective_target_latency_ns")))
        assert over == run.one("result_overlatency_query_count")
    elif scenario == "Offline":
        logged_float(run.one("result_samples_per_second"), s.samples_per_second)
        if tokens:
            assert s.tokens_per_second is not None
            logged_float(run.one("result_tokens_per_second"), s.tokens_per_second)
    elif scenario == "SingleStream":
        # LoadGen's start is not in a SingleStream trace (see tests.loadgen_oracle): the
        # last issue time is known to within the few µs before the first "SampleLoop".
        qps = float(run.one("result_qps_with_loadgen_overhead"))
        assert s.samples_per_second == pytest.approx(qps, rel=1e-3)
        logged_float(
            run.one("result_qps_without_loadgen_overhead"), 1 / (s.latency.mean_trunc / 1e9)
        )
    if tokens and scenario != "Offline":
        assert s.tokens_per_second is not None
        if scenario == "Server":
            logged_float(run.one("result_completed_tokens_per_second"), s.tokens_per_second)
        with_overhead = s.token_count / (s.final_query_issued_ns / 1e9)
        logged = run.one("result_token_throughput_with_loadgen_overhead")
        if exact_origin:
            logged_float(logged, with_overhead)
        else:
            assert with_overhead == pytest.approx(float(logged), rel=1e-3)
    # LoadGen counts a reported n_tokens of 1 as 0 tokens, and logs an error for each
    assert run.one("num_errors") == (n_tokens_le_1 if tokens else 0)

    # verdicts: every LoadGen criterion, then the early-stopping texts
    assert v.mlperf.validity.value == run.one("result_validity")
    assert finding(v, "min_duration").passed is run.one("result_min_duration_met")
    assert finding(v, "min_queries").passed is run.one("result_min_queries_met")
    assert finding(v, "early_stopping").passed is run.one("early_stopping_met")
    if scenario == "Server":
        constraints = finding(v, "perf_constraints")
        assert constraints.passed is run.one("result_perf_constraints_met")
        if not constraints.passed:
            reason = run.one("result_invalid_reason")
            for sentence in re.findall(r"(?:\w+ constrain not met: )?Reduce[^.]*\.",
                                       constraints.advice):
                assert sentence in reason
    else:
        assert "result_perf_constraints_met" not in d
    assert finding(v, "all_queries_answered").passed
    es = v.early_stopping
    printed = summary_es_texts(run.summary)
    if scenario == "Offline":
        assert es == {} and printed == {}
    elif tokens:
        assert set(es) == {"ttft", "tpot"} == set(printed)
        for kind in ("ttft", "tpot"):
            assert es[kind].text == printed[kind]
            assert es[kind].text.replace("\n", " ") == run.one(f"early_stopping_{kind}_result")
    else:
        assert set(es) == {"latency"} == set(printed)
        assert es["latency"].text == printed["latency"]
        assert es["latency"].text.replace("\n", " ") == run.one("early_stopping_result")
    if scenario == "SingleStream":
        # LoadGen keeps the estimate of the last evaluation: TTFT's when TPOT passed
        last = es["ttft"] if tokens and es["tpot"].passed else es.get("latency", es.get("tpot"))
        assert last is not None
        assert (last.estimate_ns or 0) == run.one("early_stopping_latency_ss")
        assert (last.estimate_p99_ns or 0) == run.one("early_stopping_latency_ms")
    if scenario == "MultiStream":
        assert (es["latency"].estimate_ns or 0) == run.one("early_stopping_latency_ms")
    return s, v


# -- the tests -----------------------------------------------------------------------------


def test_the_oracle_is_the_pinned_loadgen(runs: dict[str, LoadGenRun]) -> None:
    assert version("mlcommons-loadgen") == "6.0.17"
    for run in runs.values():
        assert str(run.one("loadgen_version")).startswith("6.0.17 ")


@pytest.mark.parametrize("name", sorted(set(RUNS) - {QSL_PAD_RUN}))
def test_metrics_and_verdicts_equal_loadgen(runs: dict[str, LoadGenRun], name: str) -> None:
    check_against_loadgen(runs[name])


def test_the_cases_cover_what_they_claim(runs: dict[str, LoadGenRun]) -> None:
    """Each case reaches the LoadGen outcome it is there for (per LoadGen's own log)."""

    def one(name: str, key: str) -> Any:
        return runs[name].one(key)

    assert one("server-ttft-0", "result_validity") == "VALID"
    assert one("server-short", "result_validity") == "INVALID"
    assert one("server-short", "early_stopping_met") is False
    assert one("server-short", "result_perf_constraints_met") is True
    assert one("server-ttft-10", "result_perf_constraints_met") is False
    assert "TTFT constrain not met" in one("server-ttft-10", "result_invalid_reason")
    assert one("server-tpot-8", "result_perf_constraints_met") is False
    assert "TPOT constrain not met" in one("server-tpot-8", "result_invalid_reason")
    assert one("offline", "result_validity") == "VALID"
    assert one("vision-server", "result_validity") == "VALID"
    assert one("vision-server", "result_overlatency_query_count") == 2
    assert one("singlestream", "early_stopping_met") is True
    assert one("vision-singlestream-short", "early_stopping_met") is False
    assert one("vision-multistream-short", "early_stopping_met") is False
    # the SUT reported some single-token samples (LoadGen's n_tokens quirk) in every LLM run
    for name, spec in RUNS.items():
        if spec.model == LLM:
            assert any(r["n_tokens"] == 1 for r in runs[name].sut), name


_NEED = re.compile(
    r" \* Run unsuccessful\.\n \* Processed (\d+) queries\.\n"
    r" \* Would need to run at least (\d+) more queries,"
)


@pytest.mark.parametrize(
    ("kind", "t"), [("ttft", t) for t in TTFT_TABLE] + [("tpot", t) for t in (0, *TPOT_TABLE)]
)
def test_early_stopping_table(runs: dict[str, LoadGenRun], kind: str, t: int) -> None:
    """Server runs with exactly t samples over the TTFT (or TPOT) limit: tokenmark's
    queries-needed and text equal LoadGen's summary text."""
    run = runs[f"server-{kind}-{t}" if t else "server-ttft-0"]
    _, s, v = tokenmark_view(run)
    values = s.sorted_ttft if kind == "ttft" else s.sorted_tpot
    assert int(np.count_nonzero(values > run.one(f"requested_server_{kind}_latency"))) == t
    ours = v.early_stopping[kind]
    printed = summary_es_texts(run.summary)[kind]
    assert ours.text == printed
    queries = run.one("result_query_count")
    m = _NEED.match(printed)
    if m is None:  # LoadGen does not say how many would have been needed
        assert printed == " * Run successful."
        assert ours.passed and queries >= ours.queries_needed
    else:
        assert int(m.group(1)) == queries
        assert ours.queries_needed == queries + int(m.group(2))
        assert not ours.passed
    assert ours.queries_needed == MinPassingQueriesFinder()(t, 0.99) + t


def test_short_server_run_needs_loadgens_count(runs: dict[str, LoadGenRun]) -> None:
    run = runs["server-short"]
    printed = summary_es_texts(run.summary)
    m = _NEED.match(printed["tpot"])
    assert m is not None
    needed = int(m.group(1)) + int(m.group(2))
    assert needed == MinPassingQueriesFinder()(0, 0.99)  # t = 0
    assert printed["ttft"] == ""  # TPOT failed: LoadGen never evaluates TTFT (&&)


_AT_LEAST = re.compile(r" \* Need to process at least (\d+) queries for early stopping\.")


@pytest.mark.parametrize(
    ("name", "percentile"),
    [("vision-singlestream-short", 0.90), ("vision-multistream-short", 0.99)],
)
def test_stream_minimum_queries(runs: dict[str, LoadGenRun], name: str, percentile: float) -> None:
    """LoadGen's "Need to process at least N queries" (64 at p90, 662 at p99)."""
    run = runs[name]
    assert float(run.one("effective_target_latency_percentile")) == percentile
    m = _AT_LEAST.search(summary_es_texts(run.summary)["latency"])
    assert m is not None
    assert int(m.group(1)) == MinPassingQueriesFinder()(1, percentile) + 1
    _, _, v = tokenmark_view(run)
    assert v.early_stopping["latency"].queries_needed == int(m.group(1))


def test_server_schedule_from_the_trace_is_exact(runs: dict[str, LoadGenRun]) -> None:
    """The trace's µs with 3 decimals are exact ns, and Server's first query is scheduled
    at LoadGen's start: the scheduled times rebuilt from the trace (relative to the first
    query) equal, to the nanosecond, the schedule LoadGen generates from its seeds
    (tokenmark.mlperf.lgrandom, itself proven against LoadGen in test_lgrandom_loadgen.py)."""
    run = runs["server-ttft-0"]
    eff = tokenmark_settings(run)
    ((loaded, end),) = lgrandom.loadable_sets_for(eff)
    assert [loaded] == run.detail["loaded_qsl_set"]
    generated = lgrandom.generate_queries(eff, loaded, end)
    assert generated.scheduled_ns[0] == 0
    origin, exact = oracle.run_origin_ns(run)
    assert exact
    records = records_from_loadgen(run)
    assert len(records) == generated.generated_query_count == run.one("generated_query_count")
    got = np.array([r.scheduled_ns for r in records], dtype=np.int64)
    np.testing.assert_array_equal(got, generated.scheduled_ns[[r.query_id for r in records]])
    assert run.trace.first_sample_loop_ns is not None
    assert run.trace.first_sample_loop_ns >= origin  # the issue loop starts after start


def test_singlestream_equal_issue_pads_by_the_qsl_count(runs: dict[str, LoadGenRun]) -> None:
    run = runs[QSL_PAD_RUN]
    assert run.one("qsl_reported_performance_count") == run.spec.perf_count == 200
    assert run.one("effective_performance_sample_count") == 97
    eff = tokenmark_settings(run)
    assert eff.min_query_count == run.one("effective_min_query_count")
