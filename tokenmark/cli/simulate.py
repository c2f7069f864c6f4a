"""``tokenmark simulate``: a thin layer over :mod:`tokenmark.api.simulation`."""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from tokenmark.api.simulation import scaling, simulate, simulation_dataset
from tokenmark.cli.app import app, bad_input, check_numbers
from tokenmark.config.layering import build_settings, default_scenario
from tokenmark.errors import BadInputError
from tokenmark.mlperf.settings import Scenario
from tokenmark.perfmodel import Efficiency
from tokenmark.sim.plan import ClusterSpec


@app.command(name="simulate")
def simulate_cmd(
    accelerator: Annotated[str, typer.Option(
        "--accelerator", "-a", help="Accelerator from accelerators.csv (H200, B200, GB300, "
        "MI355X, ...).")] = "H200",
    benchmark: Annotated[str, typer.Option("--benchmark", "-b", help="Benchmark.")] = "llama3.1-8b",
    scenario: Annotated[str, typer.Option(
        "--scenario", "-s", help="Scenario (default: the benchmark's first).")] = "",
    round_: Annotated[str, typer.Option("--round", "-r", help="MLPerf round preset.")] = "v6.0",
    nodes: Annotated[int, typer.Option(help="Nodes.")] = 1,
    per_node: Annotated[int, typer.Option(help="Accelerators per node.")] = 8,
    scale_up: Annotated[int, typer.Option(
        help="Accelerators in one scale-up domain (72 for an NVL72 rack; 0: the "
        "accelerator's own, capped at the count).")] = 0,
    scale_out_gbps: Annotated[float, typer.Option(
        help="Scale-out bandwidth per accelerator, GB/s one way.")] = 50.0,
    precision: Annotated[str | None, typer.Option(
        help="bf16, fp8, fp4, int8 or int4 (default: the narrowest the accelerator "
             "computes; integer weights run at its INT8 rate where it lists one).")] = None,
    tp: Annotated[int | None, typer.Option(help="Tensor parallelism (default: planned).")] = None,
    pp: Annotated[int, typer.Option(help="Pipeline parallelism.")] = 1,
    ep: Annotated[int | None, typer.Option(
        help="Expert parallelism (MoE models; default: searched).")] = None,
    dp: Annotated[int | None, typer.Option(
        help="Attention data-parallel groups per replica (MoE models; default: "
        "searched).")] = None,
    spec_tokens: Annotated[int | None, typer.Option(
        help="Tokens the model's own draft proposes per step (speculative decoding; 0: "
        "off; default: searched where the round allows it).")] = None,
    max_num_seqs: Annotated[int | None, typer.Option(help="Sequences per replica.")] = None,
    max_batched_tokens: Annotated[int, typer.Option(
        help="Chunked-prefill token budget per step.")] = 8192,
    prefill_replicas: Annotated[int, typer.Option(
        help="Replicas that only prefill (prefill/decode disaggregation; 0: searched in "
        "Server/Interactive on a scale-up domain larger than a node: splits 1:3, 1:2, "
        "1:1, 2:1).")] = 0,
    router: Annotated[str, typer.Option(help="round-robin or least-loaded.")] = "round-robin",
    stack: Annotated[str | None, typer.Option(
        help="Software stack whose calibrated efficiency to use: trtllm, vllm, sglang, "
        "other.")] = None,
    mfu: Annotated[float | None, typer.Option(help="Override the calibrated MFU.")] = None,
    mbu: Annotated[float | None, typer.Option(help="Override the calibrated MBU.")] = None,
    qps: Annotated[float | None, typer.Option(
        help="Target (Server, Interactive) or expected (Offline) queries/s (default: "
        "Server and Interactive run at the predicted rate, the highest within the "
        "latency limits; Offline at the preset's).")] = None,
    min_duration: Annotated[float | None, typer.Option(help="Seconds.")] = None,
    min_queries: Annotated[int | None, typer.Option(help="Minimum query count.")] = None,
    concurrency: Annotated[int | None, typer.Option(
        help="Streams of a closed-loop run.")] = None,
    profile: Annotated[str, typer.Option(help="'demo' or 'mlperf'.")] = "",
    scaling_sizes: Annotated[str | None, typer.Option(
        "--scaling", help="Comma-separated accelerator counts: predicted throughput and "
        "scaling efficiency at each (Server/Interactive: with its 5-95% spread over "
        "LoadGen's last-issued query).")] = None,
    output: Annotated[Path | None, typer.Option(
        "--output", "-o", help="Results folder (default: results/<time>-simulate-...).")] = None,
    no_records: Annotated[bool, typer.Option(help="Skip records.jsonl.")] = False,
) -> None:
    """Simulate a benchmark on a cluster you need not own, in virtual time.

    Example: tokenmark simulate -a B200 --nodes 9 -b llama3.1-8b -s Offline --min-queries 1000000
    """
    out = Console()
    try:
        check_numbers({"scale_out_gbps": scale_out_gbps, "mfu": mfu, "mbu": mbu, "qps": qps,
                       "min_duration": min_duration})
        picked = Scenario.parse(scenario) if scenario else default_scenario(round_, benchmark)
        if picked is None:
            raise BadInputError(f"{benchmark} has no Server scenario in {round_}; choose one "
                                "with --scenario")
        sc = picked
        overrides: dict[str, Any] = {
            "min_duration_ms": None if min_duration is None else int(min_duration * 1000),
            "min_query_count": min_queries, "concurrency": concurrency,
        }
        if qps is not None:
            overrides["offline_expected_qps" if sc is Scenario.OFFLINE else "target_qps"] = qps
        layered = build_settings(round_, benchmark, sc, profile=profile, overrides=overrides)
        eff = None
        if mfu is not None or mbu is not None:
            eff = Efficiency(mfu=mfu or 0.45, mbu=mbu or 0.75, source="command line")
        spec = ClusterSpec(accelerator, benchmark, nodes=nodes, per_node=per_node,
                           scale_up=scale_up, scale_out_gb_s=scale_out_gbps,
                           precision=precision, tp=tp, pp=pp, ep=ep, dp=dp,
                           spec_tokens=spec_tokens, max_num_seqs=max_num_seqs,
                           max_batched_tokens=max_batched_tokens,
                           prefill_replicas=prefill_replicas, stack=stack, efficiency=eff,
                           scenario=sc.value, rules_round=round_)
        if scaling_sizes:
            sizes = [int(x) for x in scaling_sizes.split(",") if x.strip()]
            pts = scaling(layered, spec, sizes, dataset=simulation_dataset(layered))
            t = Table(title=f"Predicted scaling: {benchmark} {sc.value} on {accelerator} "
                      "(simulated, unverified)", title_justify="left")
            band = any(not math.isnan(p.efficiency_low) for p in pts)
            for col in ("accelerators", "nodes", "domain", "layout", "replicas", "tokens/s",
                        "per accel.", "efficiency", *(("eff. 5-95%",) if band else ()),
                        "comm. share", "binding"):
                t.add_column(col, justify="right")
            for p in pts:
                layout = f"tp {p.tp}" + (f" dp {p.dp}" if p.dp > 1 else "")
                layout += (f" ep {p.ep}" if p.ep > 1 else "") + (
                    f" spec {p.spec_tokens}" if p.spec_tokens else "")
                if p.prefill_replicas:
                    layout += (f", {p.prefill_replicas} prefill + "
                               f"{p.replicas - p.prefill_replicas} decode")
                t.add_row(str(p.accelerators), str(p.nodes), str(p.scale_up_domain), layout,
                          str(p.replicas), f"{p.tokens_per_second:,.0f}",
                          f"{p.per_accelerator:,.0f}", f"{p.efficiency:.3f}",
                          *((f"{p.efficiency_low:.3f}-{p.efficiency_high:.3f}",) if band
                            else ()),
                          f"{p.communication_share:.1%}", p.binding_limit)
            out.print(t)
            if band:
                out.print("eff. 5-95%: the efficiency LoadGen would report over the random "
                          "last-issued query of each run (its latency ends the result's time; "
                          "runs of the settings' minimum duration and query count)")
            return
        out_dir = output or Path("results") / (
            f"{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}-sim-{layered.preset.name}-"
            f"{sc.value}")
        res = simulate(layered, spec, out_dir, router=router, write_records=not no_records,
                       at_prediction=qps is None)
    except (BadInputError, ValueError) as e:
        if isinstance(e, BadInputError):
            raise bad_input(e) from None
        raise
    out.print((out_dir / "report.txt").read_text(), highlight=False)
    raise typer.Exit(res.exit_code)
