"""Workload manifests: a re-run sends the identical request stream, proven by hashes
recomputed here from the records; changed inputs fail before any request."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from tokenmark.api.assemble import WorkloadSpec, build_workload
from tokenmark.config.layering import build_settings
from tokenmark.mlperf.settings import Scenario, Seeds
from tokenmark.trust.manifest import Manifest, build_content, load_manifest

RUN = ("run", "-b", "llama3.1-8b", "-s", "poisson", "--qps", "200", "--min-duration", "1",
       "--dataset-size", "64", "--sut", "latency-model", "--virtual-time", "--no-db", "-q")


def issued_hash(folder: Path, timed: bool = True) -> tuple[str, int]:
    """The issued-request hash, recomputed from records.jsonl as its definition says."""
    rows = []
    for line in (folder / "records.jsonl").read_text().splitlines():
        d = json.loads(line)
        if d["issued_ns"] >= 0:
            rows.append((d["seq"], d["query"], d["sample"],
                         d["scheduled_ns"] if timed else 0, d["input_tokens"]))
    rows.sort()
    return hashlib.sha256(np.asarray(rows, dtype="<i8").tobytes()).hexdigest(), len(rows)


def test_content_hash_is_canonical_and_sensitive():
    def content(seed: int) -> dict:
        layered = build_settings("v6.0", "llama3.1-8b", Scenario.POISSON,
                                 overrides={"target_qps": 5.0},
                                 seeds=Seeds(seed, seed + 1, seed + 2))
        spec = WorkloadSpec(size=16, seed=seed)
        ds = build_workload(spec, layered).dataset
        return build_content(layered, spec, ds, None)

    a, b = Manifest(content(1)), Manifest(dict(reversed(list(content(1).items()))))
    assert a.sha256 == b.sha256  # key order does not matter
    assert Manifest(content(2)).sha256 != a.sha256  # a seed does


def test_rerun_from_manifest_sends_the_identical_stream(cli, tmp_path):
    code, out = cli(*RUN, "--seed", "7", "-o", tmp_path / "a")
    assert code == 0, out
    doc_a = json.loads((tmp_path / "a" / "results.json").read_text())
    m = load_manifest(tmp_path / "a")
    assert doc_a["manifest"]["sha256"] == m.sha256
    want, n = issued_hash(tmp_path / "a")
    assert doc_a["manifest"]["issued_sha256"] == want and n == doc_a["manifest"][
        "issued_requests"] > 100

    code, out = cli("run", "--manifest", tmp_path / "a" / "manifest.json", "--sut",
                    "latency-model", "--virtual-time", "--no-db", "-q", "-o", tmp_path / "b")
    assert code == 0, out
    doc_b = json.loads((tmp_path / "b" / "results.json").read_text())
    assert doc_b["manifest"]["sha256"] == m.sha256
    assert doc_b["manifest"]["issued_sha256"] == want == issued_hash(tmp_path / "b")[0]
    assert doc_b["settings"]["effective"] == doc_a["settings"]["effective"]

    # another seed is another workload: both hashes differ
    code, _ = cli(*RUN, "--seed", "8", "-o", tmp_path / "c")
    doc_c = json.loads((tmp_path / "c" / "results.json").read_text())
    assert doc_c["manifest"]["sha256"] != m.sha256
    assert doc_c["manifest"]["issued_sha256"] != want


def test_changed_dataset_file_is_a_clear_error(cli, tmp_path):
    data = tmp_path / "prompts.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"tell me about the number {i}"}) + "\n"
                            for i in range(64)))
    code, out = cli(*RUN, "--dataset", data, "--output-len", "32", "-o", tmp_path / "a")
    assert code == 0, out
    data.write_text(data.read_text().replace("number 3", "number 33"))
    code, out = cli("run", "--manifest", tmp_path / "a", "--sut", "latency-model",
                    "--virtual-time", "--no-db", "-o", tmp_path / "b")
    assert code == 2
    assert "prompts.jsonl no longer matches the manifest" in out
    assert "Traceback" not in out
    assert not (tmp_path / "b").exists()  # nothing half-written


def test_a_flag_beats_the_manifest_and_the_run_is_then_not_a_rerun(cli, tmp_path):
    """Issue 20: the manifest stands where the defaults stand; a flag the user gives beats
    it (before, --manifest refused every settings or workload flag). A flag that restates
    the recorded value keeps the run a re-run."""
    code, out = cli(*RUN, "--seed", "7", "-o", tmp_path / "a")
    assert code == 0, out
    m = load_manifest(tmp_path / "a")
    rerun = ("run", "--manifest", tmp_path / "a", "--sut", "latency-model",
             "--virtual-time", "--no-db")
    code, out = cli(*rerun, "--qps", "200", "--dataset-size", "64", "-o", tmp_path / "same")
    assert code == 0, out
    same = json.loads((tmp_path / "same" / "results.json").read_text())["manifest"]
    assert same["sha256"] == m.sha256 and same["reran_from"] == m.source
    assert "not a re-run" not in out

    code, out = cli(*rerun, "--qps", "100", "-o", tmp_path / "x")
    assert code == 0, out
    assert "not a re-run of" in out and "target_qps 100.0 (recorded 200.0)" in out
    doc = json.loads((tmp_path / "x" / "results.json").read_text())
    assert doc["settings"]["effective"]["target_qps"] == 100.0
    assert doc["manifest"]["sha256"] != m.sha256 and doc["manifest"]["reran_from"] == ""
    mx = load_manifest(tmp_path / "x")
    # what the flag did not change is the manifest's: the seeds and the workload
    assert mx.settings.seeds == m.settings.seeds == Seeds(7, 8, 9)
    assert mx.spec == m.spec and mx.content["dataset"] == m.content["dataset"]


def test_edited_or_missing_manifest_is_refused(cli, tmp_path):
    code, out = cli(*RUN, "-o", tmp_path / "a")
    assert code == 0, out
    p = tmp_path / "a" / "manifest.json"
    doc = json.loads(p.read_text())
    doc["content"]["settings"]["target_qps"] = 400.0
    p.write_text(json.dumps(doc))
    code, out = cli("run", "--manifest", p, "--no-db", "-o", tmp_path / "y")
    assert code == 2 and "was edited" in out
    code, out = cli("run", "--manifest", tmp_path / "nothing", "--no-db")
    assert code == 2 and "no manifest at" in out
