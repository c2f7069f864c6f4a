"""Reading MLCommons' official results tables into result rows.

Each MLPerf Inference round is published with a table of every result, written by the
submission checker. Three shapes are read, by content (not by file name):

* ``summary_results.json`` as published for v4.1-v6.0: a JSON list of objects with
  ``Submitter, Availability, Category`` (the division), ``Suite`` (the system type),
  ``System, Platform, Model, UsedModel, Scenario, Nodes, Accelerator, a#, Processor,
  host_processors_per_node, Location, Software, Notes, version, inferred,
  weight_data_types, Performance_Result, Performance_Units`` and ``Power_Result,
  Power_Units`` where power was measured.
* ``summary.json`` as published for v6.1: a JSON object keyed ``"0".."N"`` whose values
  carry the checker's ``summary.csv`` columns (``Organization, Availability, Division,
  SystemType, SystemName, Platform, Model`` (the folder), ``MlperfModel, Scenario,
  Result, Accuracy, number_of_nodes, host_processor_model_name, ...,
  accelerator_model_name, accelerators_per_node, Location, framework, notes, version,
  inferred, has_power, Units, weight_data_types``).
* the checker's ``summary.csv`` itself (the same columns, in the order of
  :data:`tokenmark.submission.layout.CSV_COLUMNS`; older checkers write them without
  ``total_accelerators``, ``design_power_watts`` and ``PrivateID``; the reader goes by
  the file's own header). The checker writes it by
  joining the values with commas without quoting (``ResultExporter.export_row``), so a
  value holding a comma (``framework``, ``notes``, ``weight_data_types``
  ``fp16,bf16,fp8``, ``SystemType`` ``datacenter,edge``) spreads over several fields:
  :func:`split_checker_line` puts them back by anchoring on the columns whose values
  have a fixed form, and refuses a line it cannot split one way only (a properly quoted
  CSV is read as such: a line whose csv fields match the header is taken as it is, so a
  checker value that starts with a double quote is read as quoting). A missing value,
  which the checker writes as ``None``, is empty. A power result is a second line of the
  same ``Location`` in ``Watts`` or ``millijoules``.

One row per entry. Its identity (division, submitter, system, benchmark folder,
scenario) comes from ``Location`` (``closed/AMD/results/<system>/<benchmark>/<scenario>``),
exactly as the result tree names it, so a table row and the tree's row of the same
result share :attr:`ResultRow.key` and merge (:func:`~tokenmark.resultrows.merge_rows`:
the tree wins). Units follow the checker's figure for the benchmark and scenario; a
table's other unit, and an ``inferred`` mark the checker could not have set, are kept
and flagged (:func:`~tokenmark.importer.checker.table_unit`,
:func:`~tokenmark.importer.checker.inferred_quirk`). Non-LLM entries are kept like the
tree import keeps them (:attr:`ResultRow.llm` tells them apart); :class:`TableRead`
counts both.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final

from tokenmark.importer.checker import (
    canonical_benchmark,
    canonical_scenario,
    inferred_quirk,
    is_known_benchmark,
    result_scenario,
    table_unit,
)
from tokenmark.importer.tree import FileError, Rejected, Tree
from tokenmark.resultrows import SOURCE_TABLE, Label, ResultRow, accelerator_counts

__all__ = [
    "POWER_UNITS",
    "TABLE_NAMES",
    "TableRead",
    "is_table",
    "read_table",
    "split_checker_line",
]

#: File names a results repository gives its table (found when a folder is imported).
TABLE_NAMES: Final = ("summary_results.json", "summary.json", "summary.csv")
#: Units of a table's power lines (the checker's ``POWER_UNIT_DICT``).
POWER_UNITS: Final = frozenset({"Watts", "millijoules", "Joules"})

_NUM = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
_INT = r"\d+(?:\.0*)?"
_DIVISION = r"closed|open|network"
#: Columns whose values have a fixed form (anchors), as full-match patterns. The others
#: are free text and may hold commas.
_FIXED: Final = {
    "Availability": r"available|preview|rdi",
    "Division": _DIVISION,
    "SystemType": r"datacenter|edge|datacenter,edge|edge,datacenter",
    "Scenario": r"(?i:offline|server|interactive|singlestream|multistream)",
    "Result": _NUM,
    "Accuracy": r"[^,]*",
    "number_of_nodes": _INT,
    "host_processors_per_node": _INT,
    # published: "64", "32.0", "N/A", "128 total cores, 256 threads",
    # "64(AMD EPYC 9534) and 192(AMD EPYC 9965)": each comma-separated piece a number
    "host_processor_core_count": r"(?:N/A|n/a|NA|-|\s*\d[^,]*)?(?:,\s*\d[^,]*)*",
    # a name starts with a letter (or a [BOARD MAKER] tag); None when there is none
    "accelerator_model_name": r"None|\s*[A-Za-z\[].*|",
    "accelerators_per_node": _INT,
    "total_accelerators": _INT,
    "Location": r"(?:\./)?(?:" + _DIVISION + r")/[^,]+/results/[^,]+",
    "compliance": _DIVISION + r"|\d*",
    "errors": _INT,
    "version": r"v?\d+\.\d+",
    "inferred": r"0|1|True|False|true|false",
    "has_power": r"True|False|true|false|0|1",
    "Units": r"[^,]*",
    "Platform": r"[^,]+",
    "Model": r"[^,]+",
    "MlperfModel": r"[^,]*",
    "design_power_watts": r"[^,]*",
    "PrivateID": r"[^,]*",
}
_FIXED_RE: Final = {k: re.compile(v, re.S) for k, v in _FIXED.items()}
#: Fixed-form columns whose value may itself hold commas (so span several tokens).
_MULTI: Final = frozenset({"SystemType", "host_processor_core_count", "accelerator_model_name"})
_LOCATION = re.compile(r"^(?:\./)?(?P<division>[^/]+)/(?P<submitter>[^/]+)/results/"
                       r"(?P<system>[^/]+)/(?P<bench>[^/]+)/(?P<scenario>[^/]+)"
                       r"(?:/performance(?:/run_\d+)?)?/?$")
_ACCURACY = re.compile(r"([A-Za-z_][\w\-.]*)\s*:\s*(" + _NUM + r")(?![\w.])")
_ROUND_IN_NAME = re.compile(r"v(\d+)\.(\d+)")
_MAX_ENTRIES: Final = 200_000


@dataclass
class TableRead:
    """What :func:`read_table` read: rows, per-entry errors and counts.

    ``entries`` counts the table's entries (a power line counts as an entry of its
    own); ``llm``/``other`` split the rows by :attr:`ResultRow.llm`; ``power`` counts
    power figures attached to a row.
    """

    path: str
    shape: str
    rows: list[ResultRow] = field(default_factory=list)
    errors: list[FileError] = field(default_factory=list)
    entries: int = 0
    power: int = 0

    @property
    def llm(self) -> int:
        return sum(r.llm for r in self.rows)

    @property
    def other(self) -> int:
        return len(self.rows) - self.llm


def _head(tree: Tree, path: Path, n: int = 4096) -> bytes:
    try:
        with open(tree.confine(path), "rb") as f:
            return f.read(n)
    except (OSError, Rejected):
        return b""


def is_table(tree: Tree, path: Path) -> bool:
    """Whether ``path`` looks like an official results table (by its first bytes)."""
    head = _head(tree, path).lstrip(b"\xef\xbb\xbf \t\r\n")
    if path.suffix.lower() == ".csv":
        return head.startswith(b"Organization,Availability,Division")
    if path.suffix.lower() != ".json":
        return False
    if head.startswith(b"["):
        return b'"Performance_Result"' in head or (
            path.name == "summary_results.json" and b'"Submitter"' in head)
    return head.startswith(b"{") and re.match(rb'\{\s*"0"\s*:\s*\{', head) is not None and (
        b'"Organization"' in head)


def _text(v: Any) -> str:
    return "" if v is None else str(v).strip()


def _int(v: Any) -> int | None:
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float):
        return int(v) if v.is_integer() else None
    s = str(v).strip()
    if re.fullmatch(_INT, s):
        return int(float(s))
    return None


def _number(v: Any) -> float | None:
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, int | float):
        f = float(v)
    else:
        s = str(v).strip()
        if not re.fullmatch(_NUM, s):
            return None
        f = float(s)
    return f if math.isfinite(f) else None


def _flag(v: Any) -> bool:
    return str(v).strip().lower() in ("1", "true", "yes")


def _accuracy(text: str) -> dict[str, float]:
    return {k: float(v) for k, v in _ACCURACY.findall(text or "")}


@dataclass(frozen=True, slots=True)
class _Entry:
    """One table entry, under common names whatever the shape."""

    index: str
    raw: Mapping[str, Any]
    submitter: str
    availability: str
    division: str
    category: str
    system_name: str
    model: str
    mlperf_model: str
    scenario: str
    value: Any
    unit: str
    accuracy: str
    nodes: Any
    host_processor: str
    host_per_node: Any
    accelerator: str
    per_node: Any
    location: str
    framework: str
    notes: str
    version: str
    inferred: bool
    weights: str
    power_value: Any = None
    power_unit: str = ""


def _list_entry(i: int, x: Mapping[str, Any]) -> _Entry:
    return _Entry(
        str(i), x, _text(x.get("Submitter")), _text(x.get("Availability")).lower(),
        _text(x.get("Category")).lower(), _text(x.get("Suite")), _text(x.get("System")),
        _text(x.get("Model")), _text(x.get("Model")), _text(x.get("Scenario")),
        x.get("Performance_Result"), _text(x.get("Performance_Units")),
        _text(x.get("Accuracy")), x.get("Nodes"), _text(x.get("Processor")),
        x.get("host_processors_per_node"), _text(x.get("Accelerator")), x.get("a#"),
        _text(x.get("Location")), _text(x.get("Software")), _text(x.get("Notes")),
        _text(x.get("version")), _flag(x.get("inferred")), _text(x.get("weight_data_types")),
        x.get("Power_Result"), _text(x.get("Power_Units")),
    )


def _checker_entry(i: str, x: Mapping[str, Any]) -> _Entry:
    return _Entry(
        i, x, _text(x.get("Organization")), _text(x.get("Availability")).lower(),
        _text(x.get("Division")).lower(), _text(x.get("SystemType")),
        _text(x.get("SystemName")), _text(x.get("Model")), _text(x.get("MlperfModel")),
        _text(x.get("Scenario")), x.get("Result"), _text(x.get("Units")),
        _text(x.get("Accuracy")), x.get("number_of_nodes"),
        _text(x.get("host_processor_model_name")), x.get("host_processors_per_node"),
        _text(x.get("accelerator_model_name")), x.get("accelerators_per_node"),
        _text(x.get("Location")), _text(x.get("framework")), _text(x.get("notes")),
        _text(x.get("version")), _flag(x.get("inferred")), _text(x.get("weight_data_types")),
    )


def _round(entry: _Entry, given: str | None, from_name: str | None) -> str | None:
    if given:
        return given
    m = re.fullmatch(r"v?(\d+)\.(\d+)", entry.version)
    if m:
        return f"v{m.group(1)}.{m.group(2)}"
    return from_name


def _benchmark(entry: _Entry, folder: str, round_name: str) -> str:
    """The checker's benchmark name: the list shape's ``Model`` is the checker's name
    already; the checker shape's ``MlperfModel`` is where it names a benchmark a preset
    knows (it says ``VLM`` for qwen3-vl), else the folder's name is resolved."""
    if entry.mlperf_model and entry.mlperf_model != entry.model:
        if is_known_benchmark(entry.mlperf_model):
            return entry.mlperf_model
        return canonical_benchmark(entry.model or folder, round_name)
    return canonical_benchmark(entry.model or folder, round_name)


def _row(entry: _Entry, where: str, round_name: str | None, label: Label,
         metric: str) -> ResultRow:
    """One entry as a row; :class:`Rejected` naming the entry when it cannot be one."""
    m = _LOCATION.match(entry.location)
    if m is None:
        raise Rejected(where, f"Location {entry.location!r} is not <division>/<submitter>/"
                       "results/<system>/<benchmark>/<scenario>")
    if round_name is None:
        raise Rejected(where, "has no version and the file name does not say the round: "
                       "pass --round")
    scenario = canonical_scenario(m["scenario"]) or canonical_scenario(entry.scenario)
    if scenario is None:
        raise Rejected(where, f"unknown scenario {entry.scenario!r}")
    value = _number(entry.value)
    if value is None:
        raise Rejected(where, f"result {entry.value!r} is not a number")
    folder = m["bench"]
    benchmark = _benchmark(entry, folder, round_name)
    unit, published_unit, unit_quirk = table_unit(round_name, benchmark, scenario,
                                                  entry.unit, entry.inferred)
    quirks = [q for q in (unit_quirk, inferred_quirk(round_name, benchmark, scenario,
                                                     entry.inferred)) if q]
    nodes, per_node = _int(entry.nodes), _int(entry.per_node)
    stated, note = accelerator_counts(entry.accelerator, entry.notes, nodes, per_node)
    power = _number(entry.power_value)
    digest = hashlib.sha256(json.dumps(entry.raw, sort_keys=True, default=str).encode())
    if power is not None:
        digest.update(f"power={power!r}{entry.power_unit}".encode())
    return ResultRow(
        round=round_name, division=m["division"].lower(), submitter=m["submitter"],
        system_id=m["system"], benchmark=benchmark,
        scenario=result_scenario(folder, scenario, round_name), value=value,
        unit=unit, metric=metric, label=label, category=entry.category or None,
        availability=entry.availability or None, system_name=entry.system_name,
        accelerator_model=entry.accelerator, accelerators_per_node=per_node, nodes=nodes,
        accelerators_stated=stated, accelerator_note=note, benchmark_folder=folder,
        inferred=entry.inferred, power_value=power,
        power_unit=entry.power_unit or None if power is not None else None,
        accuracy=_accuracy(entry.accuracy), weight_data_types=entry.weights,
        framework=entry.framework, notes=entry.notes,
        source_path=_location(m), content_hash=digest.hexdigest(), source=SOURCE_TABLE,
        host_processor=entry.host_processor, host_processors_per_node=_int(entry.host_per_node),
        published_unit=published_unit, quirks="; ".join(quirks),
    )


def _location(m: re.Match[str]) -> str:
    return "/".join((m["division"], m["submitter"], "results", m["system"], m["bench"],
                     m["scenario"]))


def _attach_power(entries: list[_Entry], out: TableRead) -> list[_Entry]:
    """The checker shape's power lines folded into their results (same Location)."""
    perf: dict[str, int] = {}
    kept: list[_Entry] = []
    for e in entries:
        loc = _LOCATION.match(e.location)
        key = _location(loc) if loc else e.location
        if e.unit in POWER_UNITS:
            i = perf.get(key)
            if i is None:
                out.errors.append(FileError(f"{out.path}: entry {e.index}", "a power line "
                                            "without a performance line of its Location"))
                continue
            kept[i] = _replace_power(kept[i], e.value, e.unit)
            continue
        perf[key] = len(kept)
        kept.append(e)
    return kept


def _replace_power(e: _Entry, value: Any, unit: str) -> _Entry:
    return replace(e, power_value=value, power_unit=unit)


def read_table(tree: Tree, path: Path, round: str | None = None,
               label: Label = Label.OFFICIAL, *, fallback_round: str | None = None) -> TableRead:
    """Every entry of the table at ``path`` as a row (module docstring); a file or an
    entry that cannot be read is an error, the rest is read.

    The round is ``round`` if given, else each entry's ``version``, else
    ``fallback_round`` or the ``vX.Y`` in the file's path (``v5.1_summary_results.json``).
    """
    rel = tree.rel(path)
    m = _ROUND_IN_NAME.search(path.name) or _ROUND_IN_NAME.search(path.as_posix())
    from_name = fallback_round or (f"v{m.group(1)}.{m.group(2)}" if m else None)
    try:
        text = tree.read_text(path, tree.limits.summary_table)
    except Rejected as r:
        return TableRead(rel, "unreadable", errors=[r.error])
    if path.suffix.lower() == ".csv":
        out = TableRead(rel, "checker summary.csv")
        entries = list(_csv_entries(text, out))
        metric = "summary table: Result"
    else:
        try:
            doc = json.loads(text)
        except (json.JSONDecodeError, RecursionError) as exc:
            return TableRead(rel, "unreadable", errors=[FileError(
                rel, f"is not valid JSON ({getattr(exc, 'msg', exc)})")])
        if isinstance(doc, list):
            out = TableRead(rel, "summary_results.json list")
            entries = [_list_entry(i, x) for i, x in enumerate(doc) if isinstance(x, dict)]
            _bad = [i for i, x in enumerate(doc) if not isinstance(x, dict)]
            metric = "summary table: Performance_Result"
        elif isinstance(doc, dict):
            out = TableRead(rel, "summary.json object")
            entries = [_checker_entry(str(k), x) for k, x in doc.items() if isinstance(x, dict)]
            _bad = [k for k, x in doc.items() if not isinstance(x, dict)]
            metric = "summary table: Result"
        else:
            return TableRead(rel, "unreadable", errors=[FileError(
                rel, "is neither a list of results nor an object keyed by entry number")])
        out.errors += [FileError(f"{rel}: entry {i}", "is not a JSON object") for i in _bad]
    if len(entries) > _MAX_ENTRIES:
        return TableRead(rel, out.shape, errors=[FileError(
            rel, f"has {len(entries):,} entries, over the {_MAX_ENTRIES:,} a results table "
            "holds (a wrong file?)")])
    out.entries = len(entries) + len(out.errors)
    before = len(entries)
    entries = _attach_power(entries, out)
    out.power = before - len(entries)
    for e in entries:
        where = f"{rel}: entry {e.index}"
        try:
            row = _row(e, where, _round(e, round, from_name), label, metric)
        except Rejected as r:
            out.errors.append(r.error)
            continue
        if e.power_value is not None and row.power_value is None:
            out.errors.append(FileError(where, f"power {e.power_value!r} is not a number"))
        out.rows.append(row)
    if not entries and not out.errors:
        out.errors.append(FileError(rel, "holds no entries"))
    return out


def _csv_entries(text: str, out: TableRead) -> Iterator[_Entry]:
    reader = csv.reader(io.StringIO(text.lstrip("\ufeff")))
    try:
        header = next(reader)
    except StopIteration:
        return
    header = [h.strip() for h in header]
    for n, fields in enumerate(reader, start=2):
        if not fields or not any(f.strip() for f in fields):
            continue
        values = fields if len(fields) == len(header) else split_checker_line(fields, header)
        if isinstance(values, str):
            out.errors.append(FileError(f"{out.path}: line {n}", values))
            continue
        # the checker writes str(value): a missing value is the text None
        yield _checker_entry(f"line {n}", {h: None if v == "None" else v
                                           for h, v in zip(header, values, strict=True)})


def _fits(column: str, value: str) -> bool:
    pattern = _FIXED_RE.get(column)
    return pattern is None or pattern.fullmatch(value.strip()) is not None


def split_checker_line(tokens: Sequence[str], header: Sequence[str]) -> list[str] | str:
    """The values of a checker ``summary.csv`` line whose unquoted values held commas.

    ``tokens`` is the line split at every comma; ``header`` names the columns. Columns
    in ``_FIXED`` take one token that must have their form (those in ``_MULTI`` one or
    more: ``SystemType`` ``datacenter,edge``, a core count ``128 total cores, 256
    threads``, an accelerator list ``... (x32), ... (x16)``); free-text columns take one
    or more tokens, joined back with commas. Several free columns side by side
    (``framework``, ``operating_system``, ``notes``) cannot be told apart when they hold
    more tokens than columns: the first takes the extra tokens (their text is kept whole,
    only its split among them is unknowable). Returns the values, or a one-line reason
    when the line splits no way or more than one way (never a guess).
    """
    solutions: list[list[str]] = []
    free = [c not in _FIXED for c in header]

    def walk(i: int, j: int, acc: list[str]) -> None:
        if len(solutions) > 1:
            return
        if j == len(header):
            if i == len(tokens):
                solutions.append(list(acc))
            return
        left_cols = len(header) - j
        left_tokens = len(tokens) - i
        if left_tokens < left_cols:
            return
        col = header[j]
        if free[j]:
            run_end = j
            while run_end < len(header) and free[run_end]:
                run_end += 1
            run = run_end - j
            # the run's extent is fixed by the next anchor; try every extent
            max_take = left_tokens - (len(header) - run_end)
            for take in range(run, max_take + 1):
                values = _spread(tokens[i:i + take], run)
                walk(i + take, run_end, acc + values)
            return
        spans = range(1, left_tokens - left_cols + 2) if col in _MULTI else [1]
        for span in spans:
            value = ",".join(tokens[i:i + span])
            if i + span <= len(tokens) and _fits(col, value):
                walk(i + span, j + 1, acc + [value])

    walk(0, 0, [])
    if not solutions:
        return (f"has {len(tokens)} comma-separated fields for {len(header)} columns and "
                "no split gives every fixed-form column its form")
    if len(solutions) > 1:
        return (f"has {len(tokens)} comma-separated fields for {len(header)} columns and "
                "splits more than one way: quote the values (csv) or use summary.json")
    return solutions[0]


def _spread(tokens: Sequence[str], columns: int) -> list[str]:
    """``tokens`` over ``columns`` adjacent free columns: one each, the extra tokens to
    the first (the split among free columns is not knowable)."""
    extra = len(tokens) - columns
    return [",".join(tokens[:extra + 1])] + list(tokens[extra + 1:])


