"""A result's evidence beside the performance log: accuracy (targets, hash, truncation),
``measurements.json`` and the compliance tests."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

from tokenmark.compliance.verify import verify_test06
from tokenmark.config.layering import parse_user_conf
from tokenmark.errors import BadInputError, ConfigError
from tokenmark.mlperf.accuracylog import is_truncated, parse_accuracy_log
from tokenmark.mlperf.presets import BenchmarkPreset
from tokenmark.mlperf.settings import Scenario
from tokenmark.submission.check.report import (
    _HASH,
    Finding,
    ResultCheck,
    Severity,
    _Ctx,
    _parse_detail,
)
from tokenmark.submission.layout import (
    ACC_PATTERNS,
    MAX_ACCURACY_LOG_SIZE,
    MEASURE_FILES,
    MEASUREMENTS_FIELDS,
    ResultPaths,
)

# -- accuracy, measurements, compliance ------------------------------------------------------


def _check_accuracy(ctx: _Ctx, rc: ResultCheck, bench: BenchmarkPreset, scenario: Scenario,
                    paths: ResultPaths) -> dict[str, str]:
    """Check ``accuracy/``; return the figures read from ``accuracy.txt`` (for the CSV)."""
    out = rc.findings
    acc_dir = paths.acc_dir
    found: dict[str, str] = {}
    txt = ctx.text(acc_dir / "accuracy.txt", out, "accuracy",
                   "score the accuracy run (tokenmark score) and copy its accuracy.txt")
    detail = _parse_detail(ctx, acc_dir / "mlperf_log_detail.txt", out, "accuracy log")
    acc_json = acc_dir / "mlperf_log_accuracy.json"
    if not ctx.is_file(acc_json):
        out.append(Finding(Severity.ERROR, ctx.rel(acc_json), "accuracy", "is missing",
                           "copy the accuracy run's mlperf_log_accuracy.json (truncated)"))
    elif acc_json.stat().st_size > MAX_ACCURACY_LOG_SIZE:
        out.append(Finding(Severity.ERROR, ctx.rel(acc_json), "accuracy",
                           f"is {acc_json.stat().st_size} bytes, not truncated to "
                           f"{MAX_ACCURACY_LOG_SIZE}",
                           "truncate it (tokenmark submission package does; or the official "
                           "truncate_accuracy_log.py)"))
    if detail is not None and detail.num_errors:
        out.append(Finding(Severity.ERROR, ctx.rel(acc_dir / "mlperf_log_detail.txt"),
                           "accuracy log", f"LoadGen logged {detail.num_errors} error(s): "
                           + "; ".join(str(e.value) for e in detail.errors[:3]),
                           "fix them and rerun the accuracy run"))
    if detail is not None:
        want = bench.scenarios[scenario].accuracy_sample_count if scenario in bench.scenarios \
            else bench.accuracy_sample_count
        got = detail.get("effective_accuracy_sample_count", detail.get("qsl_reported_total_count"))
        if got != want:
            out.append(Finding(Severity.ERROR, ctx.rel(acc_dir / "mlperf_log_detail.txt"),
                               "accuracy log", f"covers {got} samples, not the dataset's {want}",
                               "run accuracy mode over the whole dataset"))
    if txt is None:
        return found
    lines = txt.splitlines()
    hashes = [m.group(1) for m in (_HASH.match(ln) for ln in lines) if m]
    if not hashes:
        out.append(Finding(Severity.ERROR, ctx.rel(acc_dir / "accuracy.txt"), "accuracy",
                           "has no hash= line",
                           "write accuracy.txt with tokenmark score (it adds hash=sha256)"))
    elif ctx.is_file(acc_json) and acc_json.stat().st_size <= MAX_ACCURACY_LOG_SIZE:
        raw = acc_json.read_bytes()
        if not is_truncated(raw) and hashlib.sha256(raw).hexdigest() != hashes[0]:
            out.append(Finding(Severity.ERROR, ctx.rel(acc_dir / "accuracy.txt"), "accuracy",
                               "hash= is not the sha256 of the (whole, untruncated) "
                               "mlperf_log_accuracy.json beside it",
                               "score the accuracy log that is submitted", official=False))
    judged = rc.division in ("closed", "network")
    for t in bench.accuracy_targets(scenario if scenario in bench.scenarios else None):
        pattern = ACC_PATTERNS.get(t.metric)
        if pattern is None:
            continue
        value = None
        for ln in lines:
            m = re.match(pattern, ln)
            if m:
                value = m.group(1)
                break
        if value is None:
            if judged and t.lower_bound is not None:
                out.append(Finding(Severity.ERROR, ctx.rel(acc_dir / "accuracy.txt"), "accuracy",
                                   f"has no {t.metric} figure",
                                   "score with the benchmark's reference evaluation"))
            continue
        found[t.metric] = value
        try:
            v = float(value)
        except ValueError:
            continue
        if judged and not t.accepts(v):
            lo, hi = t.lower_bound, t.upper_bound
            bounds = " and ".join(x for x in (f">= {lo:g}" if lo is not None else "",
                                              f"<= {hi:g}" if hi is not None else "") if x)
            out.append(Finding(Severity.ERROR, ctx.rel(acc_dir / "accuracy.txt"), "accuracy",
                               f"{t.metric} {v:g} does not meet the target ({bounds})",
                               "the closed division needs the reference accuracy; submit in "
                               "open, or fix the model"))
    return found


def _check_measurements(ctx: _Ctx, rc: ResultCheck, paths: ResultPaths) -> dict[str, Any]:
    out = rc.findings
    mdir = paths.measurements_dir
    for name in MEASURE_FILES:
        p = mdir / name
        if not ctx.is_file(p):
            out.append(Finding(Severity.ERROR, ctx.rel(p), "measurements", "is missing",
                               "tokenmark submission package writes it"))
        elif p.stat().st_size == 0:
            out.append(Finding(Severity.ERROR, ctx.rel(p), "measurements", "is empty",
                               "write what it should say"))
        elif name == "user.conf":
            _check_user_conf(ctx, p, out)
    if paths.measurements_json is None:
        out.append(Finding(Severity.ERROR, ctx.rel(mdir), "measurements",
                           "holds no <system>.json measurements file",
                           "add the measurements JSON"))
        return {}
    mj = ctx.json_obj(paths.measurements_json, out, "measurements",
                      "write measurements.json with " + ", ".join(MEASUREMENTS_FIELDS))
    if mj is None:
        return {}
    for k in MEASUREMENTS_FIELDS:
        if k not in mj:
            out.append(Finding(Severity.ERROR, ctx.rel(paths.measurements_json), "measurements",
                               f"field {k} is missing", f"add {k}"))
        elif not mj[k]:
            out.append(Finding(Severity.ERROR, ctx.rel(paths.measurements_json), "measurements",
                               f"field {k} is empty", f"give {k} a value"))
    return mj


def _check_user_conf(ctx: _Ctx, p: Path, out: list[Finding]) -> None:
    """user.conf must be what LoadGen reads: text lines of ``model.scenario.key = value``."""
    advice = "write LoadGen's user.conf (tokenmark submission package writes it)"
    text = ctx.text(p, out, "measurements", advice)
    if text is None:
        return
    try:
        parse_user_conf(text, ctx.rel(p))
    except ConfigError as exc:
        out.append(Finding(Severity.ERROR, ctx.rel(p), "measurements",
                           f"is not a LoadGen user.conf ({exc})", advice))


def _check_compliance(ctx: _Ctx, rc: ResultCheck, bench: BenchmarkPreset, scenario: Scenario,
                      paths: ResultPaths) -> None:
    if rc.division == "open":
        return
    out = rc.findings
    for test in bench.compliance_tests:
        tdir = paths.compliance_dir / test
        if ctx.outside(tdir) or not tdir.is_dir():
            out.append(Finding(Severity.ERROR, ctx.rel(tdir), "compliance", "is missing",
                               f"run the {test} audit (tokenmark run --audit {test}) and "
                               "package it"))
            continue
        if test == "TEST06":
            _check_test06(ctx, rc, tdir, scenario)
        elif test in ("TEST07", "TEST09"):
            name = "verify_accuracy.txt" if test == "TEST07" else "verify_output_len.txt"
            txt = ctx.text(tdir / name, out, "compliance", f"run the {test} verification")
            if txt is not None and "TEST PASS" not in txt:
                out.append(Finding(Severity.ERROR, ctx.rel(tdir / name), "compliance",
                                   f"{test} did not pass", "fix the system and rerun the audit"))
        elif test in ("TEST01", "TEST04"):
            txt = ctx.text(tdir / "verify_performance.txt", out, "compliance",
                           f"run {test}'s verification")
            if txt is not None and "TEST PASS" not in txt:
                out.append(Finding(Severity.ERROR, ctx.rel(tdir / "verify_performance.txt"),
                                   "compliance", f"{test} did not pass", "rerun the audit"))


def _test06_lines(txt: str) -> dict[str, bool]:
    lines = {ln.strip() for ln in txt.splitlines()}
    return {
        "first token": ("First token check pass: True" in lines
                        or "First token check pass: Skipped" in lines),
        "EOS": "EOS check pass: True" in lines,
        "sample length": "Sample length check pass: True" in lines,
    }


def _check_test06(ctx: _Ctx, rc: ResultCheck, tdir: Path, scenario: Scenario) -> None:
    out = rc.findings
    vpath = tdir / "verify_accuracy.txt"
    txt = ctx.text(vpath, out, "compliance", "run TEST06's verification")
    if txt is None:
        return
    stated = _test06_lines(txt)
    failed = [k for k, ok in stated.items() if not ok]
    if failed:
        out.append(Finding(Severity.ERROR, ctx.rel(vpath), "compliance",
                           f"TEST06 failed: {', '.join(failed)} check",
                           "fix the output handling (EOS, first token, token counts) and "
                           "rerun TEST06"))
    log = tdir / "accuracy" / "mlperf_log_accuracy.json"
    if not ctx.is_file(log):
        return
    try:
        raw = log.read_text(encoding="utf-8")
        entries = [] if is_truncated(raw.encode()) else parse_accuracy_log(raw)
    except (OSError, UnicodeDecodeError, BadInputError, ValueError) as exc:
        out.append(Finding(Severity.ERROR, ctx.rel(log), "compliance",
                           f"cannot be parsed ({exc})", "copy TEST06's accuracy log unedited",
                           official=False))
        return
    if not entries:
        return
    try:
        ours = verify_test06(entries, scenario.loadgen.value, 2)
    except (ValueError, KeyError, TypeError) as exc:
        out.append(Finding(Severity.ERROR, ctx.rel(log), "compliance",
                           f"cannot be verified ({exc})", "copy TEST06's accuracy log unedited",
                           official=False))
        return
    recomputed = {"first token": ours.first_token is not False, "EOS": ours.eos,
                  "sample length": ours.length}
    for k, ok in recomputed.items():
        if ok != stated[k]:
            out.append(Finding(Severity.ERROR, ctx.rel(vpath), "compliance",
                               f"says the {k} check {'passed' if stated[k] else 'failed'} but "
                               f"its accuracy log says it {'passed' if ok else 'failed'}",
                               "rerun TEST06's verification on the log that is submitted",
                               official=False))


