"""TEST06/07/09 verdicts and the audit settings, on logs with known faults.

The official verification scripts are the judge where the ``mlcommons/inference``
mirror is on this machine (``TOKENMARK_MLPERF_MIRROR``, default the workplace's): each
test then also runs ``compliance/TEST06/run_verification.py`` (and TEST09's) on the same
files and expects the same verdict files. Without the mirror those comparisons skip and
the independent checks here still run (CI needs no mirror).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.accuracy.support import IdsSUT, plain_answer, record
from tokenmark.compliance.audit import AUDITS, apply_audit, audit_for, read_audit_config
from tokenmark.compliance.verify import (
    verify_test06,
    verify_test07,
    verify_test09,
    write_test06,
    write_test07,
    write_test09,
)
from tokenmark.config.layering import build_settings
from tokenmark.mlperf.accuracylog import encode_ids, parse_accuracy_log
from tokenmark.mlperf.settings import Mode, Scenario, effective

MIRROR = Path(os.environ.get("TOKENMARK_MLPERF_MIRROR",
                             "/work/.mirror/mlcommons+inference/repo"))


def official_file(path: str, tmp: Path) -> Path | None:
    """A file of the official repository, from the mirror (None when absent)."""
    if not (MIRROR / "HEAD").exists():
        return None
    out = tmp / Path(path).name
    blob = subprocess.run(["git", f"--git-dir={MIRROR}", "show", f"HEAD:{path}"],
                          capture_output=True, check=False)
    if blob.returncode:
        return None
    out.write_bytes(blob.stdout)
    return out


def official(path: str, tmp: Path) -> Path:
    """A file of the official repository, from the mirror (skip when absent)."""
    got = official_file(path, tmp)
    if got is None:
        pytest.skip(f"no mlcommons/inference mirror with {path} here (optional cross-check)")
    return got


def audit06_settings(scenario: Scenario = Scenario.SERVER):
    layered = build_settings("v6.0", "llama3.1-8b", scenario,
                             overrides={"target_qps": 50.0, "offline_expected_qps": 50.0,
                                        "total_sample_count": 300,
                                        "performance_sample_count": 300})
    return effective(apply_audit(layered.settings, audit_for("TEST06")), 300)


def honest_log(tmp: Path, scenario: Scenario = Scenario.SERVER) -> Path:
    return record(audit06_settings(scenario), IdsSUT(), tmp / "run", 300).path


def tamper(path: Path, fn) -> Path:
    entries = parse_accuracy_log(path.read_text())
    fn(entries)
    out = path.parent / "tampered" / path.name
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(entries))
    return out


def extra_eos(entries):
    e = entries[3]
    e["data"] += encode_ids([2, 2]).hex().upper()
    e["token_count"] += 2


def count_mismatch(entries):
    entries[5]["token_count"] += 1


def wrong_first(entries):
    entries[0]["token_data"] = encode_ids([999999]).hex().upper()


def test_the_test06_audit_logs_about_100_samples(tmp_path):
    eff = audit06_settings()
    assert eff.mode is Mode.PERFORMANCE and not eff.sample_concatenate_permutation
    assert eff.seeds.accuracy_log == 720381539243781796 and eff.min_query_count == 100
    entries = parse_accuracy_log(honest_log(tmp_path).read_text())
    assert 60 <= len(entries) <= 140  # target 100 of the expected count, sampled


def test_test06_passes_honest_outputs(tmp_path):
    log = honest_log(tmp_path)
    res = verify_test06(parse_accuracy_log(log.read_text()), "Server")
    assert res.passed
    path = write_test06(tmp_path / "out", res, log)
    assert path.read_text() == ("First token check pass: True\nEOS check pass: True\n"
                                "Sample length check pass: True\n"
                                "TEST06 verification complete\n")
    assert (tmp_path / "out" / "TEST06" / "accuracy" / "mlperf_log_accuracy.json").exists()


@pytest.mark.parametrize("fault,line", [
    (extra_eos, "EOS check pass: False"),
    (count_mismatch, "Sample length check pass: False"),
    (wrong_first, "First token check pass: False"),
])
def test_test06_fails_a_tampered_log(tmp_path, fault, line):
    log = tamper(honest_log(tmp_path), fault)
    res = verify_test06(parse_accuracy_log(log.read_text()), "Server")
    assert not res.passed and line in res.text()
    assert res.text().endswith("TEST06 verification failed\n")


def test_test06_catches_a_sut_that_pads_with_eos(tmp_path):
    def padded(idx):
        ids = [100 + idx, 5, 2, 2, 2]  # keeps emitting EOS to inflate the token count
        return ids, ids[:1], len(ids)

    log = record(audit06_settings(), IdsSUT(padded), tmp_path, 300).path
    res = verify_test06(parse_accuracy_log(log.read_text()), "Server")
    assert res.eos is False and res.length and res.first_token


def test_test06_offline_skips_the_first_token_check(tmp_path):
    log = honest_log(tmp_path, Scenario.OFFLINE)
    entries = parse_accuracy_log(log.read_text())
    assert entries and all("token_data" not in e for e in entries)
    res = verify_test06(entries, "Offline")
    assert res.passed and res.text().startswith("First token check pass: Skipped\n")


@pytest.mark.parametrize("fault", [None, extra_eos, count_mismatch, wrong_first])
def test_official_test06_script_agrees(tmp_path, fault):
    script = official("compliance/TEST06/run_verification.py", tmp_path)
    log = honest_log(tmp_path)
    if fault is not None:
        log = tamper(log, fault)
    ours = verify_test06(parse_accuracy_log(log.read_text()), "Server")
    write_test06(tmp_path / "ours", ours, log)
    subprocess.run([sys.executable, str(script), "-c", str(log.parent), "-o",
                    str(tmp_path / "theirs"), "-s", "Server"], check=True,
                   capture_output=True, timeout=60)
    name = "TEST06/verify_accuracy.txt"
    assert (tmp_path / "ours" / name).read_text() == (tmp_path / "theirs" / name).read_text()


def test_official_test09_script_agrees(tmp_path):
    script = official("compliance/TEST09/run_verification.py", tmp_path)
    log = honest_log(tmp_path)
    res = verify_test09(parse_accuracy_log(log.read_text()), 2.5, 3.5)
    assert res.passed and res.mean == 3
    write_test09(tmp_path / "ours", res, log)
    work = tmp_path / "cwd"
    work.mkdir()
    subprocess.run([sys.executable, str(script), "-c", str(log.parent), "-o",
                    str(tmp_path / "theirs"), "--min-output-tokens", "2.5",
                    "--max-output-tokens", "3.5"], check=True, capture_output=True,
                   cwd=work, timeout=60)
    name = "TEST09/verify_output_len.txt"
    assert (tmp_path / "ours" / name).read_text() == (tmp_path / "theirs" / name).read_text()


def test_test09_and_test07_verdicts(tmp_path):
    log = honest_log(tmp_path)
    entries = parse_accuracy_log(log.read_text())
    short = verify_test09(entries, 1150.38, 1406.02)
    assert not short.passed and short.text().rstrip().endswith("TEST FAIL")
    t7 = verify_test07(61.2, 60.698)
    path = write_test07(tmp_path / "out", t7, log, run_dir=None)
    text = path.read_text()
    assert "Accuracy check pass: True\nTEST PASS\n" in text
    assert verify_test07(None, 60.698).text().endswith("TEST FAIL\n")
    assert (tmp_path / "out" / "TEST07" / "performance" / "run_1").is_dir()


@pytest.mark.parametrize("test,path", [
    ("TEST06", "compliance/TEST06/audit.config"),
    ("TEST07", "compliance/TEST07/gpt-oss-120b/audit.config"),
    ("TEST09", "compliance/TEST09/gpt-oss-120b/audit.config"),
])
def test_audits_equal_the_official_audit_config(tmp_path, test, path):
    theirs = read_audit_config(official(path, tmp_path), test=test)
    assert theirs == AUDITS[test]


def test_plain_answer_is_what_the_log_holds(tmp_path):
    log = honest_log(tmp_path)
    for e in parse_accuracy_log(log.read_text()):
        ids, first, count = plain_answer(e["qsl_idx"])
        assert e["data"] == encode_ids(ids).hex().upper() and e["token_count"] == count
