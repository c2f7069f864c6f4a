"""The walk of a submission tree, as the official ``submission_checker`` walks it: divisions,
submitters, systems, benchmarks, scenarios; the required scenarios of each benchmark."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tokenmark.errors import BadInputError, ConfigError
from tokenmark.importer.checker import canonical_scenario
from tokenmark.importer.published import canonical_benchmark
from tokenmark.mlperf.presets import BenchmarkPreset, load_round
from tokenmark.mlperf.settings import Scenario
from tokenmark.submission.check.report import (
    MODEL_MAPPING_FILE,
    CheckReport,
    Finding,
    ResultCheck,
    Severity,
    _Ctx,
    _system_findings,
)
from tokenmark.submission.check.result import _check_result
from tokenmark.submission.layout import DIVISIONS, new_layout, result_paths

__all__ = [
    "check_tree",
]

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


