"""Importing MLCommons' official results tables (the v5.1/v6.0 list, the v6.1 object and
the checker's unquoted summary.csv), against the tables themselves and the sample trees.

Expected counts are read from the shared tables independently (plain ``json`` below);
figures are copied from the files, named next to them.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.paths import SAMPLES, SHARED_DATA
from tokenmark.api import results as results_api
from tokenmark.importer import scan
from tokenmark.importer.tables import split_checker_line
from tokenmark.resultrows import SOURCE_LOGS, SOURCE_TABLE, Label
from tokenmark.store import Store
from tokenmark.submission.layout import CSV_COLUMNS

SUMMARIES = SHARED_DATA / "mlperf" / "summaries"
V51, V60, V61 = (SUMMARIES / "v5.1_summary_results.json",
                 SUMMARIES / "v6.0_summary_results.json", SUMMARIES / "v6.1_summary.json")
LLM = ("llama", "gptj", "gpt-oss", "mixtral", "deepseek", "qwen")


def _entries(path: Path) -> list[dict]:
    doc = json.loads(path.read_text())
    return doc if isinstance(doc, list) else list(doc.values())


@pytest.mark.parametrize("path, model_key", [(V51, "Model"), (V60, "Model"), (V61, "Model")])
def test_every_entry_is_a_row_and_llm_rows_are_told_apart(path, model_key):
    entries = _entries(path)
    s = scan(path)
    assert s.errors == [] and len(s.rows) == len(entries)
    [table] = s.tables
    assert table.entries == len(entries)
    llm = sum(any(f in x[model_key].lower() for f in LLM) for x in entries)
    assert (table.llm, table.other) == (llm, len(entries) - llm)
    assert {r.source for r in s.rows} == {SOURCE_TABLE}
    assert {r.label for r in s.rows} == {Label.OFFICIAL}


def test_the_counts_of_the_shared_readme():
    # summaries/README.md: v5.1 1,448 entries, v6.0 520, v6.1 492 of which 408 LLM
    # (gpt-oss 112, llama2-70b-99.9 88, deepseek-r1 76, llama3.1-8b 53 + llama3_1-8b 24,
    # qwen3-vl 47, qwen3.6-27b 6, llama3.1-8b-edge 2)
    assert [len(scan(p).rows) for p in (V51, V60, V61)] == [1448, 520, 492]
    rows = scan(V61).rows
    by = Counter(r.benchmark for r in rows if r.llm)
    assert sum(by.values()) == 408
    assert (by["gpt-oss-120b"], by["llama2-70b-99.9"], by["deepseek-r1"]) == (112, 88, 76)
    assert (by["llama3.1-8b"], by["qwen3-vl-235b-a22b"], by["qwen3.6-27b"]) == (53 + 24, 47, 6)


def test_fields_of_one_entry_of_each_shape():
    v51 = {(r.submitter, r.system_id, r.benchmark_folder, r.scenario): r for r in scan(V51).rows}
    # v5.1 entry 5.1-0001: AMD 8xMI300X_2xEPYC_9575F llama2-70b-99 Interactive 8840.42
    r = v51[("AMD", "8xMI300X_2xEPYC_9575F", "llama2-70b-99", "Interactive")]
    assert (r.round, r.division, r.category, r.availability) == (
        "v5.1", "closed", "datacenter", "available")
    assert (r.value, r.unit, r.weight_data_types) == (8840.42, "Tokens/s", "fp8")
    assert (r.nodes, r.accelerators_per_node, r.host_processor) == (1, 8, "AMD EPYC 9575F")
    assert r.accelerator_model == "AMD Instinct MI300X 192GB HBM3"
    assert r.system_name == "Supermicro AS-8125GS-TNMR2" and r.accuracy["ROUGE1"] == 44.4542
    assert r.source_path == "closed/AMD/results/8xMI300X_2xEPYC_9575F/llama2-70b-99/Interactive"
    v61 = {(r.submitter, r.system_id, r.benchmark_folder, r.scenario): r for r in scan(V61).rows}
    # v6.1 "0": AMD 8xMI350X_2xEPYC_9575F dlrm-v3 Offline 10891.1 Samples/s (not an LLM)
    d = v61[("AMD", "8xMI350X_2xEPYC_9575F", "dlrm-v3", "Offline")]
    assert (d.value, d.unit, d.llm, d.weight_data_types) == (10891.1, "Samples/s", False,
                                                             "fp16,bf16,fp8")
    # v6.1 Intel 1-node-2S-GNR_128C llama3_1-8b Offline 1916.74: CPU only, the folder's
    # LoadGen name resolved to the checker's
    cpu = v61[("Intel", "1-node-2S-GNR_128C", "llama3_1-8b", "Offline")]
    assert (cpu.benchmark, cpu.value, cpu.accelerator_model, cpu.accelerators_per_node) == (
        "llama3.1-8b", 1916.74, "", 0)
    assert (cpu.host_processor, cpu.host_processors_per_node) == ("Intel(R) Xeon(R) 6980P", 2)
    # VR NVL72 qwen3-vl Interactive: the endpoints figure as printed, Queries/s (the
    # checker's samples-based unit for qwen3-vl Server/Interactive: not a quirk)
    vr = v61[("NVIDIA", "VR-NVL72_VR-288GB_aarch64x72_TRT", "qwen3-vl-235b-a22b", "Interactive")]
    assert (vr.value, vr.unit, vr.published_unit, vr.availability) == (
        1306.6078446835, "Queries/s", "", "preview")
    assert (vr.nodes, vr.accelerators_per_node, vr.total_accelerators) == (18, 4, 72)


def test_published_unit_quirks_are_kept_and_flagged():
    rows = scan(V51).rows
    # the 8 v5.1 llama3.1-8b Interactive entries say Queries/s; the checker's figure
    # (result_completed_tokens_per_second) is tokens/s
    inter = [r for r in rows if r.benchmark == "llama3.1-8b" and r.scenario == "Interactive"]
    assert len(inter) == 8
    assert {(r.unit, r.published_unit) for r in inter} == {("Tokens/s", "Queries/s")}
    assert all("published as Queries/s" in r.quirks for r in inter)
    # no other LLM row of v5.1 carries a unit quirk
    assert sum(bool(r.published_unit) for r in rows if r.llm) == 8
    # v6.1 qwen3-vl Server/Interactive are Queries/s and rightly so
    qwen = [r for r in scan(V61).rows if r.benchmark == "qwen3-vl-235b-a22b"]
    assert {(r.scenario, r.unit) for r in qwen} == {
        ("Offline", "Samples/s"), ("Server", "Queries/s"), ("Interactive", "Queries/s")}
    assert not any(r.published_unit for r in qwen)
    # an inferred mark the checker could not have set is flagged, the mark kept
    flagged = [r for r in qwen if r.scenario == "Server" and r.inferred]
    assert flagged and all("never infers" in r.quirks for r in flagged)


def test_the_same_quirk_is_flagged_on_rows_read_from_logs(tmp_path):
    # a v5.1 llama3.1-8b Interactive folder: made from the v5.1 sample's layout with the
    # benchmark folder renamed, the logs are the same; the flag comes from the table
    # knowledge (KNOWN_TABLE_UNITS), the unit from the checker's key
    from tokenmark.importer.checker import known_table_unit
    assert known_table_unit("v5.1", "llama3.1-8b", "Interactive", "Tokens/s")[0] == "Queries/s"
    assert known_table_unit("v5.1", "llama3.1-8b", "Server", "Tokens/s") == ("", "")


def test_tree_and_table_of_one_result_merge_the_tree_wins(tmp_path, db):
    # samples/v6.0 holds 8 results whose v6.0 table entries are in V60: read together
    # (as a results repository checkout with summary_results.json at its top) they give
    # one row each, from the logs, with the table's figure kept
    repo = tmp_path / "inference_results_v6.0"
    shutil.copytree(SAMPLES / "v6.0", repo)
    shutil.copy(V60, repo / "summary_results.json")
    s = scan(repo)
    assert s.errors == [] and s.differences == []
    assert len(s.rows) == 520  # 520 entries, 8 of them also read from the logs
    logs = [r for r in s.rows if r.source == SOURCE_LOGS]
    assert len(logs) == 8 and all(r.table_value == r.value for r in logs)
    nv = next(r for r in logs if r.system_id.endswith("x288_TRT") and r.scenario == "Server")
    # table 1555110.0 = the detail log's figure; the summary prints 1555108.58
    assert (nv.value, nv.table_value, nv.summary_value) == (1555110.0, 1555110.0, 1555108.58)
    # the same through the database, in either order, and idempotent
    first = results_api.import_results(V60, db=db)
    second = results_api.import_results(SAMPLES / "v6.0", db=db)
    assert first.counts and second.counts and second.differences == ()
    assert (second.counts.added, second.counts.updated) == (0, 8)
    again = results_api.import_results(V60, db=db)
    assert again.counts and (again.counts.updated, again.counts.unchanged) == (0, 520)
    with Store.open(db) as st:
        stored = {r.key: r for r in st.rows({"round": "v6.0"})}
    assert {k: r for k, r in stored.items() if r.source == SOURCE_LOGS} == {
        r.key: r for r in logs}


def test_a_table_figure_that_differs_from_the_logs_is_reported(tmp_path, sqlite_db):
    doc = json.loads(V60.read_text())
    loc = ("./closed/Dell/results/8xMI355X_2xEPYC_9655/llama2-70b-99/Offline/performance/"
           "run_1")
    [entry] = [x for x in doc if x["Location"] == loc]
    assert entry["Performance_Result"] == 100008.0  # as published, equal to the log
    entry["Performance_Result"] = 100108.0
    edited = tmp_path / "v6.0_summary_results.json"
    edited.write_text(json.dumps(doc))
    results_api.import_results(SAMPLES / "v6.0", db=sqlite_db)
    rep = results_api.import_results(edited, db=sqlite_db)
    [diff] = rep.differences
    assert "Dell/8xMI355X_2xEPYC_9655 llama2-70b-99 Offline" in diff
    assert "100108 Tokens/s, the logs 100008" in diff and "+0.1000%" in diff
    [row] = results_api.list_results(db=sqlite_db, system_id="8xMI355X_2xEPYC_9655",
                                     benchmark="llama2-70b-99", scenario="Offline")
    assert (row.value, row.table_value, row.source) == (100008.0, 100108.0, SOURCE_LOGS)


def _checker_csv(entries: list[dict], header: list[str]) -> str:
    """The v6.1 entries written as the submission checker writes summary.csv
    (ResultExporter.export_row: str() of each value joined by commas, no quoting)."""
    lines = [",".join(header)]
    lines += [",".join(str(x.get(k, "")) for k in header) for x in entries]
    return "\n".join(lines) + "\n"


def test_the_checkers_unquoted_csv_reads_as_the_json_it_came_from(tmp_path):
    doc = json.loads(V61.read_text())
    entries = list(doc.values())
    header = list(entries[0])  # the 31 columns of the v6.1 table, in order
    text = _checker_csv(entries, header)
    assert sum(line.count(",") > len(header) - 1 for line in text.splitlines()) > 400
    path = tmp_path / "summary.csv"
    path.write_text(text)
    from_csv = scan(path)
    from_json = scan(V61)
    assert from_csv.errors == []
    got = {r.key: r for r in from_csv.rows}
    want = {r.key: r for r in from_json.rows}
    assert got.keys() == want.keys()
    by_location = {x["Location"].removeprefix("./").removesuffix("/performance/run_1"): x
                   for x in entries}
    split_unknowable = 0
    for k, r in want.items():
        c = got[k]
        for f in r.__dataclass_fields__:
            if f not in ("framework", "notes", "content_hash"):
                assert getattr(c, f) == getattr(r, f), (k, f)
        # framework, operating_system and notes sit side by side as free text: where
        # none holds a comma they come back as they were; otherwise only their joined
        # text is knowable (and is kept)
        x = by_location[r.source_path]
        if any("," in str(x[h]) for h in ("framework", "operating_system", "notes")):
            split_unknowable += 1
            joined = ",".join(str(x[h]) for h in ("framework", "operating_system", "notes"))
            assert c.framework in joined and c.notes in joined
        else:
            assert (c.framework, c.notes) == (r.framework, r.notes)
    assert 0 < split_unknowable < len(want)


_FREE = st.text(alphabet=st.sampled_from("abcXYZ 019.,-_()"), min_size=1, max_size=12)


def _row_values() -> st.SearchStrategy[dict[str, str]]:
    div = st.sampled_from(["closed", "open"])
    return st.fixed_dictionaries({
        "Organization": st.sampled_from(["AMD", "NVIDIA", "Red Hat, Inc.", "x,y"]),
        "Availability": st.sampled_from(["available", "preview", "rdi"]),
        "Division": div,
        "SystemType": st.sampled_from(["datacenter", "edge", "datacenter,edge"]),
        "SystemName": _FREE,
        "Platform": st.sampled_from(["8xMI355X", "GB300_x72", "sys-1"]),
        "Model": st.sampled_from(["llama2-70b-99.9", "deepseek-r1", "qwen3-vl-235b-a22b"]),
        "MlperfModel": st.sampled_from(["llama2-70b-99.9", "VLM", "deepseek-r1"]),
        "Scenario": st.sampled_from(["Offline", "Server", "Interactive", "singlestream"]),
        "Result": st.sampled_from(["1.5", "652750.1447708113", "100008.0", "3"]),
        "Accuracy": st.sampled_from(["ROUGE1: 44.4  ROUGE2: 22.0", "", "EXACT_MATCH: 81.6"]),
        "number_of_nodes": st.sampled_from(["1", "18", "64"]),
        "host_processor_model_name": _FREE,
        "host_processors_per_node": st.sampled_from(["1", "2"]),
        "host_processor_core_count": st.sampled_from(
            ["64", "32.0", "N/A", "128 total cores, 256 threads",
             "64(AMD EPYC 9534) and 192(AMD EPYC 9965)"]),
        "accelerator_model_name": st.one_of(
            st.sampled_from(["None", "AMD Instinct MI300X 192GB HBM3 (x32), AMD Instinct "
                             "MI325X 256GB HBM3e (x16)", "NVIDIA H200 + AMD MI350X"]),
            st.builds(lambda a, b: a + b, st.sampled_from(["A", "N", "[M] X"]), _FREE)),
        "accelerators_per_node": st.sampled_from(["0", "4", "8"]),
        "total_accelerators": st.sampled_from(["0", "8", "512"]),
        "Location": st.sampled_from(["./closed/AMD/results/s/m/Offline/performance/run_1",
                                     "open/NVIDIA/results/x/y/Server"]),
        "framework": _FREE, "operating_system": _FREE, "notes": _FREE,
        "compliance": div,
        "errors": st.just("0"),
        "version": st.sampled_from(["v6.1", "v5.1"]),
        "inferred": st.sampled_from(["0", "1"]),
        "has_power": st.sampled_from(["False", "True"]),
        "Units": st.sampled_from(["Tokens/s", "Queries/s", "Samples/s"]),
        "weight_data_types": _FREE,
        "design_power_watts": st.sampled_from(["None", "", "1200"]),
        "PrivateID": st.sampled_from(["None", "x1"]),
    })


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(_row_values())
def test_splitting_an_unquoted_line_never_guesses(values):
    """Property, against the values themselves: a line the checker would write is split
    back into exactly those values (free columns side by side: their joined text), or
    refused with a reason; and a line with no comma in any value splits as a plain
    ``str.split`` (the reference)."""
    header = list(CSV_COLUMNS)  # the checker's summary.csv columns, in order
    tokens = ",".join(values[h] for h in header).split(",")
    got = split_checker_line(tokens, header)
    if not any("," in v for v in values.values()):
        assert got == tokens
    if isinstance(got, str):
        assert "fields for" in got
        return
    assert len(got) == len(header)
    parsed = dict(zip(header, got, strict=True))
    run = ("framework", "operating_system", "notes")
    for h in header:
        if h not in run:
            assert parsed[h] == values[h], h
    assert ",".join(parsed[h] for h in run) == ",".join(values[h] for h in run)


def test_bad_tables_are_refused_with_a_reason(tmp_path):
    bad = tmp_path / "summary_results.json"
    bad.write_text('[{"Submitter": "AMD", "Performance_Result": "fast", "Location": "x"}]')
    s = scan(bad)
    assert s.rows == [] and "Location 'x' is not" in str(s.errors[0])
    partial = tmp_path / "v6.1" / "summary.json"
    partial.parent.mkdir()
    entries = json.loads(V61.read_text())
    entries["0"]["Result"] = "n/a"
    partial.write_text(json.dumps(entries))
    s = scan(partial)
    assert len(s.rows) == 491 and len(s.errors) == 1
    assert "entry 0" in str(s.errors[0]) and "is not a number" in str(s.errors[0])
    truncated = tmp_path / "summary.json"
    truncated.write_text(V61.read_text()[:5000])
    got = scan(truncated)
    assert got.rows == [] and "is not" in str(got.errors[0])
