"""The ``tokenmark`` Typer application and what every command shares."""

from __future__ import annotations

import typer
from rich.console import Console

from tokenmark.errors import EXIT_BAD_INPUT, BadInputError

__all__ = ["app", "bad_input", "err", "out"]

app = typer.Typer(
    name="tokenmark",
    help="An open, MLPerf-grade benchmark system for LLM inference. "
    "Results are unverified: not reviewed by MLCommons.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
err = Console(stderr=True)


def bad_input(e: BadInputError) -> typer.Exit:
    err.print(f"[bold red]error:[/] {e}", highlight=False, soft_wrap=True)
    return typer.Exit(EXIT_BAD_INPUT)




def out() -> Console:
    """The console for results (stdout)."""
    return Console()
