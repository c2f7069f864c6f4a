"""``tokenmark keys``, ``bundle``, ``verify``, ``calibrate``, ``reproduce`` and ``gate``, and
what ``tokenmark compare`` (two folders or ``--max-regression``: the gate under its old
name) takes from :mod:`tokenmark.api.trust` (``tokenmark run --manifest`` and its
calibration go through :mod:`tokenmark.api.launch`).

Registered on the shared Typer app by importing this module.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from tokenmark.adapters.openai_target import OpenAIConfig
from tokenmark.api import trust as trust_api
from tokenmark.api.run import EXIT_BAD_INPUT, EXIT_INVALID, EXIT_VALID
from tokenmark.cli.app import app, bad_input, check_numbers, err, out
from tokenmark.errors import BadInputError
from tokenmark.trust.compare import Delta, parse_share, worse_by

__all__ = ["bundle", "calibrate", "gate", "keys", "regression_gate", "reproduce", "verify"]

# -- keys, bundles ----------------------------------------------------------------------


@app.command()
def keys(
    name: Annotated[str | None, typer.Option(
        help="Make a key pair for this signer (e.g. alice@example.org).")] = None,
    trust: Annotated[list[Path] | None, typer.Option(
        help="Trust a signer's public key (a .pub file); repeatable.")] = None,
    directory: Annotated[Path | None, typer.Option(
        "--dir", help="Key folder (default $TOKENMARK_KEYS_DIR, else "
        "~/.config/tokenmark/keys).")] = None,
    passphrase_env: Annotated[str, typer.Option(
        help="Encrypt the private key with the passphrase in this environment "
        "variable.")] = "",
    force: Annotated[bool, typer.Option(help="Replace an existing key pair.")] = False,
) -> None:
    """Make an Ed25519 key pair for signing result bundles, trust others' public keys,
    or list the trusted keys.

    Example: tokenmark keys --name alice@example.org
    """
    from tokenmark.trust import bundle as b

    try:
        if name is not None:
            kp = trust_api.make_keys(name, directory=directory,
                                     passphrase_env=passphrase_env, force=force)
            out().print(f"private key {kp.private_path} (keep it secret)\npublic key  "
                        f"{kp.public_path} (give it to verifiers)\nkey id      {kp.key_id}",
                        highlight=False)
        for p in trust or []:
            k = b.trust_key(p, directory=directory)
            out().print(f"trusted {k.name} (key id {k.key_id})", highlight=False)
        if name is None and not trust:
            t = Table(title="trusted signing keys", title_justify="left")
            for col in ("signer", "key id", "file"):
                t.add_column(col)
            for k in b.trusted_keys(directory=directory).values():
                t.add_row(k.name, k.key_id, str(k.path))
            out().print(t)
    except BadInputError as e:
        raise bad_input(e) from None


@app.command()
def bundle(
    run: Annotated[Path, typer.Argument(help="A results folder 'tokenmark run' wrote.")],
    key: Annotated[Path | None, typer.Option(
        help="Private key (default: the one key in the key folder).")] = None,
    output: Annotated[Path | None, typer.Option(
        "--output", "-o", help="Bundle file (default RUN.tokenmark.tar.gz).")] = None,
    passphrase_env: Annotated[str, typer.Option(
        help="Environment variable holding the key's passphrase.")] = "",
    db: Annotated[str | None, typer.Option(
        "--db", help="Results database that records the signer (default: $TOKENMARK_DB, "
        "else ~/.local/share/tokenmark/results.db).")] = None,
    no_db: Annotated[bool, typer.Option("--no-db", help="Do not record the signer.")
    ] = False,
) -> None:
    """Pack a run's logs, records, manifest and fingerprint into one archive with a
    SHA-256 list of its files and an Ed25519 signature.

    Example: tokenmark bundle results/20261202-120000-llama3.1-8b-Server
    """
    try:
        s = trust_api.bundle_run(run, key=key, output=output, passphrase_env=passphrase_env,
                                 db=db, store=not no_db)
    except BadInputError as e:
        raise bad_input(e) from None
    out().print(f"{s.path}: {s.files} files signed by {s.signer} (key {s.key_id[:16]}), "
                f"run {s.run_hash[:16]}" + (f"; signer recorded in {s.stored_in}"
                                            if s.stored_in else ""), highlight=False)


@app.command()
def verify(
    path: Annotated[Path, typer.Argument(help="A bundle 'tokenmark bundle' wrote.")],
    key: Annotated[list[Path] | None, typer.Option(
        help="Also trust this public key (.pub); repeatable.")] = None,
    keys_dir: Annotated[Path | None, typer.Option(
        help="Key folder whose trusted/ keys are used (default: as 'tokenmark keys').")
    ] = None,
    store: Annotated[bool, typer.Option(
        help="Import the verified result into the database with its signer.")] = False,
    db: Annotated[str | None, typer.Option("--db", help="Results database for --store.")
    ] = None,
) -> None:
    """Check a bundle: a trusted key, the signature, and every file's SHA-256. A
    tampered bundle is rejected naming the file that changed (exit 1); an unknown key or
    an unreadable bundle exits 2.

    Example: tokenmark verify results/20261202-120000-llama3.1-8b-Server.tokenmark.tar.gz
    """
    from tokenmark.trust.bundle import TamperedError

    try:
        v = trust_api.verify_bundle(path, keys=tuple(key or ()), keys_dir=keys_dir,
                                    store=store, db=db)
    except TamperedError as e:
        err.print(f"[bold red]REJECTED:[/] {e}", highlight=False, soft_wrap=True)
        raise typer.Exit(EXIT_INVALID) from None
    except BadInputError as e:
        raise bad_input(e) from None
    run = v.results.get("run", {})
    out().print(f"VERIFIED: signed by {v.signer} (key {v.key_id[:16]}) at {v.signed_utc}; "
                f"{v.files} files intact; run {v.run_hash[:16]} ({run.get('benchmark')} "
                f"{run.get('scenario')})" + ("; stored" if store else ""), highlight=False)


# -- calibration ------------------------------------------------------------------------


@app.command()
def calibrate(
    workers: Annotated[int, typer.Option(help="Client worker processes, as the runs will "
                                         "use (0: the client in one process).")] = 0,
    duration: Annotated[float, typer.Option(help="Seconds measured at full speed.")] = 3.0,
    concurrency: Annotated[int, typer.Option(help="Requests in flight.")] = 32,
    output_tokens: Annotated[int, typer.Option(help="Tokens per answer.")] = 64,
    force: Annotated[bool, typer.Option(help="Measure again instead of using the cache.")
    ] = False,
) -> None:
    """Measure what this client machine sustains against the built-in server at full
    speed (cached per machine); 'tokenmark run --calibrate' checks plans against it.

    Example: tokenmark calibrate --duration 3
    """
    try:
        check_numbers({"duration": duration})
        cap, was_cached = trust_api.calibrate_client(workers=workers, duration_s=duration,
                                              concurrency=concurrency,
                                              output_tokens=output_tokens, force=force)
    except BadInputError as e:
        raise bad_input(e) from None
    out().print(f"this client sustains {cap.requests_per_s:,.0f} requests/s and "
                f"{cap.tokens_per_s:,.0f} streamed tokens/s ({cap.concurrency} in flight, "
                f"{cap.output_tokens} tokens each, {cap.workers} workers; measured "
                f"{cap.measured_utc}{', cached' if was_cached else ''})", highlight=False)


# -- reproducing and gating -------------------------------------------------------------


def _pct(x: float) -> str:
    return f"{x * 100:+.2f}%"


def _value(d: Delta, v: float) -> str:
    return f"{v / 1e6:,.2f} ms" if d.unit == "ns" else f"{v:,.1f}"


def _deltas_table(title: str, deltas: Any, extra: Any) -> Table:
    t = Table(title=title, title_justify="left")
    for col in ("figure", "A", "B", "change", "95% interval", "reading"):
        t.add_column(col, justify="left" if col in ("figure", "reading") else "right")
    for d in deltas:
        t.add_row(d.metric, _value(d, d.a), _value(d, d.b), _pct(d.change),
                  f"[{_pct(d.lo - 1)}, {_pct(d.hi - 1)}]", extra(d))
    return t


@app.command()
def reproduce(
    result: Annotated[Path, typer.Argument(help="The results folder to reproduce (it holds "
                                           "manifest.json and records.jsonl).")],
    target: Annotated[list[str], typer.Option(
        help="The other deployment's OpenAI-compatible endpoint (repeat for replicas).")],
    tolerance: Annotated[str, typer.Option(
        help="Accepted difference (default 4%, as partners are read against a vendor's "
        "result).")] = "4%",
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Results folder of "
                                                "the rerun.")] = None,
    api_key_env: Annotated[str, typer.Option(help="Environment variable holding the API "
                                             "key.")] = "OPENAI_API_KEY",
    model: Annotated[str, typer.Option(help="Model name, when the manifest's is not "
                                       "served there.")] = "",
    workers: Annotated[int, typer.Option(help="Client worker processes.")] = 0,
    json_out: Annotated[bool, typer.Option("--json", help="Print the reading as JSON.")
    ] = False,
) -> None:
    """Rerun a result's manifest against another deployment and report the difference in
    throughput and latency with 95% confidence intervals and a verdict against a
    tolerance: exit 0 REPRODUCED, 1 NOT REPRODUCED or INCONCLUSIVE.

    Example: tokenmark reproduce results/20261202-120000-llama3.1-8b-Server --target http://10.0.0.2:8000/v1
    """  # noqa: E501
    try:
        tol = parse_share(tolerance)
        cfg = OpenAIConfig(urls=tuple(target), api_key_env=api_key_env, model=model)
        r = trust_api.reproduce(result, cfg, output=output, tolerance=tol, workers=workers)
    except BadInputError as e:
        raise bad_input(e) from None
    rd = r.reading
    if json_out:
        import json

        out().print_json(json.dumps({"original": str(r.original), "rerun": str(r.rerun),
                                     **rd.to_json()}))
    else:
        out().print(_deltas_table(f"{r.rerun} (B) against {r.original} (A)", rd.deltas,
                                  lambda d: rd.readings[d.metric]))
        for n in rd.notes:
            out().print(f"note: {n}", highlight=False)
        out().print(f"verdict: {rd.verdict} (tolerance ±{rd.tolerance:.1%} on throughput "
                    "and median TTFT, TPOT, E2E)", highlight=False)
    raise typer.Exit(EXIT_VALID if rd.verdict == "REPRODUCED" else EXIT_INVALID)


@app.command()
def gate(
    baseline: Annotated[Path, typer.Argument(help="The baseline's results folder.")],
    run: Annotated[Path, typer.Argument(help="The new run's results folder.")],
    max_regression: Annotated[str, typer.Option(
        help="Exit 1 when throughput or a latency percentile got worse by more than this "
        "(e.g. 5%) with 95% confidence.")] = "5%",
    json_out: Annotated[bool, typer.Option("--json", help="Print the reading as JSON.")
    ] = False,
) -> None:
    """Regression gate for CI: a new run against a baseline run (two results folders);
    exit 1 on a regression, 0 otherwise. 'tokenmark compare BASELINE RUN' is the same.

    Example: tokenmark gate results/baseline results/candidate --max-regression 5%
    """
    raise typer.Exit(regression_gate(baseline, run, max_regression, json_out=json_out))


def regression_gate(baseline: Path, run: Path, max_regression: str, *,
                    json_out: bool = False) -> int:
    """``tokenmark gate BASELINE RUN --max-regression X`` (and ``compare`` given two
    folders): print, return the exit code."""
    try:
        g = trust_api.regression_gate(baseline, run, threshold=parse_share(max_regression))
    except BadInputError as e:
        err.print(f"[bold red]error:[/] {e}", highlight=False, soft_wrap=True)
        return EXIT_BAD_INPUT
    if json_out:
        import json

        out().print_json(json.dumps(g.to_json()))
    else:
        def reading(d: Delta) -> str:
            p, lo, _ = worse_by(d)
            if d.metric in g.regressed:
                return "REGRESSION"
            return "worse (not significant)" if p > g.threshold and lo <= 0 else "ok"

        out().print(_deltas_table(f"{run} against baseline {baseline}", g.deltas, reading))
        for n in g.notes:
            out().print(f"note: {n}", highlight=False)
        out().print(("PASS" if g.passed else "FAIL: regressed " + ", ".join(g.regressed))
                    + f" (max regression {g.threshold:.1%}, 95% intervals)", highlight=False)
    return EXIT_VALID if g.passed else EXIT_INVALID
