"""What the checker reports (a finding with its severity and file, one result's checks, the
whole tree's report), the small readers that never raise, and the system description."""

from __future__ import annotations

import io
import math
import re
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from tokenmark.findings import Finding as _Finding
from tokenmark.findings import VerdictKind
from tokenmark.importer.checker import Figure
from tokenmark.inputs import json_loads
from tokenmark.mlperf.mllog import DetailLog, MLLogError, SummaryLog, parse_detail, parse_summary
from tokenmark.mlperf.presets import RoundPreset
from tokenmark.submission.layout import (
    AVAILABILITIES,
    CSV_COLUMNS,
    SYSTEM_MEANINGFUL_FIELDS,
    SYSTEM_REQUIRED_FIELDS,
    SYSTEM_TYPES,
)

__all__ = [
    "RECORDS_NAME",
    "CheckReport",
    "Finding",
    "ResultCheck",
    "Severity",
]

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

