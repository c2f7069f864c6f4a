"""Published MLPerf LLM results as calibration rows: what each row was run on, and
whether the simulator can be held to it.

Three sources, one row type (:class:`PublishedRow`):

- the table of published LLM results that ships with tokenmark for the results
  database (``data/published.csv.gz``, every LLM result of v4.1-v6.1 (v5.0: 156 of 18
  systems, transcribed: ``bench/data/mlperf_v5.0``) from the official
  summary tables and the result trees, made by ``tokenmark published refresh``)
  (:func:`read_packaged`): what calibration reads by default;
- the official summary tables of MLCommons (``v5.1_summary_results.json`` and
  ``v6.0_summary_results.json``, JSON lists; ``v6.1_summary.json``, an object keyed
  ``"0"``..``"N"`` with other field names) (:func:`read_summary`), every entry;
- the results CSV ``llm_results_v4.1_v5.1.csv`` (:func:`read_published`);
  :func:`read_rounds` takes the CSV for the rounds no table covers and every table.

Accelerator names are read by the results database's normalisation
(:func:`tokenmark.hardware.accelerator`: ``Intel(R) Arc Pro(R) B60`` and
``[MAXSUN] MS-Intel Arc Pro B60 Dual 48G Turbo`` are one part, ``NVIDIA VR200`` is
``NVIDIA Vera Rubin``, ``MI300X (x8) and MI325X (x8)`` is heterogeneous, ``(x87)`` a
count), then matched to ``accelerators.csv`` by :data:`ACCELERATOR_SPELLINGS`
(substring -> short name, the more specific first); benchmark names by
:data:`BENCHMARK_SPELLINGS` (the checker's, LoadGen's and the tables' own names of a
benchmark). A row is **eligible** when

- it is in the **closed** division (open-division rows may run a different model:
  pruned, fine-tuned, or another checkpoint);
- its accelerator is in ``accelerators.csv`` and the system is **homogeneous**: a
  name that lists more than one accelerator type (``MI300X (x8) and MI325X (x8)``,
  ``H200 + MI350X``, ``MI300X (x32), MI325X (x16)``) is refused with a reason, as is a
  CPU-only system; a single type with a count (``MI355X (x87)``) is that many of it;
- its benchmark's model is in ``models.csv`` and its request lengths in
  ``workloads.csv``;
- its scenario is **Offline, Server or Interactive** (SingleStream latency on edge
  devices is not modelled here) and it reports a throughput (tokens/s, samples/s or
  queries/s).

Each row also gets

- its **precision** from the table's ``weight_data_types``: the narrowest weight
  format it names (``fp4``/``nvfp4``/``mxfp4``/``E2M1`` as fp4, ``fp8``/``F8_E4M3``
  as fp8, ``int8``, ``int4``/``uint4``). A list of a checkpoint's safetensors dtypes
  naming ``U8`` beside ``F8_E4M3`` (Nebius' and Supermicro's Qwen3-VL rows:
  ``BF16/F32/F8_E4M3/U8``) is an NVFP4 checkpoint, so fp4: NVFP4 stores its weights
  packed two E2M1 values a byte (``weight_packed``, ``torch.uint8``, ``in / 2``
  columns) with an ``F8_E4M3`` scale per 16 weights and an ``F32`` global scale
  (vLLM ``compressed_tensors_w4a4_nvfp4.py``, ``CompressedTensorsW4A4Fp4.create_weights``),
  the layout of NVIDIA's MLPerf Qwen3-VL checkpoint those runs serve (their software
  column names NVIDIA's v6.0 Qwen3-VL stack); an FP8 checkpoint has no ``U8`` tensor.
  A statement of only wide formats
  (bf16/fp16/fp32) or none leaves the planner's rule (the narrowest the accelerator
  computes), which the CSV rows, stating nothing, always get. Whether the accelerator
  computes that format natively is the deployment's business
  (:attr:`~tokenmark.perfmodel.Deployment.compute_dtype`: integer and unsupported
  formats are weight-only quantisation);
- its software **stack** from the table's software column (``vLLM``, ``SGLang``,
  ``TensorRT``; the first named where it names several) or the system's name and id
  (``vLLM``, ``SGLang``, ``TRT``, MangoBoost's ``LLMBoost`` as ``other``), else the
  vendor's reference stack (NVIDIA: TensorRT-LLM; AMD: vLLM, which AMD's own
  submissions name; Red Hat's systems: vLLM; others: ``other``).

A power-capped part is its own entry where the table has one (an MI355X capped at
1000 W is the silicon of the MI350X at the MI350X's power: modelled as MI350X).
"""

from __future__ import annotations

import csv
import gzip
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from tokenmark.errors import ConfigError
from tokenmark.hardware import accelerator
from tokenmark.mlperf.presets import implied_scenario
from tokenmark.perfmodel import find_accelerator, find_model
from tokenmark.sim.workloads import workload

__all__ = ["ACCELERATOR_SPELLINGS", "BENCHMARK_SPELLINGS", "PublishedRow",
           "canonical_accelerator", "canonical_benchmark", "read_packaged", "read_published",
           "read_rounds", "read_summary", "stated_precision"]

#: Substring (case-insensitive) -> accelerators.csv short name; the more specific first.
ACCELERATOR_SPELLINGS: tuple[tuple[str, str], ...] = (
    ("GB300", "GB300"), ("GB200", "GB200"), ("B300", "B300"), ("B200", "B200"),
    ("Vera Rubin", "VR200"), ("VR200", "VR200"),
    ("GH200 Grace Hopper Superchip 144GB", "GH200 144GB"),
    ("GH200 Grace Hopper Superchip 96GB", "GH200 96GB"),
    ("H100-NVL", "H100 NVL"), ("H100-PCIe", "H100 PCIe"), ("H100-SXM", "H100"),
    ("H200-NVL", "H200 NVL"), ("H200-SXM", "H200"),
    ("L40S", "L40S"), ("RTX PRO 6000", "RTX PRO 6000 Blackwell Server"),
    ("RTX PRO 4500", "RTX PRO 4500 Blackwell Server"),
    ("RTX 4090", "RTX 4090"), ("Jetson AGX Orin", "Jetson AGX Orin 64GB"),
    ("Jetson AGX Thor", "Jetson AGX Thor"), ("Arc Pro B60", "Arc Pro B60"),
    ("Arc Pro B70", "Arc Pro B70"), ("Arc Pro B50", "Arc Pro B50"),
    ("MI355X 288GB HBM3e (Power Cap 1000 W)", "MI350X"),
    ("MI355X", "MI355X"), ("MI350X", "MI350X"), ("MI350P", "MI350P"), ("MI325X", "MI325X"),
    ("MI300X", "MI300X"),
)
#: Every spelling of a benchmark in the tables -> the checker's name.
BENCHMARK_SPELLINGS: Mapping[str, str] = {
    "llama2-70b-99": "llama2-70b-99", "llama2-70b-99.9": "llama2-70b-99.9",
    "llama3.1-8b": "llama3.1-8b", "llama3_1-8b": "llama3.1-8b",
    "llama3.1-8b-edge": "llama3.1-8b-edge", "llama3_1-8b-edge": "llama3.1-8b-edge",
    "llama3.1-405b": "llama3.1-405b", "llama3_1-405b": "llama3.1-405b",
    "mixtral-8x7b": "mixtral-8x7b", "deepseek-r1": "deepseek-r1",
    "gpt-oss-120b": "gpt-oss-120b", "qwen3-vl-235b-a22b": "qwen3-vl-235b-a22b",
    "gptj-99": "gptj-99", "gptj-99.9": "gptj-99.9",
}
_LLM_WORDS = ("llama", "mixtral", "deepseek", "gpt-oss", "gptj", "qwen")
_METRICS = {"tokens/s": "tokens/s", "samples/s": "samples/s", "queries/s": "queries/s"}


@dataclass(frozen=True)
class PublishedRow:
    index: int  # 0-based row of its source (CSV data row or table entry)
    round: str
    division: str
    submitter: str
    system_name: str
    system_id: str
    accelerator_name: str
    per_node: int
    nodes: int
    total: int
    benchmark_raw: str
    scenario: str
    metric: str
    result: float
    samples_per_second: float
    accelerator: str | None  # accelerators.csv short name
    benchmark: str | None  # canonical checker name
    stack: str
    gpus_per_listed: int  # 2 for dual-GPU boards listed as one accelerator
    eligible: bool
    reason: str
    source: str = "csv"  # the file the row came from (its name)
    precision: str | None = None  # the weight format the row states (None: planner's rule)
    software: str = ""
    system_type: str = "datacenter"

    @property
    def system_key(self) -> tuple[str, str, str]:
        return (self.round, self.submitter, self.system_id)

    @property
    def accelerators_used(self) -> int:
        return self.total * self.gpus_per_listed


def canonical_accelerator(name: str | None) -> tuple[str | None, str]:
    """(short name, reason when refused) of a results table's accelerator column: the
    name read by the results database's normalisation (:func:`tokenmark.hardware.
    accelerator`: trademark marks and board makers' tags dropped, aliases applied, a
    list of several kinds found heterogeneous), then matched to ``accelerators.csv``."""
    hw = accelerator(name or "")
    if not hw.parts:
        return None, "CPU-only system: no accelerator to model"
    if hw.heterogeneous:
        return None, f"heterogeneous system (more than one accelerator type: {hw.name})"
    low = hw.parts[0].name.lower()
    for key, short in ACCELERATOR_SPELLINGS:
        if key.lower() in low:
            return short, ""
    return None, f"accelerator {hw.parts[0].name!r} is not in accelerators.csv"


def canonical_benchmark(name: str) -> tuple[str | None, str]:
    b = BENCHMARK_SPELLINGS.get(name.strip())
    if b is not None:
        return b, ""
    if not any(w in name.lower() for w in _LLM_WORDS):
        return None, f"{name.strip()!r} is not an LLM benchmark"
    return None, (f"benchmark {name.strip()!r} has no row in models.csv (an open-division "
                  "variant or a benchmark not modelled)")


def stated_precision(text: str | None) -> str | None:
    """The narrowest weight format a ``weight_data_types`` cell names, or None when it
    names only wide formats (bf16, fp16, fp32) or nothing."""
    t = (text or "").lower()
    if re.search(r"fp4|e2m1", t):
        return "fp4"
    if re.search(r"\bu8\b", t) and re.search(r"f8_e4m3|e4m3", t):
        # a checkpoint's safetensors dtypes: NVFP4 weights are stored packed, two E2M1
        # values a byte (U8), with an F8_E4M3 scale per 16 (see the module docstring)
        return "fp4"
    if re.search(r"u?int4", t):
        return "int4"
    if re.search(r"fp8|f8_e4m3|e4m3", t):
        return "fp8"
    if "int8" in t:
        return "int8"
    return None


def _stack(text: str, submitter: str, vendor: str) -> str:
    """The stack the text names first (a table's software column may name several:
    ``TRTLLM-rubin, vLLM-CentML`` is TensorRT-LLM's), else the defaults."""
    t = text.lower()
    named = [(t.find(key), stack) for key, stack in (
        ("vllm", "vllm"), ("sglang", "sglang"), ("trt", "trtllm"), ("tensorrt", "trtllm"),
        ("llmboost", "other"), ("mangoboost", "other")) if key in t]
    if named:
        return min(named)[1]
    if submitter == "RedHat":
        return "vllm"
    return {"NVIDIA": "trtllm", "AMD": "vllm"}.get(vendor, "other")


def _int(value: Any) -> int:
    try:
        return int(float(value))
    except (TypeError, ValueError):
        return 0


def _float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return 0.0


def _row(i: int, f: Mapping[str, Any], source: str) -> PublishedRow:
    """One row from the fields every source is mapped to."""
    name = f["accelerator"] or ""
    acc, why_acc = canonical_accelerator(name)
    bench, why_bench = canonical_benchmark(f["benchmark"])
    reasons = []
    if why_bench and "not an LLM" in why_bench:
        reasons.append(why_bench)
    else:
        if f["division"] != "closed":
            reasons.append("open division: the model or its accuracy target may differ "
                           "from the reference")
        if why_acc:
            reasons.append(why_acc)
        if why_bench:
            reasons.append(why_bench)
        if f["scenario"] not in ("Offline", "Server", "Interactive"):
            reasons.append(f"{f['scenario']} (a latency scenario) is not calibrated here")
        folder = f.get("folder") or ""
        if f["scenario"] == "Offline" and folder and implied_scenario(folder) == "Interactive":
            reasons.append(f"the Offline run in {folder} (v5.0's interactive benchmark): the "
                           f"same Offline scenario as {bench or folder}'s own row, counted once")
        if f["metric"] not in _METRICS.values():
            reasons.append(f"metric {f['metric']!r} is not a throughput")
    total = f["total"]
    stated = accelerator(name).parts[0].count if acc is not None else None
    if stated:
        total = stated  # "(x87)": the count the name states
    if total <= 0 and acc is not None and not reasons:
        reasons.append("no accelerator count")
    vendor = find_accelerator(acc).vendor if acc is not None else "other"
    if bench is not None and not reasons:
        try:
            find_model(bench)
            workload(bench)
        except ConfigError as e:
            reasons.append(str(e))
    dual = 2 if "dual" in name.lower() else 1
    text = f"{f['software']} {f['system_name']} {f['system_id']}"
    return PublishedRow(
        index=i, round=f["round"], division=f["division"], submitter=f["submitter"],
        system_name=f["system_name"], system_id=f["system_id"], accelerator_name=name,
        per_node=f["per_node"], nodes=f["nodes"] or 1, total=total,
        benchmark_raw=f["benchmark"], scenario=f["scenario"], metric=f["metric"],
        result=f["result"], samples_per_second=f["samples_per_second"], accelerator=acc,
        benchmark=bench, stack=_stack(text, f["submitter"], vendor), gpus_per_listed=dual,
        eligible=not reasons, reason="; ".join(reasons), source=source,
        precision=f["precision"], software=f["software"], system_type=f["system_type"],
    )


def read_published(path: Path) -> list[PublishedRow]:
    """Every row of a published-results CSV, each marked eligible or not (and why)."""
    with open(path, encoding="utf-8", newline="") as fh:
        return [_row(i, {
            "round": r["round"], "division": r["division"], "submitter": r["submitter"],
            "system_name": r["system_name"], "system_id": r["system_id"],
            "accelerator": r["accelerator_model_name"],
            "per_node": _int(r["accelerators_per_node"]), "nodes": _int(r["number_of_nodes"]),
            "total": _int(r["total_accelerators"]), "benchmark": r["benchmark"],
            "scenario": r["scenario"], "metric": r["metric"], "result": _float(r["result"]),
            "samples_per_second": _float(r["samples_per_second"]), "precision": None,
            "software": "", "system_type": r.get("system_type") or "datacenter",
        }, path.name) for i, r in enumerate(csv.DictReader(fh))]


def _summary_fields(e: Mapping[str, Any], rnd: str) -> dict[str, Any]:
    """An entry of an official summary table in the common field names."""
    if "Organization" in e:  # the v6.1 layout
        per, nodes = _int(e.get("accelerators_per_node")), _int(e.get("number_of_nodes"))
        return {"round": str(e.get("version") or rnd), "division": e.get("Division") or "",
                "submitter": e.get("Organization") or "",
                "system_name": e.get("SystemName") or "", "system_id": e.get("Platform") or "",
                "accelerator": e.get("accelerator_model_name"), "per_node": per, "nodes": nodes,
                "total": _int(e.get("total_accelerators")) or per * nodes,
                "benchmark": e.get("Model") or "", "scenario": e.get("Scenario") or "",
                "metric": _METRICS.get(str(e.get("Units") or "").lower(), str(e.get("Units"))),
                "result": _float(e.get("Result")), "samples_per_second": 0.0,
                "precision": stated_precision(e.get("weight_data_types")),
                "software": e.get("framework") or "", "system_type": e.get("SystemType") or ""}
    per, nodes = _int(e.get("a#")), _int(e.get("Nodes"))
    return {"round": str(e.get("version") or rnd), "division": e.get("Category") or "",
            "submitter": e.get("Submitter") or "", "system_name": e.get("System") or "",
            "system_id": e.get("Platform") or "", "accelerator": e.get("Accelerator"),
            "per_node": per, "nodes": nodes,
            "total": _int(e.get("Total Accelerators")) or per * nodes,
            "benchmark": e.get("Model") or "", "scenario": e.get("Scenario") or "",
            "metric": _METRICS.get(str(e.get("Performance_Units") or "").lower(),
                                   str(e.get("Performance_Units"))),
            "result": _float(e.get("Performance_Result")), "samples_per_second": 0.0,
            "precision": stated_precision(e.get("weight_data_types")),
            "software": e.get("Software") or "", "system_type": e.get("Suite") or ""}


def read_summary(path: Path) -> list[PublishedRow]:
    """Every entry of an official MLCommons summary table (a JSON list, or an object
    keyed ``"0"``..``"N"``), each marked eligible or not (and why); non-LLM entries
    are refused as such."""
    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    entries: Iterable[Any]
    if isinstance(data, dict):
        entries = (data[k] for k in sorted(data, key=lambda k: _int(k)))
    elif isinstance(data, list):
        entries = data
    else:
        raise ConfigError(f"{path}: a summary table is a JSON list or object, not "
                          f"{type(data).__name__}")
    m = re.search(r"v\d+\.\d+", path.name)
    rnd = m.group(0) if m else ""
    out = []
    for i, e in enumerate(entries):
        if not isinstance(e, dict):
            raise ConfigError(f"{path}: entry {i} is not an object")
        out.append(_row(i, _summary_fields(e, rnd), path.name))
    return out


def read_packaged(path: Path | None = None) -> list[PublishedRow]:
    """Every row of the packaged table of published LLM results (``data/published.csv.gz``,
    or a refreshed copy at ``path``), each marked eligible or not (and why)."""
    if path is None:
        raw = resources.files("tokenmark.data").joinpath("published.csv.gz").read_bytes()
    else:
        raw = path.read_bytes()
    text = gzip.decompress(raw).decode("utf-8")
    lines = [ln for ln in text.splitlines() if not ln.startswith("#")]
    name = path.name if path is not None else "published.csv.gz"
    out = []
    for i, r in enumerate(csv.DictReader(lines)):
        per, nodes = _int(r["accelerators_per_node"]), _int(r["nodes"])
        out.append(_row(i, {
            "round": r["round"], "division": r["division"], "submitter": r["submitter"],
            "system_name": r["system_name"], "system_id": r["system_id"],
            "accelerator": r["accelerator_model"], "per_node": per, "nodes": nodes,
            "total": _int(r["accelerators_stated"]) or per * max(nodes, 1),
            "benchmark": r["benchmark"], "scenario": r["scenario"],
            "metric": _METRICS.get(r["unit"].lower(), r["unit"]),
            "result": _float(r["value"]), "samples_per_second": 0.0,
            "precision": stated_precision(r["weight_data_types"]),
            "software": r["framework"], "system_type": r["category"],
            "folder": r["benchmark_folder"]}, name))
    return out


def read_rounds(csv_path: Path, tables: Iterable[Path]) -> list[PublishedRow]:
    """The rows of every round: each summary table's, and the CSV's for the rounds no
    table covers (the tables are the official record where both exist)."""
    rows: list[PublishedRow] = []
    for t in sorted(tables):
        rows += read_summary(t)
    covered = {r.round for r in rows}
    return [r for r in read_published(csv_path) if r.round not in covered] + rows
