"""``tokenmark run``, ``tokenmark presets`` and ``tokenmark version``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from tokenmark import __version__
from tokenmark.adapters.sse import DEFAULT_MAX_EVENT_BYTES
from tokenmark.cli.app import (
    OptionGroup,
    app,
    bad_input,
    check_numbers,
    err,
    given_flags,
    with_options,
)
from tokenmark.cli.app import out as stdout
from tokenmark.cli.progress import ProgressMode
from tokenmark.errors import EXIT_INTERRUPTED, BadInputError

# Everything else loads where it is used: `tokenmark run` imports only the run path before
# its first request (no results store, SQLAlchemy, pydantic, report, packaging or
# accuracy code; tests/unit/test_lazy_imports.py).
if TYPE_CHECKING:
    from tokenmark.api.run import InterruptGuard, RunResult
    from tokenmark.metrics.stats import Distribution
    from tokenmark.mlperf.rules import Verdict

WL = "Workload"
TG = "HTTP target"
EM = "Emulated server (the default target)"


#: What is run: benchmark, scenario, round, profile, config files and the settings flags.
LOAD: OptionGroup = (
    ("benchmark", Annotated[str, typer.Option(
        "--benchmark", "-b", help="Benchmark as the submission checker names it "
        "(llama3.1-8b, llama2-70b-99, deepseek-r1, ...) or a LoadGen alias.")], ""),
    ("scenario", Annotated[str, typer.Option(
        "--scenario", "-s", help="Offline, Server, Interactive, SingleStream, MultiStream, "
        "or a tokenmark pattern: constant, poisson, gamma, closed.")], ""),
    ("round_", Annotated[str, typer.Option("--round", "-r", help="MLPerf round preset.")], ""),
    ("profile", Annotated[str, typer.Option(
        help="'demo' (short run, labelled as not MLPerf-length) or 'mlperf'.")], ""),
    ("config", Annotated[Path | None, typer.Option(
        "--config", "-c", help="TOML file with [run], [settings], [dataset], [sut] and "
        "[target] tables. A flag you give beats its key.")], None),
    ("user_conf", Annotated[Path | None, typer.Option(
        help="An MLPerf user.conf (model.scenario.key = value).")], None),
    ("qps", Annotated[float | None, typer.Option(
        help="Target queries/s (Server, Interactive, constant, poisson, gamma) or the "
        "expected queries/s of an Offline run.")], None),
    ("concurrency", Annotated[int | None, typer.Option(
        help="Streams of a closed-loop run.")], None),
    ("max_concurrency", Annotated[int | None, typer.Option(
        help="Cap on requests in flight for any schedule.")], None),
    ("burstiness", Annotated[float | None, typer.Option(
        help="Gamma shape of the 'gamma' pattern (1.0 = Poisson).")], None),
    ("min_duration", Annotated[float | None, typer.Option(
        help="Minimum duration in seconds.")], None),
    ("max_duration", Annotated[float | None, typer.Option(
        help="Maximum duration in seconds (0: none).")], None),
    ("min_queries", Annotated[int | None, typer.Option(help="Minimum query count.")], None),
    ("max_queries", Annotated[int | None, typer.Option(help="Maximum query count.")], None),
    ("ttft_ms", Annotated[float | None, typer.Option(help="TTFT limit in ms.")], None),
    ("tpot_ms", Annotated[float | None, typer.Option(help="TPOT limit in ms.")], None),
    ("e2e_ms", Annotated[float | None, typer.Option(help="End-to-end latency limit in ms.")], None),
    ("percentile", Annotated[float | None, typer.Option(
        help="Percentile the limits apply at, in percent (e.g. 99).")], None),
    ("warmup", Annotated[float | None, typer.Option(
        help="Seconds at the start excluded from statistics (tokenmark patterns).")], None),
    ("cooldown", Annotated[float | None, typer.Option(
        help="Seconds at the end excluded from statistics (tokenmark patterns).")], None),
    ("send_lag_limit_ms", Annotated[float | None, typer.Option(
        help="Send-lag limit of the tokenmark verdict (default: max(2 ms, 1% of the "
        "mean inter-arrival time)).")], None),
    ("error_rate_limit", Annotated[float | None, typer.Option(
        help="Fraction of failed requests the tokenmark verdict accepts (default 0).")], None),
    ("seed", Annotated[int | None, typer.Option(
        help="Seed of a tokenmark pattern's schedule and sample order (MLPerf scenarios "
        "use the round's seeds).")], None),

)


#: The workload (the run spec's dataset group).
WORKLOAD: OptionGroup = (
    ("dataset_size", Annotated[int | None, typer.Option(
        help="Samples in the synthetic dataset (default: the preset's or profile's).")], None),
    ("input_len", Annotated[str | None, typer.Option(
        help="Input length distribution: N, uniform:LO:HI, normal:MEAN:STD, "
        "lognormal:MEDIAN:SIGMA.")], None),
    ("output_len", Annotated[str | None, typer.Option(
        help="Output length distribution (same forms, or hist:LEN=W,...).")], None),
    ("prefix_groups", Annotated[int, typer.Option(
        help="Synthetic: groups of prompts sharing a prefix (prefix caching).",
        rich_help_panel=WL)], 0),
    ("prefix_len", Annotated[int, typer.Option(
        help="Synthetic: tokens of the shared prefix.", rich_help_panel=WL)], 0),
    ("conversations", Annotated[int, typer.Option(
        help="Synthetic multi-turn: number of conversations (each turn replays the "
        "dataset's earlier turns).", rich_help_panel=WL)], 0),
    ("turns", Annotated[str, typer.Option(
        help="Turns per conversation (a length distribution).", rich_help_panel=WL)], "3"),
    ("system_len", Annotated[int, typer.Option(
        help="Synthetic multi-turn: system prompt tokens.", rich_help_panel=WL)], 0),
    ("dataset", Annotated[Path | None, typer.Option(
        help="A dataset file (JSONL, JSON, CSV, Parquet, ShareGPT or an MLPerf reference "
        "file).", rich_help_panel=WL)], None),
    ("dataset_format", Annotated[str | None, typer.Option(
        "--format", help="jsonl, json, csv, parquet, pickle, sharegpt or mlperf "
        "(default: from the file name).", rich_help_panel=WL)], None),
    ("columns", Annotated[str, typer.Option(
        help="Column mapping ROLE=COLUMN,... (roles: prompt, token_ids, messages, system, "
        "output_tokens, reference, reference_ids, image).", rich_help_panel=WL)], ""),
    ("allow_pickle", Annotated[bool, typer.Option(
        help="Read pickled files (a pickle can run code: only files you trust).",
        rich_help_panel=WL)], False),
    ("sharegpt_turns", Annotated[str, typer.Option(
        help="ShareGPT: 'first' turn of each conversation or 'all' turns.",
        rich_help_panel=WL)], "first"),
    ("mlperf_output", Annotated[str, typer.Option(
        help="MLPerf datasets: output length 'max' (the benchmark's) or 'reference'.",
        rich_help_panel=WL)], "max"),
    ("limit", Annotated[int | None, typer.Option(
        help="Read at most this many rows.", rich_help_panel=WL)], None),
    ("max_context", Annotated[int | None, typer.Option(
        help="Model context length: longer prompts are an error.", rich_help_panel=WL)], None),
    ("skip_long_prompts", Annotated[bool, typer.Option(
        help="Skip prompts longer than --max-context instead of failing.",
        rich_help_panel=WL)], False),
    ("tokenizer", Annotated[str, typer.Option(
        help="'builtin', a Hugging Face tokenizer folder / tokenizer.json, or 'server' (an "
        "HTTP target's own tokenize/detokenize endpoints: vLLM, SGLang, llama.cpp); counts "
        "prompt tokens and, for an HTTP target given a file, output tokens.",
        rich_help_panel=WL)], "builtin"),
    ("chat_template", Annotated[bool, typer.Option(
        help="Apply the tokenizer's chat template to prompts.", rich_help_panel=WL)], False),
    ("chat_template_file", Annotated[Path | None, typer.Option(
        help="A chat template (Jinja) to use instead of the tokenizer's.",
        rich_help_panel=WL)], None),
    ("images_per_request", Annotated[int, typer.Option(
        help="Images attached to each chat request (as data URLs).", rich_help_panel=WL)], 0),
    ("image_size", Annotated[str, typer.Option(
        help="Generated image size WxH.", rich_help_panel=WL)], "512x512"),
    ("image_dir", Annotated[Path | None, typer.Option(
        help="Take images from this folder instead of generating them.",
        rich_help_panel=WL)], None),
    ("verify_images", Annotated[bool, typer.Option(
        help="Decode every image to check it (slower).", rich_help_panel=WL)], False),
    ("trace", Annotated[Path | None, typer.Option(
        help="Replay a trace's timing (Mooncake JSONL or Azure CSV).", rich_help_panel=WL)
    ], None),
    ("trace_format", Annotated[str, typer.Option(
        help="mooncake or azure.", rich_help_panel=WL)], "mooncake"),
    ("trace_speedup", Annotated[float, typer.Option(
        help="Replay this many times faster.", rich_help_panel=WL)], 1.0),
    ("trace_sort", Annotated[bool, typer.Option(
        help="Sort a trace whose timestamps go backwards instead of failing.",
        rich_help_panel=WL)], False),

)


#: The built-in system under test (the run spec's sut group).
SYSTEM: OptionGroup = (
    ("sut", Annotated[str | None, typer.Option(
        help="Built-in system under test: emulated (the default of run and sweep without "
        "--url: the emulated server, started on loopback and benchmarked over HTTP; "
        "in-process with --virtual-time), latency-model (the default of find-peak and "
        "scaling-run, and when a --sut-*-ms option is given), null, or hf (run: a real "
        "model in-process, --model-dir).")], None),
    ("accelerator", Annotated[str, typer.Option(
        help="emulated: the accelerator (H200, B200, MI300X, ...; see accelerators.csv).",
        rich_help_panel=EM)], ""),
    ("accelerators", Annotated[int, typer.Option(
        help="emulated: accelerators in all (tp x replicas; 0: from --tp/--replicas).",
        rich_help_panel=EM)], 0),
    ("tp", Annotated[int, typer.Option(
        help="emulated: tensor parallelism (0: the fewest of 1/2/4/8 that hold the model).",
        rich_help_panel=EM)], 0),
    ("replicas", Annotated[int, typer.Option(
        help="emulated: replicas (0: one).", rich_help_panel=EM)], 0),
    ("precision", Annotated[str, typer.Option(
        help="emulated: bf16, fp8 or fp4 (default: bf16, or the narrowest that fits).",
        rich_help_panel=EM)], ""),
    ("pin_cpus", Annotated[bool, typer.Option(
        help="emulated, tokenmark's load generator, 2+ CPUs: the emulated server's process "
        "on the highest CPU, the client on the others, so the server never preempts a "
        "timed send (recorded as sut.cpus; only on a quiet machine: skipped when other work "
        "is measured just before the run; turn it off for two runs at once). A --url "
        "server is never pinned.",
        rich_help_panel=EM)], True),
    ("sut_ttft_ms", Annotated[float | None, typer.Option(
        help="latency-model: time to first token in ms.")], None),
    ("sut_tpot_ms", Annotated[float | None, typer.Option(
        help="latency-model: time per output token in ms.")], None),
    ("sut_max_batch", Annotated[int | None, typer.Option(
        help="latency-model: requests served at once (the rest queue).")], None),
    ("sut_batch_slope", Annotated[float | None, typer.Option(
        help="latency-model: TPOT growth per extra request in the batch.")], None),

)


#: An OpenAI-compatible HTTP target (the run spec's target group).
TARGET: OptionGroup = (
    ("url", Annotated[list[str] | None, typer.Option(
        help="An OpenAI-compatible endpoint (repeat for replicas); selects the HTTP client.",
        rich_help_panel=TG)], None),
    ("api", Annotated[str, typer.Option(
        help="completions or chat (default: chat when requests carry images or the model "
        "reasons, else completions).", rich_help_panel=TG)], ""),
    ("model", Annotated[str, typer.Option(
        help="Model name (default: the one the endpoint serves).", rich_help_panel=TG)], ""),
    ("stream", Annotated[bool, typer.Option(help="Stream responses (SSE).",
                                         rich_help_panel=TG)], True),
    ("include_usage", Annotated[bool, typer.Option(
        help="Ask for usage in the stream (stream_options.include_usage).",
        rich_help_panel=TG)], True),
    ("api_key_env", Annotated[str, typer.Option(
        help="Environment variable holding the API key (never logged).", rich_help_panel=TG)
    ], "OPENAI_API_KEY"),
    ("header", Annotated[list[str] | None, typer.Option(
        help="An extra header 'Name: value' (repeatable).", rich_help_panel=TG)], None),
    ("ca_file", Annotated[str, typer.Option(help="CA bundle for TLS.", rich_help_panel=TG)], ""),
    ("verify_tls", Annotated[bool, typer.Option(help="Verify TLS certificates.",
                                             rich_help_panel=TG)], True),
    ("connect_timeout", Annotated[float, typer.Option(
        help="Seconds to connect (0: none).", rich_help_panel=TG)], 30.0),
    ("first_token_timeout", Annotated[float, typer.Option(
        help="Seconds to the first token (0: none).", rich_help_panel=TG)], 0.0),
    ("request_timeout", Annotated[float, typer.Option(
        help="Seconds for a whole request (0: none).", rich_help_panel=TG)], 0.0),
    ("pool_size", Annotated[int, typer.Option(
        help="Connections per endpoint, the emulated server's included (0: one per request "
        "in flight).", rich_help_panel=TG)
    ], 0),
    ("preconnect", Annotated[int | None, typer.Option(
        help="Connections per endpoint opened before the run (default: the concurrency).",
        rich_help_panel=TG)], None),
    ("spare_connections", Annotated[int, typer.Option(
        help="Idle connections per endpoint kept open ahead of demand, so a growing "
        "open loop never waits for a handshake (0: open on demand).", rich_help_panel=TG)
    ], 4),
    ("routing", Annotated[str, typer.Option(
        help="round-robin or least-in-flight across endpoints.", rich_help_panel=TG)
    ], "round-robin"),
    ("max_tokens", Annotated[int, typer.Option(
        help="max_tokens of every request (0: each sample's output length).",
        rich_help_panel=TG)], 0),
    ("ignore_eos", Annotated[bool, typer.Option(
        help="Send ignore_eos (generate the full output length).", rich_help_panel=TG)], False),
    ("temperature", Annotated[float | None, typer.Option(
        help="Sampling temperature of every request (default: not sent; the server's).",
        rich_help_panel=TG)], None),
    ("extra_body", Annotated[str, typer.Option(
        help="A JSON object merged into every request body.", rich_help_panel=TG)], ""),
    ("model_check", Annotated[bool, typer.Option(
        help="Check GET /v1/models before the run.", rich_help_panel=TG)], True),
    ("length_probe", Annotated[bool, typer.Option(
        help="Send two one-token requests before the run to measure the chat template's "
        "tokens and check the first prompt's length.", rich_help_panel=TG)], True),
    ("max_event_bytes", Annotated[int, typer.Option(
        help="The largest server-sent event accepted; a larger one fails its request as a "
        "malformed stream.", rich_help_panel=TG)], DEFAULT_MAX_EVENT_BYTES),
    ("workers", Annotated[int, typer.Option(
        help="Client worker processes (0: the client runs in this process).",
        rich_help_panel=TG)], 0),

)


#: Where results go, how the run is driven and what is printed.
RUNNING: OptionGroup = (
    ("output", Annotated[Path | None, typer.Option(
        "--output", "-o", help="Results folder (default results/<time>-<benchmark>-<scenario>).")
    ], None),
    ("mode", Annotated[str, typer.Option(
        help="performance, or accuracy (every sample once, outputs logged to "
        "mlperf_log_accuracy.json; score it with 'tokenmark score').")], "performance"),
    ("audit", Annotated[str | None, typer.Option(
        help="Run as an MLPerf compliance audit: TEST06, TEST07 or TEST09 (LoadGen's "
        "audit.config settings; with --loadgen official LoadGen reads the audit.config "
        "tokenmark writes in the results folder); TEST06/TEST09 verdict folders are "
        "written after the run.")
    ], None),
    ("model_dir", Annotated[Path | None, typer.Option(
        help="--sut hf: a local Hugging Face model folder served in-process on the CPU.")
    ], None),
    ("loadgen", Annotated[str, typer.Option(
        help="Load generator: 'tokenmark' (its own) or 'official' (the mlcommons-loadgen "
        "package drives the SUT and writes the MLPerf logs; needed for closed-division "
        "submissions).")], "tokenmark"),
    ("find_peak", Annotated[bool, typer.Option(
        help="With --loadgen official: LoadGen's FindPeakPerformance search for the highest "
        "Server QPS meeting the latency limits, starting from --qps.")], False),
    ("virtual_time", Annotated[bool, typer.Option(
        help="Run on a virtual clock (in-process systems only): minutes of benchmark in "
        "seconds.")], False),
    ("distributed", Annotated[str, typer.Option(
        help="'ray': shard the schedule across Ray actors (the ray extra); records merge "
        "into one run.")], ""),
    ("ray_address", Annotated[str | None, typer.Option(
        help="Ray cluster HOST:PORT (default: $RAY_ADDRESS, else a local instance).")], None),
    ("ray_workers", Annotated[int, typer.Option(
        help="Ray actors (client workers) of a --distributed ray run.")], 2),
    ("db", Annotated[str | None, typer.Option(
        "--db", help="Results database to store the run in (default: $TOKENMARK_DB, else "
        "~/.local/share/tokenmark/results.db).")], None),
    ("no_db", Annotated[bool, typer.Option(
        "--no-db", help="Do not store the run in the results database.")], False),
    ("progress_mode", Annotated[ProgressMode, typer.Option(
        "--progress", help="Progress: auto (the live view on a terminal, plain lines off "
        "one; nothing with -q/--json), live, plain (a line of text every 5 s on stderr, "
        "for CI logs), jsonl (a JSON line a second on stderr, for scripts) or off.")
    ], ProgressMode.AUTO),
    ("quiet", Annotated[bool, typer.Option(
        "--quiet", "-q", help="Print only the verdicts.")], False),
    ("json_out", Annotated[bool, typer.Option(
        "--json", help="Print results.json to stdout instead of tables.")], False),

)


#: Manifests, client calibration and watchers (the run spec's trust group).
TRUST: OptionGroup = (
    ("manifest", Annotated[Path | None, typer.Option(
        help="Re-run a workload manifest (a manifest.json or the results folder holding "
        "it): the identical request stream, its files and fingerprints checked first. It "
        "stands in for the defaults: an option you give (a flag, --config, --user-conf, "
        "--profile) beats it, and the run is then not a re-run (a warning names the "
        "changes).",
        rich_help_panel="Trust")], None),
    ("calibrate", Annotated[bool, typer.Option(
        help="HTTP targets: check the planned load against this client's measured "
        "capacity ('tokenmark calibrate', cached per machine).", rich_help_panel="Trust")
    ], False),
    ("client_share", Annotated[float, typer.Option(
        help="--calibrate: the largest share of the client's capacity a plan may take.",
        rich_help_panel="Trust")], 0.5),
    ("allow_client_overload", Annotated[bool, typer.Option(
        help="--calibrate: run a plan above --client-share anyway (recorded).",
        rich_help_panel="Trust")], False),
    ("client_watch", Annotated[bool, typer.Option(
        help="Watch client CPU and event-loop lag, fingerprint client and server, scrape "
        "the server's Prometheus metrics.", rich_help_panel="Trust")], True),
    ("metrics_interval", Annotated[float, typer.Option(
        help="Seconds between scrapes of the server's /metrics.", rich_help_panel="Trust")
    ], 1.0),

)


@app.command()
@with_options(after=LOAD + WORKLOAD + SYSTEM + TARGET + RUNNING + TRUST)
def run(ctx: typer.Context, **options: Any) -> None:
    """Run a benchmark and judge it: the MLPerf verdict and the tokenmark verdict.

    Settings, later winning: the round's preset (or a --manifest's recorded run) <
    --profile < --config file < --user-conf < the flags you give.

    Example: tokenmark run --benchmark llama3.1-8b --scenario Server --profile demo --qps 30
    """
    from tokenmark.api.launch import prepare
    from tokenmark.api.run import InterruptGuard
    from tokenmark.cli.progress import progress_view
    from tokenmark.config.layering import DEMO_MAX_OUTPUT_TOKENS
    from tokenmark.config.runspec import RunSpec

    try:
        check_numbers(ctx.params)
        # the one translation of flags (and the --config file under them) into a run spec;
        # everything else (a manifest, an audit, the official LoadGen, the watchers) is
        # tokenmark.api.launch's, as for a Python caller
        rs = RunSpec.from_options(options, given_flags(ctx), config=options["config"])
        launch = prepare(rs)
    except BadInputError as e:
        raise bad_input(e) from None
    quiet, json_out = rs.output.quiet, rs.output.json
    settings, size = launch.layered.settings, launch.dataset_size
    show = not quiet and not json_out
    if show and settings.profile == "demo":
        err.print(
            "[yellow]demo profile:[/] a short run judged by LoadGen's rules, "
            f"not an MLPerf-length run (outputs capped at {DEMO_MAX_OUTPUT_TOKENS} tokens). "
            "Results are unverified."
        )
    for notice in launch.notices:
        if notice.level == "warning" and show:
            err.print(f"[yellow]warning:[/] {escape(notice.text)}", soft_wrap=True,
                      highlight=False)
        elif show or (notice.level == "info" and not json_out):
            err.print(notice.text, soft_wrap=True, highlight=False)
    view = progress_view(settings, size, quiet=quiet, json_out=json_out,
                         mode=ProgressMode(rs.output.progress), console=err)
    # From the run on, no Ctrl-C loses the results: the first stops the run, the results
    # are written; one that arrives while the report is written skips the report.
    guard = InterruptGuard(on_stop=lambda: err.print(
        "[yellow]stopping (Ctrl-C):[/] writing the results of what was measured",
        highlight=False))
    try:
        if launch.official:
            result = launch.run()
            ctx.with_resource(guard)  # during LoadGen's own run Ctrl-C ends it as before
        else:
            ctx.with_resource(guard)
            with view:
                result = launch.run(
                    progress=view.update if view.active else None,
                    record_consumers=[view.consume] if view.active else ())
        if launch.audit is not None:
            v = launch.audit
            err.print(f"{v.test}: {'PASS' if v.passed else 'FAIL'} ({v.folder})",
                      highlight=False)
    except BadInputError as e:
        raise bad_input(e) from None
    _print_result(result, quiet=quiet, json_out=json_out)
    _write_report(result, quiet=quiet or json_out, guard=guard)
    _write_csv(result)
    if not rs.output.no_db:
        _store(result, rs.output.db, quiet=quiet or json_out)
    if result.exit_code == EXIT_INTERRUPTED:
        err.print(f"interrupted (Ctrl-C): the run stopped early and is INVALID; what it "
                  f"measured is in {result.output_dir}", highlight=False, soft_wrap=True)
    raise typer.Exit(result.exit_code)


def _write_report(result: RunResult, *, quiet: bool, guard: InterruptGuard) -> None:
    """Write report.html beside results.json; a failure warns and keeps the run's exit code.
    A Ctrl-C meanwhile skips it."""
    from tokenmark.report import write_report

    try:
        with guard.skippable():
            path = write_report(result.output_dir)
    except (OSError, ValueError, BadInputError) as e:
        err.print(f"[yellow]warning:[/] no report.html: {e}", soft_wrap=True)
        return
    except KeyboardInterrupt:
        err.print(f"report.html skipped (Ctrl-C); write it with: tokenmark report "
                  f"{result.output_dir}", highlight=False, soft_wrap=True)
        return
    if not quiet:
        err.print(f"report: {path}", highlight=False)


def _write_csv(result: RunResult) -> None:
    """Write records.csv and summary.csv beside results.json; a failure warns."""
    from tokenmark.output.tables import write_csv

    try:
        write_csv(result.output_dir)
    except (OSError, ValueError) as e:
        err.print(f"[yellow]warning:[/] no records.csv/summary.csv: {escape(str(e))}",
                  soft_wrap=True)


def _store(result: RunResult, db: str | None, *, quiet: bool) -> None:
    """Store the run as an unverified row; a failure warns and keeps the run's exit code."""
    store_folder(result.output_dir, db, quiet=quiet)


def store_folder(folder: Path, db: str | None, *, quiet: bool) -> None:
    """Store a run's folder, or a sweep's/find-peak's/scaling run's (with its runs), as
    unverified; a failure warns (the folder keeps everything measured)."""
    from tokenmark.api import results as results_api

    try:
        report = results_api.store_run(folder, db=db)
    except BadInputError as e:
        err.print(f"[yellow]warning:[/] the run was not stored: {e}", soft_wrap=True)
        return
    if report.upgraded_from:
        err.print(f"upgraded your results database {report.db} from schema "
                  f"{report.upgraded_from} to the newest", highlight=False)
    if report.errors:
        err.print(f"[yellow]warning:[/] the run was not stored: {report.errors[0]}",
                  soft_wrap=True)
    elif not quiet:
        err.print(f"stored in {report.db} (unverified)", highlight=False)


def _ms(ns: float) -> str:
    return f"{ns / 1e6:,.2f}"


def _dist_row(name: str, d: Distribution, p_target: float) -> list[str]:
    if d.count == 0:
        return [name, "-", "-", "-", "-", "-", "-"]
    pc = d.percentiles
    return [name, _ms(d.mean), _ms(pc.get(0.5, 0)), _ms(pc.get(0.9, 0)),
            _ms(pc.get(0.99, 0)), _ms(pc.get(p_target, 0)), _ms(d.max)]


def _verdict_text(v: Verdict) -> Text:
    from tokenmark.mlperf.rules import Validity

    style = {Validity.VALID: "bold green", Validity.INVALID: "bold red"}.get(v.validity, "dim")
    return Text(v.validity.value, style=style)


def _sut_label(result: RunResult) -> str:
    sut = result.document["run"]["sut"]
    return str(sut.get("profile", sut["name"]))


def _print_result(result: RunResult, *, quiet: bool, json_out: bool) -> None:
    out = stdout()
    if json_out:
        out.print_json(json.dumps(result.document))
        return
    v = result.verdicts
    if quiet:
        out.print(f"MLPerf verdict: {v.mlperf.validity.value}; "
                  f"tokenmark verdict: {v.tokenmark.validity.value}; "
                  f"results: {result.output_dir}", highlight=False)
        return
    s = result.summary
    eff = result.settings
    r = eff.requested
    out.print(f"\n[bold]{r.benchmark}[/] {r.scenario.value} ({r.round} preset"
              f"{', ' + r.profile + ' profile' if r.profile else ''}) - "
              f"{_sut_label(result)}")
    p = eff.target_latency_percentile
    t = Table(title="Latency (ms)", title_justify="left")
    for col in ("metric", "mean", "p50", "p90", "p99", f"p{p * 100:g} (rule)", "max"):
        t.add_column(col, justify="right" if col != "metric" else "left")
    for name, d in (("TTFT", s.ttft), ("TPOT", s.tpot), ("ITL", s.itl), ("E2E", s.latency),
                    ("send lag", s.send_lag)):
        t.add_row(*_dist_row(name, d, p))
    if s.query_latency.count:
        t.add_row(*_dist_row("query (MultiStream)", s.query_latency, p))
    out.print(t)
    tp = Table(title="Throughput", title_justify="left")
    tp.add_column("figure")
    tp.add_column("value", justify="right")
    if s.tokens_per_second is not None:
        tp.add_row("tokens/s (LoadGen formula)", f"{s.tokens_per_second:,.2f}")
    tp.add_row("samples/s (LoadGen formula)", f"{s.samples_per_second:,.2f}")
    tp.add_row("output tokens/s (measured window)", f"{s.output_tokens_per_second:,.1f}")
    tp.add_row("requests completed / failed", f"{s.completed} / {s.failed}")
    if s.goodput_fraction is not None:
        tp.add_row("goodput (requests within limits)", f"{s.goodput_fraction:.1%}")
    out.print(tp)
    for verdict in (v.mlperf, v.tokenmark):
        title = Text(f"{verdict.kind.value} verdict: ")
        title.append_text(_verdict_text(verdict))
        out.print(title)
        for f in verdict.findings:
            mark = ("[green]pass[/]" if f.passed else
                    "[yellow]warn[/]" if f.level == "warn" else "[red]FAIL[/]")
            out.print(f"  {mark} {f.rule}: {f.observed} (required {f.required})",
                      highlight=False)
            if not f.passed and f.advice:
                out.print(f"       -> {f.advice}", highlight=False)
    out.print(f"\nResults: {result.output_dir} (unverified: not reviewed by MLCommons)",
              highlight=False)


@app.command()
def presets(
    round_: Annotated[str | None, typer.Argument(
        metavar="[ROUND]", help="A round such as v6.0; omit to list rounds.")] = None,
) -> None:
    """List the MLPerf round presets, or one round's benchmarks and limits.

    Example: tokenmark presets v6.0
    """
    from tokenmark.mlperf.presets import load_round, rounds

    out = stdout()
    try:
        if round_ is None:
            for name in rounds():
                rp = load_round(name)
                out.print(f"{name}: {len(rp.benchmarks)} benchmarks")
            return
        rp = load_round(round_)
    except BadInputError as e:
        raise bad_input(e) from None
    t = Table(title=f"MLPerf {rp.round} preset (unverified tooling; limits from "
              "mlperf.conf and the submission checker)", title_justify="left")
    for col in ("benchmark", "scenario", "limits", "dataset", "min duration"):
        t.add_column(col)
    for b in rp.benchmarks.values():
        for sc, sp in b.scenarios.items():
            lim = sp.limits
            parts = []
            if lim.ttft_ns is not None:
                parts.append(f"TTFT {lim.ttft_ns / 1e6:g} ms")
            if lim.tpot_ns is not None:
                parts.append(f"TPOT {lim.tpot_ns / 1e6:g} ms")
            if lim.e2e_ns is not None:
                parts.append(f"E2E {lim.e2e_ns / 1e6:g} ms")
            limits = (f"p{lim.percentile * 100:g} " + ", ".join(parts)) if parts else "-"
            t.add_row(b.name, sc.value, limits, f"{b.dataset} ({b.dataset_size})",
                      f"{sp.min_duration_ms / 1000:g} s")
    out.print(t)


@app.command()
def version() -> None:
    """Print tokenmark's version.

    Example: tokenmark version
    """
    Console().print(f"tokenmark {__version__}", highlight=False)
