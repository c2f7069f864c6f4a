"""Write ``v5.0_summary.csv`` (the submission checker's ``summary.csv`` columns, quoted
CSV) from ``pages.txt``, the transcription of MLCommons' per-system v5.0 results pages.

Each ``R`` line gives a benchmark folder's Server and Offline figures as the page prints
them; each becomes one row per scenario with a figure (``-``: N/A on the page). The
``Location`` is the result's folder in the results tree, so the rows key like the
tree's. ``number_of_nodes`` is the page title's accelerator count divided by
``accelerators_per_node`` where the title states a count, else 1 (single-server titles
state none). Run: ``python bench/data/mlperf_v5.0/build_summary.py``.
"""

from __future__ import annotations

import csv
from pathlib import Path

HERE = Path(__file__).resolve().parent
COLUMNS = (
    "Organization", "Availability", "Division", "SystemType", "SystemName", "Platform",
    "Model", "MlperfModel", "Scenario", "Result", "Accuracy", "number_of_nodes",
    "host_processor_model_name", "host_processors_per_node", "host_processor_core_count",
    "accelerator_model_name", "accelerators_per_node", "total_accelerators", "Location",
    "framework", "operating_system", "notes", "compliance", "errors", "version",
    "inferred", "has_power", "Units", "weight_data_types",
)


def rows(text: str) -> list[dict[str, str]]:
    out: list[dict[str, str]] = []
    system: list[str] | None = None
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        f = line.split("|")
        if f[0] == "S":
            if len(f) != 15:
                raise SystemExit(f"pages.txt:{n}: a system line has 15 fields, not {len(f)}")
            system = f
            continue
        if f[0] != "R" or len(f) != 6 or system is None:
            raise SystemExit(f"pages.txt:{n}: not a result line of a system: {line!r}")
        (_, sub, platform, avail, name, total, accel, per_node, cpu, cpus, cores, fw, os_,
         notes, _commit) = system
        nodes = int(total) // int(per_node) if total else 1
        for scenario, value, unit in (("Server", f[2], f[4]), ("Offline", f[3], f[5])):
            if value == "-":
                continue
            out.append({
                "Organization": sub, "Availability": avail, "Division": "closed",
                "SystemType": "datacenter", "SystemName": name, "Platform": platform,
                "Model": f[1], "MlperfModel": f[1], "Scenario": scenario, "Result": value,
                "Accuracy": "", "number_of_nodes": str(nodes),
                "host_processor_model_name": cpu, "host_processors_per_node": cpus,
                "host_processor_core_count": cores, "accelerator_model_name": accel,
                "accelerators_per_node": per_node,
                "total_accelerators": str(nodes * int(per_node)),
                "Location": f"closed/{sub}/results/{platform}/{f[1]}/{scenario}",
                "framework": fw, "operating_system": os_, "notes": notes,
                "compliance": "closed", "errors": "0", "version": "v5.0", "inferred": "0",
                "has_power": "False", "Units": unit, "weight_data_types": "",
            })
    return out


def main() -> None:
    made = rows((HERE / "pages.txt").read_text(encoding="utf-8"))
    with open(HERE / "v5.0_summary.csv", "w", encoding="utf-8", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=COLUMNS, lineterminator="\n")
        w.writeheader()
        w.writerows(made)
    print(f"v5.0_summary.csv: {len(made)} rows")


if __name__ == "__main__":
    main()
