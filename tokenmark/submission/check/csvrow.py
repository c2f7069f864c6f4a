"""The summary CSV row of a result without errors, in the official checker's columns and
formatting."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from tokenmark.mlperf.mllog import DetailLog
from tokenmark.mlperf.presets import BenchmarkPreset
from tokenmark.submission.check.report import ResultCheck, _Ctx
from tokenmark.submission.layout import ResultPaths

# -- the summary CSV row ---------------------------------------------------------------------


def _py_float(v: float) -> str:
    return repr(float(v))


def _csv_row(ctx: _Ctx, rc: ResultCheck, bench: BenchmarkPreset, d: DetailLog,
             paths: ResultPaths, sysj: Mapping[str, Any], accuracy: Mapping[str, str],
             measurements: Mapping[str, Any]) -> dict[str, str]:
    assert rc.figure is not None
    notes = str(sysj.get("hw_notes", "") or "")
    if sysj.get("sw_notes"):
        notes = (notes + ". " if notes else "") + str(sysj.get("sw_notes"))
    try:
        total = int(str(sysj.get("number_of_nodes"))) * int(str(sysj.get("accelerators_per_node")))
        total_s = str(total)
    except ValueError:
        total_s = ""
    acc = json.dumps(dict(accuracy)).replace(",", " ").replace('"', "").replace(
        "{", "").replace("}", "").strip()
    ran = str(d.get("effective_scenario", ""))
    return {
        "Organization": rc.submitter,
        "Availability": str(sysj.get("status", "")),
        "Division": rc.division,
        "SystemType": str(sysj.get("system_type", "")),
        "SystemName": str(sysj.get("system_name", "")),
        "Platform": rc.system,
        "Model": rc.benchmark,
        "MlperfModel": bench.name,
        "Scenario": rc.scenario,
        "Result": _py_float(rc.figure.value),
        "Accuracy": acc,
        "number_of_nodes": str(sysj.get("number_of_nodes", "")),
        "host_processor_model_name": str(sysj.get("host_processor_model_name", "")),
        "host_processors_per_node": str(sysj.get("host_processors_per_node", "")),
        "host_processor_core_count": str(sysj.get("host_processor_core_count", "")),
        "accelerator_model_name": str(sysj.get("accelerator_model_name", "")),
        "accelerators_per_node": str(sysj.get("accelerators_per_node", "")),
        "total_accelerators": total_s,
        "Location": str(paths.perf_dir),
        "framework": str(sysj.get("framework", "")),
        "operating_system": str(sysj.get("operating_system", "")),
        "notes": notes,
        "compliance": rc.division,
        "errors": "0",
        "version": ctx.preset.round,
        # the checker's test, as it runs: the folder name against the scenario LoadGen
        # ran (its ("server", "interactive") exception compares lower case with the
        # logged "Server" and never applies, so Interactive and lower-case folders say 1)
        "inferred": "1" if ran and rc.scenario != ran else "0",
        "has_power": str((paths.perf_dir.parent / "power").is_dir()),
        "Units": rc.figure.unit,
        "weight_data_types": str(measurements.get("weight_data_types", "")),
        "design_power_watts": "",
        "PrivateID": "",
    }
