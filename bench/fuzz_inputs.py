"""How many hostile inputs tokenmark's parsers and its importer took without a crash.

Runs the property tests of the input bounds (``tests/unit/test_inputs.py``: JSON and TOML
against ``json``/``tomllib``, nesting up to 100,000 deep, dotted keys), of the secret
masking (``tests/unit/test_redact.py``) and the importer fuzz
(``tests/results/test_import_fuzz.py``: a damaged submission tree and a damaged
``results.json``) with ``--examples`` generated cases per property (the tests run 300 or
250), and prints per property the cases run and the failures Hypothesis found (a failure
is a crash or a wrong answer; Hypothesis stops a property at its first one and shrinks
it). Also prints the machine's load average.

Run: ``.venv/bin/python bench/fuzz_inputs.py [--examples 2000]``.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SUITES = ("tests/unit/test_inputs.py", "tests/unit/test_redact.py",
          "tests/results/test_import_fuzz.py")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--examples", type=int, default=2000)
    a = ap.parse_args()
    env = {**os.environ, "TOKENMARK_FUZZ_EXAMPLES": str(a.examples),
           "PYTHONPATH": str(ROOT)}
    print(f"load average before: {os.getloadavg()[0]:.1f}")
    total = failed = 0
    for suite in SUITES:
        p = subprocess.run([sys.executable, "-m", "pytest", suite, "-q", "-p",
                            "no:cacheprovider", "--hypothesis-show-statistics", "-k",
                            "any or damaged or within or depth or untouched"],
                           cwd=ROOT, env=env, capture_output=True, text=True)
        name = None
        for line in p.stdout.splitlines():
            m = re.match(r"(\S+::\S+):", line.strip())
            if m:
                name = m.group(1).split("::")[-1]
            m = re.search(r"(\d+) passing, (\d+) failing", line)
            if m and name:
                ok, bad = int(m.group(1)), int(m.group(2))
                total += ok + bad
                failed += bad
                print(f"{name}: {ok + bad} cases, {bad} failing")
        tail = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else p.stderr[-300:]
        print(f"  {suite}: {tail}")
    print(f"total: {total} generated cases, {failed} failing; "
          f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
