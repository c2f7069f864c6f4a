"""Bounded parsing (:mod:`tokenmark.inputs`) equals the plain parsers within its bounds.

Property tests over generated documents: within the bounds, :func:`json_loads` and
:func:`toml_loads` give exactly what ``json.loads`` and ``tomllib.loads`` give; past
them (nesting over 64 levels, a dotted key over 64 parts, a size over the limit) they
raise :class:`InputLimitError`, whatever the depth (100,000 too). The depth measure is
checked against a plain recursive one, and the dotted-key scanner against a reference
built from the parsed document.
"""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenmark.inputs import (
    MAX_DEPTH,
    InputLimitError,
    check_depth,
    has_long_dotted_key,
    json_loads,
    read_bounded,
    toml_loads,
)

EXAMPLES = int(os.environ.get("TOKENMARK_FUZZ_EXAMPLES", "300"))
LEAF = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=10),
                 st.floats(allow_nan=False, allow_infinity=False))


def depth(obj: Any) -> int:
    """The plain recursive measure (a scalar 0, [] 1)."""
    if isinstance(obj, dict):
        return 1 + max((depth(v) for v in obj.values()), default=0)
    if isinstance(obj, list):
        return 1 + max((depth(v) for v in obj), default=0)
    return 0


def nest(obj: Any, levels: int, kinds: list[bool]) -> Any:
    for i in range(levels):
        obj = {"k": obj} if kinds[i % len(kinds)] else [obj]
    return obj


JSON = st.recursive(LEAF, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=10)


@settings(max_examples=EXAMPLES, deadline=None)
@given(doc=JSON, extra=st.integers(0, 90), kinds=st.lists(st.booleans(), min_size=1,
                                                          max_size=4))
def test_json_within_bounds_equals_json_loads_and_past_them_is_refused(doc, extra, kinds):
    deep = nest(doc, extra, kinds)
    text = json.dumps(deep)
    want = depth(deep)
    if want <= MAX_DEPTH:
        assert json_loads(text) == json.loads(text)
        assert json_loads(text.encode()) == json.loads(text)
    else:
        with pytest.raises(InputLimitError, match="nested deeper than 64 levels"):
            json_loads(text)


@settings(max_examples=EXAMPLES, deadline=None)
@given(doc=JSON, extra=st.integers(0, 90), kinds=st.lists(st.booleans(), min_size=1,
                                                          max_size=4),
       limit=st.integers(1, 100))
def test_check_depth_is_the_plain_depth(doc, extra, kinds, limit):
    deep = nest(doc, extra, kinds)
    if depth(deep) <= limit:
        check_depth(deep, limit)
    else:
        with pytest.raises(InputLimitError):
            check_depth(deep, limit)


@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000,
                                  '{"a":' * 100_000 + "1" + "}" * 100_000,
                                  "[" * 1_000_000])
def test_json_any_depth_is_refused_without_recursion_error(text):
    with pytest.raises(ValueError, match="nested deeper|Expecting"):
        json_loads(text)


def test_json_size_bound():
    assert json_loads("[1]", max_bytes=3) == [1]
    with pytest.raises(InputLimitError, match="larger than 3 bytes"):
        json_loads("[1] ", max_bytes=3)


# -- TOML ---------------------------------------------------------------------------------
BARE = st.text(alphabet="abcXYZ09_-", min_size=1, max_size=4)
TRICKY = "ab. =[]{}#'\"\\\n"  # what may mislead a scanner inside strings and comments
QUOTED = st.text(alphabet="ab. =[]{}#'", max_size=5).map(json.dumps)
KEY_PART = st.one_of(BARE, QUOTED)
SPACE = st.sampled_from(["", " ", "\t"])
STRING = st.one_of(
    st.text(alphabet=TRICKY, max_size=12).map(json.dumps),
    st.text(alphabet="ab. =[]{}#\"", max_size=12).map(lambda s: f"'{s}'"),
    st.text(alphabet="ab. =[]{}#\n", max_size=30).map(lambda s: f'"""{s}"""'),
    st.integers(60, 90).map(lambda n: json.dumps(".".join(["s"] * n))))
TOML_LEAF = st.one_of(st.integers(-10**6, 10**6), st.booleans(), STRING,
                      st.floats(-1e6, 1e6, allow_nan=False).map(repr))


@st.composite
def dotted(draw: Any, prefix: str = "") -> tuple[str, int]:
    """A dotted key (random spacing around the dots) and its number of parts."""
    base = draw(st.lists(KEY_PART, min_size=1, max_size=4))
    n = draw(st.sampled_from([1, 2, 3, 4, 62, 63, 64, 65, 66, 90]))  # around the bound
    parts = (base * n)[:n] if n > len(base) else base
    if prefix:
        parts = [prefix, *parts]
    text = parts[0]
    for part in parts[1:]:
        text += draw(SPACE) + "." + draw(SPACE) + part
    return text, len(parts)


@st.composite
def value(draw: Any, depth: int = 0) -> tuple[str, int]:
    """An inline TOML value and the most key parts inside it."""
    kind = draw(st.sampled_from(["leaf", "leaf", "array", "table"]) if depth < 3 else
                st.just("leaf"))
    if kind == "leaf":
        leaf = draw(TOML_LEAF)
        return (("true" if leaf else "false") if isinstance(leaf, bool) else str(leaf)), 0
    if kind == "array":
        items = [draw(value(depth + 1)) for _ in range(draw(st.integers(0, 3)))]
        return "[" + ", ".join(t for t, _ in items) + "]", max((n for _, n in items), default=0)
    pairs = []
    most = 0
    for i in range(draw(st.integers(0, 3))):
        key, n = draw(dotted(f"k{i}"))
        text, inner = draw(value(depth + 1))
        pairs.append(f"{key} = {text}")
        most = max(most, n, inner)
    return "{" + ", ".join(pairs) + "}", most


@st.composite
def toml_doc(draw: Any) -> tuple[str, int]:
    """A TOML document and the most parts any of its dotted keys has."""
    lines = []
    most = 0
    for i in range(draw(st.integers(1, 4))):
        key, n = draw(dotted(f"t{i}"))
        text, inner = draw(value())
        most = max(most, n, inner)
        if draw(st.booleans()):
            lines += [f"[{key}]", f"v = {text}"]
        else:
            lines.append(f"{key} = {text}")
        if draw(st.booleans()):  # a comment that looks like keys, strings and tables
            lines.append("# " + draw(st.text(alphabet=TRICKY.replace("\n", ""), max_size=20))
                         + ".".join(["c"] * 70))
    return "\n".join(lines) + "\n", most


@settings(max_examples=max(EXAMPLES // 2, 1), deadline=None)
@given(case=toml_doc())
def test_toml_within_bounds_equals_tomllib_and_long_keys_are_refused(case):
    doc, most = case
    assert has_long_dotted_key(doc) == (most > MAX_DEPTH)
    try:
        want = tomllib.loads(doc)
    except tomllib.TOMLDecodeError:  # e.g. a key defined twice: refused either way
        with pytest.raises((tomllib.TOMLDecodeError, InputLimitError)):
            toml_loads(doc)
        return
    if most > MAX_DEPTH:
        with pytest.raises(InputLimitError, match="dotted key of more than 64 parts"):
            toml_loads(doc)
    elif depth(want) > MAX_DEPTH:
        with pytest.raises(InputLimitError, match="nested deeper"):
            toml_loads(doc)
    else:
        assert toml_loads(doc) == want


@pytest.mark.parametrize("doc", [
    "x = " + "[" * 100_000 + "]" * 100_000,
    "x = " + "{b=" * 100_000 + "1" + "}" * 100_000,
    ".".join(["a"] * 100_000) + " = 1",
    "[" + ".".join(['"a"'] * 100_000) + "]",
    "x = {" + " . ".join(["a"] * 100_000) + " = 1}",
])
def test_toml_any_depth_or_key_length_is_refused(doc):
    with pytest.raises(InputLimitError):
        toml_loads(doc)


def test_toml_size_bound_and_long_values_that_are_not_keys():
    assert toml_loads("x = [" + ", ".join(["1.5"] * 5000) + "]")["x"][0] == 1.5
    assert toml_loads('x = "' + "a." * 5000 + '"')["x"].startswith("a.a.")
    with pytest.raises(InputLimitError, match="larger than 1 MiB"):
        toml_loads("#" * (1 << 20) + "\n")


def test_read_bounded(tmp_path: Path):
    p = tmp_path / "f"
    p.write_bytes(b"x" * 10)
    assert read_bounded(p, 10) == b"x" * 10
    with pytest.raises(InputLimitError, match="larger than 9 bytes"):
        read_bounded(p, 9)
