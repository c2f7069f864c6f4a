"""The parameters of ``tokenmark run`` and their Python types, for tests that give each
of its flags."""

from __future__ import annotations

import types
import typing
from typing import Any

__all__ = ["kind", "run_params"]


def run_params(command: str = "run") -> dict[str, Any]:
    """``run``'s (or another command's) click parameters by name."""
    import typer.main

    from tokenmark.cli import app as _registered  # noqa: F401  (registers every command)
    from tokenmark.cli.app import app

    return {p.name: p for p in typer.main.get_command(app).commands[command].params}


def kind(name: str) -> type:
    """The Python type of ``run``'s parameter (its annotation, None stripped)."""
    import tokenmark.cli.run

    hint = typing.get_type_hints(tokenmark.cli.run.run, include_extras=True)[name]
    base = typing.get_args(hint)[0]
    if isinstance(base, types.UnionType):
        base = next(a for a in typing.get_args(base) if a is not type(None))
    return typing.get_origin(base) or base
