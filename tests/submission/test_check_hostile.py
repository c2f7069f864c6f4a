"""The checker on a hostile tree: links out of it, and a user.conf that is not one.

A symbolic link that leaves the submission tree (a file linked to a file outside, a
folder linked to a folder outside, a link to nowhere) is an error naming the link, and
nothing outside the tree is opened or listed (every open and listing of the check is
watched through Python's audit hooks). A ``user.conf`` of random bytes, or of text that
is not LoadGen's ``key = value`` lines, is an error; the published one is not.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from tokenmark.submission.check import check_tree

RESULT = "closed/Dell/results/8xMI355X_2xEPYC_9655/llama2-70b-99/Offline"

_watch: dict[str, list[str] | None] = {"seen": None}


def _audit(event: str, args: tuple[object, ...]) -> None:
    seen = _watch["seen"]
    if seen is not None and event in ("open", "os.listdir", "os.scandir") and args:
        path = args[0]
        if isinstance(path, str | bytes | os.PathLike):
            seen.append(os.fsdecode(path))


sys.addaudithook(_audit)


def _checked(root: Path) -> tuple[object, list[str]]:
    _watch["seen"] = seen = []
    try:
        report = check_tree(root, "v6.0")
    finally:
        _watch["seen"] = None
    return report, seen


def _all_text(report: object) -> str:
    return json.dumps(report.to_json()) + report.csv_text()  # type: ignore[attr-defined]


def test_links_out_of_the_tree_are_errors_and_never_followed(v60, tmp_path):
    outside = tmp_path / "outside"
    (outside / "acc").mkdir(parents=True)
    (outside / "passwd").write_text("OUTSIDE-SECRET root:x:0:0:root:/root:/bin/bash\n")
    (outside / "acc" / "accuracy.txt").write_text("OUTSIDE-ACCURACY rougeL=99\n")
    result = v60 / RESULT
    summary = result / "performance" / "run_1" / "mlperf_log_summary.txt"
    summary.unlink()
    summary.symlink_to(outside / "passwd")
    acc = result / "accuracy"
    for f in acc.iterdir():
        f.unlink()
    acc.rmdir()
    acc.symlink_to(outside / "acc", target_is_directory=True)
    (v60 / "closed" / "Dell" / "notes.txt").symlink_to(outside / "nowhere")
    (v60 / "closed" / "Dell" / "systems" / "inside.json").symlink_to(
        v60 / "closed" / "Dell" / "systems" / "8xMI355X_2xEPYC_9655.json")  # stays inside

    report, seen = _checked(v60)

    touched = [p for p in seen if Path(p).resolve().is_relative_to(outside.resolve())
               or p.startswith(str(outside))]
    assert not touched, touched
    text = _all_text(report)
    assert "OUTSIDE-SECRET" not in text and "OUTSIDE-ACCURACY" not in text
    links = {f.path: f for f in report.findings  # type: ignore[attr-defined]
             if f.check == "structure" and "symbolic link" in f.message}
    assert set(links) == {f"{RESULT}/performance/run_1/mlperf_log_summary.txt",
                          f"{RESULT}/accuracy", "closed/Dell/notes.txt"}
    assert all(f.severity.value == "error" and "outside the submission tree" in f.message
               for f in links.values())
    (r,) = [r for r in report.results if r.path == RESULT]  # type: ignore[attr-defined]
    assert any("symbolic link out of the submission tree" in f.message for f in r.errors)
    assert not report.ok  # type: ignore[attr-defined]


def test_a_user_conf_that_is_not_one_is_an_error(v60):
    conf = v60 / RESULT / "user.conf"
    report, _ = _checked(v60)
    (r,) = [r for r in report.results if r.path == RESULT]  # type: ignore[attr-defined]
    assert not [f for f in r.errors if f.path.endswith("user.conf")]  # the published one
    for bad, says in ((os.urandom(4096) + b"\xff\xfe", "UTF-8"),
                      (b"\x00\x01\x02 binary with NUL\n", "NUL"),
                      (b"hello world\n", "is not a LoadGen user.conf"),
                      (b"*.Offline.target_qps = lots\n", "integer or double")):
        conf.write_bytes(bad)
        report, _ = _checked(v60)
        (r,) = [r for r in report.results if r.path == RESULT]  # type: ignore[attr-defined]
        errs = [f for f in r.errors if f.path == f"{RESULT}/user.conf"]
        assert errs and says in errs[0].message, (bad[:20], [f.message for f in errs])
