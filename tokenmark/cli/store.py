"""The results-database commands: import, db, results, leaderboard, reproducibility,
compare, scaling and software-gains. Each opens the database, calls one function of
:mod:`tokenmark.results_api` and prints :mod:`tokenmark.results_tables`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table as RichTable

from tokenmark import results_api
from tokenmark.api import EXIT_BAD_INPUT
from tokenmark.cli.app import app, bad_input, check_numbers, err, out
from tokenmark.errors import BadInputError
from tokenmark.results_tables import (
    Table,
    comparison_table,
    gains_tables,
    import_table,
    leaderboard_tables,
    reproducibility_tables,
    rows_table,
    scaling_table,
)

DbOpt = Annotated[str | None, typer.Option(
    "--db", help="Database file or URL (default: $TOKENMARK_DB, else "
    "~/.local/share/tokenmark/results.db); postgresql://... for PostgreSQL.")]

db_app = typer.Typer(help="Create, migrate and inspect the results database.",
                     no_args_is_help=True)
app.add_typer(db_app, name="db")


def _any(v: str | None) -> str | None:
    return None if v is None or v.lower() == "any" or v.lower() == "all" else v


def _print(tables: list[Table]) -> None:
    console = out()
    for t in tables:
        rt = RichTable(title=t.title, title_justify="left")
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
    scenario: Annotated[str | None, typer.Option()] = None,
    round_: Annotated[str | None, typer.Option("--round")] = None,
    division: Annotated[str | None, typer.Option()] = None,
    submitter: Annotated[str | None, typer.Option()] = None,
    system: Annotated[str | None, typer.Option(help="System id.")] = None,
    label: Annotated[str | None, typer.Option(help="official or unverified.")] = None,
) -> None:
    """List stored results matching the filters.

    Example: tokenmark results --benchmark deepseek-r1
    """
    try:
        rows = results_api.list_results(db=db, benchmark=benchmark, scenario=scenario,
                                        round=round_, division=division,
                                        submitter=submitter, system_id=system, label=label)
    except BadInputError as e:
        raise bad_input(e) from None
    _print([rows_table(rows)])


@app.command()
def leaderboard(
    benchmark: Annotated[str, typer.Argument()],
    scenario: Annotated[str, typer.Argument()],
    db: DbOpt = None,
    division: Annotated[str, typer.Option(help="closed, open, network or any.")] = "closed",
    availability: Annotated[str, typer.Option(
        help="available, preview, rdi or any.")] = "available",
    round_: Annotated[str | None, typer.Option("--round", help="A round or 'all'.")] = None,
    category: Annotated[str | None, typer.Option(help="datacenter or edge.")] = None,
    official_only: Annotated[bool, typer.Option(help="Leave out unverified rows.")] = False,
) -> None:
    """The leaderboard in two tiers: single node, and rack-scale/multi-node.

    Example: tokenmark leaderboard llama2-70b-99 Offline --round v6.0
    """
    try:
        lb = results_api.leaderboard(benchmark, scenario, db=db, division=_any(division),
                                     availability=_any(availability), round=_any(round_),
                                     official_only=official_only, category=category)
    except BadInputError as e:
        raise bad_input(e) from None
    _print(leaderboard_tables(lb))


@app.command()
def reproducibility(
    benchmark: Annotated[str | None, typer.Argument()] = None,
    scenario: Annotated[str | None, typer.Argument()] = None,
    db: DbOpt = None,
    accelerator: Annotated[str | None, typer.Option(help="Accelerator model text.")] = None,
    accelerators: Annotated[int | None, typer.Option(help="Accelerators used.")] = None,
    division: Annotated[str, typer.Option()] = "closed",
    round_: Annotated[str | None, typer.Option("--round")] = None,
    tolerance: Annotated[float, typer.Option(help="Spread judged acceptable.")] = 0.04,
) -> None:
    """Partners' results for the same hardware against the accelerator vendor's own.

    Example: tokenmark reproducibility llama2-70b-99 Offline --accelerator MI355X
    """
    try:
        check_numbers({"tolerance": tolerance})
        groups = results_api.reproducibility(db=db, benchmark=benchmark, scenario=scenario,
                                             accelerator=accelerator,
                                             accelerators=accelerators,
                                             division=_any(division), round=round_)
    except BadInputError as e:
        raise bad_input(e) from None
    _print(reproducibility_tables(groups, tolerance))


@app.command()
def compare(
    a: Annotated[str, typer.Argument(help="[ROUND/][SUBMITTER/]SYSTEM_ID")],
    b: Annotated[str, typer.Argument(help="[ROUND/][SUBMITTER/]SYSTEM_ID")],
    db: DbOpt = None,
    benchmark: Annotated[str | None, typer.Option()] = None,
    scenario: Annotated[str | None, typer.Option()] = None,
    normalise: Annotated[bool, typer.Option(
        help="Compare per-accelerator figures when the counts differ.")] = False,
    max_regression: Annotated[str | None, typer.Option(
        help="Regression gate for CI: A and B are results folders (baseline, new run); "
        "exit 1 when throughput or a latency percentile got worse by more than this "
        "(e.g. 5%) with 95% confidence.")] = None,
) -> None:
    """Generation over generation: system B against system A, per benchmark and scenario;
    or, given two results folders, a regression gate between a baseline and a new run.

    Example: tokenmark compare v5.1/NVIDIA/GB300-NVL72_GB300-288GB_aarch64x72_TRT v6.0/NVIDIA/GB300-NVL72_GB300-288GB_aarch64x288_TRT --normalise
    Example: tokenmark compare results/baseline results/candidate --max-regression 5%
    """  # noqa: E501
    if max_regression is not None or (Path(a).is_dir() and Path(b).is_dir()):
        from tokenmark.cli.trust import regression_gate

        raise typer.Exit(regression_gate(Path(a), Path(b), max_regression or "5%"))
    try:
        c = results_api.compare(a, b, db=db, benchmark=benchmark, scenario=scenario,
                                normalise=normalise)
    except BadInputError as e:
        raise bad_input(e) from None
    _print([comparison_table(c)])


@app.command()
def scaling(
    benchmark: Annotated[str, typer.Argument()],
    scenario: Annotated[str, typer.Argument()],
    accelerator: Annotated[str, typer.Option(help="Accelerator model text.")],
    db: DbOpt = None,
    submitter: Annotated[str | None, typer.Option()] = None,
    round_: Annotated[str | None, typer.Option("--round")] = None,
    division: Annotated[str, typer.Option()] = "closed",
    base: Annotated[int | None, typer.Option(help="Base accelerator count.")] = None,
) -> None:
    """Scaling efficiency of one system family: (T_N / N) / (T_base / base).

    Example: tokenmark scaling llama2-70b-99 Offline --accelerator MI355X --submitter AMD
    """
    try:
        s = results_api.scaling(benchmark, scenario, accelerator=accelerator, db=db,
                                submitter=submitter, round=round_, division=_any(division),
                                base=base)
    except BadInputError as e:
        raise bad_input(e) from None
    _print([scaling_table(s)])


@app.command("software-gains")
def software_gains(
    benchmark: Annotated[str, typer.Argument()],
    scenario: Annotated[str, typer.Argument()],
    db: DbOpt = None,
    accelerator: Annotated[str | None, typer.Option()] = None,
    accelerators: Annotated[int | None, typer.Option()] = None,
    submitter: Annotated[str | None, typer.Option()] = None,
    division: Annotated[str, typer.Option()] = "closed",
) -> None:
    """The same hardware across rounds: gains from software alone.

    Example: tokenmark software-gains llama2-70b-99 Offline --accelerator H200-SXM-141GB --accelerators 8
    """  # noqa: E501
    try:
        series = results_api.software_gains(benchmark, scenario, db=db,
                                            accelerator=accelerator,
                                            accelerators=accelerators, submitter=submitter,
                                            division=_any(division))
    except BadInputError as e:
        raise bad_input(e) from None
    _print(gains_tables(series))
