"""How long the analyses commands take from start to their first line of output.

Runs each command (``python -m tokenmark ...``) as a fresh process, as a user on a
fresh install would (no results database: ``TOKENMARK_DB`` points at a file that does
not exist, so the answer comes from the packaged table of published results), and
prints per command the median over ``--repeat`` runs of:

- wall time from the start of the process to its first line on stdout;
- the process's own CPU time (user + sys, from ``wait4``), which a busy machine does
  not inflate the way it inflates wall time;
- the machine's load average over the runs (``/proc/loadavg``), so a figure taken on a
  busy machine says so.

Bytecode is cached as an installed package has it (``PYTHONDONTWRITEBYTECODE`` is
removed from the commands' environment and one unmeasured run writes the caches):
compiling tokenmark's modules from source would add ~0.15 s to every start.

Goal (issue 22): start to first line <= 0.5 s on a quiet machine.

With ``--run-tokenizer DIR`` (the peers harness's tokenizer folder; default
``$TOKENIZER_DIR`` when set) it also prints the CPU time ``tokenmark run`` spends before its
first request against the harness's exact-delay mock server, with the same flags as
``bench/cli_peers.py`` and bytecode cached as above (issue 21's goal: <= 0.5 s).

    .venv/bin/python bench/cli_start.py [--repeat 5] [--importtime] [--run-tokenizer DIR]

``--importtime`` also prints the ten slowest imports of one leaderboard start
(``python -X importtime``, cumulative microseconds).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

COMMANDS = (
    ("leaderboard", ["leaderboard", "deepseek-r1", "Offline", "--round", "v6.1", "--limit",
                     "5"]),
    ("compare --accelerators", ["compare", "GB300", "Vera Rubin", "--accelerators",
                                "--round", "v6.1"]),
    ("scaling", ["scaling", "deepseek-r1", "Offline", "--accelerator", "GB300",
                 "--submitter", "NVIDIA", "--round", "v6.1", "--base", "72"]),
    ("top", ["top", "--accelerator", "MI350-series", "--round", "v6.1"]),
    ("reproducibility", ["reproducibility", "--round", "v6.1", "--vendor", "amd"]),
    ("software-gains", ["software-gains", "llama3.1-8b", "Offline", "--submitter", "Intel"]),
)


def _load() -> float:
    try:
        return float(Path("/proc/loadavg").read_text().split()[0])
    except OSError:
        return float("nan")


def _run(args: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """(seconds to the first stdout line, CPU seconds of the process, exit code)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "tokenmark", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    proc.stdout.readline()
    first = time.perf_counter() - t0
    proc.stdout.read()
    proc.stdout.close()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return first, usage.ru_utime + usage.ru_stime, proc.returncode


def _floor(env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU of a process that only imports what every tokenmark command
    imports before any tokenmark code: the interpreter, typer and rich (pydantic no
    longer: tokenmark/cli/coerce.py converts the options). tokenmark's own share is a
    command's figure minus this."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", "import typer, rich.console, rich.table"],
                            env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return time.perf_counter() - t0, usage.ru_utime + usage.ru_stime


def _run_row(opts: argparse.Namespace, env: dict[str, str]) -> None:
    """``tokenmark run`` to its first request (bench/cli_peers.py's probe and flags)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from bench.cli_peers import cpu_to_first_request, find_peers

    peers = find_peers(opts.peers)
    env = {**env, "PYTHONPATH": os.environ.get("PYTHONPATH", str(Path(__file__).resolve(
        ).parent.parent))}
    cpu_to_first_request(peers, opts.run_tokenizer, env, "1")  # warm-up: bytecode
    cpus, loads = [], []
    for _ in range(opts.repeat):
        loads.append(_load())
        cpu = cpu_to_first_request(peers, opts.run_tokenizer, env, "1")
        if cpu is None:
            raise SystemExit("run: no first request (see above)")
        cpus.append(cpu)
    print(f"{'run (to 1st request)':24} {'':>15} {statistics.median(cpus):9.3f} "
          f"{statistics.mean(loads):6.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--importtime", action="store_true")
    ap.add_argument("--run-tokenizer", default=os.environ.get("TOKENIZER_DIR", ""),
                    help="also measure `tokenmark run` to its first request (issue 21)")
    ap.add_argument("--peers", default="", help="the bench-peers harness folder")
    opts = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "TOKENMARK_DB": str(Path(tmp) / "none.db"), "COLUMNS": "200",
               "XDG_DATA_HOME": tmp}
        env.pop("TOKENMARK_PUBLISHED", None)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        for _, args in COMMANDS:  # warm-up: bytecode caches, file cache
            _run(args, env)
        print(f"{'command':24} {'first line (s)':>15} {'CPU (s)':>9} {'load':>6}")
        floor = [_floor(env) for _ in range(opts.repeat)]
        print(f"{'(python+typer+rich)':24} {statistics.median(w for w, _ in floor):15.3f} "
              f"{statistics.median(c for _, c in floor):9.3f} {_load():6.2f}")
        for name, args in COMMANDS:
            walls, cpus, loads = [], [], []
            for _ in range(opts.repeat):
                loads.append(_load())
                wall, cpu, code = _run(args, env)
                if code != 0:
                    raise SystemExit(f"{name}: exit code {code}")
                walls.append(wall)
                cpus.append(cpu)
            print(f"{name:24} {statistics.median(walls):15.3f} "
                  f"{statistics.median(cpus):9.3f} {statistics.mean(loads):6.2f}")
        if opts.run_tokenizer:
            _run_row(opts, env)
        if opts.importtime:
            out = subprocess.run([sys.executable, "-X", "importtime", "-m", "tokenmark",
                                  *COMMANDS[0][1]], env=env, capture_output=True,
                                 text=True, check=True)
            rows = []
            for line in out.stderr.splitlines():
                parts = line.split("|")
                if len(parts) == 3 and parts[1].strip().isdigit():
                    rows.append((int(parts[1]), parts[2].rstrip()))
            print("slowest imports (cumulative us):")
            for us, mod in sorted(rows, reverse=True)[:10]:
                print(f"  {us:9d} {mod}")
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
