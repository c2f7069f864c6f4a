"""The ``tokenmark`` Typer application and what every command shares."""

from __future__ import annotations

import functools
import inspect
import math
import os
import typing
from collections.abc import Mapping
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption
from typer.models import DefaultPlaceholder

from tokenmark.cli import coerce
from tokenmark.errors import EXIT_BAD_INPUT, BadInputError, ConfigError

__all__ = ["FLAG_MAX", "PANELS", "PIPED_WIDTH", "app", "bad_input", "check_numbers", "err", "out",
           "polish"]

#: The largest magnitude a number given as a flag may have (seconds, ms, rates: far past
#: any real value, and still exact in 64-bit nanoseconds after a x1e6).
FLAG_MAX = 1e12

class _Readable:
    """Help that reads well (see :func:`_readable`) and ``--help`` without a ``<bool>``
    type, for a Typer command or group."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        _readable(self)

    def get_help_option(self, ctx: Any) -> TyperOption | None:
        option: TyperOption | None = super().get_help_option(ctx)  # type: ignore[misc]
        return _plain_help(option)


class _Group(_Readable, TyperGroup):
    """The app's groups."""


class _Command(_Readable, TyperCommand):
    """Every command."""


def _plain_help(option: TyperOption | None) -> TyperOption | None:
    if option is not None:
        option.metavar = ""
        coerce.attach(option)
    return option


app = typer.Typer(
    name="tokenmark",
    cls=_Group,
    help="An open, MLPerf-grade benchmark system for LLM inference. "
    "Results are unverified: not reviewed by MLCommons.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
err = Console(stderr=True)


def bad_input(e: BadInputError) -> typer.Exit:
    err.print(f"[bold red]error:[/] {escape(str(e))}", highlight=False, soft_wrap=True)
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


#: Width of stdout when it is not a terminal (a pipe, a file) and $COLUMNS is unset:
#: tables are drawn at their natural width instead of cut at 80 columns ("INVA…").
PIPED_WIDTH = 400


_GIVEN = frozenset({"COMMANDLINE", "ENVIRONMENT", "PROMPT"})


def given_flags(ctx: typer.Context) -> frozenset[str]:
    """The parameters of a command the user gave, on the command line or through their
    environment variable (click's parameter source): each beats every file
    (:class:`~tokenmark.config.layering.FlagsOverFile`)."""
    out = []
    for name in ctx.params:
        source = ctx.get_parameter_source(name)
        if source is not None and source.name in _GIVEN:
            out.append(name)
    return frozenset(out)


#: An option group: (parameter name, annotation with its typer.Option, default) in order.
OptionGroup = tuple[tuple[str, Any, Any], ...]


_F = typing.TypeVar("_F", bound=typing.Callable[..., Any])


def with_options(before: OptionGroup = (), after: OptionGroup = ()
                 ) -> typing.Callable[[_F], _F]:
    """A decorator that gives a command the options of shared groups: ``before`` ahead of
    its own parameters, ``after`` behind them (the order of --help). The command takes
    them in ``**options``."""

    def decorate(func: _F) -> _F:
        sig = inspect.signature(func, eval_str=True)
        own = [p for p in sig.parameters.values() if p.kind is not p.VAR_KEYWORD]

        def group(g: OptionGroup) -> list[inspect.Parameter]:
            return [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, annotation=a,
                                      default=d) for n, a, d in g]

        params = [*group(before), *own, *group(after)]

        @functools.wraps(func)
        def command(**kwargs: Any) -> Any:
            return func(**kwargs)

        command.__signature__ = sig.replace(  # type: ignore[attr-defined]
            parameters=[p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in params])
        command.__annotations__ = {p.name: p.annotation for p in params}
        return typing.cast(_F, command)

    return decorate


def pick(group: OptionGroup, *names: str, **defaults: Any) -> OptionGroup:
    """The options ``names`` of ``group``, in that order: another command shares their one
    declaration (type, flags, help, panel); ``defaults`` gives a command its own default
    of an option (by parameter name) instead of the group's."""
    by_name = {n: (n, a, d) for n, a, d in group}
    wrong = [n for n in names if n not in by_name] + [n for n in defaults if n not in names]
    if wrong:
        raise ValueError(f"pick: {', '.join(wrong)}: not in the group or not picked")
    return tuple((n, by_name[n][1], defaults.get(n, by_name[n][2])) for n in names)


def out() -> Console:
    """The console for results (stdout); off a terminal, wide enough that no table is
    cut (set $COLUMNS to wrap at a width)."""
    con = Console()
    if not con.is_terminal and not os.environ.get("COLUMNS"):
        con = Console(width=PIPED_WIDTH)
    return con


# -- help that reads well (issue 27) ---------------------------------------------------

#: The panels of ``tokenmark --help``, in order, and their commands in order; a command
#: not named here goes to the last panel.
PANELS: dict[str, tuple[str, ...]] = {
    "Run": ("run", "sweep", "find-peak", "scaling-run"),
    "Results": ("results", "report", "ui", "import", "db", "leaderboard", "compare",
                "reproducibility", "scaling", "software-gains", "top", "published"),
    "Submissions": ("submission", "score", "audit"),
    "Trust": ("reproduce", "gate", "calibrate", "bundle", "verify", "keys"),
    "Tools": ("presets", "serve", "simulate", "version"),
}


def _metavar(param: TyperOption | TyperArgument) -> str:
    """What a user writes for an option: INT, FLOAT, PATH, URL, TEXT, the choices of an
    enum, nothing for a flag."""
    desc = param.type_descriptor
    ann: Any = desc.annotation
    if typing.get_origin(ann) is list:
        ann = typing.get_args(ann)[0]
    if getattr(param, "is_flag", False) or ann is bool:
        return ""
    if desc.is_choice and desc.choices is not None:
        return "|".join(str(getattr(c, "value", c)) for c in desc.choices)
    if desc.is_path:
        return "PATH"
    named = {int: "INT", float: "FLOAT"}.get(ann)
    if named:
        return named
    return "URL" if "url" in (param.name or "") else "TEXT"


def _text(doc: str) -> str:
    """A help text as written, escaped for rich: paragraphs kept, lines in a paragraph
    joined (the listing's first paragraph is one line of prose)."""
    paras = inspect.cleandoc(doc).split("\n\n")
    return escape("\n\n".join(" ".join(p.split("\n")) for p in paras))


def _readable(cmd: Any) -> None:
    """Rich markup in help texts escaped (``[run]`` stays ``[run]``, ``'tokenmark[ui]'``
    keeps its extra), the command's paragraphs one line each, metavars as users write
    them (INT, FLOAT, PATH, URL, TEXT; ``<bool>`` and ``<list[str]>`` never); values
    converted without a pydantic adapter per parameter (:mod:`tokenmark.cli.coerce`)."""
    if cmd.help:
        cmd.help = _text(cmd.help)
    for param in cmd.params:
        coerce.attach(param)
        if getattr(param, "help", None):
            param.help = _text(param.help)
        if isinstance(param, TyperOption) and param.metavar is None:
            param.metavar = _metavar(param)
        elif isinstance(param, TyperArgument):
            # the argument's name stays its label; its type column reads as an option's
            kind = _metavar(param)
            setattr(param, "display_type_rich", lambda ctx, kind=kind: kind)  # noqa: B010


def polish(typer_app: typer.Typer = app, *, top: bool = True) -> None:
    """Make ``--help`` read well: every command and group built as :class:`_Command` /
    :class:`_Group` (escaped help, user metavars), the commands of the top level in
    :data:`PANELS` (``run`` first). Called after the commands are registered."""
    order = {name: i for i, name in enumerate(n for ns in PANELS.values() for n in ns)}
    panel_of = {n: panel for panel, ns in PANELS.items() for n in ns}
    for info in typer_app.registered_commands:
        if info.cls in (None, TyperCommand) or isinstance(info.cls, DefaultPlaceholder):
            info.cls = _Command
    for group in typer_app.registered_groups:
        if group.typer_instance is not None:
            polish(group.typer_instance, top=False)
        if isinstance(group.cls, DefaultPlaceholder) or group.cls in (None, TyperGroup):
            group.cls = _Group
    if top:
        def name(info: Any) -> str:
            return str(info.name or info.callback.__name__.replace("_", "-"))

        infos: list[Any] = [*typer_app.registered_commands, *typer_app.registered_groups]
        for item in infos:
            if isinstance(item.rich_help_panel, DefaultPlaceholder | None):
                item.rich_help_panel = panel_of.get(name(item), "Tools")
        typer_app.registered_commands.sort(key=lambda i: order.get(name(i), len(order)))
