"""``tokenmark run``, ``tokenmark presets`` and ``tokenmark version``."""

from __future__ import annotations

import datetime as dt
import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from tokenmark import __version__, results_api
from tokenmark.adapters.inprocess import LatencyModel
from tokenmark.api import (
    RunResult,
    SutSpec,
    default_dataset,
    run_benchmark,
)
from tokenmark.cli.app import app, bad_input, err
from tokenmark.config.layering import build_settings, default_scenario, read_toml
from tokenmark.config.presets import load_round, rounds
from tokenmark.errors import BadInputError
from tokenmark.loadgen.runner import RunnerStats
from tokenmark.metrics.stats import Distribution
from tokenmark.rules import Validity, Verdict
from tokenmark.settings import Scenario, Seeds


@app.command()
def run(
    benchmark: Annotated[str, typer.Option(
        "--benchmark", "-b", help="Benchmark as the submission checker names it "
        "(llama3.1-8b, llama2-70b-99, deepseek-r1, ...) or a LoadGen alias.")] = "",
    scenario: Annotated[str, typer.Option(
        "--scenario", "-s", help="Offline, Server, Interactive, SingleStream, MultiStream, "
        "or a tokenmark pattern: constant, poisson, gamma, closed.")] = "",
    round_: Annotated[str, typer.Option("--round", "-r", help="MLPerf round preset.")] = "",
    profile: Annotated[str, typer.Option(
        help="'demo' (short run, labelled as not MLPerf-length) or 'mlperf'.")] = "",
    config: Annotated[Path | None, typer.Option(
        "--config", "-c", help="TOML file with [run], [settings] and [dataset] tables.")] = None,
    user_conf: Annotated[Path | None, typer.Option(
        help="An MLPerf user.conf (model.scenario.key = value).")] = None,
    qps: Annotated[float | None, typer.Option(
        help="Target queries/s (Server, Interactive, constant, poisson, gamma) or the "
        "expected queries/s of an Offline run.")] = None,
    concurrency: Annotated[int | None, typer.Option(
        help="Streams of a closed-loop run.")] = None,
    max_concurrency: Annotated[int | None, typer.Option(
        help="Cap on requests in flight for any schedule.")] = None,
    burstiness: Annotated[float | None, typer.Option(
        help="Gamma shape of the 'gamma' pattern (1.0 = Poisson).")] = None,
    min_duration: Annotated[float | None, typer.Option(
        help="Minimum duration in seconds.")] = None,
    max_duration: Annotated[float | None, typer.Option(
        help="Maximum duration in seconds (0: none).")] = None,
    min_queries: Annotated[int | None, typer.Option(help="Minimum query count.")] = None,
    max_queries: Annotated[int | None, typer.Option(help="Maximum query count.")] = None,
    ttft_ms: Annotated[float | None, typer.Option(help="TTFT limit in ms.")] = None,
    tpot_ms: Annotated[float | None, typer.Option(help="TPOT limit in ms.")] = None,
    e2e_ms: Annotated[float | None, typer.Option(help="End-to-end latency limit in ms.")] = None,
    percentile: Annotated[float | None, typer.Option(
        help="Percentile the limits apply at, in percent (e.g. 99).")] = None,
    warmup: Annotated[float | None, typer.Option(
        help="Seconds at the start excluded from statistics (tokenmark patterns).")] = None,
    cooldown: Annotated[float | None, typer.Option(
        help="Seconds at the end excluded from statistics (tokenmark patterns).")] = None,
    send_lag_limit_ms: Annotated[float | None, typer.Option(
        help="Send-lag limit of the tokenmark verdict (default: max(2 ms, 1% of the "
        "mean inter-arrival time)).")] = None,
    error_rate_limit: Annotated[float | None, typer.Option(
        help="Fraction of failed requests the tokenmark verdict accepts (default 0).")] = None,
    seed: Annotated[int | None, typer.Option(
        help="Seed of a tokenmark pattern's schedule and sample order (MLPerf scenarios "
        "use the round's seeds).")] = None,
    dataset_size: Annotated[int | None, typer.Option(
        help="Samples in the synthetic dataset (default: the preset's or profile's).")] = None,
    input_len: Annotated[str | None, typer.Option(
        help="Input length distribution: N, uniform:LO:HI, normal:MEAN:STD, "
        "lognormal:MEDIAN:SIGMA.")] = None,
    output_len: Annotated[str | None, typer.Option(
        help="Output length distribution (same forms).")] = None,
    sut: Annotated[str | None, typer.Option(
        help="Built-in system under test: latency-model or null.")] = None,
    sut_ttft_ms: Annotated[float | None, typer.Option(
        help="latency-model: time to first token in ms.")] = None,
    sut_tpot_ms: Annotated[float | None, typer.Option(
        help="latency-model: time per output token in ms.")] = None,
    sut_max_batch: Annotated[int | None, typer.Option(
        help="latency-model: requests served at once (the rest queue).")] = None,
    sut_batch_slope: Annotated[float | None, typer.Option(
        help="latency-model: TPOT growth per extra request in the batch.")] = None,
    output: Annotated[Path | None, typer.Option(
        "--output", "-o", help="Results folder (default results/<time>-<benchmark>-<scenario>).")
    ] = None,
    virtual_time: Annotated[bool, typer.Option(
        help="Run on a virtual clock (in-process systems only): minutes of benchmark in "
        "seconds.")] = False,
    db: Annotated[str | None, typer.Option(
        "--db", help="Results database to store the run in (default: $TOKENMARK_DB, else "
        "~/.local/share/tokenmark/results.db).")] = None,
    no_db: Annotated[bool, typer.Option(
        "--no-db", help="Do not store the run in the results database.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print only the verdicts.")] = False,
    json_out: Annotated[bool, typer.Option(
        "--json", help="Print results.json to stdout instead of tables.")] = False,
) -> None:
    """Run a benchmark and judge it: the MLPerf verdict and the tokenmark verdict.

    Example: tokenmark run --benchmark llama3.1-8b --scenario Server --profile demo --qps 30
    """
    try:
        doc = read_toml(config) if config else {}
        runt = doc.get("run", {})
        round_name = round_ or runt.get("round") or "v6.0"
        bench = benchmark or runt.get("benchmark") or "llama3.1-8b"
        sc_text = scenario or runt.get("scenario") or ""
        sc = Scenario.parse(sc_text) if sc_text else None
        if sc is None:
            sc = default_scenario(round_name, bench)
        prof = profile or runt.get("profile") or ""
        overrides: dict[str, Any] = {
            "min_duration_ms": None if min_duration is None else int(min_duration * 1000),
            "max_duration_ms": None if max_duration is None else int(max_duration * 1000),
            "min_query_count": min_queries,
            "max_query_count": max_queries,
            "ttft_latency_ms": ttft_ms,
            "tpot_latency_ms": tpot_ms,
            "target_latency_ms": e2e_ms,
            "target_latency_percentile": None if percentile is None else percentile / 100,
            "concurrency": concurrency,
            "max_concurrency": max_concurrency,
            "burstiness": burstiness,
            "warmup_ms": None if warmup is None else int(warmup * 1000),
            "cooldown_ms": None if cooldown is None else int(cooldown * 1000),
            "send_lag_limit_ms": send_lag_limit_ms,
            "error_rate_limit": error_rate_limit,
        }
        if dataset_size is not None:
            overrides["performance_sample_count"] = dataset_size
            overrides["total_sample_count"] = dataset_size
        if qps is not None:
            key = "offline_expected_qps" if sc is Scenario.OFFLINE else "target_qps"
            overrides[key] = qps
        seeds = None
        if seed is not None:
            seeds = Seeds(qsl=seed, sample_index=seed + 1, schedule=seed + 2)
        layered = build_settings(
            round_name, bench, sc, profile=prof, toml=doc, toml_name=str(config or ""),
            user_conf=user_conf, overrides=overrides, seeds=seeds,
        )
        ds = doc.get("dataset", {})
        dataset = default_dataset(
            layered,
            size=dataset_size or ds.get("size"),
            input_lengths=input_len or ds.get("input"),
            output_lengths=output_len or ds.get("output"),
            seed=seed or 0,
        )
        s = doc.get("sut", {})
        model = LatencyModel(
            ttft_ns=int((sut_ttft_ms or s.get("ttft_ms", 50.0)) * 1e6),
            tpot_ns=int((sut_tpot_ms or s.get("tpot_ms", 10.0)) * 1e6),
            max_batch=sut_max_batch or s.get("max_batch", 0),
            batch_slope=sut_batch_slope or s.get("batch_slope", 0.0),
        )
        spec = SutSpec(kind=sut or s.get("kind", "latency-model"), model=model)
        eff_scenario = layered.settings.scenario
        out_dir = output or Path("results") / (
            f"{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}-{layered.preset.name}-"
            f"{eff_scenario.value}"
        )
    except BadInputError as e:
        raise bad_input(e) from None

    show = not quiet and not json_out
    if show and layered.settings.profile == "demo":
        err.print(
            "[yellow]demo profile:[/] a short run judged by LoadGen's rules, "
            "not an MLPerf-length run. Results are unverified."
        )
    live: Live | None = None
    if show and sys.stderr.isatty():
        live = Live(Text("starting..."), console=err, refresh_per_second=4, transient=True)
    progress = _progress(live) if live is not None else None
    try:
        if live is not None:
            live.start()
        result = run_benchmark(layered, dataset, spec, out_dir, virtual_time=virtual_time,
                               progress=progress)
    except BadInputError as e:
        raise bad_input(e) from None
    finally:
        if live is not None:
            live.stop()
    _print_result(result, quiet=quiet, json_out=json_out)
    if not no_db:
        _store(result, db, quiet=quiet or json_out)
    raise typer.Exit(result.exit_code)


def _store(result: RunResult, db: str | None, *, quiet: bool) -> None:
    """Store the run as an unverified row; a failure warns and keeps the run's exit code."""
    try:
        report = results_api.store_run(result.output_dir, db=db)
    except BadInputError as e:
        err.print(f"[yellow]warning:[/] the run was not stored: {e}", soft_wrap=True)
        return
    if report.errors:
        err.print(f"[yellow]warning:[/] the run was not stored: {report.errors[0]}",
                  soft_wrap=True)
    elif not quiet:
        err.print(f"stored in {report.db} (unverified)", highlight=False)


def _progress(live: Live) -> Any:
    def update(st: RunnerStats, elapsed: float) -> None:
        rate = st.output_tokens / elapsed if elapsed > 0 else 0.0
        live.update(Text(
            f"{elapsed:6.1f} s  issued {st.issued}/{st.scheduled or '?'}  "
            f"completed {st.completed}  in flight {st.in_flight}  failed {st.failed}  "
            f"{rate:,.0f} output tokens/s"
        ))

    return update


def _ms(ns: float) -> str:
    return f"{ns / 1e6:,.2f}"


def _dist_row(name: str, d: Distribution, p_target: float) -> list[str]:
    if d.count == 0:
        return [name, "-", "-", "-", "-", "-", "-"]
    pc = d.percentiles
    return [name, _ms(d.mean), _ms(pc.get(0.5, 0)), _ms(pc.get(0.9, 0)),
            _ms(pc.get(0.99, 0)), _ms(pc.get(p_target, 0)), _ms(d.max)]


def _verdict_text(v: Verdict) -> Text:
    style = {Validity.VALID: "bold green", Validity.INVALID: "bold red"}.get(v.validity, "dim")
    return Text(v.validity.value, style=style)


def _sut_label(result: RunResult) -> str:
    sut = result.document["run"]["sut"]
    return str(sut.get("profile", sut["name"]))


def _print_result(result: RunResult, *, quiet: bool, json_out: bool) -> None:
    out = Console()
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
            mark = "[green]pass[/]" if f.passed else "[red]FAIL[/]"
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
    out = Console()
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
