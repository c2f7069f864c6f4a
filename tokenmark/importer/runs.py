"""Reading a tokenmark run's ``results.json`` into a :class:`RunRecord`.

The file is read by :meth:`tokenmark.output.results.ResultsDocument.from_json` (any
version of schema ``tokenmark.results/1``, upgraded to the current form). A run is
always :attr:`Label.UNVERIFIED`. Its result row:

* ``value``: LoadGen's token rate (``summary.loadgen.tokens_per_second``, Tokens/s) when
  the run counted tokens, else its sample rate (Samples/s Offline, Queries/s otherwise);
  for tokenmark's own load patterns, ``summary.throughput.output_tokens_per_second``.
  A run the official LoadGen drove (``run.loadgen == "official"``) stores LoadGen's own
  figure (``loadgen.result``: the detail-log key the checker reads, metric
  ``loadgen:<key>``) and tokenmark's figure from its records beside it
  (``tokenmark_value``).
* an accuracy-mode run (``run.mode == "AccuracyOnly"``) has no result row: it measured
  no performance. Its result is its accuracy: the scores of the ``accuracy.txt`` beside
  ``results.json`` (what ``tokenmark score`` writes), each judged against the round's
  target where there is one; none until the run is scored.
* ``validity``: the tokenmark verdict (what the CLI exit code and reports lead with);
  both verdicts are kept in the run record.
* ``division`` ``open`` (DESIGN.md: runs of tokenmark's own load generator package as
  open and unverified), ``submitter`` ``local``, ``system_id`` the system under test's
  name, unless a system description (MLPerf ``systems/<id>.json`` format) is given,
  which supplies the system and accelerator fields.
* identity: the SHA-256 of the file, so importing the same run twice adds nothing.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from tokenmark.errors import ConfigError
from tokenmark.importer.published import _accuracy as accuracy_figures  # one reader
from tokenmark.importer.tree import Rejected, Tree
from tokenmark.inputs import InputLimitError, json_loads
from tokenmark.mlperf.presets import BenchmarkPreset, find_benchmark
from tokenmark.output.results import SCHEMA, SCHEMA_PREFIX, ResultsDocument, ResultsError
from tokenmark.resultrows import (
    ACCURACY_MODE,
    SOURCE_RUN,
    AccuracyScore,
    Label,
    ResultRow,
    RunRecord,
    stated_accelerator_count,
)

__all__ = ["ACCURACY_TXT", "RESULTS_SCHEMA", "is_results_file", "read_run"]

#: The schema this tokenmark reads (:data:`tokenmark.output.results.SCHEMA`).
RESULTS_SCHEMA: Final = SCHEMA
#: What ``tokenmark score`` writes beside ``results.json``.
ACCURACY_TXT: Final = "accuracy.txt"
_MLPERF_SCENARIOS: Final = ("Offline", "Server", "Interactive", "SingleStream", "MultiStream")


def is_results_file(tree: Tree, path: Path) -> bool:
    """Whether ``path`` looks like a tokenmark ``results.json`` (its start names the schema)."""
    if path.name != "results.json":
        return False
    try:
        with open(tree.confine(path), "rb") as f:
            head = f.read(256)
    except (OSError, Rejected):
        return True  # let read_run report why it cannot be read
    return b'"schema"' in head and SCHEMA_PREFIX.encode() in head


def _sub(doc: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    v = doc.get(key)
    return v if isinstance(v, dict) else {}


def _number(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x):
        return None
    return float(x)


def read_run(tree: Tree, path: Path, system: Mapping[str, Any] | None = None) -> RunRecord:
    """The run of ``results.json`` at ``path``; :class:`Rejected` if unusable."""
    rel = tree.rel(path)
    raw = tree.read_bytes(path)
    try:
        doc = json_loads(raw.decode("utf-8"))
    except InputLimitError as exc:
        raise Rejected(rel, f"is {exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise Rejected(rel, f"is not valid JSON ({exc})") from None
    try:
        results = ResultsDocument.from_json(doc, rel)
    except ResultsError as exc:
        raise Rejected(rel, exc.problem) from None
    doc = results.to_json()  # the current form (an earlier version's upgraded)
    run, settings = doc["run"], doc["settings"]
    summary, verdicts = doc["summary"], doc["verdicts"]
    scenario = str(run["scenario"])
    value, unit, metric = _own_figure(summary, scenario)
    accuracy_run = run.get("mode") == ACCURACY_MODE
    if value is None and not accuracy_run:
        raise Rejected(rel, f"has no numeric {metric.split(':', 1)[1]}")
    tokenmark_value = None
    official = _sub(doc, "loadgen").get("result") if run.get("loadgen") == "official" else None
    if isinstance(official, dict) and _number(official.get("value")) is not None:
        tokenmark_value = value
        value, unit = _number(official.get("value")), str(official.get("unit") or unit)
        metric = f"loadgen:{official.get('metric', '')}"
    validity = {kind: results.validity(kind) for kind in ("mlperf", "tokenmark")}
    findings = results.findings()
    run_hash = hashlib.sha256(raw).hexdigest()
    sut = _sub(run, "sut")
    sys_fields: dict[str, Any] = {"system_id": str(sut.get("name") or "sut")}
    if system is not None:
        model = str(system.get("accelerator_model_name") or "")
        notes = ". ".join(str(system.get(k) or "") for k in ("hw_notes", "sw_notes")
                          if system.get(k))
        sys_fields = {
            "system_id": str(system.get("system_id") or sys_fields["system_id"]),
            "system_name": str(system.get("system_name") or ""),
            "category": str(system.get("system_type") or "") or None,
            "accelerator_model": model,
            "accelerators_per_node": _count(system.get("accelerators_per_node")),
            "nodes": _count(system.get("number_of_nodes")),
            "accelerators_stated": stated_accelerator_count(model, notes),
            "framework": str(system.get("framework") or ""),
            "notes": notes,
            "host_processor": str(system.get("host_processor_model_name") or "").strip(),
            "host_processors_per_node": _count(system.get("host_processors_per_node")),
        }
    row = None
    scores: tuple[AccuracyScore, ...] = ()
    if accuracy_run:
        scores = _scores(tree, path.parent / ACCURACY_TXT, run)
    else:
        assert value is not None
        row = ResultRow(
            round=str(run["round"]), division="open", submitter="local",
            benchmark=str(run["benchmark"]), scenario=scenario, value=value, unit=unit,
            metric=metric, label=Label.UNVERIFIED, kind="run",
            validity=validity["tokenmark"], source_path=rel, content_hash=run_hash,
            run_hash=run_hash, tokenmark_value=tokenmark_value, source=SOURCE_RUN,
            **sys_fields,
        )
    return RunRecord(
        row=row, run_hash=run_hash, started_utc=str(run.get("started_utc", "")),
        tokenmark_version=str(doc.get("tokenmark_version", "")), mode=str(run.get("mode", "")),
        mlperf_validity=validity["mlperf"], tokenmark_validity=validity["tokenmark"],
        profile_note=str(doc.get("profile_note", "")), run=run, settings=settings,
        summary=summary, verdicts=verdicts, findings=tuple(findings), accuracy=scores,
        source_path=rel,
    )


def _own_figure(summary: Mapping[str, Any], scenario: str) -> tuple[float | None, str, str]:
    """tokenmark's figure of the run from its records: (value, unit, metric)."""
    loadgen, throughput = _sub(summary, "loadgen"), _sub(summary, "throughput")
    tokens = _number(loadgen.get("tokens_per_second"))
    if scenario not in _MLPERF_SCENARIOS:
        return (_number(throughput.get("output_tokens_per_second")), "Tokens/s",
                "tokenmark:summary.throughput.output_tokens_per_second")
    if tokens:
        return tokens, "Tokens/s", "tokenmark:summary.loadgen.tokens_per_second"
    return (_number(loadgen.get("samples_per_second")),
            "Samples/s" if scenario == "Offline" else "Queries/s",
            "tokenmark:summary.loadgen.samples_per_second")


def _scores(tree: Tree, path: Path, run: Mapping[str, Any]) -> tuple[AccuracyScore, ...]:
    """The scores of the ``accuracy.txt`` at ``path`` (none if absent or unreadable)."""
    try:
        if not tree.exists(path):
            return ()
        figures = accuracy_figures(tree.read_text(path))
    except (OSError, UnicodeDecodeError, Rejected):
        return ()
    targets: dict[str, tuple[float | None, float | None, bool]] = {}
    bench: BenchmarkPreset | None
    try:
        bench = find_benchmark(str(run["round"]), str(run["benchmark"]))
    except ConfigError:
        bench = None
    if bench is not None:
        sc = str(run.get("scenario", ""))
        for t in bench.accuracy_targets(sc if sc in {s.value for s in bench.scenarios}
                                        else None):
            v = figures.get(t.reference_key)
            if v is not None:
                targets[t.reference_key] = (t.lower_bound, t.upper_bound, t.accepts(v))
    out = []
    for k, v in sorted(figures.items()):
        lo, hi, ok = targets.get(k, (None, None, None))
        out.append(AccuracyScore(k, v, lo, hi, ok))
    return tuple(out)


def _count(v: Any) -> int | None:
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    if isinstance(v, str) and v.strip().isdigit():
        return int(v)
    return None
