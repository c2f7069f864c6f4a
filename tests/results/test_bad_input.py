"""Bad input: each case is one clear per-file error, and the database is unchanged.

The database is first filled from a clean copy of the samples (fingerprint F); then a
copy with one defect is imported: the defective result must be reported with its file
and reason and skipped, every other result is identical, so the database still has
fingerprint F. Inputs with nothing importable leave an empty database untouched.
"""

from __future__ import annotations

import io
import os
import tarfile
import zipfile
from pathlib import Path

import pytest

from tokenmark.api import results as results_api
from tokenmark.importer import Limits
from tokenmark.store import Store

DELL = "v6.0/closed/Dell"
DELL_RESULT = f"{DELL}/results/8xMI355X_2xEPYC_9655/llama2-70b-99/Offline"
RUN_1 = f"{DELL_RESULT}/performance/run_1"


@pytest.fixture
def filled(samples: Path, sqlite_db: str) -> tuple[Path, str, str]:
    """(samples copy, database, its fingerprint after a clean import)."""
    rep = results_api.import_results(samples, db=sqlite_db)
    assert rep.ok and rep.counts is not None and rep.counts.added == 10
    with Store.open(sqlite_db) as st:
        return samples, sqlite_db, st.fingerprint()


def _unchanged(db: str, fp: str) -> None:
    with Store.open(db) as st:
        assert st.fingerprint() == fp and st.counts()["results"] == 10


def _one_error(rep: results_api.ImportReport, path: str, *reason: str) -> None:
    assert len(rep.errors) == 1, rep.errors
    err = rep.errors[0]
    assert err.path == path, err
    for r in reason:
        assert r in err.reason, err
    assert rep.rows == 9


def _edit(p: Path, fn) -> None:
    p.write_text(fn(p.read_text()))


def test_truncated_summary(filled):
    samples, db, fp = filled
    _edit(samples / RUN_1 / "mlperf_log_summary.txt", lambda t: t[: len(t) // 2])
    rep = results_api.import_results(samples, db=db)
    _one_error(rep, f"{RUN_1}/mlperf_log_summary.txt", "truncated")
    _unchanged(db, fp)


def test_truncated_detail_log_cut_mid_line(filled):
    samples, db, fp = filled
    _edit(samples / RUN_1 / "mlperf_log_detail.txt", lambda t: t[: int(len(t) * 0.6)])
    rep = results_api.import_results(samples, db=db)
    _one_error(rep, f"{RUN_1}/mlperf_log_detail.txt", "line")
    _unchanged(db, fp)


def test_corrupt_detail_log_garbage_line(filled):
    samples, db, fp = filled
    _edit(samples / RUN_1 / "mlperf_log_detail.txt",
          lambda t: t.replace("\n", "\n\x13garbage{{\n", 1))
    rep = results_api.import_results(samples, db=db)
    _one_error(rep, f"{RUN_1}/mlperf_log_detail.txt", "line 2")
    _unchanged(db, fp)


def test_detail_log_without_its_result(filled):
    samples, db, fp = filled
    _edit(samples / RUN_1 / "mlperf_log_detail.txt", lambda t: "\n".join(
        ln for ln in t.splitlines() if '"result_tokens_per_second"' not in ln))
    rep = results_api.import_results(samples, db=db)
    _one_error(rep, f"{RUN_1}/mlperf_log_detail.txt", "result_tokens_per_second")
    _unchanged(db, fp)


def test_summary_and_detail_of_different_runs(filled):
    samples, db, fp = filled
    _edit(samples / RUN_1 / "mlperf_log_summary.txt",
          lambda t: t.replace("Tokens per second: 100008", "Tokens per second: 100108"))
    rep = results_api.import_results(samples, db=db)
    _one_error(rep, f"{RUN_1}/mlperf_log_summary.txt", "not of one run")
    _unchanged(db, fp)


def test_binary_file_where_a_log_should_be(filled):
    samples, db, fp = filled
    (samples / RUN_1 / "mlperf_log_summary.txt").write_bytes(os.urandom(2048) + b"\xff\xfe")
    rep = results_api.import_results(samples, db=db)
    _one_error(rep, f"{RUN_1}/mlperf_log_summary.txt", "not UTF-8")
    _unchanged(db, fp)


def test_unknown_layout_and_scenario(filled):
    samples, db, fp = filled
    for p in (samples / DELL_RESULT / "performance").rglob("*"):
        if p.is_file():
            p.unlink()
    odd = samples / DELL / "results/8xMI355X_2xEPYC_9655/llama2-70b-99/Sideways"
    odd.mkdir()
    rep = results_api.import_results(samples, db=db)
    assert sorted((e.path, e.reason.split(":")[0]) for e in rep.errors) == [
        (DELL_RESULT, "unknown layout"),
        (f"{DELL}/results/8xMI355X_2xEPYC_9655/llama2-70b-99/Sideways",
         "unknown scenario folder 'Sideways'"),
    ]
    _unchanged(db, fp)


@pytest.mark.parametrize(("edit", "reason"), [
    (lambda d: d.replace('"number_of_nodes": 1,', ""), "lacks required fields: number_of_nodes"),
    (lambda d: d.replace('"status": "available"', '"status": "soon"'), "status 'soon'"),
    (lambda d: d[:40], "is not valid JSON"),
])
def test_system_file_missing_fields_or_broken(filled, edit, reason):
    samples, db, fp = filled
    system = samples / DELL / "systems/8xMI355X_2xEPYC_9655.json"
    _edit(system, edit)
    rep = results_api.import_results(samples, db=db)
    _one_error(rep, f"{DELL}/systems/8xMI355X_2xEPYC_9655.json", reason,
               "its 1 result(s) were not imported")
    _unchanged(db, fp)


def test_system_file_missing(filled):
    samples, db, fp = filled
    (samples / DELL / "systems/8xMI355X_2xEPYC_9655.json").unlink()
    rep = results_api.import_results(samples, db=db)
    _one_error(rep, f"{DELL}/systems/8xMI355X_2xEPYC_9655.json", "missing")
    _unchanged(db, fp)


def test_symlinks_that_escape_the_root(filled, tmp_path):
    samples, db, fp = filled
    outside = tmp_path / "outside"
    outside.mkdir()
    detail = samples / RUN_1 / "mlperf_log_detail.txt"
    kept = samples / "kept-detail.txt"
    detail.rename(kept)
    detail.symlink_to(Path("../" * 40) / str(outside / "x.txt").lstrip("/"))  # via '..'
    rep = results_api.import_results(samples, db=db)
    _one_error(rep, f"{RUN_1}/mlperf_log_detail.txt", "missing (or a broken symlink)")
    (outside / "x.txt").write_text("never read")
    rep = results_api.import_results(samples, db=db)
    _one_error(rep, f"{RUN_1}/mlperf_log_detail.txt", "outside the import root")
    detail.unlink()
    detail.symlink_to(kept)  # a link that stays inside the tree is followed
    system = samples / DELL / "systems/8xMI355X_2xEPYC_9655.json"
    (outside / "secret.json").write_text(system.read_text())
    system.unlink()
    system.symlink_to(outside / "secret.json")
    rep = results_api.import_results(samples, db=db)
    _one_error(rep, f"{DELL}/systems/8xMI355X_2xEPYC_9655.json", "outside the import root",
               "its 1 result(s) were not imported")
    _unchanged(db, fp)


def test_a_results_folder_linked_outside(filled, tmp_path):
    samples, db, fp = filled
    amd = samples / "v6.0/closed/AMD/results"
    target = tmp_path / "elsewhere"
    (amd / "87xMI355X_22xEPYC_9575F").rename(target)
    (amd / "87xMI355X_22xEPYC_9575F").symlink_to(target)
    rep = results_api.import_results(samples, db=db)
    assert [e.path for e in rep.errors] == ["v6.0/closed/AMD/results/87xMI355X_22xEPYC_9575F"]
    assert "outside the import root" in rep.errors[0].reason
    assert rep.rows == 8  # AMD's other system is still read
    _unchanged(db, fp)


def test_huge_files_are_refused_before_reading(filled):
    samples, db, fp = filled
    detail = samples / RUN_1 / "mlperf_log_detail.txt"
    with open(detail, "r+b") as f:  # sparse: costs no disk, 100 MiB by its size
        f.truncate(100 << 20)
    rep = results_api.import_results(samples, db=db)
    _one_error(rep, f"{RUN_1}/mlperf_log_detail.txt", "over the 67,108,864-byte limit")
    summary = samples / RUN_1 / "mlperf_log_summary.txt"
    rep = results_api.import_results(samples, db=db, limits=Limits(summary_log=100))
    assert any(e.path.endswith("mlperf_log_summary.txt") and "limit" in e.reason
               for e in rep.errors) and summary.exists()
    _unchanged(db, fp)


def _tar(path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]]) -> Path:
    with tarfile.open(path, "w:gz") as tf:
        for info, data in members:
            tf.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def _info(name: str, data: bytes = b"x", kind: bytes = tarfile.REGTYPE,
          link: str = "") -> tuple[tarfile.TarInfo, bytes | None]:
    ti = tarfile.TarInfo(name)
    ti.type, ti.linkname = kind, link
    ti.size = len(data) if kind == tarfile.REGTYPE else 0
    return ti, data if kind == tarfile.REGTYPE else None


def test_archives_with_hostile_members(tmp_path, sqlite_db):
    bad = _tar(tmp_path / "bad.tar.gz", [
        _info("../escape/results.json"),
        _info("/etc/cron.d/results.json"),
        _info("a\\..\\..\\results.json"),
        _info("C:/win/results.json"),
        _info("sub/results.json", kind=tarfile.SYMTYPE, link="/etc/passwd"),
        _info("sub/mlperf_log_detail.txt", kind=tarfile.LNKTYPE, link="../../x"),
        _info("dev/results.json", kind=tarfile.CHRTYPE),
    ])
    rep = results_api.import_results(bad, db=sqlite_db)
    reasons = {e.path.split("!", 1)[1]: e.reason for e in rep.errors}
    assert "contains '..'" in reasons["../escape/results.json"]
    assert "absolute" in reasons["/etc/cron.d/results.json"]
    assert "backslashes" in reasons["a\\..\\..\\results.json"]
    assert "drive letter" in reasons["C:/win/results.json"]
    assert "is a link" in reasons["sub/results.json"]
    assert "is a link" in reasons["sub/mlperf_log_detail.txt"]
    assert "special file" in reasons["dev/results.json"]
    assert not rep.written and not (tmp_path / "escape").exists()
    assert not Path(sqlite_db).exists()  # nothing importable: no database was even made


def test_zip_bomb_and_zip_names(tmp_path, sqlite_db):
    z = tmp_path / "bomb.zip"
    with zipfile.ZipFile(z, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("t/results.json", b"\0" * (4 << 20))
        zf.writestr("../up/results.json", b"{}")
    rep = results_api.import_results(z, db=sqlite_db,
                                     limits=Limits(archive_member=1 << 20))
    reasons = {e.path.split("!", 1)[1]: e.reason for e in rep.errors}
    assert "over the 1,048,576-byte limit" in reasons["t/results.json"]
    assert "contains '..'" in reasons["../up/results.json"]
    assert not rep.written


def test_not_an_archive_a_missing_path_and_an_empty_tree(tmp_path, sqlite_db):
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(b"not really gzip")
    rep = results_api.import_results(junk, db=sqlite_db)
    assert [e.path for e in rep.errors] == ["junk.tar.gz"]
    assert "not a readable archive" in rep.errors[0].reason
    rep = results_api.import_results(tmp_path / "nope", db=sqlite_db)
    assert "does not exist" in rep.errors[0].reason
    (tmp_path / "empty").mkdir()
    rep = results_api.import_results(tmp_path / "empty", db=sqlite_db)
    assert "unknown layout" in rep.errors[0].reason
    txt = tmp_path / "notes.txt"
    txt.write_text("hello")
    assert "is not a folder" in results_api.import_results(txt, db=sqlite_db).errors[0].reason
    assert not Path(sqlite_db).exists()


def test_strict_imports_nothing_when_anything_fails(samples, db):
    _edit(samples / RUN_1 / "mlperf_log_summary.txt", lambda t: t[:100])
    rep = results_api.import_results(samples, db=db, strict=True)
    assert len(rep.errors) == 1 and rep.rows == 9 and not rep.written
    with Store.open(db) as st:
        assert st.counts()["results"] == 0
