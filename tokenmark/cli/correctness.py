"""``tokenmark score``, ``tokenmark audit`` and ``tokenmark serve``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from tokenmark.adapters.openai_target import OpenAIConfig
from tokenmark.api import correctness as correctness_api
from tokenmark.api.assemble import WorkloadSpec, build_workload
from tokenmark.api.run import EXIT_INVALID, EXIT_VALID
from tokenmark.cli.app import app, bad_input, out
from tokenmark.config.layering import build_settings
from tokenmark.errors import BadInputError
from tokenmark.mlperf.settings import Scenario


@app.command()
def score(
    results_dir: Annotated[Path, typer.Argument(help="A results folder of an accuracy run.")],
    references: Annotated[Path, typer.Option(
        help="The benchmark's dataset file holding the reference answers.")],
    tokenizer: Annotated[str, typer.Option(
        help="The model's tokenizer (folder or tokenizer.json) to decode token ids.")
    ] = "builtin",
    benchmark: Annotated[str | None, typer.Option(help="Default: the run's.")] = None,
    round_: Annotated[str | None, typer.Option("--round", help="Default: the run's.")] = None,
    allow_pickle: Annotated[bool, typer.Option(help="Read a pickled reference file.")] = False,
    json_out: Annotated[bool, typer.Option(
        "--json", help="Print the scores and targets as JSON instead of tables.")] = False,
) -> None:
    """Score a run's mlperf_log_accuracy.json as the MLPerf reference evaluation does and
    gate it at the round's targets (99% / 99.9% of the reference); writes accuracy.txt.

    Example: tokenmark score results/acc-run --references cnn_eval.json --tokenizer ./Llama-3.1-8B
    """  # noqa: E501
    try:
        res = correctness_api.score_results(results_dir, references, benchmark=benchmark,
                                            tokenizer=tokenizer, round_name=round_,
                                            allow_pickle=allow_pickle)
    except BadInputError as e:
        raise bad_input(e) from None
    console = out()
    if json_out:
        doc = {**res.report.to_json(), "targets": [g.to_json() for g in res.gates],
               "passed": res.passed, "accuracy_txt": str(res.accuracy_txt)}
        console.print(json.dumps(doc, indent=1), highlight=False)
    else:
        for table in score_tables(res):
            console.print(table)
        for note in res.report.notes:
            console.print(f"note: {note}", highlight=False)
        console.print(f"wrote {res.accuracy_txt}", highlight=False)
    raise typer.Exit(EXIT_VALID if res.passed else EXIT_INVALID)


def score_tables(res: correctness_api.ScoreOutcome) -> list[Table]:
    """The targets judged, then every figure the evaluation printed."""
    r = res.report
    t = Table(title=f"{r.benchmark}: accuracy targets ({r.samples} samples scored)",
              title_justify="left")
    for col in ("metric", "score", "required", "verdict"):
        t.add_column(col, justify="right" if col == "score" else "left")
    for g in res.gates:
        lo, hi = g.target.lower_bound, g.target.upper_bound
        need = " and ".join(x for x in (f">= {lo:.4f}" if lo is not None else "",
                                        f"<= {hi:.4f}" if hi is not None else "") if x)
        verdict = {True: "pass", False: "FAIL", None: "incomplete"}[g.passed]
        t.add_row(g.target.metric, "not evaluated" if g.value is None else f"{g.value:g}",
                  need, verdict)
    m = Table(title="Figures of the reference evaluation", title_justify="left")
    m.add_column("key")
    m.add_column("value", justify="right")
    for k, v in r.metrics.items():
        m.add_row(k, "not evaluated" if v is None else f"{v:g}" if isinstance(v, float)
                  else str(v))
    for k, n in r.not_evaluated.items():
        m.add_row(f"not evaluated: {k}", str(n))
    return [t, m]


@app.command("audit")
def audit_cmd(
    test: Annotated[str, typer.Argument(help="TEST06, TEST07, TEST09 (MLPerf), or caching, "
                                        "streaming (tokenmark's own).")],
    results_dir: Annotated[Path | None, typer.Argument(
        help="MLPerf tests: the results folder of an audit run (tokenmark run --audit).")
    ] = None,
    out_dir: Annotated[Path | None, typer.Option(
        "--out", "-o", help="Where the verdict folder goes (default: the results folder).")
    ] = None,
    eos_token_id: Annotated[int, typer.Option(help="TEST06: the end-of-sequence id.")] = 2,
    min_tokens: Annotated[float | None, typer.Option(help="TEST09: lower bound.")] = None,
    max_tokens: Annotated[float | None, typer.Option(help="TEST09: upper bound.")] = None,
    references: Annotated[Path | None, typer.Option(help="TEST07: reference answers.")] = None,
    tokenizer: Annotated[str, typer.Option(help="TEST07: the model's tokenizer.")] = "builtin",
    url: Annotated[list[str] | None, typer.Option(
        help="caching/streaming: the OpenAI-compatible endpoint.")] = None,
    api: Annotated[str, typer.Option(help="caching/streaming: completions or chat.")
    ] = "completions",
    model: Annotated[str, typer.Option(help="caching/streaming: model name.")] = "",
    samples: Annotated[int, typer.Option(help="caching/streaming: samples to try.")] = 8,
    benchmark: Annotated[str, typer.Option(
        help="caching/streaming: benchmark whose dataset shape to use.")] = "llama3.1-8b",
) -> None:
    """Judge a compliance audit run as MLPerf's verification scripts do (TEST06/07/09,
    verdict folders in MLPerf's layout), or run tokenmark's own audits against a target.

    Example: tokenmark audit TEST06 results/test06-run
    """
    try:
        if test.lower() in ("caching", "streaming"):
            if not url:
                raise BadInputError(f"the {test} audit needs --url of the target")
            layered = build_settings("v6.0", benchmark, Scenario.POISSON)
            ds = build_workload(WorkloadSpec(size=max(samples, 1), output_lengths="32"),
                                layered).dataset
            cfg = OpenAIConfig(urls=tuple(url), api=api, model=model)
            r = correctness_api.own_audit(test.lower(), cfg, ds, samples)
            out().print(f"{r.name} ({r.label}): {'PASS' if r.passed else 'FAIL'} - "
                        f"{r.observed}", highlight=False)
            for line in r.detail:
                out().print(f"  {line}", highlight=False)
            raise typer.Exit(EXIT_VALID if r.passed else EXIT_INVALID)
        if results_dir is None:
            raise BadInputError(f"{test} judges a results folder: tokenmark audit {test} DIR")
        v = correctness_api.audit_results(test, results_dir, out=out_dir,
                                          eos_token_id=eos_token_id, min_tokens=min_tokens,
                                          max_tokens=max_tokens, references=references,
                                          tokenizer=tokenizer)
    except BadInputError as e:
        raise bad_input(e) from None
    out().print(v.text, highlight=False)
    out().print(f"verdict folder: {v.folder}", highlight=False)
    raise typer.Exit(EXIT_VALID if v.passed else EXIT_INVALID)
