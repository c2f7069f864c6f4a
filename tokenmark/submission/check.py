"""``tokenmark submission check``: a submission checker stricter than the official one.

It walks ``<root>/<division>/<submitter>/results/<system>/<benchmark>/<scenario>/`` as
the official ``submission_checker`` does and, for every LLM result tokenmark has a preset
for, re-parses every log and recomputes every verdict it can:

- structure: the performance and accuracy logs, ``measurements.json`` (and, v5.x, its
  ``user.conf``/``README.md``), the system description, the harness folder;
- the system description: required fields present, the meaningful ones non-empty,
  ``status``/``system_type`` allowed, ``submitter``/``division`` equal to the folders;
- the performance log: LoadGen errors, the round's seeds, ``effective_min_duration_ms``
  (600 s), the performance sample count, Offline's samples per query, early stopping,
  token latencies on, the TTFT/TPOT limits (strict ``<``, as the checker) of the folder's
  scenario, the inferred-result rules, and that the summary says what the detail log says;
- LoadGen's own verdict, recomputed from its criteria and figures: a log whose
  ``result_validity`` contradicts its own criteria has been edited;
- tokenmark's records beside the log (``records.jsonl``, written by ``submission
  package``): the figures and the MLPerf verdict recomputed from them must match the log;
- accuracy: ``accuracy.txt`` against the round's targets (lower and upper bounds), its
  ``hash=`` line (and the hash itself when the accuracy log is whole: a log truncated by
  ``truncate_accuracy_log.py`` is recognised with LF or CRLF line ends), the accuracy
  log truncated, the accuracy run's errors and dataset size;
- compliance: the round's tests per benchmark (TEST06 recomputed from its accuracy log when
  present, at the token width the log holds, int32 or int64; TEST07/TEST09 verdict files);
- an open submitter's ``model_mapping.json``: its own model folders are checked as the
  benchmark each maps to, as the official checker does;
- the scenarios: required ones present (one of Server/Interactive where the round says so),
  none unknown.

Two rules go beyond the official checker (digest §3.2 "Gaps"), marked ``official=False``:
a run LoadGen itself marked INVALID is rejected (the official checker reads
``result_validity`` but never fails on it), and an ``Interactive`` folder is judged against
the Interactive TTFT/TPOT limits (the official checker applies the Server ones, because it
keys on ``effective_scenario``).

Every problem is a :class:`Finding` (severity, file, check, message, advice); nothing in a
tree, however broken, raises. Results without errors get a summary CSV row in the official
checker's columns and formatting.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from tokenmark.compliance.verify import verify_test06
from tokenmark.config.layering import parse_user_conf
from tokenmark.errors import BadInputError, ConfigError
from tokenmark.findings import Finding as _Finding
from tokenmark.findings import VerdictKind
from tokenmark.importer.checker import Figure, canonical_scenario, inferred_figure
from tokenmark.importer.published import canonical_benchmark
from tokenmark.inputs import json_loads
from tokenmark.metrics.summary import Accumulator, Summary, summarize
from tokenmark.mlperf.accuracylog import is_truncated, parse_accuracy_log
from tokenmark.mlperf.mllog import DetailLog, MLLogError, SummaryLog, parse_detail, parse_summary
from tokenmark.mlperf.presets import BenchmarkPreset, RoundPreset, load_round
from tokenmark.mlperf.rules import ClientStats, Validity, evaluate
from tokenmark.mlperf.settings import (
    EffectiveSettings,
    LatencyLimits,
    Mode,
    Scenario,
    Seeds,
    TestSettings,
)
from tokenmark.output.records import read_records
from tokenmark.submission.layout import (
    ACC_PATTERNS,
    AVAILABILITIES,
    CSV_COLUMNS,
    DIVISIONS,
    MAX_ACCURACY_LOG_SIZE,
    MEASURE_FILES,
    MEASUREMENTS_FIELDS,
    SYSTEM_MEANINGFUL_FIELDS,
    SYSTEM_REQUIRED_FIELDS,
    SYSTEM_TYPES,
    TEST_DURATION_MS,
    ResultPaths,
    new_layout,
    result_paths,
)

__all__ = ["RECORDS_NAME", "CheckReport", "Finding", "ResultCheck", "Severity", "check_tree"]

#: tokenmark's records of a packaged run, beside LoadGen's logs in ``performance/run_1``.
RECORDS_NAME = "records.jsonl"
#: An open submitter's map of its model folders to benchmarks (``open/<submitter>/``).
MODEL_MAPPING_FILE = "model_mapping.json"
_HASH = re.compile(r"^hash=([\w\d]+)$")
_MAX_TEXT = 64 << 20
# A summary figure printed with 2 decimals or 6 significant digits vs the detail log's.
_AGREE_REL = 1e-5
_AGREE_ABS = 0.0051


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


_LEVEL = {Severity.ERROR: "fail", Severity.WARNING: "warn", Severity.INFO: "info"}
_SEVERITY = {level: sev for sev, level in _LEVEL.items()}


class Finding(_Finding):
    """One problem (or note) in a tree: the foundation's
    :class:`~tokenmark.findings.Finding` made from the checker's terms. ``check`` is its
    rule, ``message`` what was observed, ``path`` the file; ``official`` is False for
    rules the official checker does not apply (tokenmark's stricter ones: the tokenmark
    verdict); the severity is its level (an error fails, a warning warns, info notes)."""

    __slots__ = ()

    def __init__(self, severity: Severity, path: str, check: str, message: str,
                 advice: str = "", official: bool = True) -> None:
        super().__init__(
            rule=check, passed=severity is Severity.INFO, observed=message, required="",
            verdict=VerdictKind.MLPERF if official else VerdictKind.TOKENMARK,
            advice=advice, level=_LEVEL[severity], path=path)

    @property
    def severity(self) -> Severity:
        return _SEVERITY[self.level]

    @property
    def check(self) -> str:
        return self.rule

    @property
    def message(self) -> str:
        return self.observed

    @property
    def official(self) -> bool:
        return self.verdict is VerdictKind.MLPERF

    def line(self) -> str:
        tag = "" if self.official else " [stricter than the official checker]"
        text = f"{self.severity.value}: {self.path}: {self.check}: {self.message}{tag}"
        return text + (f" -> {self.advice}" if self.advice else "")

    def to_json(self) -> dict[str, object]:
        """The checker's form (``tokenmark submission check --json``)."""
        return {"severity": self.severity.value, "path": self.path, "check": self.check,
                "message": self.message, "advice": self.advice, "official": self.official}


@dataclass
class ResultCheck:
    division: str
    submitter: str
    system: str
    benchmark: str
    scenario: str
    path: str
    checked: bool = True  # False: not an LLM benchmark of the round (not judged)
    findings: list[Finding] = field(default_factory=list)
    figure: Figure | None = None
    row: dict[str, str] | None = None
    recomputed: dict[str, Any] = field(default_factory=dict)

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity is Severity.ERROR]

    @property
    def ok(self) -> bool:
        return self.checked and not self.errors

    @property
    def official_ok(self) -> bool:
        """Whether it passes the rules the official checker applies."""
        return self.checked and not any(f.official for f in self.errors)


@dataclass
class CheckReport:
    root: Path
    round: str
    results: list[ResultCheck]
    findings: list[Finding]  # about the tree itself (no result folder)

    @property
    def ok(self) -> bool:
        return (not any(f.severity is Severity.ERROR for f in self.findings)
                and all(r.ok for r in self.results if r.checked)
                and any(r.checked for r in self.results))

    def all_findings(self) -> list[Finding]:
        seen: set[tuple[str, str, str]] = set()
        out = []
        for f in [*self.findings, *(f for r in self.results for f in r.findings)]:
            key = (f.path, f.check, f.message)
            if key not in seen:
                seen.add(key)
                out.append(f)
        return out

    def csv_text(self) -> str:
        """The official checker's summary CSV: a plain header, every value double-quoted."""
        buf = io.StringIO()
        buf.write(",".join(CSV_COLUMNS) + "\n")
        for r in self.results:
            if r.ok and r.row is not None:
                buf.write(",".join(f'"{r.row.get(c, "")}"' for c in CSV_COLUMNS) + "\n")
        return buf.getvalue()

    def write_csv(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.csv_text(), encoding="utf-8")

    def to_json(self) -> dict[str, Any]:
        return {
            "root": str(self.root), "round": self.round, "ok": self.ok,
            "results": [{"path": r.path, "benchmark": r.benchmark, "scenario": r.scenario,
                         "checked": r.checked, "ok": r.ok, "official_ok": r.official_ok,
                         "figure": None if r.figure is None else
                         {"value": r.figure.value, "unit": r.figure.unit,
                          "metric": r.figure.metric},
                         "recomputed": r.recomputed,
                         "findings": [f.to_json() for f in r.findings]} for r in self.results],
            "findings": [f.to_json() for f in self.findings],
        }


# -- small readers that never raise ------------------------------------------------------


class _Ctx:
    """The tree being checked: paths relative to the root, findings to a list."""

    def __init__(self, root: Path, preset: RoundPreset) -> None:
        self.root = root
        self.preset = preset
        self.real = root.resolve()

    def outside(self, p: Path) -> bool:
        """Whether ``p`` (through any symbolic link on its way) lands outside the tree."""
        return not p.resolve().is_relative_to(self.real)

    def is_file(self, p: Path) -> bool:
        """A file in the tree (a link out of it is not followed)."""
        return not self.outside(p) and p.is_file()

    def dirs(self, p: Path) -> list[str]:
        """The folders in ``p`` (a link out of the tree is not followed)."""
        return [name for name in _dirs(p) if not self.outside(p / name)]

    def rel(self, p: Path) -> str:
        try:
            return str(p.relative_to(self.root))
        except ValueError:
            return str(p)

    def text(self, p: Path, out: list[Finding], check: str, advice: str) -> str | None:
        if p.is_symlink() and self.outside(p):
            out.append(Finding(Severity.ERROR, self.rel(p), check,
                               "is a symbolic link out of the submission tree (not read)",
                               "copy the file itself into the tree"))
            return None
        if not self.is_file(p):
            out.append(Finding(Severity.ERROR, self.rel(p), check, "is missing", advice))
            return None
        try:
            if p.stat().st_size > _MAX_TEXT:
                out.append(Finding(Severity.ERROR, self.rel(p), check,
                                   f"is larger than {_MAX_TEXT >> 20} MiB", advice))
                return None
            return p.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            out.append(Finding(Severity.ERROR, self.rel(p), check,
                               f"cannot be read as UTF-8 text ({exc})", advice))
            return None

    def json_obj(self, p: Path, out: list[Finding], check: str, advice: str
                 ) -> dict[str, Any] | None:
        text = self.text(p, out, check, advice)
        if text is None:
            return None
        try:
            obj = json_loads(text)
        except ValueError as exc:  # not JSON, or nested too deep
            out.append(Finding(Severity.ERROR, self.rel(p), check,
                               f"is not valid JSON ({exc})", advice))
            return None
        if not isinstance(obj, dict):
            out.append(Finding(Severity.ERROR, self.rel(p), check, "is not a JSON object",
                               advice))
            return None
        return obj


def _dirs(p: Path) -> list[str]:
    try:
        return sorted(c.name for c in p.iterdir() if c.is_dir() and not c.name.startswith("."))
    except OSError:
        return []


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    f = float(v)
    return f if math.isfinite(f) else None


def _agree(a: float, b: float, rel: float = _AGREE_REL, absolute: float = _AGREE_ABS) -> bool:
    return abs(a - b) <= max(rel * abs(b), absolute)


# -- the system description ----------------------------------------------------------------


def _system_findings(ctx: _Ctx, path: Path, sysj: dict[str, Any], division: str,
                     submitter: str) -> list[Finding]:
    rel = ctx.rel(path)
    out: list[Finding] = []
    fix = f"edit {rel}"
    missing = [k for k in SYSTEM_REQUIRED_FIELDS if k not in sysj]
    if missing:
        out.append(Finding(Severity.ERROR, rel, "system description",
                           f"lacks required field(s): {', '.join(missing)}",
                           "add them (an empty string is allowed only for the notes and "
                           "other non-meaningful fields)"))
    empty = [k for k in SYSTEM_MEANINGFUL_FIELDS if k in sysj and not sysj[k]]
    if empty:
        out.append(Finding(Severity.ERROR, rel, "system description",
                           f"field(s) need a meaningful value but are empty: {', '.join(empty)}",
                           fix))
    status = str(sysj.get("status", "")).lower()
    if status not in AVAILABILITIES:
        out.append(Finding(Severity.ERROR, rel, "system description",
                           f"status {sysj.get('status')!r} is not one of "
                           f"{', '.join(AVAILABILITIES)}", fix))
    if sysj.get("system_type") not in SYSTEM_TYPES:
        out.append(Finding(Severity.ERROR, rel, "system description",
                           f"system_type {sysj.get('system_type')!r} is not one of "
                           f"{', '.join(SYSTEM_TYPES)}", fix))
    if str(sysj.get("submitter", "")).lower() != submitter.lower():
        out.append(Finding(Severity.ERROR, rel, "system description",
                           f"submitter {sysj.get('submitter')!r} differs from the folder "
                           f"{submitter!r}", fix))
    if str(sysj.get("division", "")).lower() != division.lower():
        out.append(Finding(Severity.ERROR, rel, "system description",
                           f"division {sysj.get('division')!r} differs from the folder "
                           f"{division!r}", fix))
    net = str(sysj.get("is_network", "false")).lower() == "true"
    if division in ("closed", "network") and net != (division == "network"):
        out.append(Finding(Severity.ERROR, rel, "system description",
                           f"is_network={net} does not fit the {division} division", fix))
    for k in ("number_of_nodes", "accelerators_per_node"):
        if k in sysj and not str(sysj[k]).strip().isdigit():
            out.append(Finding(Severity.ERROR, rel, "system description",
                               f"{k} {sysj[k]!r} is not a whole number (the summary CSV "
                               "multiplies it)", fix, official=False))
    return out


# -- the walk --------------------------------------------------------------------------------


def check_tree(root: Path, round_name: str, *, submitter: str | None = None) -> CheckReport:
    """Check the submission tree at ``root`` (it holds ``closed/``, ``open/`` or
    ``network/``) against round ``round_name``'s rules. Raises only for a bad round name or
    a root that is not a folder (:class:`~tokenmark.errors.BadInputError`)."""
    try:
        preset = load_round(round_name)
    except ConfigError:
        raise
    if not root.is_dir():
        raise BadInputError(f"{root}: not a folder; give the folder that holds closed/, "
                            "open/ or network/")
    ctx = _Ctx(root, preset)
    findings: list[Finding] = _links_out(ctx)
    results: list[ResultCheck] = []
    divisions = [d for d in ctx.dirs(root) if d in DIVISIONS]
    if not divisions:
        findings.append(Finding(Severity.ERROR, ".", "structure",
                                "holds no closed/, open/ or network/ folder",
                                "give the submission's root folder (the one 'submission "
                                "package' wrote)"))
    for division in divisions:
        for sub in ctx.dirs(root / division):
            if submitter is not None and sub != submitter:
                continue
            _check_submitter(ctx, division, sub, results, findings)
    return CheckReport(root, preset.round, results, findings)


def _links_out(ctx: _Ctx) -> list[Finding]:
    """An error for each symbolic link that leaves the tree (or leads nowhere), naming
    the link; links are not followed, what they point to is not read."""
    found = []
    for top, dirs, files in os.walk(ctx.root):  # does not descend into linked folders
        for name in sorted([*dirs, *files]):
            p = Path(top) / name
            if p.is_symlink() and (ctx.outside(p) or not p.exists()):
                found.append(Finding(
                    Severity.ERROR, ctx.rel(p), "structure",
                    f"is a symbolic link to {os.readlink(p)!r}, outside the submission tree",
                    "copy what it points to into the tree; links out of it are not read"))
    return found


def _check_submitter(ctx: _Ctx, division: str, sub: str, results: list[ResultCheck],
                     findings: list[Finding]) -> None:
    base = ctx.root / division / sub
    res_dir = base / "results"
    if not res_dir.is_dir():
        findings.append(Finding(Severity.ERROR, ctx.rel(res_dir), "structure", "is missing",
                                "put each result under results/<system>/<benchmark>/<scenario>"))
        return
    src = base / ("src" if new_layout(ctx.preset.round) else "code")
    src_missing = not src.is_dir()
    mapping = _model_mapping(ctx, base, division, findings)
    for system in ctx.dirs(res_dir):
        sys_path = base / "systems" / f"{system}.json"
        sys_findings: list[Finding] = []
        sysj = ctx.json_obj(sys_path, sys_findings, "system description",
                            f"write systems/{system}.json (the system description JSON)")
        if sysj is not None:
            sys_findings += _system_findings(ctx, sys_path, sysj, division, sub)
        if src_missing:
            sys_findings.append(Finding(Severity.ERROR, ctx.rel(src), "structure",
                                        "is missing (the harness code the results ran)",
                                        f"add {src.name}/ with the code or a pointer to it"))
        for bench_dir in ctx.dirs(res_dir / system):
            _check_benchmark(ctx, division, sub, system, bench_dir, sysj, sys_findings,
                             results, mapping)


def _model_mapping(ctx: _Ctx, base: Path, division: str, findings: list[Finding]
                   ) -> dict[str, str]:
    """An open submitter's ``model_mapping.json`` (its own model folder names -> the
    benchmark each stands in for), read as the official checker reads it: in the open
    division only, consulted after the round's own names."""
    path = base / MODEL_MAPPING_FILE
    if division != "open" or not path.is_file():
        return {}
    obj = ctx.json_obj(path, findings, "model mapping",
                       'write {"<model folder>": "<benchmark>", ...}')
    if obj is None:
        return {}
    bad = [k for k, v in obj.items() if not isinstance(v, str)]
    if bad:
        findings.append(Finding(Severity.ERROR, ctx.rel(path), "model mapping",
                                f"maps {', '.join(map(repr, bad[:3]))} to a non-string",
                                "map each model folder name to a benchmark name"))
    return {k: v for k, v in obj.items() if isinstance(v, str)}


def _category(sysj: Mapping[str, Any] | None) -> str:
    st = str((sysj or {}).get("system_type", "datacenter")).lower()
    return "edge" if st == "edge" else "datacenter"


def _check_benchmark(ctx: _Ctx, division: str, sub: str, system: str, bench_dir: str,
                     sysj: dict[str, Any] | None, sys_findings: list[Finding],
                     results: list[ResultCheck], mapping: Mapping[str, str]) -> None:
    folder = ctx.root / division / sub / "results" / system / bench_dir
    scen_dirs = ctx.dirs(folder)
    name = canonical_benchmark(bench_dir, ctx.preset.round)
    bench: BenchmarkPreset | None = ctx.preset.benchmarks.get(name)
    if bench is None and bench_dir in mapping:
        name = canonical_benchmark(mapping[bench_dir], ctx.preset.round)
        bench = ctx.preset.benchmarks.get(name)
    scen_findings: list[Finding] = []
    if bench is not None and division in ("closed", "network"):
        cat = _category(sysj)
        if cat in bench.categories:
            cs = bench.categories[cat]
            have = [Scenario.parse(s) for s in scen_dirs if canonical_scenario(s)]
            missing = cs.missing(have)
            if missing:
                scen_findings.append(Finding(
                    Severity.ERROR, ctx.rel(folder), "scenarios",
                    f"lacks required scenario(s) for a {cat} system: {', '.join(missing)}",
                    "add the missing runs, or submit the benchmark in the open division"))
            unknown = [s for s in scen_dirs
                       if canonical_scenario(s) is None
                       or Scenario.parse(s) not in cs.allowed]
            if unknown:
                scen_findings.append(Finding(
                    Severity.ERROR, ctx.rel(folder), "scenarios",
                    f"has scenario folder(s) {bench.name} does not have in round "
                    f"{ctx.preset.round} for a {cat} system: {', '.join(unknown)}",
                    f"allowed: {', '.join(s.value for s in cs.allowed)}"))
        else:
            scen_findings.append(Finding(
                Severity.ERROR, ctx.rel(folder), "scenarios",
                f"{bench.name} is not a {cat} benchmark in round {ctx.preset.round}",
                f"its categories: {', '.join(bench.categories)}"))
    for scen in scen_dirs:
        rc = ResultCheck(division, sub, system, bench_dir, scen,
                         ctx.rel(folder / scen))
        results.append(rc)
        if bench is None:
            rc.checked = False
            why = ctx.preset.excluded.get(name, "not a benchmark of this round")
            rc.findings.append(Finding(Severity.INFO, rc.path, "benchmark",
                                       f"{bench_dir!r} is not checked by tokenmark ({why})"))
            continue
        rc.findings += sys_findings
        rc.findings += scen_findings
        paths = result_paths(ctx.root, ctx.preset.round, division, sub, system, bench_dir, scen)
        _check_result(ctx, rc, bench, paths, sysj)


# -- one result ------------------------------------------------------------------------------


def _parse_detail(ctx: _Ctx, p: Path, out: list[Finding], check: str) -> DetailLog | None:
    text = ctx.text(p, out, check, "copy the mlperf_log_detail.txt LoadGen wrote")
    if text is None:
        return None
    try:
        return parse_detail(text, ctx.rel(p))
    except MLLogError as exc:
        out.append(Finding(Severity.ERROR, ctx.rel(p), check, f"cannot be parsed: {exc}",
                           "copy the file LoadGen wrote, unedited"))
        return None


def _parse_summary(ctx: _Ctx, p: Path, out: list[Finding], check: str) -> SummaryLog | None:
    text = ctx.text(p, out, check, "copy the mlperf_log_summary.txt LoadGen wrote")
    if text is None:
        return None
    try:
        return parse_summary(text, ctx.rel(p))
    except MLLogError as exc:
        out.append(Finding(Severity.ERROR, ctx.rel(p), check, f"cannot be parsed: {exc}",
                           "copy the file LoadGen wrote, unedited"))
        return None


def _check_result(ctx: _Ctx, rc: ResultCheck, bench: BenchmarkPreset, paths: ResultPaths,
                  sysj: dict[str, Any] | None) -> None:
    out = rc.findings
    folder_sc = canonical_scenario(rc.scenario)
    if folder_sc is None:
        out.append(Finding(Severity.ERROR, rc.path, "scenarios",
                           f"{rc.scenario!r} is not a scenario folder name",
                           "use Offline, Server, Interactive, SingleStream or MultiStream"))
        return
    scenario = Scenario.parse(folder_sc)
    detail = _parse_detail(ctx, paths.perf_detail, out, "performance log")
    summary = _parse_summary(ctx, paths.perf_summary, out, "performance log")
    accuracy = _check_accuracy(ctx, rc, bench, scenario, paths)
    measurements = _check_measurements(ctx, rc, paths)
    _check_compliance(ctx, rc, bench, scenario, paths)
    if detail is None:
        return
    if not detail.has_results:
        out.append(Finding(Severity.ERROR, ctx.rel(paths.perf_detail), "performance log",
                           "holds no results (an accuracy run, or a run that did not end)",
                           "put the performance run's logs in performance/run_1"))
        return
    _check_performance(ctx, rc, bench, scenario, detail, summary, paths, sysj)
    if rc.errors or rc.figure is None or sysj is None:
        return
    rc.row = _csv_row(ctx, rc, bench, detail, paths, sysj, accuracy, measurements)


def _check_performance(ctx: _Ctx, rc: ResultCheck, bench: BenchmarkPreset, scenario: Scenario,
                       d: DetailLog, s: SummaryLog | None, paths: ResultPaths,
                       sysj: dict[str, Any] | None) -> None:
    out = rc.findings
    rel = ctx.rel(paths.perf_detail)
    rnd = ctx.preset
    ran = str(d.get("effective_scenario", ""))
    if d.num_errors:
        msgs = "; ".join(str(e.value) for e in d.errors[:3])
        out.append(Finding(Severity.ERROR, rel, "LoadGen errors",
                           f"LoadGen logged {d.num_errors} error(s): {msgs}",
                           "fix what the errors name and run again"))
    seeds = rnd.seeds
    for key, want in (("effective_qsl_rng_seed", seeds.qsl),
                      ("effective_sample_index_rng_seed", seeds.sample_index),
                      ("effective_schedule_rng_seed", seeds.schedule)):
        got = d.get(key)
        if got != want:
            out.append(Finding(Severity.ERROR, rel, "seeds",
                               f"{key} is {got}, not round {rnd.round}'s {want}",
                               f"run with LoadGen's mlperf.conf of round {rnd.round} (tokenmark "
                               f"sets the round's seeds with --round {rnd.round})"))
    # the scenario LoadGen ran
    if scenario is Scenario.INTERACTIVE:
        expected_ran = "Server"
    else:
        expected_ran = scenario.value
    inferred = ran != expected_ran
    if inferred:
        edge = "edge" in str((sysj or {}).get("system_type", "")).lower()
        allowed = {("SingleStream", "MultiStream"), ("MultiStream", "Offline"),
                   ("SingleStream", "Offline")}
        if not edge or (ran, scenario.value) not in allowed:
            out.append(Finding(Severity.ERROR, rel, "scenario",
                               f"LoadGen ran {ran or '(nothing)'} but the folder is "
                               f"{scenario.value}; that result cannot be inferred"
                               + ("" if edge else " (only edge systems infer results)"),
                               "put the run in the folder of the scenario it ran"))
    # min duration (the setting, as the checker reads it) and achieved
    min_dur = _num(d.get("effective_min_duration_ms"))
    if min_dur is None or min_dur < TEST_DURATION_MS:
        out.append(Finding(Severity.ERROR, rel, "min duration",
                           f"effective_min_duration_ms is {d.get('effective_min_duration_ms')}, "
                           f"below {TEST_DURATION_MS}",
                           "run with the round's min_duration (600000 ms): drop any "
                           "min_duration override (--profile demo sets one)"))
    for key, label in (("result_min_duration_met", "min duration"),
                       ("result_min_queries_met", "min queries")):
        if d.get(key) is False:
            out.append(Finding(Severity.ERROR, rel, label, f"{key} is false",
                               "run longer (LoadGen stopped before the minimum)",
                               official=False))
    psc = _num(d.get("effective_performance_sample_count"))
    if psc is None or psc < bench.performance_sample_count:
        out.append(Finding(Severity.ERROR, rel, "performance sample count",
                           f"effective_performance_sample_count is "
                           f"{d.get('effective_performance_sample_count')}, below "
                           f"{bench.performance_sample_count}",
                           f"use the whole {bench.dataset} set ({bench.dataset_size} samples); "
                           "drop performance_sample_count_override"))
    if ran == "Offline" and rc.division == "closed":
        spq = _num(d.get("effective_samples_per_query"))
        if spq is None or spq < bench.dataset_size:
            out.append(Finding(Severity.ERROR, rel, "min queries",
                               "Offline samples per query is "
                               f"{d.get('effective_samples_per_query')}, below the dataset "
                               f"size {bench.dataset_size}",
                               "raise the Offline expected QPS (target_qps) so the query "
                               "covers the dataset"))
    if ran in ("Server", "SingleStream", "MultiStream") and d.get("early_stopping_met") is not True:
        out.append(Finding(Severity.ERROR, rel, "early stopping",
                           f"early stopping was not met: {d.get('early_stopping_result', '')}"
                           .strip(), "run more queries (longer, or a higher rate)"))
    if bench.use_token_latencies and d.get("requested_use_token_latencies") is not True:
        out.append(Finding(Severity.ERROR, rel, "token latencies",
                           "requested_use_token_latencies is not true",
                           "LLM runs must report TTFT/TPOT: use the benchmark's mlperf.conf key"))
    # LoadGen's own verdict (the official checker's first gap)
    validity = d.get("result_validity")
    if validity != "VALID":
        reason = d.get("result_invalid_reason") or ""
        out.append(Finding(Severity.ERROR, rel, "result validity",
                           f"LoadGen marked the run {validity or '(no verdict)'}"
                           + (f": {reason}" if reason else ""),
                           "the run does not meet LoadGen's own criteria; fix them and "
                           "run again", official=False))
    _check_limits(ctx, rc, bench, scenario, d, rel)
    _check_consistency(ctx, rc, d, s, paths)
    fig = inferred_figure(_first_values(d), rnd.round, bench.name, scenario.value, ran)
    if isinstance(fig, str):
        out.append(Finding(Severity.ERROR, rel, "result", fig,
                           "copy the complete performance log"))
    else:
        rc.figure = fig
    _check_records(ctx, rc, bench, scenario, d, paths)


def _first_values(d: DetailLog) -> dict[str, Any]:
    return {k: d.get(k) for k in d.keys()}


def _check_limits(ctx: _Ctx, rc: ResultCheck, bench: BenchmarkPreset, scenario: Scenario,
                  d: DetailLog, rel: str) -> None:
    """TTFT/TPOT (or end-to-end) p99 under the folder scenario's limits, strictly."""
    out = rc.findings
    if scenario not in bench.scenarios or scenario.loadgen is not Scenario.SERVER:
        return
    lim = bench.scenarios[scenario].limits
    server = bench.scenarios.get(Scenario.SERVER)
    stricter = scenario is Scenario.INTERACTIVE
    if bench.use_token_latencies and lim.ttft_ns is not None and lim.tpot_ns is not None:
        ttft = _num(d.get("result_first_token_99.00_percentile_latency_ns"))
        tpot = _num(d.get("result_time_per_output_token_99.00_percentile_ns"))
        if ttft is None or tpot is None:
            out.append(Finding(Severity.ERROR, rel, "latency limits",
                               "TTFT or TPOT p99 is missing from the log",
                               "run with token latencies (use_token_latencies = 1)"))
            return
        for name, value, limit in (("TTFT", ttft, lim.ttft_ns), ("TPOT", tpot, lim.tpot_ns)):
            if value < limit:
                continue
            # Would the official checker (Server limits for an Interactive folder) pass it?
            official = True
            if stricter and server is not None:
                slim = server.limits.ttft_ns if name == "TTFT" else server.limits.tpot_ns
                official = slim is not None and value >= slim
            out.append(Finding(
                Severity.ERROR, rel, "latency limits",
                f"{name} p99 {value / 1e6:.3f} ms is not under the {scenario.value} limit "
                f"{limit / 1e6:g} ms", "lower the rate (target_qps) until the limit is met",
                official=official))
    elif lim.e2e_ns is not None:
        p99 = _num(d.get("result_99.00_percentile_latency_ns"))
        if p99 is None or p99 > lim.e2e_ns:
            out.append(Finding(Severity.ERROR, rel, "latency limits",
                               f"p99 latency {p99} ns exceeds the {scenario.value} limit "
                               f"{lim.e2e_ns} ns", "lower the rate (target_qps)"))


_SUMMARY_FIGURES = (
    ("completed_tokens_per_second", "result_completed_tokens_per_second"),
    ("completed_samples_per_second", "result_completed_samples_per_sec"),
    ("tokens_per_second", "result_tokens_per_second"),
    ("samples_per_second", "result_samples_per_second"),
)


def _check_consistency(ctx: _Ctx, rc: ResultCheck, d: DetailLog, s: SummaryLog | None,
                       paths: ResultPaths) -> None:
    """The detail log against itself and against the summary: edits show up here."""
    out = rc.findings
    rel = ctx.rel(paths.perf_detail)
    ran = str(d.get("effective_scenario", ""))
    crit = {"min duration": d.get("result_min_duration_met"),
            "min queries": d.get("result_min_queries_met")}
    if ran in ("Server", "SingleStream", "MultiStream"):
        crit["early stopping"] = d.get("early_stopping_met")
    if ran == "Server":
        crit["performance constraints"] = d.get("result_perf_constraints_met")
        ttft = _num(d.get("result_first_token_99.00_percentile_latency_ns"))
        tpot = _num(d.get("result_time_per_output_token_99.00_percentile_ns"))
        lt = _num(d.get("requested_server_ttft_latency"))
        lp = _num(d.get("requested_server_tpot_latency"))
        if (d.get("requested_use_token_latencies") is True and None not in (ttft, tpot, lt, lp)
                and isinstance(d.get("result_perf_constraints_met"), bool)):
            assert ttft is not None and tpot is not None and lt is not None and lp is not None
            met = ttft <= lt and tpot <= lp
            if met != d.get("result_perf_constraints_met"):
                out.append(Finding(
                    Severity.ERROR, rel, "log consistency",
                    f"result_perf_constraints_met is {d.get('result_perf_constraints_met')} "
                    f"but its own TTFT/TPOT p99 ({ttft:.0f}/{tpot:.0f} ns) against the limits "
                    f"({lt:.0f}/{lp:.0f} ns) say {met}",
                    "the log was edited; use the file LoadGen wrote", official=False))
    if all(isinstance(v, bool) for v in crit.values()) and "result_validity" in d:
        expect = "VALID" if all(crit.values()) else "INVALID"
        if d.get("result_validity") != expect:
            bad = [k for k, v in crit.items() if not v]
            out.append(Finding(
                Severity.ERROR, rel, "log consistency",
                f"result_validity is {d.get('result_validity')} but its criteria say {expect}"
                + (f" (not met: {', '.join(bad)})" if bad else ""),
                "the log was edited; use the file LoadGen wrote", official=False))
    if s is None:
        return
    srel = ctx.rel(paths.perf_summary)
    if s.result_validity is not None and s.result_validity != d.get("result_validity"):
        out.append(Finding(Severity.ERROR, srel, "log consistency",
                           f"the summary says {s.result_validity}, the detail log "
                           f"{d.get('result_validity')}",
                           "copy both files of the same run, unedited", official=False))
    for head, key in _SUMMARY_FIGURES:
        a, b = s.headline.get(head), _num(d.get(key))
        if a is not None and b is not None and not _agree(a, b):
            out.append(Finding(Severity.ERROR, srel, "log consistency",
                               f"the summary's {head.replace('_', ' ')} {a:g} differs from the "
                               f"detail log's {key} {b:g}",
                               "copy both files of the same run, unedited", official=False))


def _eff_from_detail(d: DetailLog, bench: BenchmarkPreset, scenario: Scenario,
                     dataset_size: int) -> EffectiveSettings:
    """LoadGen's effective settings, as logged, in tokenmark's type."""

    def i(key: str, default: int = 0) -> int:
        v = d.get(key)
        return int(v) if isinstance(v, int | float) and not isinstance(v, bool) else default

    pct = float(d.get("effective_target_latency_percentile") or 0.99)
    limits = LatencyLimits(
        ttft_ns=i("requested_server_ttft_latency") or None,
        tpot_ns=i("requested_server_tpot_latency") or None,
        e2e_ns=(i("effective_target_latency_ns") or None)
        if not bench.use_token_latencies and scenario.loadgen is Scenario.SERVER else None,
        percentile=pct)
    if scenario.loadgen is not Scenario.SERVER:
        limits = LatencyLimits(percentile=pct)
    seeds = Seeds(i("effective_qsl_rng_seed"), i("effective_sample_index_rng_seed"),
                  i("effective_schedule_rng_seed"))
    token = d.get("requested_use_token_latencies") is True
    spq = i("effective_samples_per_query", 1)
    req = TestSettings(round=bench.round, benchmark=bench.name, scenario=scenario, seeds=seeds,
                       target_qps=float(d.get("effective_target_qps") or 1.0),
                       min_duration_ms=i("effective_min_duration_ms"),
                       min_query_count=i("effective_min_query_count"),
                       use_token_latencies=token, limits=limits,
                       target_latency_percentile=pct)
    return EffectiveSettings(
        requested=req, scenario=scenario, mode=Mode.PERFORMANCE, samples_per_query=spq,
        target_qps=req.target_qps, target_duration_ns=i("effective_target_duration_ms") * 10**6,
        min_duration_ns=req.min_duration_ms * 10**6,
        max_duration_ns=i("effective_max_duration_ms") * 10**6,
        min_query_count=req.min_query_count, max_query_count=i("effective_max_query_count"),
        min_sample_count=i("effective_min_sample_count", req.min_query_count * spq),
        performance_sample_count=i("effective_performance_sample_count", dataset_size),
        total_sample_count=dataset_size,
        sample_concatenate_permutation=bool(d.get("effective_sample_concatenate_permutation")),
        use_token_latencies=token, limits=limits, target_latency_percentile=pct,
        max_async_queries=i("effective_max_async_queries"), seeds=seeds, concurrency=0,
        max_concurrency=0, warmup_ns=0, cooldown_ns=0)


def _summary_from_records(path: Path, eff: EffectiveSettings
                          ) -> tuple[Summary, Validity, int, tuple[int, int]]:
    """The records' summary, verdict and count, and (first scheduled, last done) in ns."""
    acc = Accumulator()
    n = 0
    first, last = -1, 0
    for rec in read_records(path):
        acc.add(rec)
        n += 1
        first = rec.scheduled_ns if first < 0 else min(first, rec.scheduled_ns)
        last = max(last, rec.done_ns)
    data = acc.finish(n, interrupted=False, reason="")
    summary = summarize(data, eff)
    verdict = evaluate(summary, eff, ClientStats()).mlperf.validity
    data.itl.close()
    return summary, verdict, n, (max(first, 0), last)


def _loadgen_rate_bounds(ran: str, s: Summary, first_ns: int, last_ns: int
                         ) -> tuple[float, float]:
    """Where LoadGen's token rate of a run must lie, given tokenmark's records of it.

    The records time from tokenmark's ``t0``, taken just before LoadGen starts; LoadGen
    times from its own origin, which lies between ``t0`` and the first query reaching
    tokenmark (Offline: the one query's scheduled time, between ``t0`` and the records'
    scheduled time). So LoadGen's span is at most the records' and at least that less
    the first query's arrival, whatever the machine's load: bounds, not a tolerance.
    """
    ours = s.tokens_per_second or 0.0
    if ran == "Offline":
        return (ours * s.max_latency_ns / last_ns if last_ns > 0 else 0.0), ours
    span = s.final_query_done_ns
    return ours, (ours * span / (span - first_ns) if span > first_ns else math.inf)


def _check_records(ctx: _Ctx, rc: ResultCheck, bench: BenchmarkPreset, scenario: Scenario,
                   d: DetailLog, paths: ResultPaths) -> None:
    """Recompute the log's figures and LoadGen's verdict from tokenmark's records."""
    rec_path = paths.perf_dir / RECORDS_NAME
    if not ctx.is_file(rec_path):
        return
    out = rc.findings
    rel = ctx.rel(rec_path)
    total = int(_num(d.get("qsl_reported_total_count")) or bench.dataset_size)
    try:
        eff = _eff_from_detail(d, bench, scenario, total)
        summary, validity, n, (first_ns, last_ns) = _summary_from_records(rec_path, eff)
    except (BadInputError, ValueError, KeyError, TypeError, OSError) as exc:
        out.append(Finding(Severity.ERROR, rel, "records",
                           f"cannot be read or summarised ({exc})",
                           "package the records.jsonl the run wrote, or leave it out",
                           official=False))
        return
    # Logs tokenmark wrote hold figures computed from these very records (equal to the
    # %g printing). LoadGen's own logs time from its scheduled time, tokenmark's records
    # from the moment LoadGen's IssueQuery reached tokenmark, so LoadGen's latencies are
    # never smaller than the records' (one-sided check: an edit that flatters a latency
    # shows), and its token rate lies within the bounds of _loadgen_rate_bounds (0.1%
    # slack for the µs between tokenmark's record and LoadGen's completion stamp).
    own = d.tokenmark_note is not None
    ran = str(d.get("effective_scenario", ""))
    key = ("result_tokens_per_second" if ran == "Offline"
           else "result_completed_tokens_per_second")
    counts: list[tuple[str, float | None, float | None]] = [
        ("query count", _num(d.get("result_query_count")), float(summary.queries_issued))]
    if bench.use_token_latencies and summary.tokens_per_second is not None:
        counts.append(("tokens/s", _num(d.get(key)), summary.tokens_per_second))
    lats: list[tuple[str, float | None, float | None]] = []
    if ran != "Offline" and bench.use_token_latencies and summary.ttft.count:
        lats.append(("TTFT p99 (ns)",
                     _num(d.get("result_first_token_99.00_percentile_latency_ns")),
                     summary.ttft.percentiles.get(0.99)))
        lats.append(("TPOT p99 (ns)",
                     _num(d.get("result_time_per_output_token_99.00_percentile_ns")),
                     summary.tpot.percentiles.get(0.99)))
    if summary.latency.count:
        lats.append(("latency p99 (ns)", _num(d.get("result_99.00_percentile_latency_ns")),
                     summary.latency.percentiles.get(0.99)))
    rc.recomputed = {"records": n, "mlperf_validity": validity.value}
    advice = ("the log no longer matches the run that made it; package the run again from "
              "its results folder")
    for name, logged, ours in [*counts, *lats]:
        rc.recomputed[name] = ours
        if logged is None or ours is None:
            continue
        theirs = float(ours)
        if name in ("query count",) or own:
            ok = _agree(logged, theirs, 0.0 if name == "query count" else 1e-5, 0.5)
        elif name == "tokens/s":
            lo, hi = _loadgen_rate_bounds(ran, summary, first_ns, last_ns)
            ok = lo * (1 - 1e-3) <= logged <= hi * (1 + 1e-3)
        else:
            ok = logged >= theirs * (1 - 1e-3) - 1e6
        if not ok:
            out.append(Finding(Severity.ERROR, ctx.rel(paths.perf_detail), "records",
                               f"{name} is {logged:g} in the log but {theirs:g} from the "
                               f"run's {n} records", advice, official=False))
    if own and validity.value != d.get("result_validity"):
        out.append(Finding(Severity.ERROR, ctx.rel(paths.perf_detail), "records",
                           f"result_validity is {d.get('result_validity')} in the log but "
                           f"{validity.value} recomputed from the records",
                           "the log no longer matches the run that made it", official=False))


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


# -- the summary CSV row ---------------------------------------------------------------------


def _py_float(v: float) -> str:
    return repr(float(v))


def _csv_row(ctx: _Ctx, rc: ResultCheck, bench: BenchmarkPreset, d: DetailLog,
             paths: ResultPaths, sysj: Mapping[str, Any], accuracy: Mapping[str, str],
             measurements: Mapping[str, Any]) -> dict[str, str]:
    assert rc.figure is not None
    notes = str(sysj.get("hw_notes", "") or "")
    if sysj.get("sw_notes"):
        notes = (notes + ". " if notes else "") + str(sysj.get("sw_notes"))
    try:
        total = int(str(sysj.get("number_of_nodes"))) * int(str(sysj.get("accelerators_per_node")))
        total_s = str(total)
    except ValueError:
        total_s = ""
    acc = json.dumps(dict(accuracy)).replace(",", " ").replace('"', "").replace(
        "{", "").replace("}", "").strip()
    ran = str(d.get("effective_scenario", ""))
    return {
        "Organization": rc.submitter,
        "Availability": str(sysj.get("status", "")),
        "Division": rc.division,
        "SystemType": str(sysj.get("system_type", "")),
        "SystemName": str(sysj.get("system_name", "")),
        "Platform": rc.system,
        "Model": rc.benchmark,
        "MlperfModel": bench.name,
        "Scenario": rc.scenario,
        "Result": _py_float(rc.figure.value),
        "Accuracy": acc,
        "number_of_nodes": str(sysj.get("number_of_nodes", "")),
        "host_processor_model_name": str(sysj.get("host_processor_model_name", "")),
        "host_processors_per_node": str(sysj.get("host_processors_per_node", "")),
        "host_processor_core_count": str(sysj.get("host_processor_core_count", "")),
        "accelerator_model_name": str(sysj.get("accelerator_model_name", "")),
        "accelerators_per_node": str(sysj.get("accelerators_per_node", "")),
        "total_accelerators": total_s,
        "Location": str(paths.perf_dir),
        "framework": str(sysj.get("framework", "")),
        "operating_system": str(sysj.get("operating_system", "")),
        "notes": notes,
        "compliance": rc.division,
        "errors": "0",
        "version": ctx.preset.round,
        # the checker's test, as it runs: the folder name against the scenario LoadGen
        # ran (its ("server", "interactive") exception compares lower case with the
        # logged "Server" and never applies, so Interactive and lower-case folders say 1)
        "inferred": "1" if ran and rc.scenario != ran else "0",
        "has_power": str((paths.perf_dir.parent / "power").is_dir()),
        "Units": rc.figure.unit,
        "weight_data_types": str(measurements.get("weight_data_types", "")),
        "design_power_watts": "",
        "PrivateID": "",
    }
