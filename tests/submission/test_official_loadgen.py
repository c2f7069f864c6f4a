"""`tokenmark run --loadgen official`: the mlcommons-loadgen package drives tokenmark's
in-process latency-model SUT for a few seconds; its logs are LoadGen's, tokenmark's
records agree with them, and a closed tree packaged from the run checks clean of
record mismatches."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.accuracy.support import IdsSUT
from tests.accuracy.test_compliance import official_file
from tests.submission.test_package import MEAS, system_file
from tokenmark.adapters.inprocess import LatencyModel
from tokenmark.api.run import SutSpec, default_dataset
from tokenmark.config.layering import build_settings
from tokenmark.errors import ConfigError
from tokenmark.mlperf.mllog import parse_detail
from tokenmark.mlperf.settings import Scenario
from tokenmark.output.records import read_records
from tokenmark.submission.check import check_tree
from tokenmark.submission.package import PackageSpec, package_runs

pytest.importorskip("mlperf_loadgen", reason="pip install mlcommons-loadgen (the loadgen extra)")

from tokenmark.api.submission import run_official_loadgen  # noqa: E402

# 200 queries/s for 2.5 s: ~500 queries, above the 459 early stopping needs at p99.
OVERRIDES = {"target_qps": 200.0, "min_duration_ms": 2500, "min_query_count": 470,
             "performance_sample_count": 100, "total_sample_count": 100}
MODEL = LatencyModel(ttft_ns=5_000_000, tpot_ns=1_000_000)


@pytest.fixture(scope="module")
def official_run(tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("official") / "perf"
    layered = build_settings("v6.0", "llama3.1-8b", Scenario.SERVER, profile="demo",
                             overrides=OVERRIDES)
    ds = default_dataset(layered, size=100, output_lengths="uniform:8:16")
    result = run_official_loadgen(layered, ds, SutSpec(kind="latency-model", model=MODEL), out)
    return out, result


def test_loadgen_writes_the_logs_and_tokenmark_the_records(official_run):
    out, result = official_run
    detail = parse_detail((out / "mlperf_log_detail.txt").read_text())
    assert str(detail["loadgen_version"]).startswith("6.0.")  # LoadGen's own log
    assert detail.tokenmark_note is None
    # the round's seeds, set by tokenmark over the installed LoadGen's mlperf.conf
    assert detail["effective_schedule_rng_seed"] == 3936089224930324775
    assert detail["requested_server_ttft_latency"] == 2_000_000_000
    n = detail["result_query_count"]
    assert n >= 470
    assert len((out / "records.jsonl").read_text().splitlines()) == n
    doc = json.loads((out / "results.json").read_text())
    assert doc["run"]["loadgen"] == "official"
    cmp = doc["loadgen"]["comparison"]
    assert cmp["query_count"]["relative_difference"] == 0
    # throughput: the same completions; LoadGen's span starts at its own start, which lies
    # between tokenmark's t0 and the first query reaching tokenmark (however busy the CPU)
    recs = list(read_records(out / "records.jsonl"))
    tokens = sum(r.output_tokens for r in recs)
    ours = cmp["tokens_per_second"]["tokenmark"]
    span = tokens / ours  # tokenmark's: from its t0 to the last query's completion
    first = min(r.scheduled_ns for r in recs) / 1e9
    slack = 1e-3  # LoadGen's completion time stamps a few µs after tokenmark's record
    assert ours * (1 - slack) <= cmp["tokens_per_second"]["loadgen"] <= \
        tokens / (span - first) * (1 + slack)
    # latency: LoadGen times from its scheduled time, so never less than the records
    for k in ("ttft_p99_ns", "tpot_p99_ns", "latency_p99_ns"):
        assert cmp[k]["loadgen"] >= cmp[k]["tokenmark"] * 0.999 - 1e6, k
    # the modelled TTFT is a floor for both
    assert cmp["ttft_p99_ns"]["tokenmark"] >= 5_000_000
    assert result.verdicts.mlperf.validity.value == detail["result_validity"]


def test_a_closed_tree_from_the_run_matches_its_records(official_run, tmp_path):
    out, _ = official_run
    mp = tmp_path / "m.json"
    mp.write_text(json.dumps(MEAS))
    package_runs(PackageSpec(runs=(out,), output=tmp_path / "sub", submitter="Acme",
                             system=system_file(tmp_path, "closed"), measurements=mp,
                             division="closed"))
    report = check_tree(tmp_path / "sub", "v6.0")
    (r,) = report.results
    checks = {f.check for f in r.errors}
    assert "records" not in checks and "seeds" not in checks and "log consistency" not in checks
    assert "min duration" in checks  # a 2.5 s run is not a submission
    assert r.recomputed["records"] == r.recomputed["query count"]


def test_find_peak_is_server_only():
    layered = build_settings("v6.0", "llama3.1-8b", Scenario.OFFLINE, profile="demo")
    with pytest.raises(ConfigError, match="FindPeakPerformance searches Server"):
        run_official_loadgen(layered, default_dataset(layered, size=10), SutSpec(),
                             Path("/nonexistent"), find_peak=True)


# -- compliance audits through LoadGen's own audit.config ------------------------------------


AUDIT_OVERRIDES = {"target_qps": 300.0, "min_duration_ms": 2000, "min_query_count": 600,
                   "performance_sample_count": 120, "total_sample_count": 120}


@pytest.fixture(scope="module")
def test06_run(tmp_path_factory: pytest.TempPathFactory):
    """A TEST06 run: the run folder already holds an audit.config of the user's (it must be
    put back) and the working directory holds a stray one (LoadGen must never read it)."""
    base = tmp_path_factory.mktemp("test06")
    out = base / "test06"
    out.mkdir()
    (out / "audit.config").write_text("# the user's own file\n")
    cwd = base / "cwd"
    cwd.mkdir()
    (cwd / "audit.config").write_text("*.*.mode = 1\n*.*.min_query_count = 7\n")
    layered = build_settings("v6.0", "llama3.1-8b", Scenario.SERVER, profile="demo",
                             overrides=AUDIT_OVERRIDES)
    ds = default_dataset(layered, size=120, output_lengths="8")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(cwd)
        result = run_official_loadgen(layered, ds, lambda _clock: IdsSUT(), out,
                                      audit="TEST06")
    return out, cwd, result


def test_loadgen_applies_the_audit_config_written_in_the_run_folder(test06_run):
    out, cwd, result = test06_run
    detail = parse_detail((out / "mlperf_log_detail.txt").read_text())
    assert any("Found Audit Config file" in str(w.value) for w in detail.warnings)
    # compliance/TEST06/audit.config, as LoadGen applied it over user.conf
    assert detail["effective_min_query_count"] == 100
    assert detail["effective_min_duration_ms"] == 0
    assert detail["effective_accuracy_log_rng_seed"] == 720381539243781796
    assert detail["effective_accuracy_log_sampling_target"] == 100
    assert detail["effective_sample_concatenate_permutation"] is False
    assert detail["effective_test_mode"] == "PerformanceOnly"
    assert "min_query_count = 600" in (out / "user.conf").read_text()  # the submitter's
    # the folder is put back as it was; the stray file in the working directory is unread
    assert (out / "audit.config").read_text() == "# the user's own file\n"
    assert (cwd / "audit.config").read_text() == "*.*.mode = 1\n*.*.min_query_count = 7\n"
    doc = json.loads((out / "results.json").read_text())
    assert doc["run"]["audit"] == "TEST06"
    assert doc["loadgen"]["audit"]["found_by_loadgen"] is True
    assert doc["settings"]["effective"]["min_query_count"] == 100
    assert result.summary.sample_count == detail["result_query_count"]


def test_test06_judges_loadgens_accuracy_log_and_packages_into_a_closed_tree(test06_run,
                                                                           tmp_path):
    from tests.accuracy.support import plain_answer
    from tokenmark.api.correctness import audit_results
    from tokenmark.mlperf.accuracylog import decode_ids, parse_accuracy_log

    out, _, _ = test06_run
    entries = parse_accuracy_log((out / "mlperf_log_accuracy.json").read_text())
    detail = parse_detail((out / "mlperf_log_detail.txt").read_text())
    # LoadGen logged every sample (p = 100 / max(0, 100)) with the SUT's ids and counts
    assert len(entries) == detail["result_query_count"] >= 100
    for e in entries:
        ids, first, count = plain_answer(e["qsl_idx"])
        assert decode_ids(e["data"]) == ids and decode_ids(e["token_data"]) == first
        assert e["token_count"] == count
    verdict = audit_results("TEST06", out)
    assert verdict.passed, verdict.text
    assert (out / "TEST06" / "verify_accuracy.txt").read_text().endswith(
        "TEST06 verification complete\n")
    script = official_file("compliance/TEST06/run_verification.py", tmp_path)
    if script is not None:  # the official script says the same (where a mirror is at hand)
        subprocess.run([sys.executable, str(script), "-c", str(out), "-o",
                        str(tmp_path / "theirs"), "-s", "Server"], check=True,
                       capture_output=True, timeout=120)
        assert (tmp_path / "theirs/TEST06/verify_accuracy.txt").read_text() == \
            (out / "TEST06/verify_accuracy.txt").read_text()
    mp = tmp_path / "m.json"
    mp.write_text(json.dumps(MEAS))
    perf = _official_perf(tmp_path / "perf")
    package_runs(PackageSpec(runs=(perf, out), output=tmp_path / "sub", submitter="Acme",
                             system=system_file(tmp_path, "closed"), measurements=mp,
                             division="closed"))
    folder = tmp_path / "sub/closed/Acme/results/box1/llama3.1-8b/Server"
    assert (folder / "TEST06/verify_accuracy.txt").is_file()
    assert (folder / "TEST06/accuracy/mlperf_log_accuracy.json").is_file()
    (r,) = check_tree(tmp_path / "sub", "v6.0").results
    assert not [f for f in r.errors if f.check == "compliance"], r.errors


def _official_perf(out: Path) -> Path:
    layered = build_settings("v6.0", "llama3.1-8b", Scenario.SERVER, profile="demo",
                             overrides={**OVERRIDES, "min_duration_ms": 500,
                                        "min_query_count": 50})
    run_official_loadgen(layered, default_dataset(layered, size=100, output_lengths="8"),
                         SutSpec(kind="latency-model", model=MODEL), out)
    return out


def test_an_audit_is_a_performance_run():
    layered = build_settings("v6.0", "llama3.1-8b", Scenario.SERVER, profile="demo")
    with pytest.raises(ConfigError, match="TEST06 is a performance-mode run"):
        run_official_loadgen(layered, default_dataset(layered, size=10), SutSpec(),
                             Path("/nonexistent"), audit="TEST06", find_peak=True)


# -- what an official-LoadGen run stores, and what it compares -----------------------------------


def test_the_stored_row_carries_loadgens_figure_with_tokenmarks_beside_it(official_run,
                                                                         tmp_path):
    from tokenmark.api import results as results_api

    out, _ = official_run
    detail = parse_detail((out / "mlperf_log_detail.txt").read_text())
    doc = json.loads((out / "results.json").read_text())
    assert doc["loadgen"]["result"] == {
        "value": detail["result_completed_tokens_per_second"], "unit": "Tokens/s",
        "metric": "result_completed_tokens_per_second"}
    db = str(tmp_path / "r.db")
    assert results_api.store_run(out, db=db).ok
    (row,) = results_api.list_results(db=db)
    assert row.value == detail["result_completed_tokens_per_second"]  # LoadGen's figure
    assert row.metric == "loadgen:result_completed_tokens_per_second"
    assert row.tokenmark_value == doc["summary"]["loadgen"]["tokens_per_second"]
    assert row.tokenmark_value != row.value


def test_offline_compares_queries_with_queries(tmp_path):
    """One Offline query holds every sample: LoadGen's query count (1) is compared with
    tokenmark's query count, not its sample count."""
    layered = build_settings("v6.0", "llama3.1-8b", Scenario.OFFLINE, profile="demo",
                             overrides={"offline_expected_qps": 200.0, "min_duration_ms": 500,
                                        "min_query_count": 1, "performance_sample_count": 100,
                                        "total_sample_count": 100})
    out = tmp_path / "offline"
    result = run_official_loadgen(layered, default_dataset(layered, size=100,
                                                           output_lengths="8"),
                                  SutSpec(kind="latency-model", model=MODEL), out)
    cmp = json.loads((out / "results.json").read_text())["loadgen"]["comparison"]
    assert cmp["query_count"] == {"loadgen": 1.0, "tokenmark": 1.0, "relative_difference": 0.0}
    detail = parse_detail((out / "mlperf_log_detail.txt").read_text())
    assert result.summary.sample_count == detail["generated_samples_per_query"] >= 100
    assert cmp["samples_per_second"]["loadgen"] == detail["result_samples_per_second"]


# -- the official handle records what the native one records (issue 19's fields) ---------------


class _ReasoningSUT(IdsSUT):
    """Streams 2 reasoning tokens and 1 answer token in one read, then 2 answer tokens;
    reports details (usage basis), the server's reasoning count and a prompt count 7 above
    the planned one, as an HTTP target of a reasoning model does."""

    def __init__(self, clock) -> None:
        super().__init__()
        self.clock = clock

    def issue(self, query, handle) -> None:
        from tokenmark.records import ResponseDetails, TokenSource
        from tokenmark.sut import DetailsHandle, ReasoningHandle

        assert isinstance(handle, ReasoningHandle) and isinstance(handle, DetailsHandle)
        t = self.clock.now_ns()
        handle.reasoning(2, t)
        handle.token(1, t)  # the same read: one chunk of 3
        handle.token(2)
        handle.reasoning_usage(2)
        handle.details(ResponseDetails(finish_reason="stop", stream_tokens=5,
                                       token_basis="usage"))
        handle.complete(10, TokenSource.USAGE, input_tokens=query.sample.input_tokens + 7,
                        cached_input_tokens=4)


def test_official_records_keep_the_planned_prompt_and_the_servers_details(tmp_path):
    from tokenmark.api.run import run_benchmark

    layered = build_settings("v6.0", "llama3.1-8b", Scenario.OFFLINE, profile="demo",
                             overrides={"offline_expected_qps": 200.0, "min_duration_ms": 300,
                                        "min_query_count": 1, "performance_sample_count": 50,
                                        "total_sample_count": 50})
    ds = default_dataset(layered, size=50, output_lengths="10")
    planned = {i: ds.sample(i).input_tokens for i in range(50)}
    run_official_loadgen(layered, ds, _ReasoningSUT, tmp_path / "official")
    run_benchmark(layered, ds, _ReasoningSUT, tmp_path / "native")

    def shapes(folder: Path) -> set[tuple[object, ...]]:
        out = set()
        for r in read_records(folder / "records.jsonl"):
            assert r.input_tokens == planned[r.sample_index]  # the plan, not the server's
            assert r.server_input_tokens == planned[r.sample_index] + 7
            assert r.first_answer_ns == r.first_token_ns >= 0
            out.add((r.output_tokens, tuple(r.chunk_tokens), r.reasoning_tokens,
                     r.finish_reason, r.stream_tokens, r.token_basis, r.cached_input_tokens,
                     r.token_source.value))
        return out

    # chunks 3 + 2 spread over the usage's 10 tokens: 6 + 4
    expected = {(10, (6, 4), 2, "stop", 5, "usage", 4, "usage")}
    assert shapes(tmp_path / "official") == shapes(tmp_path / "native") == expected


def test_an_official_accuracy_run_is_judged_as_a_native_one(tmp_path):
    """LoadGen's accuracy mode judges no performance: the MLPerf verdict is its one
    criterion (every sample answered), tokenmark's has no pacing rule."""
    layered = build_settings("v6.0", "llama3.1-8b", Scenario.SERVER, profile="demo",
                             overrides={"mode": "accuracy", "target_qps": 500.0,
                                        "performance_sample_count": 40,
                                        "total_sample_count": 40})
    ds = default_dataset(layered, size=40, output_lengths="10")
    result = run_official_loadgen(layered, ds, _ReasoningSUT, tmp_path / "acc")
    v = result.verdicts
    assert [(f.rule, f.passed) for f in v.mlperf.findings] == [("all_queries_answered", True)]
    assert [f.rule for f in v.tokenmark.findings] == ["error_rate", "run_completed"]
    assert v.valid
    entries = (tmp_path / "acc" / "mlperf_log_accuracy.json").read_text().count('"qsl_idx"')
    assert entries == 40


@pytest.mark.parametrize("test,scenario", [("TEST07", Scenario.SERVER),
                                           ("TEST09", Scenario.OFFLINE)])
def test_loadgen_applies_test07_and_test09_audit_configs(tmp_path, test, scenario):
    """The other LLM audits reach LoadGen the same way: it finds the file tokenmark wrote
    and runs with its settings (published values in compliance.audit.AUDITS: TEST07 990
    queries, TEST09 a sampling target of 10,000; both issue each sample once)."""
    from tests.accuracy.support import IdsSUT
    from tokenmark.compliance.audit import AUDITS

    rate = "offline_expected_qps" if scenario is Scenario.OFFLINE else "target_qps"
    layered = build_settings("v6.0", "llama3.1-8b", scenario, profile="demo",
                             overrides={rate: 2000.0, "performance_sample_count": 200,
                                        "total_sample_count": 200})
    out = tmp_path / test
    run_official_loadgen(layered, default_dataset(layered, size=200, output_lengths="8"),
                         lambda _clock: IdsSUT(), out, audit=test)
    detail = parse_detail((out / "mlperf_log_detail.txt").read_text())
    audit = AUDITS[test]
    assert any("Found Audit Config file" in str(w.value) for w in detail.warnings)
    assert detail["effective_accuracy_log_sampling_target"] == \
        audit.accuracy_log_sampling_target
    assert detail["effective_performance_issue_unique"] is True
    assert detail["effective_test_mode"] == "PerformanceOnly"
    if scenario is Scenario.SERVER:
        assert detail["effective_min_query_count"] == audit.min_query_count == 990
    # each sample once: the 200-sample set, not the 990 queries asked for
    assert detail["result_query_count"] == (200 if scenario is Scenario.SERVER else 1)
    assert not (out / "audit.config").exists()  # the folder is put back
