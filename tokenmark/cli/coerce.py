"""Option values converted without building a pydantic adapter per parameter (start-up).

Typer 0.29 converts every parameter's value (defaults included) through a pydantic
``TypeAdapter`` it builds for that parameter on first use: importing pydantic and building
the adapters of ``tokenmark run`` cost about 0.06 s of the 0.3-0.35 s of CPU the command
spends before its first request (issue 21; ``bench/cli_start.py``). Almost every value is
already of its type (a default) or a plain string of digits, a word from a fixed set, or
a path; for those the answer is known without pydantic. :func:`attach` gives one of
tokenmark's parameters a converter that answers such values here and hands every other
value (and every value these rules would turn down) to Typer's own converter, built then,
so anything unusual (an error message, an underscore in a number, ``inf``) is exactly what
Typer says.

The rules, each equal to what Typer's adapter returns (tests/cli/test_coerce.py checks
them against the installed Typer's adapters with hypothesis):

- a value that is already of the option's type (``int``, ``float``, ``str``, ``bool``)
  and the option has no ``min``/``max``/``clamp``/parser: itself;
- ``int`` from ASCII digits (at most 18), ``float`` from ASCII digits with at most one
  decimal point inside (``12``, ``0.5``): ``int(s)``, ``float(s)``;
- ``pathlib.Path`` from a non-empty string: ``Path(s)``, then Typer's own path checks;
- an ``Enum`` or ``Literal`` choice: Typer's own matching (``coerce_cli_choice``);
- a list of any of the above: each item so, as a list.

Pin-aware: only the Typer minor versions in :data:`TESTED` (whose conversion the tests
checked) are touched; with any other Typer, or one without this machinery
(``typer._coercion``, before 0.29), every parameter converts as Typer does.
"""

from __future__ import annotations

import functools
import pathlib
from typing import Any

__all__ = ["TESTED", "attach", "quick", "supported"]

#: Typer minor versions whose conversion rules tests/cli/test_coerce.py checked.
TESTED = ("0.29",)


class _Slow(Exception):
    """The value needs Typer's own converter."""


def _digits(s: str, point: bool) -> bool:
    if not s.isascii() or len(s) > 18:
        return False
    if point and "." in s:
        whole, _, frac = s.partition(".")
        return whole.isdigit() and frac.isdigit()
    return s.isdigit()


def quick(annotation: Any, info: Any, value: Any, param: Any = None, ctx: Any = None) -> Any:
    """``value`` converted as Typer's adapter for ``annotation`` (with the option's
    ``info``) would; raises :class:`_Slow` (or the check's own error) when it cannot say."""
    from typer import _param_types as pt
    from typer._typing import get_args, get_origin

    if info.parser is not None or info.min is not None or info.max is not None or info.clamp:
        raise _Slow
    if get_origin(annotation) is list:
        (item,) = get_args(annotation)
        if not isinstance(value, list | tuple):
            raise _Slow
        return [quick(item, info, v, param, ctx) for v in value]
    choice = pt.choice_coercion_annotation(annotation, info)
    if choice is not None:
        return pt.coerce_cli_choice(value, choices=choice[0], case_sensitive=choice[1],
                                    ctx=ctx)
    kind = type(value)
    if annotation in (int, float, str, bool) and kind is annotation:
        return value
    if kind is str:
        if annotation is int and _digits(value, False):
            return int(value)
        if annotation is float and _digits(value, True):
            return float(value)
        if annotation is pathlib.Path and info.path_type is None and value and (
                pt.routes_to_path(annotation, info)):
            return pt.coerce_cli_path(pathlib.Path(value), info, path_type=pathlib.Path,
                                      param=param, ctx=ctx)
    raise _Slow


def supported() -> bool:
    """Whether the installed Typer is one :data:`TESTED` with its converters in place."""
    return _quick_class() is not None


@functools.cache
def _quick_class() -> type | None:
    import typer

    if ".".join(typer.__version__.split(".")[:2]) not in TESTED:
        return None
    try:
        from typer._coercion import RuntimeParam, build_runtime_param
        from typer._param_types import (  # noqa: F401 - what quick() uses
            choice_coercion_annotation,
            coerce_cli_choice,
            coerce_cli_path,
            routes_to_path,
        )
    except ImportError:
        return None

    class QuickParam(RuntimeParam):
        """Converts the values :func:`quick` knows; builds Typer's own for the rest."""

        descriptor: Any  # set in __init__ (not a dataclass field of Typer's)

        def __init__(self, descriptor: Any) -> None:
            object.__setattr__(self, "descriptor", descriptor)
            super().__init__(parameter_info=descriptor.parameter_info,
                             annotation=descriptor.annotation)

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            try:
                return quick(self.annotation, self.parameter_info, value, param, ctx)
            except Exception:  # noqa: BLE001 - Typer's own conversion decides and says why
                real = build_runtime_param(self.descriptor)
                param._runtime_param = real
                return real._coerce_value(value, param=param, ctx=ctx)

    return QuickParam


def attach(param: Any) -> None:
    """Make one Typer parameter convert with :func:`quick` first, where the installed
    Typer is supported and the parameter is not a file (Typer opens those itself)."""
    cls = _quick_class()
    desc = getattr(param, "type_descriptor", None)
    if cls is None or desc is None or desc.file_annotation is not None or getattr(
            param, "_runtime_param", False) is not None:
        return
    param._runtime_param = cls(desc)
