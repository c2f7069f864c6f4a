"""Result rows: one benchmark result as plain data, and the rules that classify it.

A :class:`ResultRow` is what the results database stores and what every analysis
(:mod:`tokenmark.analyses`) reads: one published MLPerf result (a
``<division>/<submitter>/results/<system>/<benchmark>/<scenario>`` folder with its
system description) or one of the user's own tokenmark runs. It is foundation-level
data: the standard library only, no SQL, no files.

Labels. Every row says what it is: :attr:`Label.OFFICIAL` for a result published by
MLCommons (reviewed), :attr:`Label.UNVERIFIED` for anything else, including every
number tokenmark measured ("Result not verified by MLCommons Association.").

Accelerator counts (the one place the published data is ambiguous):

* :attr:`ResultRow.total_accelerators` is ``number_of_nodes x accelerators_per_node`` of
  the system description: the submission checker's ``total_accelerators`` and the
  official figure.
* :attr:`ResultRow.accelerators_stated` is a count the description states explicitly
  for the accelerators that ran, found by :func:`stated_accelerator_count`: the
  ``(xN)`` markers of ``accelerator_model_name`` (v6.0 AMD ``87xMI355X_22xEPYC_9575F``:
  11 nodes x 8 = 88, model name ``... HBM3e (x87)``: one GPU was not used) or a
  sentence in the notes ("87 of 88 GPUs"). System *names* are not trusted for this:
  v6.0 NVIDIA's 288-GPU system is named "GB300 NVL72 (72x GB300-288GB ...)".
* :attr:`ResultRow.accelerators_used` is the stated count where there is one, else the
  total. Per-accelerator figures, scaling efficiency, generation-over-generation
  normalisation and "same accelerator count" matching use it (the work was done by
  the accelerators that ran); leaderboards show both counts.

Sources. A published result can be read from its result folder (``logs``: the LoadGen
logs and the system description) or from MLCommons' official summary table
(``summary table``); a tokenmark run is ``run``. Where one result (one natural key) is
read from both, :func:`merge_rows` keeps the logs' row, records the table's figure in
:attr:`ResultRow.table_value` and reports a difference between the two; a re-import
never loses a field the stored row has and the new one lacks (the richer row wins).

Tiers (:func:`tier_of`), the rule and why:

* :attr:`Tier.SINGLE_NODE`: ``number_of_nodes == 1`` and at most
  :data:`MAX_ACCELERATORS_PER_SERVER` accelerators in it.
* :attr:`Tier.MULTI_NODE` ("rack-scale / multi-node"): more than one node, or a single
  "node" with more accelerators than any server chassis holds (a rack described as one
  node). Within it :func:`scale_label` says ``rack-scale (NVL72)`` when the name puts the
  nodes in one NVLink domain of at least 32 accelerators, else ``multi-node``.
* A name alone never decides: v6.0 NVIDIA's "GB300 NVL72 (4x GB300-288GB ...)" is one
  4-GPU tray of the rack (``number_of_nodes = 1``, 4 per node) and competes with
  single servers; its 18-tray sibling is rack-scale.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from tokenmark.findings import Finding

__all__ = [
    "ACCURACY_MODE",
    "LATENCY_UNITS",
    "LLM_FAMILIES",
    "MAX_ACCELERATORS_PER_SERVER",
    "RACK_SCALE_MIN_DOMAIN",
    "SERIES_KINDS",
    "SOURCE_LOGS",
    "SOURCE_RUN",
    "SOURCE_TABLE",
    "UNVERIFIED_NOTE",
    "AccuracyScore",
    "DivisionName",
    "Label",
    "Merged",
    "ResultRow",
    "RunFinding",
    "RunRecord",
    "SeriesPoint",
    "SeriesRecord",
    "SystemRecord",
    "Tier",
    "accelerator_counts",
    "accelerator_key",
    "accelerator_vendor",
    "higher_is_better",
    "is_llm_benchmark",
    "merge_all",
    "merge_rows",
    "round_order",
    "scale_label",
    "stated_accelerator_count",
    "tier_of",
]

#: Above this many accelerators "per node", the node is a rack, not a server chassis
#: (HGX-class servers hold 8, the largest published ones 16).
MAX_ACCELERATORS_PER_SERVER = 16
#: An ``NVL<n>`` name with ``n`` at least this spans nodes with one NVLink domain.
RACK_SCALE_MIN_DOMAIN = 32
#: What every number tokenmark measured says of itself (and every label of its reports).
UNVERIFIED_NOTE = "Result not verified by MLCommons Association."
#: ``results.json`` ``run.mode`` of an accuracy-mode run (LoadGen's ``AccuracyOnly``).
ACCURACY_MODE = "AccuracyOnly"
#: Units whose smaller values are better (the rest are throughputs).
LATENCY_UNITS = frozenset({"Latency (ms)", "Latency (s)", "millijoules"})
#: Where a row was read from (:attr:`ResultRow.source`).
SOURCE_LOGS = "logs"
SOURCE_TABLE = "summary table"
SOURCE_RUN = "run"
#: Which source wins when one result was read from two (higher wins).
_SOURCE_RANK = {SOURCE_LOGS: 2, SOURCE_TABLE: 1}
#: Benchmark name parts that make a benchmark an LLM (or VLM) benchmark: the checker's
#: names (``llama2-70b-99``, ``gptj-99``, ``gpt-oss-120b``, ``mixtral-8x7b``,
#: ``deepseek-r1``, ``qwen3-vl-235b-a22b``) and open-division folders
#: (``llama3_1-70b-fp8_dyn``, ``neuralmagic_Llama-2-7b-chat-hf-FP8``).
LLM_FAMILIES = ("llama", "gptj", "gpt-j", "gpt-oss", "mixtral", "deepseek", "qwen")

_STATED_IN_NAME = re.compile(r"\(\s*[xX×]\s*(\d+)\s*\)")
_STATED_IN_NOTES = (
    re.compile(r"\b(\d+)\s+(?:of|out of)\s+\d+\s+(?:GPUs|accelerators|devices|chips)\b", re.I),
    re.compile(r"\b(?:using|used|uses)\s+(?:only\s+)?(\d+)\s+(?:GPUs|accelerators|devices)\b",
               re.I),
)
_NVL = re.compile(r"NVL(\d+)", re.I)
_ROUND = re.compile(r"^v?(\d+)\.(\d+)$")


class Label(StrEnum):
    """Whether MLCommons reviewed the number."""

    OFFICIAL = "official"
    UNVERIFIED = "unverified"


class Tier(StrEnum):
    SINGLE_NODE = "single-node"
    MULTI_NODE = "multi-node"


class DivisionName(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    NETWORK = "network"


@dataclass(frozen=True, slots=True)
class ResultRow:
    """One result. ``value`` is in ``unit``; ``metric`` names where it came from.

    For published rows ``metric`` is the LoadGen detail-log key the submission checker
    reads for the benchmark, scenario and round (``result_tokens_per_second``, ...;
    ``inferred:...`` when the checker derives the scenario's figure from another
    scenario's run), and ``summary_value`` is the same quantity as
    ``mlperf_log_summary.txt`` prints it (Server token rates with 2 decimals where the
    detail log has 6 significant digits). ``benchmark`` is the checker's name
    (``llama3.1-8b``), ``benchmark_folder`` the folder it was submitted under
    (``llama3_1-8b``, an open-division custom model). ``kind`` is ``published`` or
    ``run`` (the user's own tokenmark run; then ``run_hash`` names it in the store).
    For a run the official LoadGen drove, ``value`` is LoadGen's figure (from its
    detail log, as the checker reads it) and ``tokenmark_value`` tokenmark's own figure
    of the same quantity from its records, kept beside it; ``None`` elsewhere.

    ``source`` says what the row was read from (``logs``, ``summary table``, ``run``).
    ``published_unit`` is the unit the official table prints where it differs from the
    checker's unit for the figure (``unit``), and ``quirks`` lists such published quirks,
    kept and flagged rather than rewritten (``"; "``-separated). ``table_value`` is the
    official table's figure of a row read from the logs, where both were imported.
    ``host_processor``/``host_processors_per_node`` describe the host CPUs (the hardware
    of a CPU-only result).
    """

    round: str
    division: str
    submitter: str
    system_id: str
    benchmark: str
    scenario: str
    value: float
    unit: str
    metric: str
    label: Label
    kind: str = "published"
    category: str | None = None
    availability: str | None = None
    system_name: str = ""
    accelerator_model: str = ""
    accelerators_per_node: int | None = None
    nodes: int | None = None
    accelerators_stated: int | None = None
    accelerator_note: str = ""
    benchmark_folder: str = ""
    summary_value: float | None = None
    validity: str = "VALID"
    inferred: bool = False
    power_value: float | None = None
    power_unit: str | None = None
    accuracy: Mapping[str, float] = field(default_factory=dict)
    weight_data_types: str = ""
    framework: str = ""
    notes: str = ""
    source_path: str = ""
    content_hash: str = ""
    run_hash: str | None = None
    tokenmark_value: float | None = None
    source: str = SOURCE_LOGS
    host_processor: str = ""
    host_processors_per_node: int | None = None
    published_unit: str = ""
    quirks: str = ""
    table_value: float | None = None

    @property
    def total_accelerators(self) -> int | None:
        """``number_of_nodes x accelerators_per_node`` (the checker's figure)."""
        if self.nodes is None or self.accelerators_per_node is None:
            return None
        return self.nodes * self.accelerators_per_node

    @property
    def accelerators_used(self) -> int | None:
        """The stated count of accelerators that ran, else :attr:`total_accelerators`."""
        stated = self.accelerators_stated
        return stated if stated is not None else self.total_accelerators

    @property
    def tier(self) -> Tier:
        return tier_of(self.nodes, self.accelerators_per_node)

    @property
    def higher_is_better(self) -> bool:
        return higher_is_better(self.unit)

    @property
    def per_accelerator(self) -> float | None:
        """``value / accelerators_used`` for throughputs; derived, never an MLPerf figure.

        ``None`` for latencies (not divisible by a chip count) and systems without a
        known positive accelerator count (CPU-only submissions report 0).
        """
        n = self.accelerators_used
        if not self.higher_is_better or not n or n <= 0:
            return None
        return self.value / n

    @property
    def llm(self) -> bool:
        """Whether the benchmark is an LLM (or VLM) benchmark (:func:`is_llm_benchmark`)."""
        return is_llm_benchmark(self.benchmark) or is_llm_benchmark(self.benchmark_folder)

    @property
    def key(self) -> str:
        """The natural key: a re-import of the same result finds the same row."""
        if self.kind == "run":
            return f"run|{self.run_hash}"
        return "|".join((self.kind, self.round, self.division, self.submitter,
                         self.system_id, self.benchmark_folder or self.benchmark,
                         self.scenario))

    @property
    def system_ref(self) -> str:
        """``round/submitter/system_id``: how analyses name a system unambiguously."""
        return f"{self.round}/{self.submitter}/{self.system_id}"


#: One finding of a tokenmark run's verdicts: the rules' own type (kept under this name).
RunFinding = Finding


@dataclass(frozen=True, slots=True)
class AccuracyScore:
    """One accuracy figure of an accuracy-mode run (``accuracy.txt``, as ``tokenmark
    score`` wrote it), with the round's target where it has one (``passed`` ``None``:
    no target for the metric)."""

    metric: str
    value: float
    lower_bound: float | None = None
    upper_bound: float | None = None
    passed: bool | None = None


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One of the user's own runs (``results.json``, schema ``tokenmark.results/1``).

    ``row`` is its performance result row (label :attr:`Label.UNVERIFIED`, ``kind ==
    "run"``); an accuracy-mode run (``mode == "AccuracyOnly"``) has none: it measured no
    performance, and its result is ``accuracy``, the scores of its ``accuracy.txt`` (empty
    until ``tokenmark score`` wrote one). The rest is what the run's results file says,
    kept whole: ``settings`` (layers, requested, effective), ``summary``, ``verdicts`` and
    ``run`` (start time, SUT, dataset, round, benchmark, scenario), plus each finding as a
    row of its own for queries.
    """

    row: ResultRow | None
    run_hash: str
    started_utc: str
    tokenmark_version: str
    mode: str
    mlperf_validity: str
    tokenmark_validity: str
    profile_note: str
    run: Mapping[str, Any]
    settings: Mapping[str, Any]
    summary: Mapping[str, Any]
    verdicts: Mapping[str, Any]
    findings: tuple[RunFinding, ...] = ()
    accuracy: tuple[AccuracyScore, ...] = ()
    source_path: str = ""

    @property
    def is_accuracy(self) -> bool:
        """An accuracy-mode run (no performance row)."""
        return self.mode == ACCURACY_MODE

    def info(self, name: str) -> str:
        """``round``, ``benchmark``, ``scenario`` or ``system_id``: the row's, else the
        run's own (an accuracy run's system is its system under test's name)."""
        if self.row is not None:
            return str(getattr(self.row, name))
        if name == "system_id":
            sut = self.run.get("sut")
            return str(sut.get("name") or "sut") if isinstance(sut, Mapping) else "sut"
        return str(self.run.get(name, ""))


@dataclass(frozen=True, slots=True)
class SystemRecord:
    """A published system description (``systems/<id>.json``) as read, kept whole."""

    round: str
    division: str
    submitter: str
    system_id: str
    content_hash: str
    description: Mapping[str, Any]
    source_path: str

    @property
    def key(self) -> str:
        return "|".join((self.round, self.division, self.submitter, self.system_id))


#: Kinds of a series of runs (``index.json``'s ``kind``), with how people name them.
SERIES_KINDS: dict[str, str] = {"sweep": "sweep", "find-peak": "find-peak search",
                                "scaling": "scaling run"}


@dataclass(frozen=True, slots=True)
class SeriesPoint:
    """One point of a series: its row of ``index.json`` (a sweep point, a find-peak
    probe, a scaling replica count) kept whole, and the run it measured (``run_hash``:
    the SHA-256 of that run's results.json, as ``RunRecord.run_hash``; ``None`` when the
    run's folder was not at hand)."""

    position: int
    run_hash: str | None
    data: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class SeriesRecord:
    """A sweep, find-peak search or scaling run of the user's (its ``index.json``, kept
    whole in ``doc``), with one :class:`SeriesPoint` per point. ``series_hash`` is the
    SHA-256 of the index file; ``started_utc`` its first run's start."""

    series_hash: str
    kind: str
    started_utc: str
    round: str
    benchmark: str
    scenario: str
    doc: Mapping[str, Any]
    points: tuple[SeriesPoint, ...]
    source_path: str = ""

    @property
    def title(self) -> str:
        """``sweep of llama3.1-8b Server (v6.0)``: what the series is, as people read it."""
        what = SERIES_KINDS.get(self.kind, self.kind)
        return f"{what} of {self.benchmark} {self.scenario} ({self.round})"


def higher_is_better(unit: str) -> bool:
    """Throughputs (tokens/s, samples/s, queries/s, Watts-normalised) rise; latencies fall."""
    return unit not in LATENCY_UNITS


def tier_of(nodes: int | None, accelerators_per_node: int | None) -> Tier:
    """The tier by the rule of the module docstring (unknown counts count as one node)."""
    if nodes is not None and nodes > 1:
        return Tier.MULTI_NODE
    if accelerators_per_node is not None and accelerators_per_node > MAX_ACCELERATORS_PER_SERVER:
        return Tier.MULTI_NODE
    return Tier.SINGLE_NODE


def scale_label(row: ResultRow) -> str:
    """``single-node``, ``rack-scale (NVL72)`` or ``multi-node``, for display."""
    if row.tier is Tier.SINGLE_NODE:
        return Tier.SINGLE_NODE.value
    for text in (row.system_name, row.system_id):
        m = _NVL.search(text or "")
        if m and int(m.group(1)) >= RACK_SCALE_MIN_DOMAIN:
            return f"rack-scale (NVL{m.group(1)})"
    return Tier.MULTI_NODE.value


def stated_accelerator_count(accelerator_model_name: str, notes: str = "") -> int | None:
    """The accelerator count a system description states explicitly, or ``None``.

    ``(xN)`` markers in the accelerator model name are summed (a heterogeneous
    cluster lists ``... MI300X (x32), ... MI325X (x16)``); otherwise the first
    "N of M GPUs" / "using N GPUs" sentence of the notes counts.
    """
    marks = [int(m) for m in _STATED_IN_NAME.findall(accelerator_model_name or "")]
    if marks:
        return sum(marks)
    for pattern in _STATED_IN_NOTES:
        m = pattern.search(notes or "")
        if m:
            return int(m.group(1))
    return None


def accelerator_key(name: str) -> str:
    """A spelling-insensitive key for an accelerator model (``(xN)`` markers dropped).

    ``"NVIDIA H200-SXM-141GB"`` and ``"NVIDIA H200 SXM 141GB"`` share the key
    ``nvidiah200sxm141gb``; different memory sizes or form factors stay apart.
    """
    return re.sub(r"[^a-z0-9]+", "", _STATED_IN_NAME.sub("", name or "").lower())


def accelerator_vendor(name: str) -> str:
    """The vendor of an accelerator model: its first word, lower case (``nvidia``, ``amd``)."""
    m = re.match(r"\s*([A-Za-z]+)", name or "")
    return m.group(1).lower() if m else ""


def round_order(name: str) -> tuple[int, int]:
    """A sort key for round names (``v4.1`` < ``v5.1`` < ``v6.0``); unknown names sort first."""
    m = _ROUND.match(name.strip())
    return (int(m.group(1)), int(m.group(2))) if m else (-1, -1)


def is_llm_benchmark(name: str) -> bool:
    """Whether a benchmark (or folder) name names an LLM benchmark (:data:`LLM_FAMILIES`)."""
    low = (name or "").lower()
    return any(f in low for f in LLM_FAMILIES)


def accelerator_counts(model: str, notes: str, nodes: int | None,
                       per_node: int | None) -> tuple[int | None, str]:
    """The stated count of accelerators used (or ``None``) and a note about it.

    A stated count above ``nodes x per_node`` is ignored (and said so); one below it is
    kept with a note giving both figures.
    """
    stated = stated_accelerator_count(model, notes)
    total = nodes * per_node if nodes is not None and per_node is not None else None
    if stated is not None and total is not None and stated > total:
        return None, (f"the description states {stated} accelerators but nodes x per node = "
                      f"{total}; the stated count is ignored")
    if stated is not None and stated != total:
        return stated, (f"accelerators used {stated} (stated in the description); "
                        f"number_of_nodes x accelerators_per_node = {nodes} x {per_node} = "
                        f"{total}")
    return stated, ""


@dataclass(frozen=True, slots=True)
class Merged:
    """What :func:`merge_rows` keeps, and the difference between the sources, if any."""

    row: ResultRow
    difference: str | None = None


#: Fields a merge fills from the other row where the kept row has none.
_FILLABLE = ("category", "availability", "system_name", "accelerator_model",
             "accelerators_per_node", "nodes", "accelerators_stated", "accelerator_note",
             "summary_value", "accuracy", "weight_data_types", "framework", "notes",
             "host_processor", "host_processors_per_node", "published_unit", "table_value")
#: How far the table's figure may be from the logs' and still count as the same: the
#: table copies the detail log's number, so only float printing may differ.
_SAME_FIGURE_REL = 1e-9


def _empty(v: Any) -> bool:
    return v is None or v == "" or (isinstance(v, Mapping) and not v)


def merge_rows(old: ResultRow, new: ResultRow) -> Merged:
    """One result read twice (same :attr:`ResultRow.key`): the row to keep.

    The row from the better source wins (logs over the summary table; between two rows
    of one source, the newer, ``new``); fields the winner lacks are taken from the
    other row, so a re-import from a poorer source never loses what was stored (a
    weight type, a power figure). Where the logs' row meets a table's row, the table's
    figure is kept as :attr:`ResultRow.table_value`, the table's flagged quirks are
    kept, and a figure or unit that differs is reported as ``difference``.
    """
    if old.key != new.key:
        raise ValueError(f"cannot merge rows of different results: {old.key} / {new.key}")
    keep_new = _SOURCE_RANK.get(new.source, 0) >= _SOURCE_RANK.get(old.source, 0)
    winner, other = (new, old) if keep_new else (old, new)
    fill: dict[str, Any] = {f: getattr(other, f) for f in _FILLABLE
                            if _empty(getattr(winner, f)) and not _empty(getattr(other, f))}
    if winner.power_value is None and other.power_value is not None:
        fill["power_value"], fill["power_unit"] = other.power_value, other.power_unit
    quirks = [q for q in (winner.quirks.split("; ") + other.quirks.split("; ")) if q]
    if quirks:
        fill["quirks"] = "; ".join(dict.fromkeys(quirks))
    difference = None
    if winner.source == SOURCE_LOGS and other.source == SOURCE_TABLE:
        fill["table_value"] = other.value
        difference = _difference(winner, other)
    return Merged(replace(winner, **fill) if fill else winner, difference)


def merge_all(rows: Iterable[ResultRow], into: Mapping[str, ResultRow] | None = None
              ) -> tuple[dict[str, ResultRow], list[str]]:
    """``rows`` merged into ``into`` (by key, in order, with :func:`merge_rows`): one row
    per result, and the differences found."""
    by_key = dict(into or {})
    differences: list[str] = []
    for row in rows:
        old = by_key.get(row.key)
        if old is None:
            by_key[row.key] = row
            continue
        m = merge_rows(old, row)
        by_key[row.key] = m.row
        if m.difference:
            differences.append(m.difference)
    return by_key, differences


def _difference(logs: ResultRow, table: ResultRow) -> str | None:
    where = f"{logs.round} {logs.division}/{logs.submitter}/{logs.system_id} " \
            f"{logs.benchmark_folder or logs.benchmark} {logs.scenario}"
    if logs.unit != table.unit:
        return (f"{where}: the summary table's unit is {table.unit}, the logs' "
                f"{logs.unit}; the logs' row is kept")
    if math.isclose(logs.value, table.value, rel_tol=_SAME_FIGURE_REL):
        return None
    rel = (table.value / logs.value - 1) * 100 if logs.value else math.inf
    return (f"{where}: the summary table says {table.value:g} {table.unit}, the logs "
            f"{logs.value:g} ({rel:+.4f}%); the logs' figure is kept")
