"""How fast a whole published round imports: ``python bench/import_round.py PATH [--db URL]``.

PATH is a checkout of a results repository (e.g. ``mlcommons/inference_results_v5.1``,
about 54,000 files; fetch it while developing, never in CI). Prints the files under PATH,
the result folders read, rows stored, per-file errors, the seconds taken to read and to
write, and the machine's background load during the import (other processes' CPU, in
cores). Goal (issue "Results"): the whole round in <= 60 s. When PATH holds the round's
``summary_results.json`` (MLCommons' published table), it also counts how many published
results the import reproduces exactly.

The database is a fresh SQLite file in a temporary folder unless ``--db`` names one.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

from tokenmark.importer import scan
from tokenmark.store import Store


def cpu_times() -> tuple[float, float]:
    """(busy seconds of the whole machine, this process's CPU seconds)."""
    with open("/proc/stat") as f:
        parts = [float(x) for x in f.readline().split()[1:]]
    busy = (sum(parts) - parts[3] - parts[4]) / os.sysconf("SC_CLK_TCK")
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return busy, ru.ru_utime + ru.ru_stime


def published_agreement(path: Path, rows: list) -> str:
    table = path / "summary_results.json"
    if not table.is_file():
        return "no summary_results.json to compare with"
    pub = {x["Location"]: x for x in json.loads(table.read_text())}
    mine = {r.source_path: r for r in rows}
    both = set(pub) & set(mine)
    same = sum(math.isclose(pub[k]["Performance_Result"], mine[k].value, rel_tol=1e-9)
               for k in both)
    return (f"{same} of {len(both)} results in both match summary_results.json exactly "
            f"({len(pub)} published, {len(mine)} imported)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", type=Path)
    ap.add_argument("--db", help="database path or URL (default: a temporary SQLite file)")
    args = ap.parse_args()
    if not args.path.is_dir():
        sys.exit(f"{args.path} is not a folder")
    files = sum(len(f) for _, _, f in os.walk(args.path))
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or str(Path(tmp) / "results.db")
        before, t0 = cpu_times(), time.perf_counter()
        found = scan(args.path)
        t1 = time.perf_counter()
        with Store.open(db) as st:
            counts = st.write(found.rows, found.runs, list(found.systems.values()))
        t2 = time.perf_counter()
        after = cpu_times()
    load = max(0.0, ((after[0] - before[0]) - (after[1] - before[1])) / (t2 - t0))
    print(f"files under {args.path}: {files}")
    print(f"result folders read: {found.folders}; rows: {len(found.rows)}; "
          f"systems: {len(found.systems)}; per-file errors: {len(found.errors)}")
    for e in found.errors[:20]:
        print(f"  {e}")
    print(f"read {t1 - t0:.2f} s + write {t2 - t1:.2f} s = {t2 - t0:.2f} s "
          f"(goal <= 60 s); added {counts.added}, unchanged {counts.unchanged}")
    print(f"background load during the import: {load:.2f} cores "
          f"(of {len(os.sched_getaffinity(0))})")
    print(published_agreement(args.path, found.rows))


if __name__ == "__main__":
    main()
