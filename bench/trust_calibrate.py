"""What this client sustains against the built-in exact server at full speed
(``tokenmark calibrate`` without the cache), and the machine's background load.

Run: .venv/bin/python bench/trust_calibrate.py [SECONDS] [WORKERS]
"""

from __future__ import annotations

import sys
import tempfile

from tokenmark.trust.fingerprint import background_cores, cpu_snapshot
from tokenmark.trust.selfcal import measure


def main() -> None:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
    workers = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    with tempfile.TemporaryDirectory():
        a = cpu_snapshot()
        cap = measure(duration_s=seconds, concurrency=32, output_tokens=64, workers=workers)
        b = cpu_snapshot()
    print(f"client capacity ({workers} workers, 32 in flight, 64 tokens each, {seconds:g} s): "
          f"{cap.requests_per_s:,.0f} requests/s, {cap.tokens_per_s:,.0f} streamed tokens/s "
          f"({cap.completed} completed, {cap.failed} failed)")
    print(f"cores busy outside this process meanwhile (server process included): "
          f"{background_cores(a, b)}")


if __name__ == "__main__":
    main()
