"""The ``tokenmark`` command line: a thin layer over :mod:`tokenmark.api.run` and
:mod:`tokenmark.api.results`.

Bad input prints one line naming the problem and the fix and exits with code 2; a bug
exits with code 3 after printing where to report it. See docs/reference.md "Exit codes".

Start-up cost. Each module of this package registers its commands on the shared Typer
``app`` when imported, and some load a lot (the run path: numpy, the HTTP client, the
emulator). :func:`main` therefore imports only the module of the command on the command
line when that module stands alone (:data:`ALONE`: the results commands, which answer
in well under a second, and ``run``, whose CPU time before its first request counts),
and every module otherwise (``--help``).
``tokenmark.cli.app`` (what tests and ``python -m`` use) is the app with every command
registered.
"""

from __future__ import annotations

import importlib
import sys
import traceback
import types
from collections.abc import Sequence
from typing import Any

__all__ = ["ALONE", "MODULES", "app", "main", "register"]

#: Every module that registers commands.
MODULES = ("correctness", "faces", "run", "scale", "serve", "simulate", "store",
           "submission", "trust")
#: Commands whose module is imported alone when they are the one asked for.
ALONE = {name: "store" for name in (
    "import", "db", "results", "leaderboard", "reproducibility", "compare", "scaling",
    "software-gains", "top", "published")} | {
    # the run path: `tokenmark run` loads only what it needs before its first request
    name: "run" for name in ("run", "presets", "version")}


def register(modules: Sequence[str] = MODULES) -> None:
    """Import command modules (each registers its commands on the app)."""
    for name in modules:
        importlib.import_module(f"tokenmark.cli.{name}")
    importlib.import_module("tokenmark.cli.app").polish()


def _modules_for(args: Sequence[str]) -> Sequence[str]:
    """The modules a command line needs: its command's alone, or all."""
    first = next((a for a in args if not a.startswith("-")), None)
    module = ALONE.get(first or "")
    return MODULES if module is None else (module,)


def main(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        register(_modules_for(args))
        from tokenmark.cli.app import app as typer_app

        typer_app(args=args, prog_name="tokenmark")
    except SystemExit:
        raise
    except KeyboardInterrupt:
        from tokenmark.cli.app import err

        err.print("interrupted")
        sys.exit(130)
    except Exception:  # a bug: say so, keep the traceback for the report
        from tokenmark.cli.app import err
        from tokenmark.errors import EXIT_INTERNAL

        err.print("[bold red]internal error[/] (a bug in tokenmark; please report it with "
                  "the traceback below)")
        err.print(traceback.format_exc(), highlight=False, markup=False)
        sys.exit(EXIT_INTERNAL)


class _Package(types.ModuleType):
    """``tokenmark.cli.app`` is the Typer app with every command registered (importing
    the ``app`` submodule would otherwise make it the module)."""

    @property
    def app(self) -> Any:
        register()
        return importlib.import_module("tokenmark.cli.app").app

    @app.setter
    def app(self, _submodule: Any) -> None:
        pass  # the import system records the submodule here; sys.modules has it


sys.modules[__name__].__class__ = _Package


if __name__ == "__main__":
    main()
