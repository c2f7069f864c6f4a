"""Importing the shared sample folders reproduces their published values.

The expected figures are the README's (``tests/data/shared/mlperf/samples/README.md``)
and the logs' own lines; the CSV rows of the same folders must match too.
"""

from __future__ import annotations

import shutil
import tarfile
import zipfile
from pathlib import Path

import pytest

from tests.paths import SAMPLES
from tests.results.support import CSV_UNITS, csv_records
from tokenmark.importer import scan
from tokenmark.resultrows import Label, Tier


@pytest.fixture(scope="module")
def rows():
    s = scan(SAMPLES)
    assert s.errors == [] and s.folders == 10
    return {(r.round, r.submitter, r.system_id, r.benchmark, r.scenario): r for r in s.rows}


def test_the_readme_figures(rows):
    nv288 = "GB300-NVL72_GB300-288GB_aarch64x288_TRT"
    off = rows[("v6.0", "NVIDIA", nv288, "deepseek-r1", "Offline")]      # 1: 2,494,310 tok/s
    assert (off.value, off.unit, off.metric) == (2494310.0, "Tokens/s", "result_tokens_per_second")
    assert (off.nodes, off.accelerators_per_node, off.total_accelerators) == (72, 4, 288)
    assert off.tier is Tier.MULTI_NODE
    srv = rows[("v6.0", "NVIDIA", nv288, "deepseek-r1", "Server")]       # 2: 1,555,108.58
    assert srv.summary_value == 1555108.58 and srv.value == 1555110.0   # detail log: %g
    amd87 = rows[("v6.0", "AMD", "87xMI355X_22xEPYC_9575F", "llama2-70b-99", "Offline")]
    assert (amd87.total_accelerators, amd87.accelerators_used) == (88, 87)   # 3: 87 of 88
    assert "87" in amd87.accelerator_note and "88" in amd87.accelerator_note
    assert amd87.value == 1042110.0 and amd87.tier is Tier.MULTI_NODE
    inter = rows[("v6.0", "AMD", "87xMI355X_22xEPYC_9575F", "llama2-70b-99", "Interactive")]
    assert inter.metric == "result_completed_tokens_per_second"           # 4: log says Server
    assert (inter.value, inter.summary_value, inter.inferred) == (785522.0, 785521.65, False)
    base = rows[("v6.0", "AMD", "8xMI355X_2xEPYC_9575F", "llama2-70b-99", "Offline")]
    dell = rows[("v6.0", "Dell", "8xMI355X_2xEPYC_9655", "llama2-70b-99", "Offline")]
    assert (base.value, dell.value) == (103480.0, 100008.0)               # 5, 6
    assert round((dell.value / base.value - 1) * 100, 1) == -3.4           # "-3.4%"
    qwen = rows[("v6.0", "NVIDIA", "GB300-NVL72_GB300-288GB_aarch64x4_TRT",
                 "qwen3-vl-235b-a22b", "Server")]                          # 7: samples-based
    assert (qwen.value, qwen.unit, qwen.summary_value) == (41.6351, "Queries/s", 41.64)
    assert qwen.tier is Tier.SINGLE_NODE  # one 4-GPU tray, although the name says NVL72
    thor = rows[("v6.0", "NVIDIA", "Jetson-Thor", "llama3.1-8b-edge", "SingleStream")]
    assert (thor.value, thor.unit) == (1357552837 / 1e6, "Latency (ms)")   # 8: p90, in ms
    assert thor.division == "open" and thor.category == "edge"
    v51 = rows[("v5.1", "NVIDIA", "GB300-NVL72_GB300-288GB_aarch64x72_TRT", "deepseek-r1",
                "Offline")]
    assert (v51.value, v51.total_accelerators) == (420659.0, 72)          # 9
    v41 = rows[("v4.1", "AMD", "8xMI300X_2xEPYC-9374F", "llama2-70b-99", "Server")]
    assert (v41.value, v41.summary_value) == (21028.2, 21028.23)          # 10: 2024 format
    assert all(r.label is Label.OFFICIAL and r.validity == "VALID" for r in rows.values())
    assert off.accuracy["exact_match"] == pytest.approx(81.60893345487693)
    assert dell.accuracy["rouge1"] == 44.458 and dell.weight_data_types == "fp4"


def test_the_csv_rows_of_the_same_folders(rows):
    by_path = {r.source_path: r for r in rows.values()}
    matched = 0
    for x in csv_records():
        rel = x["source_path"].split("/", 2)[2].removesuffix(
            "/performance/run_1/mlperf_log_summary.txt")
        r = by_path.get(f"{x['round']}/{rel}")
        if r is None:
            continue
        matched += 1
        assert r.summary_value == float(x["result"])  # the summary line, as printed
        assert r.value == pytest.approx(float(x["result"]), rel=1e-5)
        assert r.unit == CSV_UNITS[x["metric"]]
        assert (r.nodes, r.accelerators_per_node, r.total_accelerators) == (
            int(x["number_of_nodes"]), int(x["accelerators_per_node"]),
            int(x["total_accelerators"]))
        assert r.per_accelerator == pytest.approx(float(x["result_per_accelerator"]), rel=1e-5)
        assert (r.system_name, r.accelerator_model, r.availability, r.category) == (
            x["system_name"].strip(), x["accelerator_model_name"], x["availability"],
            x["system_type"])
    assert matched == 2  # v4.1 AMD llama2-70b-99 Server, v5.1 NVIDIA deepseek-r1 Offline


def test_rounds_from_folders_loadgen_or_the_caller(tmp_path):
    sub = tmp_path / "tree" / "closed"
    shutil.copytree(SAMPLES / "v6.0" / "closed" / "Dell", sub / "Dell")
    got = scan(tmp_path / "tree")
    assert [r.round for r in got.rows] == ["v6.0"]  # loadgen_version 6.0.x
    forced = scan(tmp_path / "tree", round="v6.1")
    assert [r.round for r in forced.rows] == ["v6.1"]
    named = tmp_path / "inference_results_v6.1"
    (tmp_path / "tree").rename(named)
    assert [r.round for r in scan(named).rows] == ["v6.1"]  # the checkout's name wins
    packed = _pack(named, tmp_path / "inference_results_v6.1.tar.gz")
    assert [r.round for r in scan(packed).rows] == ["v6.1"]  # so does the archive's


def test_labels(tmp_path, samples):
    assert {r.label for r in scan(samples, official=False).rows} == {Label.UNVERIFIED}
    detail = next(samples.rglob("Dell/results/*/*/Offline/performance/run_1/"
                                "mlperf_log_detail.txt"))
    text = detail.read_text()
    detail.write_text(':::MLLOG {"key": "tokenmark_note", "value": "Written by tokenmark", '
                      '"time_ms": 0.0, "namespace": "mlperf::logging", "event_type": '
                      '"POINT_IN_TIME", "metadata": {}}\n' + text)
    labels = {r.submitter: r.label for r in scan(samples / "v6.0").rows}
    assert labels["Dell"] is Label.UNVERIFIED and labels["AMD"] is Label.OFFICIAL


def _pack(src: Path, dest: Path) -> Path:
    if dest.suffix == ".zip":
        with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zf:
            for p in sorted(src.rglob("*")):
                zf.write(p, p.relative_to(src.parent).as_posix())
    else:
        with tarfile.open(dest, "w:gz") as tf:
            tf.add(src, arcname=src.name)
    return dest


@pytest.mark.parametrize("name", ["samples.tar.gz", "samples.zip"])
def test_archives_import_like_the_folder(tmp_path, name):
    folder = scan(SAMPLES)
    packed = scan(_pack(SAMPLES, tmp_path / name))
    assert packed.errors == []
    assert sorted((r.key, r.value, r.content_hash) for r in packed.rows) == sorted(
        (r.key, r.value, r.content_hash) for r in folder.rows)
    assert all(r.source_path.startswith(f"{name}!samples/") for r in packed.rows)
