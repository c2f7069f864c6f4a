"""Published MLPerf LLM results as calibration rows: what each row was run on, and
whether the simulator can be held to it.

A row of ``llm_results_v4.1_v5.1.csv`` is **eligible** when

- it is in the **closed** division (open-division rows may run a different model:
  pruned, fine-tuned, or another checkpoint);
- its accelerator is in ``accelerators.csv`` and the system is **homogeneous** (not a
  CPU-only system, not a mix of accelerator types);
- its benchmark's model is in ``models.csv`` and its request lengths in
  ``workloads.csv`` (LoadGen spellings such as ``llama3_1-8b`` are accepted);
- its scenario is **Offline, Server or Interactive** (the throughput scenarios;
  SingleStream latency on edge devices is not modelled here);
- it reports a throughput (tokens/s, or samples/s and queries/s for GPT-J).

Each row also gets its software **stack** from the system's name and id (``vLLM``,
``SGLang``, ``TRT``/``TensorRT``, MangoBoost's ``LLMBoost`` as ``other``), else the
vendor's reference stack (NVIDIA: TensorRT-LLM; AMD: vLLM, which AMD's own
submissions name; Red Hat's OpenShift systems: vLLM; others: ``other``). The CSV
carries no precision; the planner's rule (the narrowest precision the accelerator
computes natively) matches the results: e.g. B200's llama2-70b-99 and -99.9 rows are
equal, so both ran at FP4.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from tokenmark.errors import ConfigError
from tokenmark.perfmodel import find_accelerator, find_model
from tokenmark.sim.workloads import workload

__all__ = ["PublishedRow", "canonical_accelerator", "canonical_benchmark", "read_published"]

# Substring -> accelerators.csv short name; the more specific names come first.
_ACCELERATORS = (
    ("GB300", "GB300"), ("GB200", "GB200"), ("B300", "B300"), ("B200", "B200"),
    ("GH200 Grace Hopper Superchip 144GB", "GH200 144GB"),
    ("GH200 Grace Hopper Superchip 96GB", "GH200 96GB"),
    ("H100-NVL", "H100 NVL"), ("H100-PCIe", "H100 PCIe"), ("H100-SXM", "H100"),
    ("H200-NVL", "H200 NVL"), ("H200-SXM", "H200"),
    ("L40S", "L40S"), ("RTX PRO 6000", "RTX PRO 6000 Blackwell Server"),
    ("RTX 4090", "RTX 4090"), ("Jetson AGX Orin", "Jetson AGX Orin 64GB"),
    ("Jetson AGX Thor", "Jetson AGX Thor"), ("Arc Pro B60", "Arc Pro B60"),
    ("MI355X", "MI355X"), ("MI350X", "MI350X"), ("MI325X", "MI325X"), ("MI300X", "MI300X"),
)
_BENCHMARKS = {
    "llama2-70b-99": "llama2-70b-99", "llama2-70b-99.9": "llama2-70b-99.9",
    "llama3.1-8b": "llama3.1-8b", "llama3_1-8b": "llama3.1-8b",
    "llama3.1-8b-edge": "llama3.1-8b-edge", "llama3_1-8b-edge": "llama3.1-8b-edge",
    "llama3.1-405b": "llama3.1-405b", "llama3_1-405b": "llama3.1-405b",
    "mixtral-8x7b": "mixtral-8x7b", "deepseek-r1": "deepseek-r1",
    "gptj-99": "gptj-99", "gptj-99.9": "gptj-99.9",
}


@dataclass(frozen=True)
class PublishedRow:
    index: int  # 0-based data row in the CSV
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

    @property
    def system_key(self) -> tuple[str, str, str]:
        return (self.round, self.submitter, self.system_id)

    @property
    def accelerators_used(self) -> int:
        return self.total * self.gpus_per_listed


def canonical_accelerator(name: str) -> tuple[str | None, str]:
    """(short name, reason when unknown) of a results table's accelerator column."""
    if not name or name.strip().upper() == "N/A":
        return None, "CPU-only system: no accelerator to model"
    if "(x" in name and "," in name:
        return None, "heterogeneous system (more than one accelerator type)"
    for key, short in _ACCELERATORS:
        if key.lower() in name.lower():
            return short, ""
    return None, f"accelerator {name!r} is not in accelerators.csv"


def canonical_benchmark(name: str) -> tuple[str | None, str]:
    b = _BENCHMARKS.get(name.strip())
    if b is None:
        return None, f"benchmark {name!r} is an open-division variant with no model row"
    return b, ""


def _stack(row: dict[str, str], vendor: str) -> str:
    text = f"{row['system_name']} {row['system_id']}".lower()
    if "vllm" in text:
        return "vllm"
    if "sglang" in text:
        return "sglang"
    if "trt" in text or "tensorrt" in text:
        return "trtllm"
    if "llmboost" in text or "mangoboost" in text:
        return "other"
    if row["submitter"] == "RedHat":
        return "vllm"
    return {"NVIDIA": "trtllm", "AMD": "vllm"}.get(vendor, "other")


def _int(text: str) -> int:
    try:
        return int(float(text))
    except ValueError:
        return 0


def _row(i: int, r: dict[str, str]) -> PublishedRow:
    acc, why_acc = canonical_accelerator(r["accelerator_model_name"])
    bench, why_bench = canonical_benchmark(r["benchmark"])
    reasons = []
    if r["division"] != "closed":
        reasons.append("open division: the model or its accuracy target may differ from "
                       "the reference")
    if why_acc:
        reasons.append(why_acc)
    if why_bench:
        reasons.append(why_bench)
    if r["scenario"] not in ("Offline", "Server", "Interactive"):
        reasons.append(f"{r['scenario']} (a latency scenario) is not calibrated here")
    if r["metric"] not in ("tokens/s", "samples/s", "queries/s"):
        reasons.append(f"metric {r['metric']!r} is not a throughput")
    total = _int(r["total_accelerators"])
    if total <= 0 and not why_acc:
        reasons.append("no accelerator count")
    vendor = "other"
    if acc is not None:
        vendor = find_accelerator(acc).vendor
    if bench is not None:
        try:
            find_model(bench)
            workload(bench)
        except ConfigError as e:
            reasons.append(str(e))
    dual = 2 if "dual" in r["accelerator_model_name"].lower() else 1
    return PublishedRow(
        index=i, round=r["round"], division=r["division"], submitter=r["submitter"],
        system_name=r["system_name"], system_id=r["system_id"],
        accelerator_name=r["accelerator_model_name"], per_node=_int(r["accelerators_per_node"]),
        nodes=_int(r["number_of_nodes"]) or 1, total=total, benchmark_raw=r["benchmark"],
        scenario=r["scenario"], metric=r["metric"], result=float(r["result"] or 0),
        samples_per_second=float(r["samples_per_second"] or 0), accelerator=acc,
        benchmark=bench, stack=_stack(r, vendor), gpus_per_listed=dual,
        eligible=not reasons, reason="; ".join(reasons),
    )


def read_published(path: Path) -> list[PublishedRow]:
    """Every row of a published-results CSV, each marked eligible or not (and why)."""
    with open(path, encoding="utf-8", newline="") as f:
        return [_row(i, r) for i, r in enumerate(csv.DictReader(f))]
