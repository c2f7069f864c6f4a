"""``tokenmark report`` and ``tokenmark ui``: the HTML report and the web UI.

Registered on the shared Typer app by importing this module (``tokenmark/cli/__init__.py``
does). Both commands only parse options and call the report and web UI edges.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Annotated

import typer

from tokenmark.cli.app import app, bad_input, check_numbers, err
from tokenmark.errors import BadInputError

__all__ = ["UPLOAD_TOKEN_ENV", "report", "ui"]

UPLOAD_TOKEN_ENV = "TOKENMARK_UPLOAD_TOKEN"


@app.command()
def report(
    runs: Annotated[list[Path], typer.Argument(
        metavar="RUN...", help="Results folders (or results.json files), or folders of "
        "them such as a sweep's.")],
    output: Annotated[Path | None, typer.Option(
        "--output", "-o", help="Where the comparison of two or more runs goes (default "
        "comparison.html in the current folder).")] = None,
    each: Annotated[bool, typer.Option(
        help="Also (re)write each run's report.html.")] = True,
) -> None:
    """Write each run's self-contained report.html (into its results folder) and, for two
    or more runs, a comparison page: throughput against latency with the Pareto front.

    Reports open offline: the plotting library and the data are inside the file.

    Example: tokenmark report results/20261202-120000-llama3.1-8b-Server
    """
    try:
        from tokenmark.report import find_runs, write_comparison, write_report
    except ImportError as e:  # jinja2 missing
        raise bad_input(BadInputError(f"reports need Jinja2 ({e}); pip install "
                                      "'tokenmark[report]'")) from None

    missing = [str(p) for p in runs if not p.exists()]
    if missing:
        raise bad_input(BadInputError(f"no such results folder: {', '.join(missing)}"))
    folders = find_runs(runs)
    if not folders:
        raise bad_input(BadInputError(
            "no results.json under " + ", ".join(map(str, runs)) + "; give the folders "
            "'tokenmark run' wrote (results/<time>-<benchmark>-<scenario>)"))
    try:
        if each or len(folders) == 1:
            for folder in folders:
                t0 = time.perf_counter()
                path = write_report(folder)
                err.print(f"{path} ({path.stat().st_size / 1e3:,.0f} kB, "
                          f"{time.perf_counter() - t0:.1f} s)", highlight=False)
        if len(folders) > 1:
            out = output or Path("comparison.html")
            write_comparison(folders, out, links=each)
            err.print(f"{out} (comparison of {len(folders)} runs)", highlight=False)
    except (OSError, ValueError) as e:  # an unreadable or malformed results folder
        raise bad_input(BadInputError(f"cannot write the report: {e}")) from None


@app.command()
def ui(
    db: Annotated[str | None, typer.Option(
        "--db", help="Results database (default: $TOKENMARK_DB, else "
        "~/.local/share/tokenmark/results.db).")] = None,
    host: Annotated[str, typer.Option(
        help="Address to listen on; 127.0.0.1 keeps the UI on this machine.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8321,
    upload_token: Annotated[str | None, typer.Option(
        help="Accept uploads that present this token (at least 16 characters; "
        f"default ${UPLOAD_TOKEN_ENV}). Without it the UI is read-only.")] = None,
    max_upload_mb: Annotated[float, typer.Option(
        help="Largest upload accepted, in MiB.")] = 64.0,
    runs_dir: Annotated[list[Path] | None, typer.Option(
        "--runs", help="A folder holding results folders (repeatable): run pages then "
        "draw the plots that need records.jsonl.")] = None,
    allowed_host: Annotated[list[str] | None, typer.Option(
        help="Another Host name the UI answers to (repeatable), e.g. behind a proxy.")
    ] = None,
) -> None:
    """Serve the web UI over the results database: runs with their plots, results, the
    two-tier leaderboard, compare, reproducibility, scaling and software gains, and a
    JSON API (OpenAPI at /api/openapi.json). Read-only unless given an upload token.

    Example: tokenmark ui --port 8321
    """
    try:
        from tokenmark.webui import UiConfig
        from tokenmark.webui.server import allowed_hosts_for, serve
    except ImportError as e:  # fastapi, uvicorn or jinja2 missing
        raise bad_input(BadInputError(f"the web UI needs FastAPI, uvicorn and Jinja2 ({e}); "
                                      "pip install 'tokenmark[ui]'")) from None

    token = upload_token or os.environ.get(UPLOAD_TOKEN_ENV) or None
    try:
        check_numbers({"max_upload_mb": max_upload_mb})
        cfg = UiConfig(db=db, upload_token=token,
                       max_upload_bytes=int(max_upload_mb * 1024 * 1024),
                       runs=tuple(runs_dir or ()),
                       allowed_hosts=allowed_hosts_for(host, tuple(allowed_host or ())))
    except BadInputError as e:
        raise bad_input(e) from None
    mode = "uploads need the token" if token else "read-only"
    err.print(f"tokenmark ui on http://{host}:{port} ({mode}); Ctrl-C stops it",
              highlight=False)
    serve(cfg, host=host, port=port)
