"""A closed-division tree from official-LoadGen runs, checked by tokenmark and (optionally)
by the official MLCommons checker: the closed-division proof, repeatable.

For one benchmark (default llama3.1-8b, round v6.0) and its scenarios (default Offline and
Server), it runs with ``tokenmark run --loadgen official`` against a system under test
(default: tokenmark's emulated server; ``--sut hf --model-dir DIR`` for a real local
model), in this order: TEST06 for each scenario, the performance runs, the accuracy runs
(whole dataset). It scores each accuracy run with ``tokenmark score`` against a
references file (``--references``; without one, a file of placeholder answers is written:
a synthetic model meets no accuracy target, and the tree says so), packages everything
with ``tokenmark submission package --division closed``, checks the tree with
``tokenmark submission check`` and, given ``--inference PATH`` (a checkout of
``mlcommons/inference``; never committed), runs the official
``tools/submission/submission_checker`` and prints every error it logs.

The full run is long (round settings: every performance run lasts 600 s or more; each
accuracy run covers the 13,368-sample set): about 45 minutes for llama3.1-8b Offline and
Server on the emulated H200. ``--quick`` shortens every run (10 s, 100 queries, a
300-sample set) to try the pipeline in about five minutes; the checkers then rightly fail
the durations and sample counts.

Run: python bench/closed_division.py OUT [--inference PATH] [--quick] [--sut hf --model-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from tokenmark.submission.package import system_template

SYSTEM = {
    **system_template("closed", "tokenmark"),
    "division": "closed", "submitter": "tokenmark", "status": "available",
    "system_type": "datacenter", "number_of_nodes": "1", "host_processors_per_node": "1",
    "host_processor_model_name": "the client machine's CPU",
    "host_processor_core_count": str(os.cpu_count() or 1), "host_memory_capacity": "n/a",
    "host_storage_capacity": "n/a", "host_storage_type": "n/a", "accelerators_per_node": "1",
    "accelerator_memory_capacity": "n/a", "operating_system": sys.platform,
    "other_software_stack": "Python, mlcommons-loadgen (official LoadGen)",
    "host_memory_configuration": "n/a", "host_networking": "loopback",
    "host_network_card_count": "0", "host_networking_topology": "loopback",
    "accelerator_host_interconnect": "n/a", "accelerator_memory_configuration": "n/a",
    "accelerator_interconnect": "n/a", "cooling": "n/a",
    "sw_notes": "Runs driven by the official LoadGen; results unverified.",
    **{k: "n/a" for k in ("host_processor_frequency", "host_processor_caches",
                          "host_processor_interconnect", "accelerator_frequency",
                          "accelerator_interconnect_topology", "accelerator_on-chip_memories")},
}
MEASUREMENTS = {"input_data_types": "int32 token ids", "retraining": "No",
                "starting_weights_filename": "see hw_notes", "weight_data_types": "see hw_notes",
                "weight_transformations": "none"}


def tm(*args: str, check: bool = False) -> int:
    cmd = [sys.executable, "-m", "tokenmark", *args]
    print("$ tokenmark " + " ".join(args), flush=True)
    t0 = time.perf_counter()
    rc = subprocess.run(cmd, check=False).returncode
    print(f"  exit {rc} in {time.perf_counter() - t0:.0f} s; load average "
          f"{' '.join(Path('/proc/loadavg').read_text().split()[:3])}", flush=True)
    if check and rc not in (0, 1):
        sys.exit(f"tokenmark {args[0]} failed with exit code {rc}")
    return rc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--benchmark", default="llama3.1-8b")
    ap.add_argument("--round", default="v6.0")
    ap.add_argument("--scenarios", default="Offline,Server")
    ap.add_argument("--offline-qps", default="30", help="Offline expected QPS")
    ap.add_argument("--server-qps", default="20", help="Server target QPS")
    ap.add_argument("--accelerator", default="H200 SXM", help="the emulated accelerator")
    ap.add_argument("--pool-size", default="512", help="connections to the server: an "
                    "Offline query of the whole set opens one per sample without a cap")
    ap.add_argument("--sut", default="", help="hf: a local Hugging Face model (--model-dir)")
    ap.add_argument("--model-dir", default="")
    ap.add_argument("--references", type=Path, help="the dataset's reference answers")
    ap.add_argument("--inference", type=Path, help="a checkout of mlcommons/inference")
    ap.add_argument("--quick", action="store_true", help="10 s runs of 300 samples")
    a = ap.parse_args()
    out = a.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    sut = ["--sut", a.sut, "--model-dir", a.model_dir] if a.sut else \
        ["--accelerator", a.accelerator]
    quick = ["--min-duration", "10", "--min-queries", "100", "--dataset-size", "300"] \
        if a.quick else []
    common = ["run", "-b", a.benchmark, "--round", a.round, "--loadgen", "official", "-q",
              "--db", str(out / "results.db"), "--pool-size", a.pool_size, *sut, *quick]
    runs: list[Path] = []
    accuracy: list[Path] = []
    scenarios = [s.strip() for s in a.scenarios.split(",") if s.strip()]

    def rate(sc: str) -> list[str]:
        off = sc == "Offline"
        return ["--qps", a.offline_qps if off else a.server_qps, *(["--no-stream"] if off else [])]

    for sc in scenarios:
        d = out / f"test06-{sc.lower()}"
        tm(*common, "-s", sc, *rate(sc), "--audit", "TEST06", "-o", str(d), check=True)
        runs.append(d)
    for sc in scenarios:
        d = out / f"perf-{sc.lower()}"
        tm(*common, "-s", sc, *rate(sc), "-o", str(d), check=True)
        runs.append(d)
    for sc in scenarios:
        d = out / f"acc-{sc.lower()}"
        tm(*common, "-s", sc, *rate(sc), "--mode", "accuracy", "-o", str(d), check=True)
        runs.append(d)
        accuracy.append(d)
    refs = a.references
    if refs is None:
        refs = out / "placeholder-references.jsonl"
        n = json.loads((accuracy[0] / "results.json").read_text())["run"]["dataset"]["size"]
        refs.write_text("".join(json.dumps({"output": f"placeholder reference {i}"}) + "\n"
                                for i in range(n)))
    for d in accuracy:
        tm("score", str(d), "--references", str(refs))
        tm("import", str(d), "--db", str(out / "results.db"))  # adds the scores to the run
    system = dict(SYSTEM)
    if a.sut:
        system.update(system_name=f"local model {a.model_dir} (CPU)",
                      accelerator_model_name="none (CPU)", framework="tokenmark hf engine",
                      hw_notes=f"A local Hugging Face model ({a.model_dir}) on the CPU.")
    else:
        system.update(system_name=f"tokenmark emulated server ({a.accelerator})",
                      accelerator_model_name=f"{a.accelerator} (emulated by tokenmark)",
                      framework="tokenmark emulated server",
                      hw_notes="No accelerator: every time is predicted by tokenmark's "
                      "performance model; the emulated model has no weights.")
    # the file's name is the system's folder name in the tree
    sys_file = out / ("local-model.json" if a.sut else
                      "emulated-" + a.accelerator.split()[0].lower() + ".json")
    sys_file.write_text(json.dumps(system, indent=2))
    (out / "measurements.json").write_text(json.dumps(MEASUREMENTS, indent=2))
    tree = out / "tree"
    tm("submission", "package", *map(str, runs), "-o", str(tree), "--submitter", "tokenmark",
       "--system", str(sys_file), "--measurements", str(out / "measurements.json"),
       "--division", "closed", "--round", a.round)
    tm("submission", "check", str(tree), "--round", a.round)
    if a.inference is not None:
        log = out / "official_checker.log"
        with open(log, "w") as f:
            subprocess.run([sys.executable, "-m", "submission_checker.main", "--input",
                            str(tree), "--version", a.round, "--csv", str(out / "summary.csv")],
                           cwd=a.inference / "tools" / "submission", stdout=f,
                           stderr=subprocess.STDOUT, check=False)
        print(f"official checker ({log}):")
        for line in log.read_text().splitlines():
            if " ERROR]" in line or "WARNING] " in line and "skipped" not in line:
                print("  " + line)


if __name__ == "__main__":
    main()
