"""``tokenmark run`` as a user runs it, beside the peer load generators, in one invocation.

Drives the peers harness (``../shared/bench-peers/``: an exact-delay mock server pinned to
one core, each client pinned to the other, the client's whole process tree measured from
/proc, the server's own write times as the truth) for tokenmark's CLI and for every peer
installed, then prints the figures of issue 21 with tokenmark's ratio to the best peer and
to the plain aiohttp loop (``floor``) measured in the same invocation:

- max streamed tokens/s at 256 in flight, 128-token outputs, zero delays (at the server);
- client CPU-s per 1M tokens at 16 in flight (20 ms TTFT, 5 ms tokens; steady window);
- TTFT p99 error against the server's truth at 1, 64 and 256 in flight (50 ms, 10 ms);
- achieved / target arrival rate, Poisson 400/s;
- tokenmark's CPU before its first request (imports, checks, dataset, connections).

``--tools noop`` adds the no-op client (bench/noop_client.py: raw sockets, reads stamped
where they land, nothing parsed), run in the harness's ``floor`` slot: the floor this
harness puts under each goal. A goals table follows the figures: each of issue 21's
goals with tokenmark's figure, the best peer's, aiohttp's, the no-op floor and whether
it is met, not met, or below the floor (the no-op client misses it too).

``--variants`` runs tokenmark more than once with different settings, e.g.
``uvloop,asyncio`` (``TOKENMARK_EVENT_LOOP``) to see what the event loop is worth. Runs
are interleaved (rep 1 of every tool, then rep 2) so slow drifts of a shared machine spread
over all tools; the load average is printed with each run, and ``client util`` says how
much of its core each client got: on a loaded machine compare ratios, not absolutes.

A peer whose venv is missing is named as skipped with the reason. Set the harness folder
with ``--peers`` (default: ``$BENCH_PEERS``, ``../shared/bench-peers`` beside the
repository, or ``/work/shared/bench-peers``) and the peers' venvs with ``--venvs``
(``VENV_ROOT`` of the harness's setup.sh)::

    PYTHONPATH=. python bench/cli_peers.py --venvs /tmp/pb [--tools tokenmark,noop,floor,loadgen]
        [--scenarios max,cpu,acc-c1,acc-c64,acc-c256,rate-400] [--reps 1]
        [--variants uvloop,asyncio] [--results DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PEERS = ("floor", "loadgen", "vllm", "aiperf", "guidellm")
NAMES = {"floor": "aiohttp", "loadgen": "LoadGen", "vllm": "vllm bench", "aiperf": "AIPerf",
         "guidellm": "GuideLLM", "noop": "no-op"}
#: The no-op client (bench/noop_client.py) runs in the harness's ``floor`` slot: its
#: ``bin/python`` is a script that runs bench/noop_client.py with floor_client.py's
#: arguments, so the harness (server, pinning, CPU and truth) is the same, unchanged.
NOOP_PY = """#!/bin/sh
shift
exec {python} {client} "$@"
"""
SCENARIOS = ("max", "cpu", "acc-c1", "acc-c64", "acc-c256", "rate-400")
#: Each variant of tokenmark: its name and the environment it runs with.
VARIANTS = {"asyncio": {"TOKENMARK_EVENT_LOOP": "asyncio"},
            "uvloop": {"TOKENMARK_EVENT_LOOP": "uvloop"},
            # reads parsed where they land (before issue 21's ReadQueue) or when no send is due
            "inline": {"TOKENMARK_EVENT_LOOP": "asyncio", "TOKENMARK_DEFER_READS": "0"},
            "deferred": {"TOKENMARK_EVENT_LOOP": "asyncio", "TOKENMARK_DEFER_READS": "1"}}


def find_peers(given: str) -> Path:
    for p in (given, os.environ.get("BENCH_PEERS", ""), str(ROOT.parent / "shared" / "bench-peers"),
              "/work/shared/bench-peers"):
        if p and (Path(p) / "harness.py").is_file():
            return Path(p)
    sys.exit("bench/cli_peers.py: the peers harness was not found; give --peers DIR "
             "(the folder with harness.py, mock_server.py and run_tool.sh)")


def installed(tool: str, venvs: Path) -> str:
    """'' when the tool can run here, else why not."""
    if tool == "noop":
        return ""
    if tool in ("floor", "loadgen"):
        ok = (venvs / "venv-loadgen" / "bin" / "python").exists()
        return "" if ok else f"no {venvs}/venv-loadgen (run the harness's setup.sh)"
    if (venvs / f"venv-{tool}" / ".bench-ok").exists() or (
            venvs / f"venv-{tool}" / "bin" / tool).exists():
        return ""
    return f"not installed under {venvs}/venv-{tool} (the harness's setup.sh failed or was not run)"


def load() -> float:
    return os.getloadavg()[0]


def run_one(peers: Path, tool: str, variant: str, scenario: str, rep: int, results: Path,
            env: dict[str, str], server_cpu: str) -> dict[str, Any] | None:
    out = results / variant
    if tool == "noop":
        tool = "floor"  # in the floor's slot (NOOP_PY)
    cmd = ["taskset", "-c", server_cpu, sys.executable, str(peers / "harness.py"), "run",
           "--tool", tool, "--scenario", scenario, "--rep", str(rep), "--results", str(out)]
    if not shutil.which("taskset"):
        cmd = cmd[3:]
    la = load()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    path = out / "raw" / tool / scenario / f"rep{rep}" / "result.json"
    if not path.exists():
        print(f"  {variant} {scenario} rep {rep}: no result ({p.stderr.strip()[-200:]})")
        return None
    r: dict[str, Any] = json.loads(path.read_text())
    r["load"] = la
    own = path.parent / "out" / "tm" / "results.json"  # tokenmark's own results
    if own.exists():
        lag = _get(json.loads(own.read_text()), "summary", "latency_ms", "send_lag",
                   "percentiles", "99")
        r["tm_send_lag_p99"] = lag
    steady = r.get("steady") or {}
    print(f"  {variant:>10} {scenario:>8} rep {rep}: rc {r['rc']}, client util "
          f"{steady.get('client_util', float('nan')):.2f}, load {la:.1f}", flush=True)
    return r


def _get(d: Any, *path: str) -> Any:
    for k in path:
        d = d.get(k) if isinstance(d, dict) else None
    return d


def figure(rs: list[dict[str, Any]], scenario: str) -> float | None:
    """The scenario's figure, median over the reps that ran cleanly."""
    vals = []
    for r in rs:
        if r.get("rc") != 0 or r.get("timed_out"):
            continue
        if scenario == "max":
            v = _get(r, "steady", "tok_per_s")
        elif scenario == "cpu":
            v = _get(r, "steady", "cpu_s_per_1m_tok")
        elif scenario.startswith("acc"):
            tool = _get(r, "tool_report", "ttft_ms", "p99")
            truth = _get(r, "ground_truth", "ttft_ms", "p99")
            v = None if tool is None or truth is None else tool - truth
        elif scenario == "send-lag":  # the client's own send lag p99 in rate-400
            v = r.get("tm_send_lag_p99")
            if v is None:
                v = _get(r, "tool_report", "send_lag_ms", "p99")  # the no-op client's
        else:
            got = _get(r, "ground_truth", "arrival_rate")
            v = None if got is None else got / r["params"]["rate"]
        if v is not None:
            vals.append(float(v))
    return statistics.median(vals) if vals else None


ROWS = [("max", "max streamed tok/s, 256 in flight", "higher", "{:,.0f}"),
        ("cpu", "client CPU-s per 1M tokens, 16 in flight", "lower", "{:.1f}"),
        ("acc-c256", "TTFT p99 error (ms), 256 in flight", "lower", "{:+.1f}"),
        ("acc-c64", "TTFT p99 error (ms), 64 in flight", "lower", "{:+.1f}"),
        ("acc-c1", "TTFT p99 error (ms), 1 in flight", "lower", "{:+.1f}"),
        ("rate-400", "achieved / target, Poisson 400/s", "closer", "{:.2f}"),
        ("send-lag", "the client's own send lag p99 (ms), Poisson 400/s", "lower", "{:.3f}")]


def table(by: dict[tuple[str, str], list[dict[str, Any]]], columns: list[str]) -> str:
    lines = ["| figure | " + " | ".join(columns) + " | best peer | tokenmark / best peer "
             "| tokenmark / aiohttp |", "|---" * (len(columns) + 4) + "|"]
    tm = columns[0]
    for sc, label, better, fmt in ROWS:
        vals = {c: figure(by.get((c, sc), []), sc) for c in columns}
        if all(v is None for v in vals.values()):
            continue
        peers = {c: v for c, v in vals.items() if c in NAMES.values() and v is not None
                 and c != NAMES["noop"]}
        best_name, best = "", None
        for c, v in peers.items():
            if best is None or (better == "higher" and v > best) or (
                    better == "lower" and abs(v) < abs(best)) or (
                    better == "closer" and abs(v - 1) < abs(best - 1)):
                best_name, best = c, v

        def ratio(v: float | None, ref: float | None) -> str:
            if v is None or ref is None or ref == 0:
                return "n/a"
            return f"{v / ref:.2f}x"

        cells = ["n/a" if vals[c] is None else fmt.format(vals[c]) for c in columns]
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {best_name or 'n/a'} | "
                     f"{ratio(vals[tm], best)} | {ratio(vals[tm], vals.get('aiohttp'))} |")
    return "\n".join(lines)


#: Issue 21's goals: (scenario, goal, kind, bound). ``ratio-peer``: tokenmark / the best
#: peer >= bound; ``ratio-aiohttp``: tokenmark / aiohttp <= bound; ``abs``: |figure| <= bound.
GOALS = [("max", ">= 2.5x the best peer's streamed tok/s", "ratio-peer", 2.5),
         ("cpu", "CPU per 1M tokens <= 0.35x aiohttp's", "ratio-aiohttp", 0.35),
         ("acc-c1", "TTFT p99 error <= 0.5 ms, 1 in flight", "abs", 0.5),
         ("acc-c64", "TTFT p99 error <= 0.5 ms, 64 in flight", "abs", 0.5),
         ("acc-c256", "TTFT p99 error <= 0.5 ms, 256 in flight", "abs", 0.5),
         ("send-lag", "send lag p99 <= 1 ms, Poisson 400/s", "abs", 1.0)]


def _score(v: float | None, kind: str, ref: float | None) -> float | None:
    """The figure a goal bounds: a ratio to ``ref`` or the figure's size."""
    if v is None:
        return None
    if kind == "abs":
        return abs(v)
    return v / ref if ref else None


def _meets(x: float | None, kind: str, bound: float) -> bool | None:
    if x is None:
        return None
    return x >= bound if kind == "ratio-peer" else x <= bound


def goals(by: dict[tuple[str, str], list[dict[str, Any]]], columns: list[str]) -> str:
    """Each goal: tokenmark's figure, the best peer, aiohttp, the no-op client's (the
    floor of this harness) and whether it is met; a goal the no-op client does not meet
    is reported as below the floor."""
    lines = ["| goal | tokenmark | best peer | aiohttp | no-op floor | verdict |",
             "|---|---|---|---|---|---|"]
    tm = columns[0] if columns and columns[0].startswith("tokenmark") else None
    for sc, goal, kind, bound in GOALS:
        better = next(b for s_, _, b, _ in ROWS if s_ == sc)
        fmt = next(f for s_, _, _, f in ROWS if s_ == sc)
        vals = {c: figure(by.get((c, sc), []), sc) for c in columns}
        peers = {c: v for c, v in vals.items() if v is not None and c in NAMES.values()
                 and c != NAMES["noop"]}
        best_name, best = "", None
        for c, v in peers.items():
            if best is None or (better == "higher" and v > best) or (
                    better == "lower" and abs(v) < abs(best)):
                best_name, best = c, v
        aio = vals.get(NAMES["floor"])
        noop = vals.get(NAMES["noop"])
        mine = vals.get(tm) if tm else None

        ref = best if kind == "ratio-peer" else aio if kind == "ratio-aiohttp" else None

        def show(v: float | None, kind: str = kind, fmt: str = fmt,
                 ref: float | None = ref) -> str:
            if v is None:
                return "n/a"
            x = _score(v, kind, ref)
            return fmt.format(v) + (f" ({x:.2f}x)" if kind != "abs" and x is not None else "")

        m, f = (_meets(_score(v, kind, ref), kind, bound) for v in (mine, noop))
        sm, sn = _score(mine, kind, ref), _score(noop, kind, ref)
        # the no-op client is a floor only where tokenmark does not beat it
        beats_noop = sm is not None and sn is not None and (
            sm > sn if kind == "ratio-peer" else abs(sm) < abs(sn))
        verdict = ("n/a" if m is None else "met" if m else
                   "not met (the no-op client misses it too; tokenmark beats it)"
                   if f is False and beats_noop else
                   "below floor (the no-op client misses it too)" if f is False else
                   "not met" + ("" if f else " (no floor measured)"))
        lines.append(f"| {goal} | {show(mine)} | "
                     f"{(best_name + ' ' + fmt.format(best)) if best is not None else 'n/a'} | "
                     f"{show(aio)} | {show(noop)} | {verdict} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--peers", default="", help="the bench-peers harness folder")
    ap.add_argument("--venvs", default=os.environ.get("VENV_ROOT", "/tmp"),
                    help="VENV_ROOT of the harness's setup.sh (venv-loadgen, venv-vllm...)")
    ap.add_argument("--tokenizer", default="",
                    help="the harness's tokenizer folder (default: VENVS/tokenizer)")
    ap.add_argument("--tools", default="tokenmark,noop," + ",".join(PEERS))
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    ap.add_argument("--variants", default="asyncio",
                    help="tokenmark variants, comma separated: " + ", ".join(VARIANTS))
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--results", default="", help="keep the raw results here")
    ap.add_argument("--server-cpu", default="0")
    ap.add_argument("--client-cpu", default="1")
    a = ap.parse_args()
    peers = find_peers(a.peers)
    venvs = Path(a.venvs)
    tok = a.tokenizer or str(venvs / "tokenizer")
    tm_bin = shutil.which("tokenmark", path=str(Path(sys.executable).parent)) or shutil.which(
        "tokenmark")
    tools = [t for t in a.tools.split(",") if t]
    scenarios = [s for s in a.scenarios.split(",") if s]
    variants = [v for v in a.variants.split(",") if v]
    for v in variants:
        if v not in VARIANTS:
            sys.exit(f"bench/cli_peers.py: unknown variant {v!r} (choose from "
                     f"{', '.join(VARIANTS)})")
    skipped = {t: why for t in tools if t != "tokenmark" and (why := installed(t, venvs))}
    if "tokenmark" in tools and not tm_bin:
        skipped["tokenmark"] = "no tokenmark executable beside this Python"
    if not Path(tok, "tokenizer.json").exists():
        sys.exit(f"bench/cli_peers.py: no tokenizer at {tok} (the harness's make_tokenizer.py "
                 "writes it; give --tokenizer)")
    base = dict(os.environ, VENV_ROOT=str(venvs), TOKENIZER_DIR=tok,
                SERVER_CPU=a.server_cpu, CLIENT_CPU=a.client_cpu,
                PYTHONPATH=os.environ.get("PYTHONPATH", str(ROOT)))
    if tm_bin:
        base["TOKENMARK_BIN"] = tm_bin
    runs: list[tuple[str, str, dict[str, str]]] = []  # (tool, column, env)
    results = Path(a.results) if a.results else Path(tempfile.mkdtemp(prefix="cli-peers-"))
    for t in tools:
        if t in skipped:
            continue
        if t == "noop":
            fake = results / "noop-venv" / "bin"
            fake.mkdir(parents=True, exist_ok=True)
            (fake / "python").write_text(NOOP_PY.format(
                python=sys.executable, client=ROOT / "bench" / "noop_client.py"))
            (fake / "python").chmod(0o755)
            runs.append((t, NAMES[t], {**base, "VENV_LOADGEN": str(fake.parent)}))
        elif t == "tokenmark":
            runs += [(t, f"tokenmark[{v}]" if len(variants) > 1 else "tokenmark",
                      {**base, **VARIANTS[v]}) for v in variants]
        else:
            runs.append((t, NAMES[t], base))
    print(f"load before: {os.getloadavg()}; {os.cpu_count()} cores; results in {results}")
    by: dict[tuple[str, str], list[dict[str, Any]]] = {}
    t0 = time.monotonic()
    for rep in range(1, a.reps + 1):
        for tool, col, env in runs:
            for sc in scenarios:
                r = run_one(peers, tool, col.replace("[", "-").replace("]", ""), sc, rep,
                            results, env, a.server_cpu)
                if r is not None:
                    by.setdefault((col, sc), []).append(r)
                    if sc == "rate-400":
                        by.setdefault((col, "send-lag"), []).append(r)
    loads = [r["load"] for rs in by.values() for r in rs]
    print(f"\n{time.monotonic() - t0:.0f} s; load average during the runs: "
          f"{min(loads, default=0):.1f}-{max(loads, default=0):.1f} on {os.cpu_count()} cores; "
          f"medians of {a.reps} rep(s)\n")
    columns = [c for _, c, _ in runs]
    columns.sort(key=lambda c: not c.startswith("tokenmark"))
    print(table(by, columns))
    print("\n" + goals(by, columns))
    util = {c: figure_util(by.get((c, "max"), [])) for c in columns}
    print("\nclient core util in `max` (share of its core each client got): " + ", ".join(
        f"{c} {u:.2f}" for c, u in util.items() if u is not None))
    for t, why in skipped.items():
        print(f"skipped {NAMES.get(t, t)}: {why}")
    if "tokenmark" in tools and "tokenmark" not in skipped:
        for v in variants:
            firsts = [c for _ in range(3) if (c := cpu_to_first_request(
                peers, tok, {**base, **VARIANTS[v]}, a.client_cpu)) is not None]
            if firsts:
                print(f"tokenmark[{v}] CPU before the first request: {min(firsts):.2f} s "
                      f"(best of {len(firsts)}; load {load():.1f})")


#: Runs ``tokenmark run`` in this process and prints its CPU time when the first request
#: is written (everything before it: imports, checks, the dataset, the connections).
_FIRST = """
import resource, sys
from tokenmark.adapters import openai_http
from tokenmark.cli import main
send = openai_http.OpenAIHttpSUT.send
def first(self, *a, **k):
    if not getattr(first, "seen", False):
        first.seen = True
        ru = resource.getrusage(resource.RUSAGE_SELF)
        print(f"CPU-FIRST {ru.ru_utime + ru.ru_stime:.3f}", file=sys.stderr, flush=True)
    return send(self, *a, **k)
openai_http.OpenAIHttpSUT.send = first
sys.argv = ["tokenmark", *sys.argv[1:]]
main()
"""


def cpu_to_first_request(peers: Path, tok: str, env: dict[str, str], cpu: str) -> float | None:
    """CPU seconds ``tokenmark run`` (the harness's flags) spends before its first request."""
    with tempfile.TemporaryDirectory() as d:
        ready = Path(d, "ready")
        with socket.socket() as sk:
            sk.bind(("127.0.0.1", 0))
            port = sk.getsockname()[1]
        srv = subprocess.Popen([sys.executable, str(peers / "mock_server.py"), "--port",
                                str(port), "--ready-file", str(ready)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            t_end = time.monotonic() + 10
            while not ready.exists() and time.monotonic() < t_end:
                time.sleep(0.02)
            cmd = ["run", "-b", "llama3.1-8b", "-s", "closed", "--concurrency", "1",
                   "--url", f"http://127.0.0.1:{port}", "--api", "completions", "--stream",
                   "--model", "mock", "--tokenizer", tok, "--input-len", "128",
                   "--output-len", "16", "--max-tokens", "16", "--ignore-eos",
                   "--min-queries", "4", "--max-queries", "4", "--dataset-size", "4",
                   "--min-duration", "0", "--no-db", "--progress", "off", "-q", "-o",
                   str(Path(d, "out"))]
            pin = ["taskset", "-c", cpu] if shutil.which("taskset") else []
            p = subprocess.run([*pin, sys.executable, "-c", _FIRST, *cmd], env=env,
                               capture_output=True, text=True, check=False)
        finally:
            srv.terminate()
            srv.wait()
    for line in p.stderr.splitlines():
        if line.startswith("CPU-FIRST "):
            return float(line.split()[1])
    print(f"  CPU before the first request: not measured ({p.stderr.strip()[-300:]})")
    return None


def figure_util(rs: list[dict[str, Any]]) -> float | None:
    vals = [u for r in rs if (u := _get(r, "steady", "client_util")) is not None]
    return statistics.median(vals) if vals else None


if __name__ == "__main__":
    main()
