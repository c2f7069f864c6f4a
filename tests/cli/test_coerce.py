"""Issue 21 (start-up CPU): tokenmark's options convert their values without a pydantic
adapter per parameter (tokenmark/cli/coerce.py), and every value converts exactly as the
installed Typer's own converter does: the same value of the same type, or the same error
message. The reference is Typer's ``build_runtime_param`` (its pydantic adapters)."""

from __future__ import annotations

import enum
import math
import pathlib
from typing import Annotated, Any, Literal

import pytest
import typer
import typer.main
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokenmark.cli import app as tm_app  # the app with every command registered
from tokenmark.cli import coerce

pytestmark = pytest.mark.skipif(not coerce.supported(), reason=(
    f"Typer {typer.__version__} is not one coerce.TESTED lists: tokenmark leaves its "
    "conversion alone (test_an_untested_typer_is_left_alone covers that)"))


class Color(enum.Enum):
    RED = "red"
    GREEN = "Green"


def _command(tmp: pathlib.Path | None = None) -> Any:
    """A command with one option of each kind tokenmark uses (and some it does not)."""
    demo = typer.Typer()

    @demo.command()
    def cmd(
        i: Annotated[int, typer.Option()] = 0,
        f: Annotated[float, typer.Option()] = 0.0,
        s: Annotated[str, typer.Option()] = "",
        b: Annotated[bool, typer.Option()] = False,
        p: Annotated[pathlib.Path, typer.Option()] = pathlib.Path("."),
        e: Annotated[Color, typer.Option()] = Color.RED,
        ei: Annotated[Color, typer.Option(case_sensitive=False)] = Color.RED,
        lit: Annotated[Literal["fast", "Slow"], typer.Option()] = "fast",
        li: Annotated[list[int] | None, typer.Option()] = None,
        ls: Annotated[list[str] | None, typer.Option()] = None,
        lp: Annotated[list[pathlib.Path] | None, typer.Option()] = None,
        le: Annotated[list[Color] | None, typer.Option()] = None,
        imin: Annotated[int, typer.Option(min=1)] = 1,
        fmax: Annotated[float, typer.Option(max=2.0)] = 1.0,
        iclamp: Annotated[int, typer.Option(min=0, max=5, clamp=True)] = 1,
        pfile: Annotated[pathlib.Path, typer.Option(exists=True, dir_okay=False)] = (
            pathlib.Path(".")),
        pdir: Annotated[pathlib.Path, typer.Option(file_okay=False)] = pathlib.Path("."),
        sp: Annotated[str, typer.Option(parser=lambda v: str(v).upper())] = "",
    ) -> None:
        """Demo."""

    return typer.main.get_command(demo)


CMD = _command()
PARAMS = {p.name: p for p in CMD.params}


def _outcome(runtime: Any, param: Any, value: Any) -> tuple[Any, ...]:
    ctx = typer.Context(CMD)
    try:
        got = runtime._coerce_value(value, param=param, ctx=ctx)
    except typer.BadParameter as e:
        return ("error", e.message)
    except Exception as e:  # noqa: BLE001 - whatever Typer raises, the quick way must too
        return ("raised", type(e), str(e))
    if isinstance(got, list):
        return ("ok", "list", tuple((type(v), repr(v)) for v in got))
    return ("ok", type(got), repr(got))


def _same(name: str, value: Any) -> None:
    from typer._coercion import build_runtime_param

    param = PARAMS[name]
    desc = param.type_descriptor
    quick = coerce._quick_class()(desc)  # type: ignore[misc]
    assert _outcome(quick, param, value) == _outcome(build_runtime_param(desc), param, value)


_TEXT = st.text(st.characters(exclude_categories=()), max_size=12)
_NUMBERISH = st.from_regex(r"[ +\-]?[0-9_٠-٩]{0,20}(\.[0-9_]{0,5})?([eE][+\-]?[0-9]{1,3})? ?",
                           fullmatch=True)
#: digits of any script (int() reads "١٢" and "１２", pydantic does not), points
_DIGITS = st.text(alphabet="0123456789.٠١٢٣٤٥٦٧٨٩１２", min_size=1, max_size=20)
_NUMBERS = st.one_of(_DIGITS, st.integers().map(str), st.floats().map(str),
                     st.floats(allow_nan=False).map(repr), _NUMBERISH,
                     st.integers(0, 10**25).map(lambda n: "0" * (n % 3) + str(n)))
_NATIVE = st.one_of(st.integers(), st.floats(), st.booleans(), _TEXT,
                    st.builds(pathlib.Path, _TEXT), st.sampled_from(list(Color)))
_ANY = st.one_of(_NUMBERS, _TEXT, _NATIVE, st.sampled_from(["red", "RED", "Green", "green",
                                                            "fast", "slow", "Slow", ""]))
_SETTINGS = settings(max_examples=400, deadline=None,
                     suppress_health_check=[HealthCheck.too_slow])


@_SETTINGS
@given(name=st.sampled_from(["i", "f", "s", "b", "e", "ei", "lit", "imin", "fmax", "iclamp",
                             "sp"]), value=_ANY)
def test_every_scalar_value_converts_as_typer_converts_it(name, value):
    _same(name, value)


@_SETTINGS
@given(name=st.sampled_from(["i", "f", "imin", "fmax", "li"]), value=_NUMBERS)
def test_every_number_converts_as_typer_converts_it(name, value):
    _same(name, value)


@_SETTINGS
@given(name=st.sampled_from(["li", "ls", "lp", "le"]),
       value=st.lists(_ANY, max_size=4).flatmap(
           lambda items: st.sampled_from([items, tuple(items)])) | _ANY)
def test_every_list_converts_as_typer_converts_it(name, value):
    _same(name, value)


def test_paths_convert_as_typer_converts_them(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "file.txt").write_text("x")
    (tmp_path / "dir").mkdir()
    values = ["file.txt", "dir", "missing", "", "-", ".", "dir/", "a\x00b",
              str(tmp_path / "file.txt"), pathlib.Path("file.txt"), 5]

    @_SETTINGS
    @given(name=st.sampled_from(["p", "pfile", "pdir", "lp"]),
           value=st.sampled_from(values) | _TEXT)
    def check(name, value):
        _same(name, [value] if name == "lp" else value)

    check()


def test_the_values_users_give_take_the_quick_way():
    """The point of the module: plain values never build an adapter (a regression to
    always falling back would pass the equality tests above)."""
    def fast(name, value):
        p = PARAMS[name]
        return coerce.quick(p.type_descriptor.annotation, p.type_descriptor.parameter_info,
                            value, p, typer.Context(CMD))

    assert fast("i", "12") == 12 and type(fast("i", "007")) is int
    assert fast("f", "0.5") == 0.5 and fast("f", "3") == 3.0
    assert fast("s", "hello") == "hello"
    assert fast("p", "out/run") == pathlib.Path("out/run")
    assert fast("e", "Green") is Color.GREEN and fast("ei", "GREEN") is Color.GREEN
    assert fast("lit", "Slow") == "Slow"
    assert fast("li", ("1", "2")) == [1, 2]
    for name, value in (("i", "1_000"), ("i", "-1"), ("f", "1e3"), ("f", "inf"),
                        ("imin", "3"), ("sp", "x"), ("i", 1.5)):
        with pytest.raises(coerce._Slow):
            fast(name, value)


def _tokenmark_params():
    def walk(cmd):
        if hasattr(cmd, "commands"):
            for sub in cmd.commands.values():
                yield from walk(sub)
        yield from ((cmd, p) for p in cmd.params)
    return list(walk(typer.main.get_command(tm_app)))


def test_every_tokenmark_option_converts_its_default_as_typer_does():
    from typer._coercion import build_runtime_param

    params = _tokenmark_params()
    assert len(params) > 300
    quick = coerce._quick_class()
    for cmd, p in params:
        desc = p.type_descriptor
        if desc.file_annotation is not None:
            continue
        assert isinstance(p._runtime_param, quick), (cmd.name, p.name)
        default = p.get_default(typer.Context(cmd), call=False)
        if default is None or callable(default):
            continue
        ctx = typer.Context(cmd)
        mine = _outcome_in(quick(desc), p, default, ctx)
        theirs = _outcome_in(build_runtime_param(desc), p, default, ctx)
        assert mine == theirs, (cmd.name, p.name, default)


def _outcome_in(runtime: Any, param: Any, value: Any, ctx: Any) -> tuple[Any, ...]:
    try:
        got = runtime.coerce(value, param=param, ctx=ctx)
    except typer.BadParameter as e:
        return ("error", e.message)
    if isinstance(got, float) and math.isnan(got):
        return ("ok", "nan")
    return ("ok", type(got), repr(got))


def test_a_bad_value_reads_as_typer_says_it(tmp_path, monkeypatch):
    """The whole error a user sees is Typer's own, word for word."""
    from typer.testing import CliRunner

    runner = CliRunner()
    cases = (["--concurrency", "x"], ["--concurrency", "1.5"], ["--concurrency", "1_0x"],
             ["--qps", "fast"], ["--qps", "-"], ["--scenario", "sideways"])

    def outputs():
        return [(r.exit_code, r.output) for r in (
            runner.invoke(tm_app, ["run", *args, "-o", str(tmp_path / "o")]) for args in cases)]

    mine = outputs()
    monkeypatch.setattr(coerce, "_quick_class", lambda: None)  # Typer converts alone
    assert mine == outputs()
    assert [code for code, _ in mine] == [2] * len(cases)
    assert "valid integer" in mine[0][1] and "valid number" in mine[3][1]


def test_an_untested_typer_is_left_alone():
    real = typer.__version__
    typer.__version__ = "0.99.0"
    coerce._quick_class.cache_clear()
    try:
        assert not coerce.supported()
        param = _command().params[0]
        param._runtime_param = None
        coerce.attach(param)
        assert param._runtime_param is None  # Typer builds its own, as it always does
    finally:
        typer.__version__ = real
        coerce._quick_class.cache_clear()
    assert coerce.supported()
