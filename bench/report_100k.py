"""The HTML report of a 100k-request run: its size, how long it takes, peak memory.

Makes the run first (llama3.1-8b Server at 500 queries/s for 200 s on the virtual
clock, about 100,000 requests of up to 128 streamed tokens: a 126 MB records.jsonl),
then times ``write_report`` in a fresh process and reads its peak RSS.
Run: ``.venv/bin/python bench/report_100k.py [FOLDER]`` (default: a temporary folder).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

RUN = ["-m", "tokenmark", "run", "-b", "llama3.1-8b", "-s", "Server", "--qps", "500",
       "--min-duration", "200", "--virtual-time", "--dataset-size", "1024",
       "--sut-max-batch", "600", "--no-db", "-q"]
MEASURE = """
import resource, sys, time
from pathlib import Path
from tokenmark.report import write_report
t0 = time.perf_counter()
out = write_report(Path(sys.argv[1]))
dt = time.perf_counter() - t0
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(f"{out}: {out.stat().st_size / 1e3:,.0f} kB in {dt:.2f} s, peak RSS {rss:,.0f} MiB")
"""


def main() -> None:
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp()) / "run"
    if not (folder / "results.json").exists():
        subprocess.run([sys.executable, *RUN, "-o", str(folder)], check=False)
    lines = sum(1 for _ in open(folder / "records.jsonl", "rb"))
    size = (folder / "records.jsonl").stat().st_size / 1e6
    print(f"{lines:,} records, records.jsonl {size:,.0f} MB")
    subprocess.run([sys.executable, "-c", MEASURE, str(folder)], check=True)


if __name__ == "__main__":
    main()
