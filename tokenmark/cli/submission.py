"""``tokenmark submission``: package a submission tree from runs, check a tree, and print a
system-description template. Thin: each command calls :mod:`tokenmark.api.submission`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from tokenmark.api import submission as submission_api
from tokenmark.api.run import EXIT_INVALID
from tokenmark.cli.app import app, bad_input, err, out
from tokenmark.errors import BadInputError
from tokenmark.submission.check import CheckReport, Severity
from tokenmark.submission.package import PackageSpec, system_template

submission_app = typer.Typer(
    help="MLPerf submission trees: package runs into the round's layout, check a tree "
    "(stricter than the official checker), print a system-description template.",
    no_args_is_help=True)
app.add_typer(submission_app, name="submission")


def _print_check(report: CheckReport, *, verbose: bool) -> None:
    console = out()
    t = Table(title=f"Submission check ({report.round}) of {report.root}", title_justify="left")
    for col in ("result", "figure", "verdict", "errors"):
        t.add_column(col)
    for r in report.results:
        fig = "-" if r.figure is None else f"{r.figure.value:,.2f} {r.figure.unit}"
        verdict = ("not checked" if not r.checked else "OK" if r.ok
                   else "FAIL" if r.official_ok is False else "FAIL (tokenmark only)")
        t.add_row(r.path, fig, verdict, str(len(r.errors)))
    console.print(t)
    for f in report.all_findings():
        if f.severity is Severity.INFO and not verbose:
            continue
        console.print(f.line(), highlight=False, soft_wrap=True)
    n_err = sum(1 for f in report.all_findings() if f.severity is Severity.ERROR)
    console.print(f"{'submission looks OK' if report.ok else 'submission has errors'}: "
                  f"{sum(r.ok for r in report.results)} result(s) pass, {n_err} error(s)",
                  highlight=False)


@submission_app.command("check")
def check(
    root: Annotated[Path, typer.Argument(help="The folder holding closed/, open/ or network/.")],
    round_: Annotated[str, typer.Option("--round", "-r", help="The round whose rules apply "
                                        "(v5.1, v6.0, v6.1).")] = "v6.0",
    csv_path: Annotated[Path | None, typer.Option(
        "--csv", help="Write the summary CSV (the official checker's columns) here.")] = None,
    submitter: Annotated[str | None, typer.Option(help="Check only this submitter.")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the findings as JSON.")
                        ] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Also print notes.")] = False,
) -> None:
    """Check a submission tree: every log re-parsed, every verdict recomputed, with advice.

    Exits 0 when every result passes, 1 when any has an error, 2 on bad input.

    Example: tokenmark submission check sub/ --round v6.0 --csv summary.csv
    """
    try:
        report = submission_api.check_submission(root, round_, csv_path=csv_path,
                                                 submitter=submitter)
    except BadInputError as e:
        raise bad_input(e) from None
    if json_out:
        out().print_json(json.dumps(report.to_json()))
    else:
        _print_check(report, verbose=verbose)
    raise typer.Exit(0 if report.ok else EXIT_INVALID)


@submission_app.command("package")
def package(
    runs: Annotated[list[Path], typer.Argument(help="tokenmark run folders: performance, "
                                               "accuracy (scored) and audit runs.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="New folder for the tree.")],
    submitter: Annotated[str, typer.Option(help="Organization (the folder name).")],
    system: Annotated[Path, typer.Option(help="System description JSON (see 'tokenmark "
                                         "submission template').")],
    measurements: Annotated[Path, typer.Option(
        help="measurements.json: input_data_types, retraining, starting_weights_filename, "
        "weight_data_types, weight_transformations.")],
    division: Annotated[str, typer.Option(help="closed (official-LoadGen runs only), open "
                                          "or network.")] = "closed",
    round_: Annotated[str | None, typer.Option("--round", "-r", help="Round (default: the "
                                               "runs').")] = None,
    system_id: Annotated[str | None, typer.Option(help="System folder name (default: the "
                                                  "system file's name).")] = None,
    records: Annotated[bool, typer.Option(help="Include tokenmark's records.jsonl beside "
                                          "the logs (check recomputes from them).")] = True,
    check_after: Annotated[bool, typer.Option("--check/--no-check", help="Check the tree "
                                              "once written.")] = True,
) -> None:
    """Assemble a submission tree in the round's layout from tokenmark run folders.

    Example: tokenmark submission package runs/perf runs/acc runs/test06 -o sub --submitter Acme --system sys.json --measurements m.json
    """  # noqa: E501
    spec = PackageSpec(runs=tuple(runs), output=output, submitter=submitter, system=system,
                       measurements=measurements, division=division, round=round_,
                       system_id=system_id, include_records=records)
    try:
        rep = submission_api.package_submission(spec)
    except BadInputError as e:
        raise bad_input(e) from None
    console = out()
    for r in rep.results:
        console.print(f"wrote {rep.root / r}", highlight=False)
    for n in rep.notes:
        err.print(f"[yellow]note:[/] {n}", highlight=False, soft_wrap=True)
    if not check_after:
        return
    report = submission_api.check_submission(rep.root, rep.round)
    _print_check(report, verbose=False)
    raise typer.Exit(0 if report.ok else EXIT_INVALID)


@submission_app.command("template")
def template(
    division: Annotated[str, typer.Option(help="closed, open or network.")] = "closed",
    submitter: Annotated[str, typer.Option(help="Organization.")] = "",
) -> None:
    """Print a system description JSON with every field the checker requires.

    Example: tokenmark submission template --submitter Acme > systems/my_system.json
    """
    print(json.dumps(system_template(division, submitter), indent=4))
