"""Reading a published MLPerf submission tree into result rows.

Layouts (digest §7), all read by the same code:

* v4.1-v5.1: ``<division>/<submitter>/results/<system>/<benchmark>/<scenario>/``
  with ``performance/run_1/mlperf_log_{summary,detail}.txt`` and
  ``accuracy/accuracy.txt``; ``measurements/<system>/<benchmark>/<scenario>/*.json``
  beside ``results/``.
* v6.0-v6.1: the same folder with ``measurements.json`` inside it.
* v6.1 "endpoints": ``performance/result_summary.json`` instead of the LoadGen logs
  (fields mapped as the checker's ``ENDPOINTS_MAPPINGS``: ``tps`` tokens/s, ``qps``
  samples/s, ``latency.early_stopping_percentiles.90.0``/``latency.avg`` ns).
* ``<division>/<submitter>/systems/<system>.json``: the system description, required,
  with the fields the database needs (:data:`REQUIRED_SYSTEM_FIELDS`).
* ``<division>/<submitter>/model_mapping.json`` (open division): folder -> benchmark.

Power is read where published (``performance/power/`` present: ``spl.txt`` over the
log's power window). Every problem becomes a :class:`FileError` naming the file; a
result with any error yields no row (nothing half-read is returned).
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Final

from tokenmark.errors import ConfigError
from tokenmark.importer.checker import (
    Figure,
    canonical_benchmark,
    canonical_scenario,
    inferred_figure,
    known_table_unit,
    power_figure,
    result_scenario,
    unit_for,
)
from tokenmark.importer.tree import FileError, Rejected, Tree
from tokenmark.inputs import InputLimitError, json_loads
from tokenmark.mlperf.mllog import MLLogError, parse_detail, parse_summary
from tokenmark.mlperf.presets import load_round
from tokenmark.resultrows import Label, ResultRow, SystemRecord, accelerator_counts

__all__ = ["DIVISIONS", "REQUIRED_SYSTEM_FIELDS", "SubmitterReader", "canonical_benchmark"]

DIVISIONS: Final = ("closed", "open", "network")
REQUIRED_SYSTEM_FIELDS: Final = (
    "division", "submitter", "status", "system_name", "system_type", "number_of_nodes",
    "accelerators_per_node", "accelerator_model_name",
)
AVAILABILITIES: Final = ("available", "preview", "rdi")
#: Reads a file's text and adds it to the result's content hash.
_Take = Callable[[Path, str], str]
_VERSION = re.compile(r"^\s*(\d+)\.(\d+)")
_ACC_PAIR = re.compile(r"([A-Za-z_][\w\-]*)\s*[=:]\s*'?([-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)")
# How far the summary's printing of a figure may be from the detail log's: the detail
# log has 6 significant digits (%g), the summary 6 significant digits or 2 decimals.
_AGREE_REL: Final = 1e-5
_AGREE_ABS: Final = 0.0051


def _int_or_none(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, str) and v.strip().isdigit():
        return int(v.strip())
    return None


def _accuracy(text: str) -> dict[str, float]:
    """The figures of the last result line of ``accuracy.txt`` (a Python dict literal, or
    ``key=value`` pairs); strings holding numbers count, other values are dropped."""
    for line in reversed(text.splitlines()):
        s = line.strip()
        if not s or s.startswith("hash="):
            continue
        if s.startswith("{") and s.endswith("}"):
            try:
                obj = ast.literal_eval(s)
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                obj = None
            if isinstance(obj, dict):
                out: dict[str, float] = {}
                for k, v in obj.items():
                    try:
                        f = float(v)
                    except (TypeError, ValueError):
                        continue
                    if math.isfinite(f):
                        out[str(k)] = f
                return out
        pairs = {k: float(v) for k, v in _ACC_PAIR.findall(s)}
        if pairs:
            return pairs
    return {}


@dataclass
class SubmitterReader:
    """Reads ``<division>/<submitter>/``: systems (cached) and result folders."""

    tree: Tree
    path: Path
    division: str
    round: str | None
    label: Label
    systems: dict[str, SystemRecord | FileError] = field(default_factory=dict)
    mapping: dict[str, str] = field(default_factory=dict)

    @property
    def submitter(self) -> str:
        return self.path.name

    def load_mapping(self) -> FileError | None:
        p = self.path / "model_mapping.json"
        if not self.tree.exists(p):
            return None
        try:
            obj = json_loads(self.tree.read_text(p))
        except Rejected as r:
            return r.error
        except InputLimitError as exc:
            return FileError(self.tree.rel(p), f"is {exc}")
        except json.JSONDecodeError as exc:
            return FileError(self.tree.rel(p), f"is not valid JSON ({exc.msg}, line {exc.lineno})")
        if not isinstance(obj, dict) or not all(isinstance(v, str) for v in obj.values()):
            return FileError(self.tree.rel(p), "must map folder names to benchmark names")
        self.mapping = {str(k): v for k, v in obj.items()}
        return None

    def result_folders(self, errors: list[FileError]) -> list[Path]:
        """Every ``results/<system>/<benchmark>/<scenario>`` folder (sorted); folders that
        cannot be listed or leave the tree are appended to ``errors``."""
        results = self.path / "results"
        if not results.is_dir():
            return []
        out: list[Path] = []
        try:
            for system in self.tree.subdirs(results, errors):
                for bench in self.tree.subdirs(system, errors):
                    out.extend(self.tree.subdirs(bench, errors))
        except Rejected as r:
            errors.append(r.error)
        return out

    def system(self, system_id: str, round_name: str) -> SystemRecord:
        cached = self.systems.get(system_id)
        if cached is None:
            try:
                cached = self._read_system(system_id, round_name)
            except Rejected as r:
                cached = r.error
            self.systems[system_id] = cached
        if isinstance(cached, FileError):
            raise Rejected(cached.path, cached.reason)
        return cached

    def _read_system(self, system_id: str, round_name: str) -> SystemRecord:
        p = self.path / "systems" / f"{system_id}.json"
        rel = self.tree.rel(p)
        if not self.tree.exists(p):
            raise Rejected(rel, f"missing: the system description of results/{system_id}")
        raw = self.tree.read_bytes(p)
        desc = self.tree.read_json_object(p)
        missing = [k for k in REQUIRED_SYSTEM_FIELDS if desc.get(k) in (None, "")
                   and not (k == "accelerator_model_name" and k in desc)]
        if missing:
            raise Rejected(rel, f"lacks required fields: {', '.join(missing)}")
        status = str(desc["status"]).strip().lower()
        if status not in AVAILABILITIES:
            raise Rejected(rel, f"status {desc['status']!r} is not one of "
                           f"{', '.join(AVAILABILITIES)}")
        if _int_or_none(desc["number_of_nodes"]) is None:
            raise Rejected(rel, f"number_of_nodes {desc['number_of_nodes']!r} is not a count")
        return SystemRecord(round_name, self.division, self.submitter, system_id,
                            hashlib.sha256(raw).hexdigest(), desc, rel)

    def read_result(self, folder: Path) -> ResultRow:
        """One result folder as a row; :class:`Rejected` on the first problem."""
        tree = self.tree
        scen_name, bench_folder = folder.name, folder.parent.name
        system_id = folder.parent.parent.name
        scenario = canonical_scenario(scen_name)
        if scenario is None:
            raise Rejected(tree.rel(folder), f"unknown scenario folder {scen_name!r}: expected "
                           "Offline, Server, Interactive, SingleStream or MultiStream")
        hasher = hashlib.sha256()

        def take(p: Path, text: str) -> str:
            # paths relative to the submitter, so the hash does not depend on the import
            # root (a checkout and an archive of it hash alike)
            rel = p.relative_to(self.path).as_posix() if p.is_relative_to(self.path) else p.name
            hasher.update(rel.encode() + b"\0" + text.encode() + b"\0")
            return text

        perf = folder / "performance"
        detail_path = perf / "run_1" / "mlperf_log_detail.txt"
        endpoints_path = perf / "result_summary.json"
        if tree.exists(detail_path):
            detail_text = take(detail_path, tree.read_text(detail_path))
            try:
                detail = parse_detail(detail_text, tree.rel(detail_path)).as_dict()
            except MLLogError as exc:
                raise Rejected(tree.rel(detail_path), _log_problem(exc)) from None
            first = {k: v[0] for k, v in detail.items()}
            round_name = self._round_of(first, detail_path)
            figure, summary_value, validity = self._loadgen_figure(
                folder, first, round_name, bench_folder, scenario, take)
            tokenmark_made = "tokenmark_note" in first
        elif tree.exists(endpoints_path):
            first = {}
            round_name = self.round or "v6.1"
            figure, validity = self._endpoints_figure(endpoints_path, round_name, bench_folder,
                                                      scenario, take)
            summary_value, tokenmark_made = None, False
        elif tree.exists(detail_path.with_name("mlperf_log_summary.txt")):
            raise Rejected(tree.rel(detail_path), "missing beside the summary: a result needs "
                           "both LoadGen logs")
        else:
            raise Rejected(tree.rel(folder), "unknown layout: expected performance/run_1/"
                           "mlperf_log_detail.txt (v4.1-v6.1) or performance/"
                           "result_summary.json (v6.1 endpoints)")
        benchmark = canonical_benchmark(self.mapping.get(bench_folder, bench_folder), round_name)
        system = self.system(system_id, round_name)
        hasher.update(system.content_hash.encode())
        desc = system.description
        power = self._power(perf, first, scenario, take)
        accuracy = self._accuracy(folder, take)
        weights = self._weights(folder, system_id, bench_folder, scen_name, take)
        model = str(desc.get("accelerator_model_name") or "")
        notes = ". ".join(str(desc.get(k) or "").strip() for k in ("hw_notes", "sw_notes")
                          if str(desc.get(k) or "").strip())
        per_node = _int_or_none(desc.get("accelerators_per_node"))
        nodes = _int_or_none(desc.get("number_of_nodes"))
        stated, note = accelerator_counts(model, notes, nodes, per_node)
        published_unit, quirk = known_table_unit(round_name, benchmark, scenario, figure.unit)
        return ResultRow(
            round=round_name, division=self.division, submitter=self.submitter,
            system_id=system_id, benchmark=benchmark,
            scenario=result_scenario(self.mapping.get(bench_folder, bench_folder), scenario,
                                     round_name),
            value=figure.value, unit=figure.unit, metric=figure.metric,
            label=Label.UNVERIFIED if tokenmark_made else self.label,
            category=str(desc.get("system_type") or "") or None,
            availability=str(desc["status"]).strip().lower(),
            system_name=str(desc.get("system_name") or "").strip(),
            accelerator_model=model, accelerators_per_node=per_node, nodes=nodes,
            accelerators_stated=stated, accelerator_note=note, benchmark_folder=bench_folder,
            summary_value=summary_value, validity=validity, inferred=figure.inferred,
            power_value=power[0] if power else None, power_unit=power[1] if power else None,
            accuracy=accuracy, weight_data_types=weights,
            framework=str(desc.get("framework") or ""), notes=notes,
            source_path=tree.rel(folder), content_hash=hasher.hexdigest(),
            host_processor=str(desc.get("host_processor_model_name") or "").strip(),
            host_processors_per_node=_int_or_none(desc.get("host_processors_per_node")),
            published_unit=published_unit, quirks=quirk,
        )

    def _round_of(self, detail: Mapping[str, Any], where: Path) -> str:
        if self.round:
            return self.round
        m = _VERSION.match(str(detail.get("loadgen_version", "")))
        if m is None:
            raise Rejected(self.tree.rel(where), "cannot tell the round (no vX.Y folder above "
                           "the tree and no loadgen_version): pass --round")
        return f"v{m.group(1)}.{m.group(2)}"

    def _loadgen_figure(self, folder: Path, detail: Mapping[str, Any], round_name: str,
                        bench_folder: str, scenario: str,
                        take: _Take) -> tuple[Figure, float | None, str]:
        tree = self.tree
        run_1 = folder / "performance" / "run_1"
        detail_rel = tree.rel(run_1 / "mlperf_log_detail.txt")
        summary_path = run_1 / "mlperf_log_summary.txt"
        if not tree.exists(summary_path):
            raise Rejected(tree.rel(summary_path), "missing beside the detail log")
        text = take(summary_path, tree.read_text(summary_path))
        try:
            summary = parse_summary(text, tree.rel(summary_path))
        except MLLogError as exc:
            problem = _log_problem(exc)
            try:
                truncated = not parse_summary(text, tree.rel(summary_path),
                                              strict=False).complete
            except MLLogError:
                truncated = False
            if truncated and "truncated" not in problem:
                problem = ("is truncated: it stops before LoadGen's errors trailer ('No errors "
                           f"encountered during test.'); first problem at {problem}")
            raise Rejected(tree.rel(summary_path), problem) from None
        ran = canonical_scenario(str(detail.get("effective_scenario", "")))
        if ran is None:
            raise Rejected(detail_rel, "has no effective_scenario: not a performance-mode log")
        benchmark = canonical_benchmark(self.mapping.get(bench_folder, bench_folder), round_name)
        fig = inferred_figure(detail, round_name, benchmark, scenario, ran)
        if isinstance(fig, str):
            raise Rejected(detail_rel, fig)
        validity = str(detail.get("result_validity", ""))
        if summary.result_validity and validity and summary.result_validity != validity:
            raise Rejected(tree.rel(summary_path), f"says {summary.result_validity} where the "
                           f"detail log says {validity}: the two files are not of one run")
        printed = self._printed(summary.headline, fig)
        if printed is not None and abs(printed - fig.value) > _AGREE_ABS + _AGREE_REL * abs(
                fig.value):
            raise Rejected(tree.rel(summary_path), f"prints {printed:g} where the detail log's "
                           f"{fig.metric} is {fig.value:g}: the two files are not of one run")
        return fig, printed, validity or (summary.result_validity or "")

    @staticmethod
    def _printed(headline: Mapping[str, float], fig: Figure) -> float | None:
        """The summary's printing of the same figure, where it prints one."""
        metric = fig.metric
        names = {"result_tokens_per_second": "tokens_per_second",
                 "result_completed_tokens_per_second": "completed_tokens_per_second",
                 "result_samples_per_second": "samples_per_second",
                 "result_completed_samples_per_sec": "completed_samples_per_second",
                 "result_inferred_tokens_per_second": "inferred_tokens_per_second",
                 "result_inferred_completed_tokens_per_second":
                     "inferred_completed_tokens_per_second"}
        if metric in names:
            return headline.get(names[metric])
        if metric == "result_90.00_percentile_latency_ns" and "target_latency_ns" in headline:
            return headline["target_latency_ns"] / 1e6
        return None

    def _endpoints_figure(self, path: Path, round_name: str, bench_folder: str, scenario: str,
                          take: _Take) -> tuple[Figure, str]:
        rel = self.tree.rel(path)
        try:
            doc = json_loads(take(path, self.tree.read_text(path)))
        except InputLimitError as exc:
            raise Rejected(rel, f"is {exc}") from None
        except json.JSONDecodeError as exc:
            raise Rejected(rel, f"is not valid JSON ({exc.msg}, line {exc.lineno})") from None
        if not isinstance(doc, dict):
            raise Rejected(rel, "is not a JSON object")
        benchmark = canonical_benchmark(self.mapping.get(bench_folder, bench_folder), round_name)
        latency = doc.get("latency") if isinstance(doc.get("latency"), dict) else {}
        pct = latency.get("early_stopping_percentiles", {}) if isinstance(latency, dict) else {}
        candidates: list[tuple[str, Any]]
        if scenario in ("SingleStream", "MultiStream"):
            candidates = [("latency.early_stopping_percentiles.90.0",
                           pct.get("90.0", pct.get("90")) if isinstance(pct, dict) else None),
                          ("latency.avg", latency.get("avg") if isinstance(latency, dict)
                           else None)]
        elif benchmark in _token_benchmarks(round_name):
            candidates = [("tps", doc.get("tps"))]
        else:
            candidates = [("qps", doc.get("qps"))]
        for name, v in candidates:
            if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v):
                value = float(v) / 1e6 if name.startswith("latency") else float(v)
                key = {"tps": "result_completed_tokens_per_second",
                       "qps": "result_completed_samples_per_sec"}.get(name, name)
                return Figure(value, unit_for(key, scenario, benchmark),
                              f"endpoints:{name}"), "VALID"
        raise Rejected(rel, f"has no numeric {' or '.join(n for n, _ in candidates)}")

    def _power(self, perf: Path, detail: Mapping[str, Any], scenario: str,
               take: _Take) -> tuple[float, str] | None:
        if not (perf / "power").is_dir():
            return None
        spl = perf / "run_1" / "spl.txt"
        if not self.tree.exists(spl):
            raise Rejected(self.tree.rel(spl), "missing: performance/power/ says this result "
                           "has power, measured in run_1/spl.txt")
        count = detail.get("result_query_count")
        ran = canonical_scenario(str(detail.get("effective_scenario", ""))) or scenario
        got = power_figure(take(spl, self.tree.read_text(spl)), str(detail.get("power_begin")),
                           str(detail.get("power_end")), scenario,
                           float(count) if isinstance(count, int | float) else None, ran)
        if isinstance(got, str):
            raise Rejected(self.tree.rel(spl), got)
        return got

    def _accuracy(self, folder: Path, take: _Take) -> dict[str, float]:
        p = folder / "accuracy" / "accuracy.txt"
        if not self.tree.exists(p):
            return {}
        return _accuracy(take(p, self.tree.read_tail(p, 64 * 1024)))

    def _weights(self, folder: Path, system_id: str, bench: str, scen: str, take: _Take) -> str:
        p = folder / "measurements.json"
        if not self.tree.exists(p):
            old = self.path / "measurements" / system_id / bench / scen
            candidates = [old / f"{system_id}.json"] + [
                f for f in self.tree.files(old) if f.suffix == ".json"] if old.is_dir() else []
            p = next((c for c in candidates if self.tree.exists(c)), p)
            if not self.tree.exists(p):
                return ""
        try:
            obj = json_loads(take(p, self.tree.read_text(p)))
        except InputLimitError as exc:
            raise Rejected(self.tree.rel(p), f"is {exc}") from None
        except json.JSONDecodeError as exc:
            raise Rejected(self.tree.rel(p), f"is not valid JSON ({exc.msg}, line {exc.lineno})"
                           ) from None
        if not isinstance(obj, dict):
            raise Rejected(self.tree.rel(p), "is not a JSON object")
        return str(obj.get("weight_data_types") or "")


def _log_problem(exc: MLLogError) -> str:
    """The parser's message without the file name (the error names the file already)."""
    text = str(exc)
    prefix = f"{exc.source}:{exc.line}: " if exc.line is not None else f"{exc.source}: "
    problem = text[len(prefix):] if text.startswith(prefix) else text
    problem = problem.replace(" (strict=False skips such lines)", "").replace(
        " (strict=False reads what is there)", "")
    return f"line {exc.line}: {problem}" if exc.line is not None else problem


@cache
def _token_benchmarks(round_name: str) -> frozenset[str]:
    try:
        preset = load_round(round_name)
    except ConfigError:
        return frozenset()
    return frozenset(n for n, b in preset.benchmarks.items() if b.use_token_latencies)
