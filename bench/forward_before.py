"""The forward-in-time evaluation of the simulator as it was at commit 279d459 ("before").

Run against a copy of that commit's package, not this one:

    git archive 279d459 tokenmark | tar -x -C /tmp/old
    PYTHONPATH=/tmp/old .venv/bin/python bench/forward_before.py --rounds v5.1,v6.0,v6.1
    .venv/bin/python bench/calibrate.py --tables-from bench/out/forward/before

The code of 279d459 has no forward protocol and reads only the results CSV, so this
script (1) writes every LLM entry of the official summary tables in that CSV's columns
(the old reader then accepts or refuses each by its own rules: no gpt-oss-120b,
Qwen3-VL, Vera Rubin, ...); (2) takes the old calibration's parameters: for v5.1 its
"all" fold fitted afresh on the v4.1 rows only (stage 1 on the Offline rows, stage 2's
(mbu, serial) grid on the Server/Interactive rows, as ``calibrate_published`` fits
it); for v6.0 and v6.1 the ``efficiency.csv`` that commit shipped, which is that fold
fitted on the v4.1 and v5.1 rows (the old code could not read v6.0, so that is all it
could learn before v6.1 too); (3) predicts every row of the round the old code can
represent with the old prediction path (Offline trace; Server search bounded by the
system's Offline). It writes ``forward_predictions.csv``. ``--fast-search`` replaces the
old search's bisection by the current bracket-and-interpolate one over the old code's
own simulated runs (the same answer to the same 1% tolerance, about half the probes).
``--offline-only`` scores the Offline rows only (stage 1 alone for a refitted step): the
old stage 2 (900 Server searches for the v4.1 fit) and the old Server searches do not fit
in the time a shared 2-core machine has; the Server/Interactive rows are then left out
of the tables (not counted as refused).
"""

from __future__ import annotations

import argparse
import csv
import json
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "shared" / "mlperf"
FIELDS = ["round", "division", "submitter", "system_name", "accelerator_model_name",
          "accelerators_per_node", "number_of_nodes", "benchmark", "scenario", "metric",
          "result", "system_id", "total_accelerators", "samples_per_second"]
UNITS = {"tokens/s": "tokens/s", "samples/s": "samples/s", "queries/s": "queries/s"}
LLM = ("llama", "mixtral", "deepseek", "gpt-oss", "gptj", "qwen")


def _entries(path: Path) -> list[dict[str, Any]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    if isinstance(data, dict):
        return [data[k] for k in sorted(data, key=int)]
    return list(data)


def _csv_row(e: dict[str, Any], rnd: str, index: int) -> dict[str, Any]:
    if "Organization" in e:
        per, nodes = e.get("accelerators_per_node") or 0, e.get("number_of_nodes") or 0
        return {"round": rnd, "division": e["Division"], "submitter": e["Organization"],
                "system_name": e["SystemName"], "accelerator_model_name":
                e.get("accelerator_model_name") or "N/A", "accelerators_per_node": per,
                "number_of_nodes": nodes, "benchmark": e["Model"],
                "scenario": e["Scenario"],
                "metric": UNITS.get(str(e["Units"]).lower(), str(e["Units"])),
                "result": e["Result"], "system_id": e["Platform"],
                "total_accelerators": e.get("total_accelerators") or per * nodes,
                "samples_per_second": "", "table_index": index}
    per, nodes = e.get("a#") or 0, e.get("Nodes") or 0
    return {"round": rnd, "division": e["Category"], "submitter": e["Submitter"],
            "system_name": e["System"], "accelerator_model_name": e.get("Accelerator") or "N/A",
            "accelerators_per_node": per, "number_of_nodes": nodes, "benchmark": e["Model"],
            "scenario": e["Scenario"],
            "metric": UNITS.get(str(e["Performance_Units"]).lower(), e["Performance_Units"]),
            "result": e["Performance_Result"], "system_id": e["Platform"],
            "total_accelerators": e.get("Total Accelerators") or per * nodes,
            "samples_per_second": "", "table_index": index}


def combined_csv(out: Path) -> Path:
    """The CSV's v4.1 rows and every LLM entry of the three tables, in the CSV's columns."""
    rows: list[dict[str, Any]] = []
    with open(DATA / "llm_results_v4.1_v5.1.csv", encoding="utf-8", newline="") as f:
        for i, r in enumerate(csv.DictReader(f)):
            if r["round"] == "v4.1":
                rows.append({**{k: r[k] for k in FIELDS}, "table_index": i})
    for name, rnd in (("v5.1_summary_results.json", "v5.1"),
                      ("v6.0_summary_results.json", "v6.0"), ("v6.1_summary.json", "v6.1")):
        for i, e in enumerate(_entries(DATA / "summaries" / name)):
            if any(w in str(e.get("Model", "")).lower() for w in LLM):
                rows.append(_csv_row(e, rnd, i))
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, fieldnames=[*FIELDS, "table_index"])
        w.writeheader()
        w.writerows(rows)
    return out


def _fast_search(search: Any) -> Any:
    """The old search (bisection in log space to 1%) replaced by the current one's
    bracket-and-interpolate search over the old code's own probes (the same answer to
    the same tolerance with about half the probes: on a shared 2-core machine the old
    stage 2's 900 searches took 45 s each); documented where the tables are shown."""
    import math

    def g(p: Any, limits: Any) -> float:
        ratio = 0.0
        for got, limit in ((p.ttft_p99_ns, limits.ttft_ns), (p.tpot_p99_ns, limits.tpot_ns),
                           (p.e2e_p99_ns, limits.e2e_ns)):
            if limit:
                ratio = max(ratio, got / limit)
        return math.log(ratio) if ratio > 0 else -math.inf

    def max_server_rate(d: Any, inputs: Any, outputs: Any, limits: Any, *,
                        requests: int = 3000, rel_tol: float = 0.01, seed: int = 0) -> Any:
        hi = search.replica_saturated_rate(d, inputs, outputs, seed=seed) * d.replicas
        if hi <= 0:
            return search.ServerPoint(0.0, 0, 0, 0, 0.0, False)

        def probe(q: float) -> Any:
            return search.replica_server_run(d, inputs, outputs, q, limits,
                                             requests=requests, seed=seed)

        q = hi * 0.9
        best = probe(q)
        g_hi = math.inf
        for _ in range(2):
            if best.passed:
                break
            hi, g_hi = q, g(best, limits)
            q = hi / 8
            best = probe(q)
        if not best.passed:
            return best
        lo, g_lo, kept = q, g(best, limits), ""
        while math.log(hi / lo) > rel_tol:
            x = 0.5
            if math.isfinite(g_lo) and math.isfinite(g_hi) and g_hi > g_lo:
                x = min(0.9, max(0.1, -g_lo / (g_hi - g_lo)))
            mid = lo * math.exp(x * math.log(hi / lo))
            pt = probe(mid)
            if pt.passed:
                lo, g_lo, best = mid, g(pt, limits), pt
                if kept == "hi" and math.isfinite(g_hi):
                    g_hi /= 2
                kept = "hi"
            else:
                hi, g_hi = mid, g(pt, limits)
                if kept == "lo" and math.isfinite(g_lo):
                    g_lo /= 2
                kept = "lo"
        return best

    return max_server_rate


def _shipped_params() -> Any:
    """The old calibration's parameters for a row as 279d459 shipped them
    (efficiency.csv: its "all" fold, one row per group level with at least two systems):
    the first of the row's levels (architecture, stack, round) -> (architecture, stack)
    -> architecture -> vendor -> everything that has a row for the scenario."""
    from tokenmark.sim.params import efficiency_rows

    table = {(r.family, r.stack, r.round, r.scenario): r.efficiency for r in efficiency_rows()}

    def params(p: Any, scenario: str) -> tuple[Any, str]:
        arch, stack = p.group
        for level in ((arch, stack, p.row.round), (arch, stack, "*"), (arch, "*", "*"),
                      (p.vendor, "*", "*"), ("*", "*", "*")):
            eff = table.get((*level, scenario))
            if eff is not None:
                return eff, "/".join(level)
        raise KeyError(scenario)

    return params


def _refit(cal: Any, train: list[Any], traces: dict[Any, Any], lengths: Any, args: Any,
           say: Any) -> Any:
    """The old calibration's "all" fold fitted on ``train`` only."""
    offline = [p for p in train if p.row.scenario == "Offline"]
    for p in offline:
        if p.trace_key not in traces:
            traces[p.trace_key] = cal._trace(p, lengths)
    fitter = cal._Fitter(offline, traces)
    full = ("all", lambda _r: False)
    fitter.alpha(*full)
    latency = [p for p in train if p.row.scenario != "Offline" and p.limits]
    stage2 = None if args.offline_only else cal._LatencyFit(
        latency, fitter, lengths, args.requests, args.workers, say, True, args.cache)

    def params(p: Any, scenario: str) -> tuple[Any, str]:
        eff, used = fitter.params_for(p, *full)
        if scenario == "Offline" or stage2 is None:
            return eff, used
        pair, level = stage2.mbu(p, *full)
        if pair is not None:
            eff, used = fitter.params_for(p, *full, None, *pair)
            used += f" (mbu {pair[0]}, serial {pair[1]} from {level})"
        return eff, used

    return params


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", default="v5.1,v6.0")
    ap.add_argument("--refit", default="v5.1",
                    help="steps fitted afresh on the rounds before them (the others use the "
                         "parameters 279d459 shipped, fitted on v4.1 and v5.1)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "forward" / "before")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--requests", type=int, default=1500)
    ap.add_argument("--cache", type=Path, default=None)
    ap.add_argument("--offline-only", action="store_true",
                    help="score the Offline rows only (no stage 2, no Server searches: the "
                         "old stage 2 alone is 900 searches)")
    ap.add_argument("--fast-search", action="store_true",
                    help="the current search's probes in place of the old bisection")
    args = ap.parse_args()
    # the old package (279d459), found on PYTHONPATH
    from tokenmark.sim import calibration as cal
    from tokenmark.sim import search
    from tokenmark.sim.fit import predict_rate
    from tokenmark.sim.published import read_published

    if args.fast_search:
        cal.max_server_rate = _fast_search(search)

    t0 = time.perf_counter()

    def say(m: str) -> None:
        print(f"[{time.perf_counter() - t0:7.1f} s] {m}", flush=True)

    path = combined_csv(args.out / "combined.csv")
    rows = read_published(path)
    with open(path, encoding="utf-8", newline="") as f:
        index = [int(r["table_index"]) for r in csv.DictReader(f)]
    lengths = cal._Lengths()
    prepared: dict[int, Any] = {}
    refused: dict[int, str] = {}
    for row in rows:
        if not row.eligible:
            refused[row.index] = row.reason
            continue
        p = cal._prepare(row, lengths)
        if isinstance(p, str):
            refused[row.index] = p
        else:
            prepared[row.index] = p
    say(f"{len(prepared)} representable rows of {len(rows)}")
    out_rows: list[tuple[Any, float, str]] = []
    traces: dict[Any, Any] = {}
    shipped = _shipped_params()
    for rnd in args.rounds.split(","):
        train = [p for p in prepared.values() if p.row.round < rnd]
        test = [p for p in prepared.values() if p.row.round == rnd]
        if rnd in args.refit.split(","):
            params = _refit(cal, train, traces, lengths, args, say)
            say(f"{rnd}: fitted on {len(train)} rows of the rounds before it")
        else:
            params = shipped
            say(f"{rnd}: the parameters 279d459 shipped (fitted on the v4.1 and v5.1 rows)")
        jobs = []
        for p in test:
            if p.row.scenario != "Offline" and p.limits is None:
                continue
            offline_eff, used = params(p, "Offline")
            if p.trace_key not in traces:
                traces[p.trace_key] = cal._trace(p, lengths)
            bound = predict_rate(traces[p.trace_key], offline_eff)
            if p.row.scenario == "Offline":
                out_rows.append((p, bound, used))
                continue
            if args.offline_only:
                continue
            eff, used = params(p, p.row.scenario)
            jobs.append((p, cal._job(p, eff, lengths, args.requests),
                         bound if not p.samples_metric else float("inf"), used))
        values = cal._run_jobs([j for _, j, _, _ in jobs], args.workers, say, args.cache)
        for (p, _, bound, used), (v, _tp) in zip(jobs, values, strict=True):
            out_rows.append((p, min(v, bound), used))
        say(f"{rnd}: {len(test)} rows predicted")
    with open(args.out / "forward_predictions.csv", "w", encoding="utf-8", newline="") as f:
        w = csv.writer(f)
        w.writerow(["step", "source_index", "round", "division", "submitter", "system_id",
                    "accelerator", "accelerators", "nodes", "benchmark", "scenario",
                    "published", "predicted", "group"])
        for p, v, used in out_rows:
            r = p.row
            w.writerow([r.round, index[r.index], r.round, r.division, r.submitter,
                        r.system_id, r.accelerator, r.accelerators_used, r.nodes,
                        r.benchmark, r.scenario, r.result, f"{v:.6g}", used])
        steps = set(args.rounds.split(","))
        for i, why in sorted(refused.items()):
            r = rows[i]
            if r.round in steps and (not args.offline_only or r.scenario == "Offline"):
                w.writerow([r.round, index[i], r.round, r.division, r.submitter,
                            r.system_id, r.accelerator_name, r.total, r.nodes,
                            r.benchmark_raw, r.scenario, r.result, "", f"refused: {why}"])
    say(f"written {args.out / 'forward_predictions.csv'}")


if __name__ == "__main__":
    main()
