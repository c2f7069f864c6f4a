"""The results-database commands: import, db, results, leaderboard, reproducibility,
compare, scaling, software-gains, top and published. Each calls one function of
:mod:`tokenmark.api.results` and prints :mod:`tokenmark.api.tables`. This module is
imported alone when one of its commands runs (see :mod:`tokenmark.cli`), so it loads
nothing of the run path."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table as RichTable

from tokenmark.api import results as results_api
from tokenmark.api.tables import (
    Table,
    accelerator_comparison_tables,
    aliases_table,
    comparison_table,
    gains_summary_table,
    gains_tables,
    import_table,
    leaderboard_tables,
    published_table,
    refresh_table,
    reproducibility_tables,
    rows_table,
    scaling_table,
    top_table,
)
from tokenmark.cli.app import app, bad_input, check_numbers, err, out
from tokenmark.errors import EXIT_BAD_INPUT, AnalysisError, BadInputError
from tokenmark.resultrows import ResultRow

DbOpt = Annotated[str | None, typer.Option(
    "--db", help="Database file or URL (default: $TOKENMARK_DB, else "
    "~/.local/share/tokenmark/results.db); postgresql://... for PostgreSQL.")]
PublishedOpt = Annotated[bool, typer.Option(
    "--published/--no-published", help="Include the published results that ship with "
    "tokenmark (v4.1-v6.1 LLM results, v5.0 in part; see 'tokenmark published status').")]

db_app = typer.Typer(help="Create, migrate and inspect the results database.",
                     no_args_is_help=True)
app.add_typer(db_app, name="db")
published_app = typer.Typer(help="The table of published LLM results that ships with "
                            "tokenmark: where it is, how it was made, refresh it.",
                            no_args_is_help=True)
app.add_typer(published_app, name="published")


def _any(v: str | None) -> str | None:
    return None if v is None or v.lower() == "any" or v.lower() == "all" else v


def _print(tables: list[Table]) -> None:
    console = out()
    for t in tables:
        console.print(t.title, highlight=False, soft_wrap=True)
        rt = RichTable()
        for c in t.columns:
            rt.add_column(c)
        for row in t.rows:
            rt.add_row(*row)
        console.print(rt)
        for note in t.notes:
            console.print(f"note: {note}", highlight=False)


@app.command("import")
def import_(
    path: Annotated[Path, typer.Argument(help="A results repository checkout, submission "
                                         "tree, run folder, results.json or archive.")],
    db: DbOpt = None,
    round_: Annotated[str | None, typer.Option("--round", help="Round, when the path "
                                               "does not say (e.g. v5.1).")] = None,
    unverified: Annotated[bool, typer.Option(
        help="Label the results unverified (a tree MLCommons has not published).")] = False,
    strict: Annotated[bool, typer.Option(help="Store nothing if any file fails.")] = False,
    system: Annotated[Path | None, typer.Option(
        help="A systems/<id>.json describing the hardware of imported runs.")] = None,
) -> None:
    """Import published results or tokenmark runs into the database (idempotent).

    Example: tokenmark import tests/data/shared/mlperf/samples
    """
    try:
        report = results_api.import_results(path, db=db, round=round_,
                                            official=not unverified, strict=strict,
                                            system=system)
    except BadInputError as e:
        raise bad_input(e) from None
    _print([import_table(report)])
    for fe in report.errors:
        err.print(f"error: {fe}", highlight=False, soft_wrap=True)
    raise typer.Exit(0 if report.ok else EXIT_BAD_INPUT)


@db_app.command("upgrade")
def db_upgrade(db: DbOpt = None) -> None:
    """Create the database or migrate it to the newest schema.

    Example: tokenmark db upgrade
    """
    try:
        st = results_api.db_upgrade(db)
    except BadInputError as e:
        raise bad_input(e) from None
    out().print(f"{st.url}: schema {st.revision} (newest {st.head})", highlight=False)


@db_app.command("status")
def db_status(db: DbOpt = None) -> None:
    """Where the database is, its schema and what it holds.

    Example: tokenmark db status
    """
    try:
        st = results_api.db_status(db)
    except BadInputError as e:
        raise bad_input(e) from None
    rev = st.revision or "not created"
    out().print(f"{st.url}: schema {rev} (newest {st.head})", highlight=False)
    for k, v in st.counts.items():
        out().print(f"  {k}: {v}", highlight=False)


@app.command("results")
def results(
    db: DbOpt = None,
    benchmark: Annotated[str | None, typer.Option(help="Benchmark or LoadGen alias.")] = None,
    scenario: Annotated[str | None, typer.Option(
        help="Scenario: Offline, Server, Interactive, SingleStream or MultiStream.")] = None,
    round_: Annotated[str | None, typer.Option("--round", help="A round, e.g. v6.0.")] = None,
    division: Annotated[str | None, typer.Option(help="closed, open or network.")] = None,
    submitter: Annotated[str | None, typer.Option(help="Submitter (e.g. NVIDIA, AMD).")] = None,
    system: Annotated[str | None, typer.Option(help="System id.")] = None,
    label: Annotated[str | None, typer.Option(help="official or unverified.")] = None,
    published: Annotated[bool, typer.Option(
        "--published", help="Also list the published results that ship with tokenmark."
    )] = False,
    json_out: Annotated[bool, typer.Option(
        "--json", help="Print the rows as a JSON array (every field) instead of a table.")
    ] = False,
    csv_out: Annotated[bool, typer.Option(
        "--csv", help="Print the rows as CSV (every field, a header line) instead of a "
        "table.")] = False,
) -> None:
    """List stored results matching the filters.

    Example: tokenmark results --benchmark deepseek-r1 --round v6.1 --published
    """
    try:
        rows = results_api.list_results(db=db, benchmark=benchmark, scenario=scenario,
                                        round=round_, division=division,
                                        submitter=submitter, system_id=system, label=label,
                                        published=published)
    except BadInputError as e:
        raise bad_input(e) from None
    if json_out and csv_out:
        raise bad_input(BadInputError("give --json or --csv, not both"))
    if json_out or csv_out:
        _print_rows(rows, csv_out=csv_out)
        return
    _print([rows_table(rows)])


def _print_rows(rows: list[ResultRow], *, csv_out: bool) -> None:
    """Rows as JSON or CSV on stdout: every field of :class:`ResultRow`, by name."""
    import dataclasses
    import json
    import sys

    dicts = [{k: v.value if isinstance(v, Enum) else v
              for k, v in dataclasses.asdict(r).items()} for r in rows]
    if csv_out:
        from tokenmark.output.tables import write_table

        write_table(sys.stdout, [f.name for f in dataclasses.fields(ResultRow)], dicts)
    else:
        sys.stdout.write(json.dumps(dicts, indent=1) + "\n")


@app.command()
def leaderboard(
    benchmark: Annotated[str, typer.Argument(help="Benchmark or LoadGen alias.")],
    scenario: Annotated[str, typer.Argument(help="Scenario, e.g. Server.")],
    db: DbOpt = None,
    division: Annotated[str, typer.Option(help="closed, open, network or any.")] = "closed",
    availability: Annotated[str, typer.Option(
        help="available, preview, rdi or any.")] = "available",
    round_: Annotated[str | None, typer.Option("--round", help="A round or 'all'.")] = None,
    category: Annotated[str | None, typer.Option(help="datacenter or edge.")] = None,
    official_only: Annotated[bool, typer.Option(help="Leave out unverified rows.")] = False,
    limit: Annotated[int | None, typer.Option(help="Show at most this many places per "
                                              "tier.")] = None,
    published: PublishedOpt = True,
) -> None:
    """The leaderboard in two tiers: single node, and rack-scale/multi-node.

    Example: tokenmark leaderboard deepseek-r1 Offline --round v6.1 --limit 5
    """
    try:
        lb = results_api.leaderboard(benchmark, scenario, db=db, division=_any(division),
                                     availability=_any(availability), round=_any(round_),
                                     official_only=official_only, category=category,
                                     published=published)
    except BadInputError as e:
        raise bad_input(e) from None
    _print(leaderboard_tables(lb, limit))


@app.command()
def reproducibility(
    benchmark: Annotated[str | None, typer.Argument(
        help="A benchmark (default: every benchmark).")] = None,
    scenario: Annotated[str | None, typer.Argument(
        help="A scenario (default: every scenario).")] = None,
    db: DbOpt = None,
    accelerator: Annotated[str | None, typer.Option(help="Accelerator model text.")] = None,
    accelerators: Annotated[int | None, typer.Option(help="Accelerators used.")] = None,
    division: Annotated[str, typer.Option(help="closed, open, network or any.")] = "closed",
    round_: Annotated[str | None, typer.Option("--round", help="A round, e.g. v6.0.")] = None,
    tolerance: Annotated[float, typer.Option(help="Spread judged acceptable.")] = 0.04,
    vendor: Annotated[str | None, typer.Option(
        help="Accelerator vendor (amd, nvidia, intel, ...).")] = None,
    published: PublishedOpt = True,
) -> None:
    """Partners' results for the same hardware against the accelerator vendor's own.

    Example: tokenmark reproducibility --round v6.1 --vendor amd
    """
    try:
        check_numbers({"tolerance": tolerance})
        groups = results_api.reproducibility(db=db, benchmark=benchmark, scenario=scenario,
                                             accelerator=accelerator,
                                             accelerators=accelerators,
                                             division=_any(division), round=round_,
                                             vendor=vendor, published=published)
        if not groups:
            raise AnalysisError("no accelerator has both its vendor's result and a "
                                "partner's at one count, benchmark, scenario and round "
                                "among the results asked for")
    except BadInputError as e:
        raise bad_input(e) from None
    _print(reproducibility_tables(groups, tolerance))


@app.command()
def compare(
    a: Annotated[str, typer.Argument(help="[ROUND/][SUBMITTER/]SYSTEM_ID, or an "
                                     "accelerator with --accelerators")],
    b: Annotated[str, typer.Argument(help="[ROUND/][SUBMITTER/]SYSTEM_ID, or an "
                                     "accelerator with --accelerators")],
    db: DbOpt = None,
    benchmark: Annotated[str | None, typer.Option(help="Benchmark or LoadGen alias.")] = None,
    scenario: Annotated[str | None, typer.Option(
        help="Scenario: Offline, Server, Interactive, SingleStream or MultiStream.")] = None,
    normalise: Annotated[bool, typer.Option(
        help="Compare per-accelerator figures when the counts differ.")] = False,
    accelerators: Annotated[bool, typer.Option(
        "--accelerators", help="A and B name accelerators (e.g. GB300, 'Vera Rubin'): "
        "pair their results per benchmark, scenario and submitter.")] = False,
    any_submitter: Annotated[bool, typer.Option(
        help="With --accelerators: pair the best of each across submitters.")] = False,
    round_: Annotated[str | None, typer.Option(
        "--round", help="With --accelerators: one round.")] = None,
    published: PublishedOpt = True,
    max_regression: Annotated[str | None, typer.Option(
        help="Regression gate for CI (the same as 'tokenmark gate A B'): A and B are "
        "results folders (baseline, new run); exit 1 when throughput or a latency "
        "percentile got worse by more than this (e.g. 5%) with 95% confidence.")] = None,
) -> None:
    """Generation over generation: system B against system A, per benchmark and scenario;
    or, given two results folders, the regression gate of 'tokenmark gate' (its old name).

    Example: tokenmark compare v5.1/NVIDIA/GB300-NVL72_GB300-288GB_aarch64x72_TRT v6.0/NVIDIA/GB300-NVL72_GB300-288GB_aarch64x288_TRT --normalise
    Example: tokenmark compare GB300 "Vera Rubin" --accelerators --round v6.1
    Example: tokenmark compare results/baseline results/candidate --max-regression 5%
    """  # noqa: E501
    if max_regression is not None or (Path(a).is_dir() and Path(b).is_dir()):
        from tokenmark.cli.trust import regression_gate

        raise typer.Exit(regression_gate(Path(a), Path(b), max_regression or "5%"))
    try:
        if accelerators:
            ac = results_api.compare_accelerators(
                a, b, db=db, round=round_, benchmark=benchmark, scenario=scenario,
                same_submitter=not any_submitter, normalise=normalise, published=published)
            _print(accelerator_comparison_tables(ac))
            return
        c = results_api.compare(a, b, db=db, benchmark=benchmark, scenario=scenario,
                                normalise=normalise, published=published)
    except BadInputError as e:
        raise bad_input(e) from None
    _print([comparison_table(c)])


@app.command()
def scaling(
    benchmark: Annotated[str, typer.Argument(help="Benchmark or LoadGen alias.")],
    accelerator: Annotated[str, typer.Option(help="Accelerator model text.")],
    scenario: Annotated[str | None, typer.Argument(
        help="A scenario (default: every scenario with results at two or more counts).")
    ] = None,
    db: DbOpt = None,
    submitter: Annotated[str | None, typer.Option(
        help="One submitter's results (needed when several have some), or any.")] = None,
    round_: Annotated[str | None, typer.Option("--round", help="A round, e.g. v6.0.")] = None,
    division: Annotated[str, typer.Option(help="closed, open, network or any.")] = "closed",
    base: Annotated[int | None, typer.Option(help="Base accelerator count.")] = None,
    availability: Annotated[str | None, typer.Option(
        help="available, preview, rdi (needed when the family has several), or any."
    )] = None,
    published: PublishedOpt = True,
) -> None:
    """Scaling efficiency of one system family: (T_N / N) / (T_base / base).

    Example: tokenmark scaling deepseek-r1 --accelerator GB300 --submitter NVIDIA --round v6.1 --base 72
    """  # noqa: E501
    try:
        if scenario is None:
            curves = results_api.scaling_scenarios(
                benchmark, accelerator=accelerator, db=db, submitter=submitter,
                round=round_, division=_any(division), base=base, availability=availability,
                published=published)
        else:
            curves = [results_api.scaling_efficiency(
                benchmark, scenario, accelerator=accelerator, db=db, submitter=submitter,
                round=round_, division=_any(division), base=base, availability=availability,
                published=published)]
    except BadInputError as e:
        raise bad_input(e) from None
    _print([scaling_table(s) for s in curves])


@app.command("software-gains")
def software_gains(
    benchmark: Annotated[str | None, typer.Argument(
        help="A benchmark (default: every benchmark).")] = None,
    scenario: Annotated[str | None, typer.Argument(
        help="A scenario (default: every scenario).")] = None,
    db: DbOpt = None,
    accelerator: Annotated[str | None, typer.Option(help="Accelerator model text.")] = None,
    accelerators: Annotated[int | None, typer.Option(help="Accelerators used.")] = None,
    submitter: Annotated[str | None, typer.Option(help="Submitter (e.g. NVIDIA, AMD).")] = None,
    division: Annotated[str, typer.Option(help="closed, open, network or any.")] = "closed",
    published: PublishedOpt = True,
) -> None:
    """The same hardware across rounds: gains from software alone.

    Example: tokenmark software-gains llama3.1-8b --submitter Intel
    """
    try:
        series = results_api.software_gains(benchmark, scenario, db=db,
                                            accelerator=accelerator,
                                            accelerators=accelerators, submitter=submitter,
                                            division=_any(division), published=published)
    except BadInputError as e:
        raise bad_input(e) from None
    _print(gains_tables(series) if scenario else [gains_summary_table(series)])


@app.command()
def top(
    db: DbOpt = None,
    vendor: Annotated[str | None, typer.Option(
        help="Accelerator vendor: amd, nvidia, intel, ...")] = None,
    accelerator: Annotated[str | None, typer.Option(
        help="Accelerator model text or family (e.g. MI355X, MI350-series).")] = None,
    submitter: Annotated[str | None, typer.Option(help="Submitter (e.g. NVIDIA, AMD).")] = None,
    benchmark: Annotated[str | None, typer.Option(help="Benchmark or LoadGen alias.")] = None,
    scenario: Annotated[str | None, typer.Option(
        help="Scenario: Offline, Server, Interactive, SingleStream or MultiStream.")] = None,
    round_: Annotated[str | None, typer.Option(
        "--round", help="A round or 'all' (default: the newest with a match).")] = None,
    division: Annotated[str, typer.Option(help="closed, open, network or any.")] = "closed",
    availability: Annotated[str, typer.Option(
        help="available, preview, rdi or any.")] = "available",
    unit: Annotated[str, typer.Option(help="Rank figures in this unit.")] = "Tokens/s",
    limit: Annotated[int, typer.Option(help="How many to list.")] = 10,
    published: PublishedOpt = True,
) -> None:
    """The largest results across all benchmarks, by accelerator vendor, accelerator or
    submitter.

    Example: tokenmark top --accelerator MI350-series --round v6.1
    """
    try:
        t = results_api.top(db=db, vendor=vendor, accelerator=accelerator,
                            submitter=submitter, benchmark=benchmark, scenario=scenario,
                            division=_any(division), availability=_any(availability),
                            round=round_, unit=unit, limit=limit, published=published)
    except BadInputError as e:
        raise bad_input(e) from None
    _print([top_table(t)])


@published_app.command("status")
def published_status() -> None:
    """Which table of published results the analyses read, how it was made, and what
    it holds.

    Example: tokenmark published status
    """
    try:
        t = results_api.published_table()
    except BadInputError as e:
        raise bad_input(e) from None
    _print([published_table(t)])


@published_app.command("refresh")
def published_refresh(
    sources: Annotated[list[Path], typer.Argument(
        help="Official tables (summary_results.json, summary.json, summary.csv) and "
        "result trees or archives.")],
    out: Annotated[Path | None, typer.Option(
        help="Where to write the table (default: published.csv.gz in the user's data "
        "folder, which the analyses then read).")] = None,
    replace: Annotated[bool, typer.Option(
        help="Start from nothing instead of the table in use.")] = False,
    note: Annotated[str, typer.Option(help="A line of provenance to record.")] = "",
    round_: Annotated[str | None, typer.Option(
        "--round", help="Round, when the sources do not say.")] = None,
) -> None:
    """Rebuild the table of published LLM results from newer official tables.

    Example: tokenmark published refresh inference_results_v6.1/summary.json
    """
    try:
        r = results_api.refresh_published(sources, out=out, replace=replace, note=note,
                                          round=round_)
    except BadInputError as e:
        raise bad_input(e) from None
    _print([refresh_table(r)])


@published_app.command("aliases")
def published_aliases() -> None:
    """The accelerator, system and submitter names tokenmark reads as one, and why.

    Example: tokenmark published aliases
    """
    _print([aliases_table(results_api.aliases())])
