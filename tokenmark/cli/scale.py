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
from tokenmark.api.assemble import build_workload, default_api, prebuild, server_tokenizer
from tokenmark.api.run import EXIT_INVALID, EXIT_VALID, SutSpec
from tokenmark.cli.app import (
    OptionGroup,
    app,
    bad_input,
    check_numbers,
    err,
    given_flags,
    out,
    pick,
    with_options,
)
from tokenmark.cli.run import LOAD, RUNNING, SYSTEM, WORKLOAD, store_folder
from tokenmark.cli.run import TARGET as RUN_TARGET
from tokenmark.clock import Clock
from tokenmark.config.layering import LayeredSettings
from tokenmark.dataset import Dataset
from tokenmark.errors import BadInputError, ConfigError
from tokenmark.output.results import RESULTS_FILE
from tokenmark.output.tables import write_csv
from tokenmark.scale.sweep import parse_points
from tokenmark.sut import SystemUnderTest

SutFactory = Callable[[Clock], SystemUnderTest]
SR = "Search"

# The options the scale commands share with 'run' are run's own declarations
# (cli/run.py: one type, flag, help text and panel per option); only the options whose
# meaning differs here (the parent folder of the runs, index.json, the series' store)
# are declared below.
Output = Annotated[Path | None, typer.Option(
    "--output", "-o", help="Parent folder of the runs (default results/<time>-<command>).")]
JsonOut = Annotated[bool, typer.Option("--json", help="Print index.json to stdout.")]
StoreDb = Annotated[str | None, typer.Option(
    "--db", help="Results database to store the series and its runs in (default: "
    "$TOKENMARK_DB, else ~/.local/share/tokenmark/results.db).")]
NoDb = Annotated[bool, typer.Option(
    "--no-db", help="Do not store the series and its runs in the results database.")]

_LATENCY_MODEL = ("sut_ttft_ms", "sut_tpot_ms", "sut_max_batch", "sut_batch_slope")

#: The options every scale command opens with (run's).
HEAD: OptionGroup = pick(LOAD, "benchmark", "scenario", "round_", "profile", "config")
#: The settings and workload options every scale command takes (run's).
LIMITS: OptionGroup = pick(
    LOAD, "min_duration", "min_queries", "ttft_ms", "tpot_ms", "e2e_ms", "percentile",
    "send_lag_limit_ms") + pick(
    WORKLOAD, "dataset_size", "input_len", "output_len", "dataset", "dataset_format",
    "columns", "tokenizer")
#: find-peak and scaling-run: run's system options, the latency model by default.
SEARCH_SUT: OptionGroup = pick(SYSTEM, "sut", *_LATENCY_MODEL, sut="latency-model",
                               sut_ttft_ms=50.0, sut_tpot_ms=10.0, sut_max_batch=0,
                               sut_batch_slope=0.0)
#: sweep: run's system options and defaults (the emulated server unless a latency-model
#: option or --url).
SWEEP_SUT: OptionGroup = pick(SYSTEM, "sut", *_LATENCY_MODEL, "accelerator")
#: run's HTTP target options the scale commands honour.
TARGET: OptionGroup = pick(RUN_TARGET, "url", "api", "model", "max_tokens", "ignore_eos",
                           "header", "api_key_env")
TAIL: OptionGroup = pick(RUN_TARGET, "routing", "workers") + pick(RUNNING, "virtual_time") + (
    ("output", Output, None), ("json_out", JsonOut, False), ("db", StoreDb, None),
    ("no_db", NoDb, False))


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
    served = None  # --tokenizer server: the HTTP target's own tokenizer, as 'run'
    if rs.dataset.tokenizer == "server" and rs.target.urls:
        served = server_tokenizer(suts.http_config(rs))
    try:
        workload = build_workload(rs.dataset, layered, served)
        if served is not None:
            prebuild(workload.dataset)
    finally:
        if served is not None:
            served.close()
    api = default_api(rs.target.api, rs.dataset, layered.preset.name)  # as 'run'
    return _Setup(layered, workload.dataset, suts.replicas_of(rs, layered, api=api))


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
@with_options(HEAD, LIMITS + SWEEP_SUT + TARGET + TAIL)
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
