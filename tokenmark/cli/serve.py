"""``tokenmark serve``: the emulated server, or a local Hugging Face model, on loopback."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tokenmark.cli.app import app, bad_input, err
from tokenmark.engines.emulated import EmulatorSpec
from tokenmark.errors import BadInputError, ConfigError
from tokenmark.perfmodel.outputs import output_model
from tokenmark.servers.emulated import (
    EXIT_DIED,
    EmulatedConfig,
    EmulatedServer,
    serve_emulated,
)
from tokenmark.servers.faults import FAULT_KINDS, FaultPlan

EM = "Emulated server"
FL = "Faults (emulated server)"


@app.command()
def serve(
    engine: Annotated[str, typer.Option(
        help="emulated (timing from tokenmark's performance model) or hf (a local Hugging "
        "Face model on the CPU, --model-dir).")] = "emulated",
    model_dir: Annotated[Path | None, typer.Option(
        help="hf: the model folder (config.json, weights, tokenizer).")] = None,
    accelerator: Annotated[str, typer.Option(
        help="The emulated accelerator (H200, B200, MI300X, ...).", rich_help_panel=EM)
    ] = "H200",
    accelerators: Annotated[int, typer.Option(
        help="Accelerators in all (tp x replicas; 0: from --tp and --replicas).",
        rich_help_panel=EM)] = 0,
    tp: Annotated[int, typer.Option(
        help="Tensor parallelism per replica (0: the fewest of 1/2/4/8 that hold the "
        "model).", rich_help_panel=EM)] = 0,
    replicas: Annotated[int, typer.Option(help="Replicas (0: one).", rich_help_panel=EM)] = 0,
    model: Annotated[str, typer.Option(
        help="The emulated model, by benchmark name (llama3.1-8b, llama2-70b-99, "
        "deepseek-r1, ...).", rich_help_panel=EM)] = "llama3.1-8b",
    precision: Annotated[str, typer.Option(
        help="bf16, fp8 or fp4 (weights and arithmetic).", rich_help_panel=EM)] = "bf16",
    stack: Annotated[str, typer.Option(
        help="Software stack whose calibrated efficiency to use: trtllm, vllm, sglang "
        "(default: the vendor's reference stack).", rich_help_panel=EM)] = "",
    max_num_seqs: Annotated[int, typer.Option(
        help="Sequences batched at once per replica.", rich_help_panel=EM)] = 256,
    max_batched_tokens: Annotated[int, typer.Option(
        help="Token budget of one step (chunked prefill).", rich_help_panel=EM)] = 8192,
    served_model_name: Annotated[str, typer.Option(
        help="The model name the API serves (default: the benchmark name).",
        rich_help_panel=EM)] = "",
    fault: Annotated[list[str] | None, typer.Option(
        help="Inject a fault into a fraction of requests: KIND[:N]=FRACTION, repeatable. "
        f"Kinds: {', '.join(k for k in FAULT_KINDS if k != 'ok')} (e.g. status:500=0.02, "
        "status:429=0.01, reset=0.01, reset_mid:3=0.01, malformed=0.01, end_mid:2=0.01, "
        "stall=0.005, slow_head:800=0.02, oversize:1048576=0.01).",
        rich_help_panel=FL)] = None,
    fault_seed: Annotated[int, typer.Option(
        help="Seed of the fault draws (the same requests get the same faults).",
        rich_help_panel=FL)] = 0,
    exit_after: Annotated[int, typer.Option(
        help="Die (reset every connection, exit 70) when request N+1 arrives (0: never).",
        rich_help_panel=FL)] = 0,
    stop_lengths: Annotated[str, typer.Option(
        help="Let answers stop before max_tokens (finish_reason 'stop') at lengths drawn "
        "per prompt from this distribution: 'published' (the benchmark's published output "
        "lengths: deepseek-r1, gpt-oss-120b) or lognormal:MEDIAN:SIGMA, uniform:LO:HI, "
        "hist:... (default: exact max_tokens lengths; ignore_eos requests never stop "
        "early).", rich_help_panel=EM)] = "",
    output_seed: Annotated[int, typer.Option(
        help="Seed of the per-prompt output-length draws (stop lengths, reasoning/answer "
        "split).", rich_help_panel=EM)] = 0,
    api_key_env: Annotated[str, typer.Option(
        help="Require 'Bearer <key>', the key read from this environment variable.")] = "",
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port (0: a free one).")] = 8000,
) -> None:
    """Serve an OpenAI-compatible API: the emulated server (continuous batching timed by
    tokenmark's performance model of an accelerator and a model; /metrics like vLLM's;
    faults on request), or a local Hugging Face model (--engine hf). Ctrl-C stops it.

    Example: tokenmark serve --accelerator H200 --model llama3.1-8b --precision bf16 --port 8000
    """
    import os

    try:
        if engine == "hf":
            if model_dir is None:
                raise ConfigError("--engine hf serves a local model: give --model-dir DIR")
            from tokenmark.api import correctness as correctness_api

            correctness_api.serve_hf(model_dir, host=host, port=port)
            return
        if engine != "emulated":
            raise ConfigError(f"unknown engine {engine!r}; choose emulated or hf")
        if port < 0 or port > 65535:
            raise ConfigError(f"--port must be within 0..65535 (got {port})")
        spec = EmulatorSpec(accelerator=accelerator, model=model, precision=precision,
                            tp=tp, replicas=replicas, accelerators=accelerators,
                            stack=stack, max_num_seqs=max_num_seqs,
                            max_batched_tokens=max_batched_tokens)
        d = spec.deployment()
        cfg = EmulatedConfig(
            served_model=served_model_name,
            faults=tuple(FaultPlan.parse_fraction(f) for f in fault or ()),
            fault_seed=fault_seed, exit_after=max(0, exit_after),
            api_key=os.environ.get(api_key_env, "") if api_key_env else "",
            stop_lengths=stop_lengths, output_seed=output_seed)
        FaultPlan(fractions=cfg.faults)  # checks the fractions now
        om = output_model(d.model.benchmarks[0] if d.model.benchmarks else d.model.name)
        stops = om.stop_lengths(stop_lengths)  # checks the distribution now
    except BadInputError as e:
        raise bad_input(e) from None

    def ready(server: EmulatedServer) -> None:
        err.print(f"[yellow]{server.label}[/] (modelled timing, not a measurement of "
                  f"hardware; efficiency {d.efficiency.source}; KV cache "
                  f"{d.kv_capacity_tokens:,} tokens per replica)", highlight=False)
        if cfg.faults:
            err.print("faults: " + ", ".join(f"{f}={p:g}" for f, p in cfg.faults),
                      highlight=False)
        lengths = (f"answers may stop early at lengths drawn from {stops} (seed "
                   f"{output_seed})" if stops is not None else "answers are exactly max_tokens "
                   "long")
        if om.reasons:
            lengths += f"; chat answers reason first (delta.{om.reasoning_field})"
        if server.vision is not None:
            lengths += "; images become image tokens (Qwen-VL rule)"
        err.print(lengths, highlight=False)
        err.print(f"serving {server.model!r} at {server.url}/v1 (metrics: {server.url}"
                  "/metrics); Ctrl-C stops", highlight=False)
        print(f"READY {server.url}", flush=True)

    try:
        code = serve_emulated(spec, cfg, host=host, port=port, on_ready=ready)
    except OSError as e:
        raise bad_input(ConfigError(f"cannot listen on {host}:{port}: {e.strerror or e}; "
                                    "choose another --port (0: a free one)")) from None
    if code == EXIT_DIED:
        err.print(f"exited after {exit_after} requests (--exit-after)", highlight=False)
        raise typer.Exit(EXIT_DIED)
