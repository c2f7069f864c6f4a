"""results.json has one writer and one reader, and the reader reads every earlier version.

The fixtures in ``tests/data/results_versions`` were written by the code of the commits
they are named after (see its README); each is read into the current form, stored in a
results database, drawn by the report and shown by the web UI."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tokenmark.api import results as results_api
from tokenmark.api.run import SutSpec, default_dataset, run_benchmark
from tokenmark.config.layering import build_settings
from tokenmark.findings import Finding
from tokenmark.mlperf.settings import Scenario
from tokenmark.output.results import (
    SCHEMA,
    ResultsDocument,
    ResultsError,
    read_results,
    write_results,
)
from tokenmark.report import report_data, write_report
from tokenmark.resultrows import UNVERIFIED_NOTE
from tokenmark.webui.pages import run_document

VERSIONS = Path(__file__).resolve().parents[1] / "data" / "results_versions"
FILES = sorted(VERSIONS.glob("*.json"))
CURRENT = [p for p in FILES if "2720340" in p.name]


def _paths(d: Any, prefix: str = "") -> set[str]:
    """Key paths of a document, not descending into tables keyed by data."""
    out: set[str] = set()
    if isinstance(d, dict):
        for k, v in d.items():
            p = f"{prefix}.{k}" if prefix else k
            out.add(p)
            if k not in ("percentiles", "intervals95", "errors_by_class", "per_endpoint",
                         "limits_ns", "seeds", "layers", "values", "dataset", "sut"):
                out |= _paths(v, p)
    elif isinstance(d, list) and d and isinstance(d[0], dict):
        out |= _paths(d[0], prefix + "[]")
    return out


def test_there_is_a_fixture_of_each_version():
    assert [p.name for p in FILES] == [
        "loadgen-147e638.json", "loadgen-2720340.json", "run-0c36e69.json",
        "run-147e638.json", "run-2720340.json", "run-3ae407b.json", "run-75be6a7.json",
        "run-e21949c.json", "sim-2720340.json", "sim-79858bd.json"]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_every_version_reads_into_the_current_form(path):
    doc = read_results(path)
    current = json.loads((VERSIONS / f"{path.stem.split('-')[0]}-2720340.json").read_text())
    out = doc.to_json()
    want = {p for p in _paths(current) if p.split(".")[0] in
            ("schema", "tokenmark_version", "label", "label_note", "profile_note", "run",
             "settings", "summary", "verdicts", "files")}
    # what later versions added to the core sections, earlier ones now have as well
    # (settings and the dataset description only grew with what a version knew)
    missing = {p for p in want - _paths(out) if not p.startswith("settings.")}
    assert missing == set(), missing
    assert out["label"] == "unverified" and out["label_note"] == UNVERIFIED_NOTE
    assert out["run"]["title"]
    for kind in ("mlperf", "tokenmark"):
        for f in out["verdicts"][kind]["findings"]:
            assert f["level"] in ("fail", "warn", "info")
    found = doc.findings()
    assert found and all(isinstance(f, Finding) for f in found)
    assert {f.verdict.value for f in found} == {"mlperf", "tokenmark"}


@pytest.mark.parametrize("path", CURRENT, ids=lambda p: p.stem)
def test_the_current_version_reads_back_unchanged(path):
    raw = json.loads(path.read_text())
    out = ResultsDocument.from_json(raw, str(path)).to_json()
    assert out == raw | {"run": out["run"]}  # the only addition: a title for every run
    assert out["run"] == raw["run"] | {"title": out["run"]["title"]}


def test_writer_and_reader_agree_on_a_new_run(tmp_path):
    layered = build_settings("v6.0", "llama3.1-8b", Scenario.SERVER, profile="demo",
                             overrides={"min_duration_ms": 1000, "min_query_count": 16,
                                        "target_qps": 20.0, "performance_sample_count": 32,
                                        "total_sample_count": 32})
    res = run_benchmark(layered, default_dataset(layered, size=32), SutSpec(), tmp_path,
                        virtual_time=True)
    written = json.loads((tmp_path / "results.json").read_text())
    assert written == res.document
    doc = read_results(tmp_path)
    assert doc.to_json() == written
    assert doc.profile_note.startswith("demo profile") and doc.run.title
    # the keys the bench harness's adapter reads (../shared/bench-peers/clients)
    s = written["summary"]
    for name, keys in (("ttft", ("50", "99")), ("itl", ("99",)), ("tpot", ())):
        assert isinstance(s["latency_ms"][name]["mean"], float)
        for k in keys:
            assert isinstance(s["latency_ms"][name]["percentiles"][k], float)
    for key in ("window_s", "requests_per_second", "output_tokens_per_second"):
        assert isinstance(s["throughput"][key], float)
    assert s["counts"]["completed"] == 32 - s["counts"]["failed"]
    assert set(written["verdicts"]) == {"mlperf", "tokenmark"}
    assert isinstance(written["tokenmark_version"], str)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_every_version_is_stored_drawn_and_shown(path, tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    shutil.copy(path, folder / "results.json")
    rep = results_api.store_run(folder, db=tmp_path / "r.db")
    assert rep.errors == () and rep.runs == 1, rep.errors
    (rec,) = results_api.list_runs(db=tmp_path / "r.db")
    assert {f.level for f in rec.findings} <= {"fail", "warn"}
    assert run_document(rec)["run"]["title"]
    data = report_data(read_results(folder).to_json())
    assert [d["name"] for d in data["distributions"]] == ["ttft", "tpot", "itl", "e2e"]
    assert write_report(folder).is_file()


@pytest.mark.parametrize(("doc", "problem"), [
    ([], "is not a JSON object"),
    ({"schema": "other/1"}, "schema 'other/1' is not 'tokenmark.results/1'"),
    ({"schema": "tokenmark.results/2"}, "upgrade tokenmark to read it"),
    ({"schema": SCHEMA, "run": {}}, "has no 'settings' object"),
    ({"schema": SCHEMA, "run": {"round": "v6.0"}, "settings": {}, "summary": {},
      "verdicts": {"mlperf": {}, "tokenmark": {}}}, "run.benchmark is missing"),
    ({"schema": SCHEMA, "run": {}, "settings": {}, "summary": {}, "verdicts": {}},
     "verdicts.mlperf is missing"),
])
def test_a_bad_document_is_one_line_naming_the_problem(doc, problem):
    with pytest.raises(ResultsError, match=problem) as e:
        ResultsDocument.from_json(doc, "x/results.json")
    assert e.value.where == "x/results.json" and "\n" not in str(e.value)


def test_write_results_is_what_read_results_reads(tmp_path):
    doc = read_results(CURRENT[0])
    path = write_results(tmp_path, doc)
    assert path == tmp_path / "results.json"
    assert read_results(tmp_path) == doc
