"""`submission package` from tokenmark runs, then `submission check` on what it wrote:
the records beside the logs let the checker recompute every figure and the verdict."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.submission.conftest import set_detail
from tokenmark.api.run import SutSpec, default_dataset, run_benchmark
from tokenmark.config.layering import build_settings
from tokenmark.errors import BadInputError
from tokenmark.mlperf.settings import Scenario
from tokenmark.submission.check import Severity, check_tree
from tokenmark.submission.layout import MEASUREMENTS_FIELDS
from tokenmark.submission.package import PackageSpec, package_runs, system_template

MEAS = {"input_data_types": "int32", "retraining": "No",
        "starting_weights_filename": "none (latency model)", "weight_data_types": "none",
        "weight_transformations": "none"}


def system_file(tmp: Path, division: str = "open", submitter: str = "Acme") -> Path:
    sysj = {k: "x" for k in system_template()}
    sysj.update(division=division, submitter=submitter, status="available",
                system_type="datacenter", number_of_nodes="1", accelerators_per_node="8",
                system_name="test box")
    p = tmp / "box1.json"
    p.write_text(json.dumps(sysj))
    return p


@pytest.fixture(scope="module")
def server_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("runs") / "perf"
    layered = build_settings("v6.0", "llama3.1-8b", Scenario.SERVER, profile="demo",
                             overrides={"target_qps": 20.0})
    run_benchmark(layered, default_dataset(layered), SutSpec(), out, virtual_time=True)
    return out


def spec(tmp: Path, runs: tuple[Path, ...], **kw: object) -> PackageSpec:
    mp = tmp / "m.json"
    mp.write_text(json.dumps(MEAS))
    args: dict = dict(runs=runs, output=tmp / "sub", submitter="Acme",
                      system=system_file(tmp), measurements=mp, division="open")
    args.update(kw)
    return PackageSpec(**args)


def test_package_writes_the_round_layout_and_check_recomputes_it(server_run, tmp_path):
    rep = package_runs(spec(tmp_path, (server_run,)))
    folder = tmp_path / "sub/open/Acme/results/box1/llama3.1-8b/Server"
    assert rep.results == ["open/Acme/results/box1/llama3.1-8b/Server"]
    for name in ("measurements.json", "user.conf", "README.md",
                 "performance/run_1/mlperf_log_detail.txt",
                 "performance/run_1/mlperf_log_summary.txt", "performance/run_1/records.jsonl"):
        assert (folder / name).is_file(), name
    assert (tmp_path / "sub/open/Acme/systems/box1.json").is_file()
    assert (tmp_path / "sub/open/Acme/src/README.md").is_file()
    assert "llama3_1-8b.Server.target_qps = 20" in (folder / "user.conf").read_text()
    assert any("no accuracy run" in n for n in rep.notes)
    report = check_tree(tmp_path / "sub", "v6.0")
    (r,) = report.results
    # recomputed from the records: the same count and verdict as the log
    assert r.recomputed["mlperf_validity"] == "VALID"
    assert r.recomputed["records"] == r.recomputed["query count"]  # one sample per query
    errs = {f.check for f in r.errors}
    assert "records" not in errs and "log consistency" not in errs
    # a demo run is short: the checker says so, with advice
    (dur,) = [f for f in r.errors if f.check == "min duration"]
    assert "below 600000" in dur.message and "--profile demo" in dur.advice
    assert "accuracy" in errs  # no accuracy run was packaged


def test_a_log_edited_after_the_run_no_longer_matches_its_records(server_run, tmp_path):
    package_runs(spec(tmp_path, (server_run,)))
    run1 = tmp_path / "sub/open/Acme/results/box1/llama3.1-8b/Server/performance/run_1"
    # lower TTFT p99 in both the detail log (consistently) -- only the records can tell
    set_detail(run1 / "mlperf_log_detail.txt",
               **{"result_first_token_99.00_percentile_latency_ns": 1_000_000})
    report = check_tree(tmp_path / "sub", "v6.0")
    (f,) = [f for f in report.results[0].errors if f.check == "records"]
    assert "TTFT p99 (ns) is 1e+06 in the log but 5e+07 from the run's" in f.message
    assert f.official is False


def test_package_refuses_bad_input_with_one_line(server_run, tmp_path):
    with pytest.raises(BadInputError, match="official LoadGen drove.*--division open"):
        package_runs(spec(tmp_path, (server_run,), division="closed",
                          system=system_file(tmp_path, "closed")))
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"division": "open", "submitter": "Acme"}))
    with pytest.raises(BadInputError, match="lacks 33 required field"):
        package_runs(spec(tmp_path, (server_run,), system=bad))
    with pytest.raises(BadInputError, match="results.json"):
        package_runs(spec(tmp_path, (tmp_path,)))
    m = tmp_path / "m2.json"
    m.write_text(json.dumps({k: "" for k in MEASUREMENTS_FIELDS}))
    with pytest.raises(BadInputError, match="give a value for input_data_types"):
        package_runs(spec(tmp_path, (server_run,), measurements=m))


def test_v51_layout_puts_measurements_beside_results(tmp_path):
    out = tmp_path / "perf"
    layered = build_settings("v5.1", "llama3.1-8b", Scenario.OFFLINE, profile="demo")
    run_benchmark(layered, default_dataset(layered), SutSpec(), out, virtual_time=True)
    package_runs(spec(tmp_path, (out,)))
    assert (tmp_path / "sub/open/Acme/measurements/box1/llama3.1-8b/Offline/"
            "box1_Offline.json").is_file()
    assert (tmp_path / "sub/open/Acme/code/README.md").is_file()
    report = check_tree(tmp_path / "sub", "v5.1")
    (r,) = report.results
    assert not [f for f in r.errors if f.check in ("measurements", "records", "seeds")]
    assert r.figure is not None and r.figure.unit == "Tokens/s"
    assert Severity.ERROR in {f.severity for f in r.findings}  # demo length, no accuracy
