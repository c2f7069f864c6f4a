"""``tokenmark submission package``: a submission tree assembled from tokenmark run folders.

Each run folder (what ``tokenmark run`` wrote: ``results.json`` and the ``mlperf_log_*``
files) is placed by what it is:

- a performance run -> ``performance/run_1/`` (LoadGen's summary and detail logs, and
  tokenmark's ``records.jsonl`` so ``submission check`` can recompute the figures);
- an accuracy run (``--mode accuracy``, scored with ``tokenmark score``) ->
  ``accuracy/`` (``accuracy.txt``, the logs, ``mlperf_log_accuracy.json`` truncated as the
  official ``truncate_accuracy_log.py`` does: the first and last 4096 characters);
- an audit run (``--audit TEST06`` ..., with its verdict folder) -> ``TEST06/`` ...;

in the round's layout (digest §7.1; v5.x puts measurements and compliance beside
``results/``), with ``systems/<system>.json`` (the system description, checked for the
required fields), ``measurements.json``, ``user.conf`` (the run's, or one written from its
settings), a ``README.md`` per result and the harness folder (``src/``, v5.x ``code/``).

The closed and network divisions take only runs the official LoadGen drove
(``tokenmark run --loadgen official``): logs tokenmark's own load generator wrote go in the
open division, labelled unverified (DESIGN.md).
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokenmark import __version__
from tokenmark.errors import BadInputError, ConfigError
from tokenmark.inputs import MIB, load_json_object
from tokenmark.mlperf.presets import RoundPreset, load_round
from tokenmark.mlperf.settings import Scenario
from tokenmark.output.results import read_results
from tokenmark.submission.layout import (
    DIVISIONS,
    MEASUREMENTS_FIELDS,
    SYSTEM_MEANINGFUL_FIELDS,
    SYSTEM_REQUIRED_FIELDS,
    VIEWABLE_SIZE,
    new_layout,
)

__all__ = ["AUDITS", "PackageReport", "PackageSpec", "package_runs", "system_template",
           "truncate_accuracy_log"]

AUDITS = ("TEST01", "TEST04", "TEST06", "TEST07", "TEST09")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")
_HASH = re.compile(r"^hash=([\w\d]+)$", re.MULTILINE)
_LOGS = ("mlperf_log_summary.txt", "mlperf_log_detail.txt")


@dataclass(frozen=True)
class PackageSpec:
    runs: tuple[Path, ...]
    output: Path
    submitter: str
    system: Path  # the system description JSON
    measurements: Path  # measurements.json (the five fields)
    division: str = "closed"
    round: str | None = None  # default: the runs' round
    system_id: str | None = None  # default: the system file's name
    include_records: bool = True


@dataclass
class PackageReport:
    root: Path
    round: str
    division: str
    submitter: str
    system_id: str
    results: list[str] = field(default_factory=list)  # result folders, relative to root
    notes: list[str] = field(default_factory=list)


@dataclass
class _Run:
    path: Path
    doc: dict[str, Any]
    benchmark: str
    scenario: str
    kind: str  # performance | accuracy | TEST06 ...


def system_template(division: str = "closed", submitter: str = "") -> dict[str, str]:
    """Every field the checker requires, empty (``division``/``submitter`` filled)."""
    out = {k: "" for k in SYSTEM_REQUIRED_FIELDS}
    out.update(division=division, submitter=submitter, status="available",
               system_type="datacenter")
    return out


def truncate_accuracy_log(text: str) -> str:
    """What ``truncate_accuracy_log.py`` leaves: the first and last 4096 characters."""
    if len(text) < VIEWABLE_SIZE:
        return text
    return text[:VIEWABLE_SIZE] + "\n\n...\n\n" + text[-VIEWABLE_SIZE:]


def _json(path: Path, what: str, fix: str) -> dict[str, Any]:
    if not path.is_file():
        raise BadInputError(f"{path}: no such {what}; {fix}")
    return load_json_object(path, what, fix, max_bytes=16 * MIB)


def _read_run(path: Path) -> _Run:
    doc = read_results(path).to_json()  # the one reader: names what is missing
    run = doc["run"]
    audits = [t for t in AUDITS if (path / t).is_dir()]
    if len(audits) > 1:
        raise BadInputError(f"{path}: holds verdict folders of {', '.join(audits)}; one audit "
                            "per run folder")
    if audits:
        kind = audits[0]
    elif run.get("mode") == "AccuracyOnly":
        kind = "accuracy"
    else:
        kind = "performance"
    try:
        scenario = Scenario.parse(str(run["scenario"]))
    except (ConfigError, ValueError):
        raise BadInputError(f"{path}: scenario {run['scenario']!r} is not an MLPerf "
                            "scenario") from None
    if not scenario.is_mlperf:
        raise BadInputError(f"{path}: a {scenario.value} run is a tokenmark pattern, not an "
                            "MLPerf scenario; only MLPerf scenarios can be submitted")
    return _Run(path, doc, str(run["benchmark"]), scenario.value, kind)


def _check_system(sysj: dict[str, Any], spec: PackageSpec) -> None:
    missing = [k for k in SYSTEM_REQUIRED_FIELDS if k not in sysj]
    if missing:
        raise BadInputError(
            f"{spec.system}: the system description lacks {len(missing)} required field(s): "
            f"{', '.join(missing)}; add them ('tokenmark submission template' writes every "
            "field)")
    empty = [k for k in SYSTEM_MEANINGFUL_FIELDS if not sysj.get(k)]
    if empty:
        raise BadInputError(f"{spec.system}: these fields need a value: {', '.join(empty)}")
    if str(sysj.get("division", "")).lower() != spec.division:
        raise BadInputError(f"{spec.system}: division is {sysj.get('division')!r} but the "
                            f"package is for {spec.division!r}; make them agree")
    if str(sysj.get("submitter", "")).lower() != spec.submitter.lower():
        raise BadInputError(f"{spec.system}: submitter is {sysj.get('submitter')!r} but "
                            f"--submitter is {spec.submitter!r}; make them agree")


def _user_conf(run: _Run, preset: RoundPreset) -> str:
    conf = run.path / "user.conf"
    if conf.is_file():
        return conf.read_text(encoding="utf-8")
    req = run.doc.get("settings", {}).get("requested", {})
    bench = preset.benchmark(run.benchmark)
    sc = Scenario.parse(run.scenario)
    key = f"{bench.scenario(sc).loadgen_model}.{sc.loadgen.value}"
    lines = [f"# Written by tokenmark {__version__} from {run.path.name}/results.json"]
    if sc.loadgen is Scenario.SERVER and "target_qps" in req:
        lines.append(f"{key}.target_qps = {float(req['target_qps']):g}")
    if sc.loadgen is Scenario.OFFLINE and "offline_expected_qps" in req:
        lines.append(f"{key}.target_qps = {float(req['offline_expected_qps']):g}")
    if "min_duration_ms" in req:
        lines.append(f"{key}.min_duration = {int(req['min_duration_ms'])}")
    if "min_query_count" in req:
        lines.append(f"{key}.min_query_count = {int(req['min_query_count'])}")
    return "\n".join(lines) + "\n"


def _copy_logs(src: Path, dest: Path, what: str) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    for name in _LOGS:
        if not (src / name).is_file():
            raise BadInputError(f"{src}: no {name} in this {what} run; give the folder the run "
                                "wrote (MLPerf scenarios write both logs)")
        shutil.copyfile(src / name, dest / name)


def _readme(run: _Run, others: list[_Run], preset: RoundPreset) -> str:
    r = run.doc.get("run", {})
    lines = [f"# {run.benchmark} {run.scenario}", "",
             f"Packaged by tokenmark {__version__} for MLPerf Inference {preset.round}.",
             "Results are unverified: not reviewed by MLCommons.", "",
             f"- load generator: {'official LoadGen (mlcommons-loadgen)' if r.get('loadgen') == 'official' else 'tokenmark'}",  # noqa: E501
             f"- system under test: {r.get('sut', {}).get('name', '')}",
             f"- performance run: {run.path.name} (started {r.get('started_utc', '')})"]
    for o in others:
        lines.append(f"- {o.kind} run: {o.path.name}")
    lines += ["", "Reproduce with `tokenmark run --benchmark "
              f"{run.benchmark} --scenario {run.scenario} --round {preset.round}"
              f"{' --loadgen official' if r.get('loadgen') == 'official' else ''}` and the "
              "user.conf beside this file."]
    return "\n".join(lines) + "\n"


def package_runs(spec: PackageSpec) -> PackageReport:
    """Assemble the tree; raises :class:`BadInputError` (one line) on bad input."""
    if spec.division not in DIVISIONS:
        raise BadInputError(f"division {spec.division!r} is not one of {', '.join(DIVISIONS)}")
    if not _NAME.match(spec.submitter):
        raise BadInputError(f"submitter {spec.submitter!r} must be a plain folder name "
                            "(letters, digits, . _ + -)")
    system_id = spec.system_id or spec.system.stem
    if not _NAME.match(system_id):
        raise BadInputError(f"system id {system_id!r} must be a plain folder name")
    if not spec.runs:
        raise BadInputError("give at least one run folder to package")
    runs = [_read_run(p) for p in spec.runs]
    rounds = sorted({str(r.doc["run"]["round"]) for r in runs})
    round_name = spec.round or (rounds[0] if len(rounds) == 1 else "")
    if not round_name:
        raise BadInputError(f"the runs are of several rounds ({', '.join(rounds)}); package "
                            "one round at a time (--round)")
    preset = load_round(round_name)
    stray = [r.path.name for r in runs if r.doc["run"]["round"] != preset.round]
    if stray:
        raise BadInputError(f"run(s) {', '.join(stray)} are of another round than "
                            f"{preset.round}; their seeds would be wrong")
    if spec.division in ("closed", "network"):
        own = [r.path.name for r in runs if r.doc["run"].get("loadgen") != "official"]
        if own:
            raise BadInputError(
                f"the {spec.division} division takes only runs the official LoadGen drove; "
                f"{', '.join(own)} ran on tokenmark's load generator: rerun them with "
                "--loadgen official, or package with --division open")
    sysj = _json(spec.system, "system description", "write one ('tokenmark submission "
                 "template' prints every required field)")
    _check_system(sysj, spec)
    meas = _json(spec.measurements, "measurements file",
                 f"write a JSON object with {', '.join(MEASUREMENTS_FIELDS)}")
    bad = [k for k in MEASUREMENTS_FIELDS if not meas.get(k)]
    if bad:
        raise BadInputError(f"{spec.measurements}: give a value for {', '.join(bad)}")
    out = spec.output
    if out.exists() and any(out.iterdir()):
        raise BadInputError(f"{out}: already exists and is not empty; give a new folder")
    groups: dict[tuple[str, str], dict[str, list[_Run]]] = {}
    for r in runs:
        bench = preset.benchmark(r.benchmark).name
        r.benchmark = bench
        groups.setdefault((bench, r.scenario), {}).setdefault(r.kind, []).append(r)
    for (bench, sc), kinds in groups.items():
        for kind, rs in kinds.items():
            if len(rs) > 1:
                raise BadInputError(f"{bench} {sc}: {len(rs)} {kind} runs "
                                    f"({', '.join(r.path.name for r in rs)}); give one")
        if "performance" not in kinds:
            raise BadInputError(f"{bench} {sc}: no performance run among the folders; add one")
    report = PackageReport(out, preset.round, spec.division, spec.submitter, system_id)
    sub = out / spec.division / spec.submitter
    (sub / "systems").mkdir(parents=True, exist_ok=True)
    (sub / "systems" / f"{system_id}.json").write_text(json.dumps(sysj, indent=4) + "\n",
                                                       encoding="utf-8")
    src = sub / ("src" if new_layout(preset.round) else "code")
    src.mkdir(parents=True, exist_ok=True)
    (src / "README.md").write_text(
        f"# Harness\n\nThe runs were made with tokenmark {__version__} "
        "(`pip install tokenmark`), an open LLM inference benchmark; its source is the "
        "harness code of these results.\n", encoding="utf-8")
    for (bench, sc), kinds in sorted(groups.items()):
        perf = kinds["performance"][0]
        others = [r for k, rs in kinds.items() if k != "performance" for r in rs]
        folder = sub / "results" / system_id / bench / sc
        _copy_logs(perf.path, folder / "performance" / "run_1", "performance")
        if spec.include_records and (perf.path / "records.jsonl").is_file():
            shutil.copyfile(perf.path / "records.jsonl",
                            folder / "performance" / "run_1" / "records.jsonl")
        if new_layout(preset.round):
            mdir, cdir = folder, folder
            mname = "measurements.json"
        else:
            mdir = sub / "measurements" / system_id / bench / sc
            cdir = sub / "compliance" / system_id / bench / sc
            mname = f"{system_id}_{sc}.json"
        mdir.mkdir(parents=True, exist_ok=True)
        (mdir / mname).write_text(json.dumps(meas, indent=4) + "\n", encoding="utf-8")
        (mdir / "user.conf").write_text(_user_conf(perf, preset), encoding="utf-8")
        (mdir / "README.md").write_text(_readme(perf, others, preset), encoding="utf-8")
        if "accuracy" in kinds:
            _accuracy(kinds["accuracy"][0], folder / "accuracy")
        else:
            report.notes.append(f"{bench} {sc}: no accuracy run given (run --mode accuracy, "
                                "score it with tokenmark score, and package its folder)")
        for test in AUDITS:
            if test in kinds:
                shutil.copytree(kinds[test][0].path / test, cdir / test)
        for test in preset.benchmark(bench).compliance_tests:
            if test not in kinds and spec.division != "open":
                report.notes.append(f"{bench} {sc}: no {test} audit run given (tokenmark run "
                                    f"--audit {test})")
        report.results.append(str(folder.relative_to(out)))
    return report


def _accuracy(run: _Run, dest: Path) -> None:
    _copy_logs(run.path, dest, "accuracy")
    log = run.path / "mlperf_log_accuracy.json"
    txt = run.path / "accuracy.txt"
    if not log.is_file():
        raise BadInputError(f"{run.path}: no mlperf_log_accuracy.json; give the accuracy run's "
                            "folder")
    if not txt.is_file():
        raise BadInputError(f"{run.path}: no accuracy.txt; score the run first (tokenmark "
                            f"score {run.path} --references FILE)")
    text = txt.read_text(encoding="utf-8")
    raw = log.read_bytes()
    m = _HASH.search(text)
    if m is None or m.group(1) != hashlib.sha256(raw).hexdigest():
        raise BadInputError(f"{txt}: its hash= line is not the sha256 of the "
                            "mlperf_log_accuracy.json beside it; score the run again")
    shutil.copyfile(txt, dest / "accuracy.txt")
    (dest / "mlperf_log_accuracy.json").write_text(
        truncate_accuracy_log(raw.decode("utf-8")), encoding="utf-8")
