"""``tokenmark find-peak``, ``tokenmark sweep`` and ``tokenmark scaling-run``."""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from tokenmark.api import scale as scale_api
from tokenmark.api import suts
from tokenmark.api.assemble import build_workload
from tokenmark.api.run import EXIT_INVALID, EXIT_VALID, SutSpec
from tokenmark.cli.app import (
    OptionGroup,
    app,
    bad_input,
    check_numbers,
    err,
    given_flags,
    out,
    with_options,
)
from tokenmark.cli.run import store_folder
from tokenmark.clock import Clock
from tokenmark.config.layering import LayeredSettings
from tokenmark.dataset import Dataset
from tokenmark.errors import BadInputError, ConfigError
from tokenmark.output.results import RESULTS_FILE
from tokenmark.output.tables import write_csv
from tokenmark.scale.sweep import parse_points
from tokenmark.sut import SystemUnderTest

SutFactory = Callable[[Clock], SystemUnderTest]
ST = "System under test"
SR = "Search"

# Options every command of this module takes (Typer needs them spelled per command).
Benchmark = Annotated[str, typer.Option("--benchmark", "-b", help="Benchmark name.")]
ScenarioOpt = Annotated[str, typer.Option(
    "--scenario", "-s", help="Server, Interactive, or a pattern: constant, poisson, gamma, "
    "closed (concurrency sweeps).")]
RoundOpt = Annotated[str, typer.Option("--round", "-r", help="MLPerf round preset.")]
Profile = Annotated[str, typer.Option(help="'demo' (short runs) or 'mlperf'.")]
ConfigOpt = Annotated[Path | None, typer.Option(
    "--config", "-c", help="TOML file with [run], [settings], [dataset] and [sut] tables.")]
MinDuration = Annotated[float | None, typer.Option(help="Minimum duration of a run in s.")]
MinQueries = Annotated[int | None, typer.Option(help="Minimum query count of a run.")]
TtftMs = Annotated[float | None, typer.Option(help="TTFT limit in ms.")]
TpotMs = Annotated[float | None, typer.Option(help="TPOT limit in ms.")]
E2eMs = Annotated[float | None, typer.Option(help="End-to-end latency limit in ms.")]
Pct = Annotated[float | None, typer.Option(help="Percentile of the limits, in percent.")]
SendLag = Annotated[float | None, typer.Option(help="Send-lag limit in ms.")]
DsSize = Annotated[int | None, typer.Option(help="Samples in the synthetic dataset.")]
InLen = Annotated[str | None, typer.Option(help="Input length distribution.")]
OutLen = Annotated[str | None, typer.Option(help="Output length distribution.")]
DsFile = Annotated[Path | None, typer.Option(help="A dataset file (as for 'run').")]
TokOpt = Annotated[str, typer.Option(help="'builtin' or a tokenizer folder.")]
SutOpt = Annotated[str, typer.Option(help="latency-model or null (with no --url).",
                                     rich_help_panel=ST)]
SutTtft = Annotated[float, typer.Option(help="latency-model: TTFT in ms.", rich_help_panel=ST)]
SutTpot = Annotated[float, typer.Option(help="latency-model: TPOT in ms.", rich_help_panel=ST)]
SutBatch = Annotated[int, typer.Option(help="latency-model: requests served at once.",
                                       rich_help_panel=ST)]
SutSlope = Annotated[float, typer.Option(help="latency-model: TPOT growth per request.",
                                         rich_help_panel=ST)]
Urls = Annotated[list[str] | None, typer.Option(
    help="OpenAI-compatible endpoint (repeat for replicas).", rich_help_panel=ST)]
ApiOpt = Annotated[str, typer.Option(help="completions or chat.", rich_help_panel=ST)]
ModelOpt = Annotated[str, typer.Option(help="Model name.", rich_help_panel=ST)]
Routing = Annotated[str, typer.Option(help="round-robin or least-in-flight.",
                                      rich_help_panel=ST)]
Workers = Annotated[int, typer.Option(help="Client worker processes (HTTP).",
                                      rich_help_panel=ST)]
Virtual = Annotated[bool, typer.Option(help="Virtual clock (in-process systems only).")]
Output = Annotated[Path | None, typer.Option(
    "--output", "-o", help="Parent folder of the runs (default results/<time>-<command>).")]
JsonOut = Annotated[bool, typer.Option("--json", help="Print index.json to stdout.")]
StoreDb = Annotated[str | None, typer.Option(
    "--db", help="Results database to store the series and its runs in (default: "
    "$TOKENMARK_DB, else ~/.local/share/tokenmark/results.db).")]
NoDb = Annotated[bool, typer.Option(
    "--no-db", help="Do not store the series and its runs in the results database.")]
# sweep: the target options of 'run' (its default target, the emulated server, included)
SweepSut = Annotated[str, typer.Option(
    help="emulated (the default: the emulated server, as 'run'), latency-model (the "
    "default when a --sut-*-ms/--sut-max-batch/--sut-batch-slope option is given) or "
    "null; with no --url.", rich_help_panel=ST)]
SweepTtft = Annotated[float | None, typer.Option(
    "--sut-ttft-ms", help="latency-model: TTFT in ms (default 50).", rich_help_panel=ST)]
SweepTpot = Annotated[float | None, typer.Option(
    "--sut-tpot-ms", help="latency-model: TPOT in ms (default 10).", rich_help_panel=ST)]
SweepBatch = Annotated[int | None, typer.Option(
    "--sut-max-batch", help="latency-model: requests served at once (default: all).",
    rich_help_panel=ST)]
SweepSlope = Annotated[float | None, typer.Option(
    "--sut-batch-slope", help="latency-model: TPOT growth per request (default 0).",
    rich_help_panel=ST)]
SweepAccel = Annotated[str, typer.Option(
    help="emulated: the accelerator (default H200).", rich_help_panel=ST)]
MaxTokens = Annotated[int, typer.Option(
    help="max_tokens of every request (0: each sample's output length).",
    rich_help_panel=ST)]
IgnoreEos = Annotated[bool, typer.Option(
    help="Send ignore_eos (generate the full output length).", rich_help_panel=ST)]
Header = Annotated[list[str] | None, typer.Option(
    help="An extra header 'Name: value' (repeatable).", rich_help_panel=ST)]
ApiKeyEnv = Annotated[str, typer.Option(
    help="Environment variable holding the API key (never logged).", rich_help_panel=ST)]


#: The options every scale command opens with (as 'run' names them).
HEAD: OptionGroup = (
    ("benchmark", Benchmark, ""), ("scenario", ScenarioOpt, ""), ("round_", RoundOpt, ""),
    ("profile", Profile, ""), ("config", ConfigOpt, None))
#: The settings, workload and target options find-peak and scaling-run share.
LIMITS: OptionGroup = (
    ("min_duration", MinDuration, None), ("min_queries", MinQueries, None),
    ("ttft_ms", TtftMs, None), ("tpot_ms", TpotMs, None), ("e2e_ms", E2eMs, None),
    ("percentile", Pct, None), ("send_lag_limit_ms", SendLag, None),
    ("dataset_size", DsSize, None), ("input_len", InLen, None),
    ("output_len", OutLen, None), ("dataset", DsFile, None), ("tokenizer", TokOpt, "builtin"))
#: find-peak and scaling-run: the latency model unless --url.
SEARCH_SUT: OptionGroup = (
    ("sut", SutOpt, "latency-model"), ("sut_ttft_ms", SutTtft, 50.0),
    ("sut_tpot_ms", SutTpot, 10.0), ("sut_max_batch", SutBatch, 0),
    ("sut_batch_slope", SutSlope, 0.0))
#: sweep: the emulated server (as 'run') unless a latency-model option or --url.
SWEEP_SUT: OptionGroup = (
    ("sut", SweepSut, ""), ("sut_ttft_ms", SweepTtft, None), ("sut_tpot_ms", SweepTpot, None),
    ("sut_max_batch", SweepBatch, None), ("sut_batch_slope", SweepSlope, None),
    ("accelerator", SweepAccel, ""))
TARGET: OptionGroup = (
    ("url", Urls, None), ("api", ApiOpt, "completions"), ("model", ModelOpt, ""))
SWEEP_TARGET: OptionGroup = (
    ("max_tokens", MaxTokens, 0), ("ignore_eos", IgnoreEos, False), ("header", Header, None),
    ("api_key_env", ApiKeyEnv, "OPENAI_API_KEY"))
TAIL: OptionGroup = (
    ("routing", Routing, "round-robin"), ("workers", Workers, 0),
    ("virtual_time", Virtual, False), ("output", Output, None), ("json_out", JsonOut, False),
    ("db", StoreDb, None), ("no_db", NoDb, False))


@dataclass
class _Setup:
    layered: LayeredSettings
    dataset: Dataset
    sut_for: Callable[[int], SutSpec | SutFactory]


#: Options of the scale commands that are theirs, not the run spec's.
_OWN = frozenset({"ctx", "replicas", "concurrency", "rates", "db", "no_db"})


def _setup(o: dict[str, Any], *, default_scenario: str = "Server",
           concurrency: int | None = None) -> _Setup:
    """The layered settings, dataset and systems under test of a scale command's options:
    the same run spec as 'run' (a flag the user gave beats the file's key)."""
    from tokenmark.config.runspec import RunSpec

    check_numbers(o)
    given = given_flags(o["ctx"]) if "ctx" in o else frozenset()
    rs = RunSpec.from_options({k: v for k, v in o.items() if k not in _OWN}, given,
                              config=o.get("config"))
    rs = rs.with_load(scenario=rs.load.scenario or default_scenario,
                      concurrency=concurrency)
    layered = rs.settings()
    workload = build_workload(rs.dataset, layered)
    return _Setup(layered, workload.dataset, suts.replicas_of(rs, layered))


def _out(output: Path | None, command: str, layered: LayeredSettings) -> Path:
    return output or Path("results") / (
        f"{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}-{command}-{layered.preset.name}-"
        f"{layered.settings.scenario.value}")


def _print_index(parent: Path, json_out: bool) -> None:
    if json_out:
        Console().print_json((parent / scale_api.INDEX_JSON).read_text())


def _store_series(parent: Path, opts: dict[str, Any]) -> None:
    """Write records.csv and summary.csv beside every run's results.json under
    ``parent`` (as ``tokenmark run`` does; index.csv, one row per point, is the
    series'), then store the series (index.json) and its runs as ``tokenmark run``
    stores a run (:func:`tokenmark.cli.run.store_folder`), unless --no-db."""
    for folder in sorted(p.parent for p in parent.rglob(RESULTS_FILE)):
        try:
            write_csv(folder)
        except (OSError, ValueError) as e:
            err.print(f"[yellow]warning:[/] no records.csv/summary.csv in {folder}: "
                      f"{escape(str(e))}", soft_wrap=True)
    if not opts.get("no_db"):
        store_folder(parent, opts.get("db"), quiet=bool(opts.get("json_out")))


@app.command("find-peak")
@with_options(HEAD, LIMITS + SEARCH_SUT + TARGET + TAIL)
def find_peak(
    ctx: typer.Context,
    start_qps: Annotated[float | None, typer.Option(
        help="First rate probed (default: the preset's or profile's).", rich_help_panel=SR)
    ] = None,
    max_qps: Annotated[float | None, typer.Option(help="Never probe above this rate.",
                                                  rich_help_panel=SR)] = None,
    tolerance: Annotated[float, typer.Option(
        help="Stop when the valid and invalid rates are within this fraction.",
        rich_help_panel=SR)] = 0.05,
    max_probes: Annotated[int, typer.Option(help="Most probes before confirming.",
                                            rich_help_panel=SR)] = 16,
    probe_duration: Annotated[float | None, typer.Option(
        help="Seconds per probe (default: the minimum duration; shorter probes leave the "
        "length rules to the confirming run).", rich_help_panel=SR)] = None,
    stop_early: Annotated[bool, typer.Option(
        help="End a probe once its failure is certain.", rich_help_panel=SR)] = True,
    **options: Any,
) -> None:
    """Find the highest Server/Interactive rate whose run is VALID, and confirm it.

    Every probe is a full results folder under the output folder, listed in index.json
    and index.csv.

    Example: tokenmark find-peak -s Server --profile demo --sut-max-batch 8 --virtual-time
    """
    opts = {k: v for k, v in locals().items() if k != "options"} | options
    output, json_out, virtual_time = (options[k] for k in ("output", "json_out",
                                                           "virtual_time"))
    try:
        st = _setup(opts)
        parent = _out(output, "find-peak", st.layered)
        err.print(f"find-peak: probes in {parent}", highlight=False)
        res = scale_api.find_peak(
            st.layered, st.dataset, st.sut_for(1), parent, start_qps=start_qps,
            tolerance=tolerance, max_qps=max_qps if max_qps is not None else math.inf,
            max_probes=max_probes, probe_duration_s=probe_duration, stop_early=stop_early,
            virtual_time=virtual_time, on_probe=None if json_out else _show_probe)
    except BadInputError as e:
        raise bad_input(e) from None
    _print_index(parent, json_out)
    _store_series(parent, opts)
    if not json_out:
        line = (f"peak: {res.rate:,.4g} queries/s" if res.rate is not None else "no peak")
        Console().print(f"{line} ({res.note}); index: {parent / scale_api.INDEX_JSON} "
                        "(unverified)", highlight=False)
    raise typer.Exit(EXIT_VALID if res.rate is not None else EXIT_INVALID)


def _show_probe(p: scale_api.Probe) -> None:
    s = p.result.summary
    err.print(f"  {p.kind} {p.index:2d}: {p.rate:10.4g}/s  {p.judgement.kind.value:18s} "
              f"{s.completed}/{s.scheduled} done  {p.judgement.reason[:90]}", highlight=False)


@app.command()
@with_options(HEAD, LIMITS + SWEEP_SUT + TARGET + SWEEP_TARGET + TAIL)
def sweep(
    ctx: typer.Context,
    rates: Annotated[str, typer.Option(
        help="Rates (queries/s): a list 1,2,4, LO:HI:STEPS (geometric), or 'auto' (the "
        "default without --concurrency): a synchronous run, a throughput run, then "
        "--points rates evenly between their requests/s, as GuideLLM's sweep.")] = "",
    points: Annotated[int, typer.Option(
        help="--rates auto: rates between the synchronous and the throughput run.")] = 8,
    throughput_concurrency: Annotated[int, typer.Option(
        help="--rates auto: streams of the throughput run (a closed loop).")] = 64,
    concurrency: Annotated[str, typer.Option(
        help="Concurrencies of a closed loop: a list 1,2,4 or LO:HI:STEPS.")] = "",
    pareto_latency: Annotated[str, typer.Option(
        help="Latency of the Pareto front: ttft_p99_ms, tpot_p99_ms or e2e_p99_ms.")
    ] = "e2e_p99_ms",
    **options: Any,
) -> None:
    """Run one full benchmark per rate or concurrency: throughput against latency and
    goodput per point, and the Pareto front. Without --rates or --concurrency the range
    is automatic (--rates auto).

    Example: tokenmark sweep -s poisson --rates 2:16:4 --ttft-ms 500 --sut-max-batch 8
    """
    opts = {k: v for k, v in locals().items() if k != "options"} | options
    output, json_out, virtual_time = (options[k] for k in ("output", "json_out",
                                                           "virtual_time"))
    try:
        auto = points if rates.strip().lower() == "auto" or not (rates or concurrency) else 0
        if auto and concurrency:
            raise ConfigError("--rates auto chooses its own points; drop --concurrency")
        if auto:
            rates = ""
        rate_pts = parse_points(rates, "--rates") if rates else ()
        conc_pts = tuple(int(c) for c in parse_points(concurrency, "--concurrency")) \
            if concurrency else ()
        if conc_pts and any(c != int(c) for c in parse_points(concurrency, "--concurrency")):
            raise ConfigError("--concurrency points must be whole numbers")
        default = "closed" if conc_pts else "Server"
        st = _setup(opts, default_scenario=default,
                    concurrency=conc_pts[0] if conc_pts else None)
        parent = _out(output, "sweep", st.layered)
        res = scale_api.sweep(st.layered, st.dataset, st.sut_for(1), parent, rates=rate_pts,
                              concurrencies=conc_pts, pareto_latency=pareto_latency,
                              virtual_time=virtual_time, auto=auto,
                              throughput_concurrency=throughput_concurrency,
                              on_point=None if json_out else _show_point)
    except (BadInputError, ValueError) as e:
        raise bad_input(e if isinstance(e, BadInputError) else ConfigError(str(e))) from None
    _print_index(parent, json_out)
    _store_series(parent, opts)
    if not json_out:
        t = Table(title=f"Sweep ({parent}, unverified)", title_justify="left")
        for col in ("point", "kind", "value", "verdict", "req/s", "out tok/s", "TTFT p99 ms",
                    "TPOT p99 ms", "E2E p99 ms", "goodput", "Pareto"):
            t.add_column(col, justify="left" if col in ("verdict", "kind") else "right")
        for r in res.rows:
            t.add_row(str(r["point"]), r["kind"], f"{r['value']:.4g}", r["tokenmark_verdict"],
                      f"{r['requests_per_s']:.3g}", f"{r['output_tokens_per_s']:,.0f}",
                      _fmt(r["ttft_p99_ms"]), _fmt(r["tpot_p99_ms"]), _fmt(r["e2e_p99_ms"]),
                      "-" if r["goodput_fraction"] is None else f"{r['goodput_fraction']:.1%}",
                      "*" if r["pareto"] else "")
        out().print(t)


def _show_point(r: dict[str, Any]) -> None:
    err.print(f"  point {r['point']:2d}: {r['kind']:11s} {r['value']:10.4g}  "
              f"{r['tokenmark_verdict']:8s} {r['requests_per_s']:.3g} req/s", highlight=False)


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:,.1f}"


@app.command(name="scaling-run")
@with_options(HEAD, LIMITS + SEARCH_SUT + TARGET + TAIL)
def scaling_run(
    ctx: typer.Context,
    replicas: Annotated[str, typer.Option(
        help="Replica (endpoint) counts, e.g. 1,2,4; with --url the first N endpoints.")
    ] = "1,2,4",
    repeats: Annotated[int, typer.Option(help="Searches per replica count (for the "
                                         "interval).")] = 1,
    start_qps: Annotated[float | None, typer.Option(help="First rate of the first search.",
                                                    rich_help_panel=SR)] = None,
    tolerance: Annotated[float, typer.Option(help="Search tolerance (fraction).",
                                             rich_help_panel=SR)] = 0.05,
    probe_duration: Annotated[float | None, typer.Option(help="Seconds per probe.",
                                                         rich_help_panel=SR)] = None,
    **options: Any,
) -> None:
    """The same workload against 1, 2, 4, ... replicas at fixed latency limits: peak
    throughput per replica and scaling efficiency with an interval.

    Example: tokenmark scaling-run --profile demo --replicas 1,2 --sut-max-batch 8 --virtual-time
    """
    opts = {k: v for k, v in locals().items() if k != "options"} | options
    output, json_out, virtual_time = (options[k] for k in ("output", "json_out",
                                                           "virtual_time"))
    try:
        counts = tuple(int(n) for n in parse_points(replicas, "--replicas"))
        st = _setup(opts)
        parent = _out(output, "scaling", st.layered)
        err.print(f"scaling: searches in {parent}", highlight=False)
        res = scale_api.scaling_run(
            st.layered, st.dataset, st.sut_for, parent, replicas=counts, repeats=repeats,
            start_qps=start_qps, virtual_time=virtual_time, tolerance=tolerance,
            probe_duration_s=probe_duration)
    except (BadInputError, ValueError) as e:
        raise bad_input(e if isinstance(e, BadInputError) else ConfigError(str(e))) from None
    _print_index(parent, json_out)
    _store_series(parent, opts)
    if not json_out:
        t = Table(title=f"Scaling efficiency ({parent}, unverified)", title_justify="left")
        for col in ("replicas", "peak q/s", "tokens/s", "per replica", "efficiency",
                    "interval"):
            t.add_column(col, justify="right")
        for p in res.points:
            hi = "open" if not math.isfinite(p.efficiency_high) else f"{p.efficiency_high:.1%}"
            t.add_row(str(p.replicas), f"{sum(p.peak_rates) / len(p.peak_rates):.4g}",
                      f"{p.throughput:,.0f}", f"{p.per_replica:,.0f}", f"{p.efficiency:.1%}",
                      f"[{p.efficiency_low:.1%}, {hi}]")
        out().print(t)
        Console().print(json.dumps({"interval": [p.sources for p in res.points]}),
                        highlight=False)
