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

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

__all__ = [
    "ACCURACY_MODE",
    "LATENCY_UNITS",
    "MAX_ACCELERATORS_PER_SERVER",
    "RACK_SCALE_MIN_DOMAIN",
    "AccuracyScore",
    "DivisionName",
    "Label",
    "ResultRow",
    "RunFinding",
    "RunRecord",
    "SystemRecord",
    "Tier",
    "accelerator_key",
    "accelerator_vendor",
    "higher_is_better",
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
#: ``results.json`` ``run.mode`` of an accuracy-mode run (LoadGen's ``AccuracyOnly``).
ACCURACY_MODE = "AccuracyOnly"
#: Units whose smaller values are better (the rest are throughputs).
LATENCY_UNITS = frozenset({"Latency (ms)", "Latency (s)", "millijoules"})

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


@dataclass(frozen=True, slots=True)
class RunFinding:
    """One finding of a tokenmark run's verdicts (``verdict`` is ``mlperf`` or ``tokenmark``)."""

    verdict: str
    rule: str
    passed: bool
    observed: str = ""
    required: str = ""
    advice: str = ""
    detail: str = ""


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
