"""Where things live in a submission tree, per round, and the checker's fixed tables.

Copied as data (with its source) from ``mlcommons/inference``
``tools/submission/submission_checker/constants.py`` @ b66003e1 (2026-08-20): the path
templates (``PERFORMANCE_LOG_PATH``, ``MEASUREMENTS_PATH``, ``COMPLIANCE_PATH``,
``SRC_PATH``), ``SYSTEM_DESC_REQUIRED_FIELDS``, ``SYSTEM_DESC_MEANINGFUL_RESPONSE_REQUIRED_
FIELDS``, ``SYSTEM_IMP_REQUIRED_FILES``, ``REQUIRED_MEASURE_FILES``, ``ACC_PATTERN`` (the
LLM metrics), ``MAX_ACCURACY_LOG_SIZE``, ``TEST_DURATION_MS``, ``VALID_*`` and the summary
CSV's columns (``results.py``). Nothing here is the checker's code.

Two layouts (digest §7.1): up to v5.1, measurements and compliance sit beside
``results/`` (``measurements/<system>/<benchmark>/<scenario>/<system>*.json``,
``compliance/<system>/<benchmark>/<scenario>/TEST06/``) and the harness is in ``code/``;
from v6.0 both are inside the result folder (``measurements.json``, ``TEST06/``) and the
harness is in ``src/``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final

from tokenmark.resultrows import round_order

__all__ = [
    "ACC_PATTERNS",
    "AVAILABILITIES",
    "CSV_COLUMNS",
    "DIVISIONS",
    "MAX_ACCURACY_LOG_SIZE",
    "MEASUREMENTS_FIELDS",
    "MEASURE_FILES",
    "SYSTEM_MEANINGFUL_FIELDS",
    "SYSTEM_REQUIRED_FIELDS",
    "SYSTEM_TYPES",
    "TEST_DURATION_MS",
    "ResultPaths",
    "new_layout",
    "result_paths",
]

DIVISIONS: Final = ("closed", "open", "network")
AVAILABILITIES: Final = ("available", "preview", "rdi")
SYSTEM_TYPES: Final = ("datacenter", "edge", "datacenter,edge", "edge,datacenter")
#: ``MAX_ACCURACY_LOG_SIZE``: a submitted ``mlperf_log_accuracy.json`` is truncated to this.
MAX_ACCURACY_LOG_SIZE: Final = 10 * 1024
#: ``TEST_DURATION_MS``: the checker's minimum ``effective_min_duration_ms``.
TEST_DURATION_MS: Final = 600_000
#: ``truncate_accuracy_log.py``: bytes kept from each end of the accuracy log.
VIEWABLE_SIZE: Final = 4096

SYSTEM_REQUIRED_FIELDS: Final = (
    "division", "submitter", "status", "system_name", "number_of_nodes",
    "host_processor_model_name", "host_processors_per_node", "host_processor_core_count",
    "host_memory_capacity", "host_storage_capacity", "host_storage_type",
    "accelerators_per_node", "accelerator_model_name", "accelerator_memory_capacity",
    "framework", "operating_system", "system_type", "other_software_stack",
    "host_processor_frequency", "host_processor_caches", "host_memory_configuration",
    "host_processor_interconnect", "host_networking", "host_networking_topology",
    "accelerator_frequency", "accelerator_host_interconnect", "accelerator_interconnect",
    "accelerator_interconnect_topology", "accelerator_memory_configuration",
    "accelerator_on-chip_memories", "cooling", "hw_notes", "sw_notes",
    "host_network_card_count", "system_type_detail",
)
SYSTEM_MEANINGFUL_FIELDS: Final = (
    "division", "submitter", "system_type", "status", "system_name", "number_of_nodes",
    "host_processor_model_name", "host_processors_per_node", "host_processor_core_count",
    "host_memory_capacity", "host_memory_configuration", "host_storage_capacity",
    "host_storage_type", "host_networking", "host_network_card_count",
    "host_networking_topology", "accelerators_per_node", "accelerator_model_name",
    "accelerator_memory_capacity", "accelerator_host_interconnect",
    "accelerator_memory_configuration", "accelerator_interconnect", "cooling", "framework",
    "operating_system", "other_software_stack",
)
#: ``SYSTEM_IMP_REQUIRED_FILES``: the fields of ``measurements.json``.
MEASUREMENTS_FIELDS: Final = (
    "input_data_types", "retraining", "starting_weights_filename", "weight_data_types",
    "weight_transformations",
)
#: ``REQUIRED_MEASURE_FILES``: beside the measurements JSON, non-empty.
MEASURE_FILES: Final = ("user.conf", "README.md")

#: ``ACC_PATTERN`` entries for the metrics tokenmark's presets name.
ACC_PATTERNS: Final = {
    "ROUGE1": r".*'rouge1':\s+'?([\d.]+)'?.*",
    "ROUGE2": r".*'rouge2':\s+'?([\d.]+)'?.*",
    "ROUGEL": r".*'rougeL':\s+'?([\d.]+)'?.*",
    "ROUGELSUM": r".*'rougeLsum':\s+'?([\d.]+)'?.*",
    "GEN_LEN": r".*'gen_len':\s([\d.]+).*",
    "TOKENS_PER_SAMPLE": r".*'tokens_per_sample':\s([\d.]+).*",
    "gsm8k_accuracy": r".*'gsm8k':\s([\d.]+).*",
    "mbxp_accuracy": r".*'mbxp':\s([\d.]+).*",
    "exact_match": r".*'exact_match':\s([\d.]+).*",
    "F1_HIERARCHICAL": r'\{.*"f1":\s*([\d\.]+).*\}',
    "ACCURACY": r"Word Error Rate\:.*, accuracy=([0-9\.]+)%",
}

#: The summary CSV's columns, in the checker's order (``ResultExporter.head``).
CSV_COLUMNS: Final = (
    "Organization", "Availability", "Division", "SystemType", "SystemName", "Platform",
    "Model", "MlperfModel", "Scenario", "Result", "Accuracy", "number_of_nodes",
    "host_processor_model_name", "host_processors_per_node", "host_processor_core_count",
    "accelerator_model_name", "accelerators_per_node", "total_accelerators", "Location",
    "framework", "operating_system", "notes", "compliance", "errors", "version", "inferred",
    "has_power", "Units", "weight_data_types", "design_power_watts", "PrivateID",
)


def new_layout(round_name: str) -> bool:
    """Whether the round uses the v6.0 layout (measurements and compliance inside)."""
    return round_order(round_name) >= round_order("v6.0")


@dataclass(frozen=True)
class ResultPaths:
    """The files of one result folder ``<division>/<submitter>/results/<system>/<bench>/<scen>``."""

    folder: Path
    perf_dir: Path
    acc_dir: Path
    measurements_dir: Path
    measurements_json: Path | None  # None: the v5.x file was not found in its folder
    compliance_dir: Path
    src_dir: Path

    @property
    def perf_detail(self) -> Path:
        return self.perf_dir / "mlperf_log_detail.txt"

    @property
    def perf_summary(self) -> Path:
        return self.perf_dir / "mlperf_log_summary.txt"


def result_paths(root: Path, round_name: str, division: str, submitter: str, system: str,
                 benchmark: str, scenario: str) -> ResultPaths:
    sub = root / division / submitter
    folder = sub / "results" / system / benchmark / scenario
    if new_layout(round_name):
        mdir, mjson = folder, folder / "measurements.json"
        comp, src = folder, sub / "src"
    else:
        mdir = sub / "measurements" / system / benchmark / scenario
        mjson = None
        if mdir.is_dir() and mdir.resolve().is_relative_to(root.resolve()):  # no link out
            names = sorted(p.name for p in mdir.iterdir() if p.is_file())
            pick = [n for n in names if n.startswith(system) and n.endswith(f"_{scenario}.json")]
            pick = pick or [n for n in names if n.startswith(system) and n.endswith(".json")]
            mjson = mdir / pick[0] if pick else None
        comp = sub / "compliance" / system / benchmark / scenario
        src = sub / "code"
    return ResultPaths(folder, folder / "performance" / "run_1", folder / "accuracy", mdir,
                       mjson, comp, src)
