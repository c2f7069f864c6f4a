"""The ``tokenmark`` command line: a thin layer over :mod:`tokenmark.api` and
:mod:`tokenmark.results_api`.

Bad input prints one line naming the problem and the fix and exits with code 2; a bug
exits with code 3 after printing where to report it. See README "Exit codes".
"""

from __future__ import annotations

import sys
import traceback

from tokenmark.api import EXIT_INTERNAL
from tokenmark.cli import correctness as _correctness  # noqa: F401
from tokenmark.cli import faces as _faces  # noqa: F401  (registers its commands)
from tokenmark.cli import run as _run  # noqa: F401  (registers its commands)
from tokenmark.cli import scale as _scale  # noqa: F401  (registers its commands)
from tokenmark.cli import serve as _serve  # noqa: F401  (registers its commands)
from tokenmark.cli import simulate as _simulate  # noqa: F401  (registers its commands)
from tokenmark.cli import store as _store  # noqa: F401  (registers its commands)
from tokenmark.cli import submission as _submission  # noqa: F401  (registers its commands)
from tokenmark.cli import trust as _trust  # noqa: F401  (registers its commands)
from tokenmark.cli.app import app, err

__all__ = ["app", "main"]


def main() -> None:
    try:
        app()
    except SystemExit:
        raise
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)
    except Exception:  # a bug: say so, keep the traceback for the report
        err.print("[bold red]internal error[/] (a bug in tokenmark; please report it with "
                  "the traceback below)")
        err.print(traceback.format_exc(), highlight=False, markup=False)
        sys.exit(EXIT_INTERNAL)


if __name__ == "__main__":
    main()
