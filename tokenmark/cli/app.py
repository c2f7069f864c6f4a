"""The ``tokenmark`` Typer application and what every command shares."""

from __future__ import annotations

import math
from collections.abc import Mapping

import typer
from rich.console import Console

from tokenmark.errors import EXIT_BAD_INPUT, BadInputError, ConfigError

__all__ = ["FLAG_MAX", "app", "bad_input", "check_numbers", "err", "out"]

#: The largest magnitude a number given as a flag may have (seconds, ms, rates: far past
#: any real value, and still exact in 64-bit nanoseconds after a x1e6).
FLAG_MAX = 1e12

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


def check_numbers(options: Mapping[str, object]) -> None:
    """Refuse a flag of ``inf``, ``nan`` or a magnitude over :data:`FLAG_MAX` (the shell
    passes any float), naming it; ``options`` are a command's parameters by name."""
    for name, value in options.items():
        values = value if isinstance(value, list | tuple) else (value,)
        for v in values:
            if isinstance(v, float) and not (math.isfinite(v) and abs(v) <= FLAG_MAX):
                flag = "--" + name.rstrip("_").replace("_", "-")
                raise ConfigError(f"{flag} {v:g} is not a usable number; give a finite "
                                  f"value of at most {FLAG_MAX:g}")


def out() -> Console:
    """The console for results (stdout)."""
    return Console()
