"""Parsing input tokenmark did not write, within bounds on size and nesting.

JSON and TOML documents from files, uploads, servers and the command line go through
here, so a hostile or broken one costs a clear error instead of a ``RecursionError``
(100,000 nested brackets), hours of CPU (TOML's dotted keys parse in quadratic time)
or all the memory (a file far larger than any real one of its kind):

- nesting: at most :data:`MAX_DEPTH` levels of arrays and objects (tables). The
  parsers recurse, so a document too deep for them fails as too deep; one they parse is
  measured without recursion, so no later walk over it can overflow the stack;
- size: a file is read through :func:`read_bounded`, which stops one byte past the
  limit its caller names (``what`` and the limit appear in the message); a text already
  in memory is checked before it is parsed;
- TOML dotted keys (``a.b.c = 1``, ``[a.b.c]``) of more than :data:`MAX_DEPTH` parts are
  refused before parsing.

Failures raise :class:`InputLimitError`, a ``ValueError``, so a caller that already turns
malformed JSON (``json.JSONDecodeError``, also a ``ValueError``) into its own one-line
error about the file handles these too; :func:`json_loads` and :func:`toml_loads` raise
their parser's own error types for malformed input, as before.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

from tokenmark.errors import BadInputError

__all__ = [
    "MAX_DEPTH",
    "MIB",
    "InputLimitError",
    "check_depth",
    "json_loads",
    "load_json_object",
    "read_bounded",
    "toml_loads",
]

#: Levels of nested arrays and objects any parsed document may have. tokenmark's own
#: documents use at most 8; published MLPerf files fewer.
MAX_DEPTH = 64
MIB = 1 << 20

#: TOML strings (multi-line ones first) and comments, matched left to right as TOML's
#: lexer reads them, so a quote inside a comment or a ``#`` inside a string misleads
#: nothing.
_STRINGS_AND_COMMENTS = re.compile(
    r'"""(?:[^"\\]|\\.|"(?!""))*+"""'
    r"|'''(?:[^']|'(?!''))*+'''"
    r'|"(?:[^"\\\n]|\\.)*+"'
    r"|'[^'\n]*+'"
    r"|#[^\n]*+", re.S)
_PART = r"""(?:[A-Za-z0-9_-]++|""|'')"""
#: A dotted key of more than MAX_DEPTH parts, in a text whose strings are blanked to
#: ``""`` and whose comments are gone: there, only keys are dotted chains (a float has two
#: parts). Linear: attempts start only where a part can, possessive parts never
#: backtrack, and an attempt stops after MAX_DEPTH + 1 parts.
_LONG_KEY = re.compile(r"(?<![A-Za-z0-9_-])" + _PART + r"(?:[ \t]*+\.[ \t]*+" + _PART
                       + f"){{{MAX_DEPTH}}}")


def _blank(m: re.Match[str]) -> str:
    return "" if m.group().startswith("#") else '""'


def has_long_dotted_key(text: str) -> bool:
    """Whether TOML ``text`` has a dotted key (``a.b = 1``, ``[a.b]``, ``{a.b = 1}``) of
    more than :data:`MAX_DEPTH` parts; ``tomllib`` takes quadratic time over those."""
    return _LONG_KEY.search(_STRINGS_AND_COMMENTS.sub(_blank, text)) is not None


class InputLimitError(ValueError):
    """A document over a size or nesting bound (the message says which)."""


def check_depth(obj: object, max_depth: int = MAX_DEPTH) -> None:
    """Raise :class:`InputLimitError` if ``obj`` nests lists/dicts deeper than
    ``max_depth`` (a scalar is depth 0, ``[]`` depth 1). Iterative: any depth is safe."""
    stack: list[tuple[object, int]] = [(obj, 0)]
    pop = stack.pop
    push = stack.append
    while stack:
        node, depth = pop()
        if isinstance(node, dict):
            items: Any = node.values()
        elif isinstance(node, list | tuple):
            items = node
        else:
            continue
        depth += 1
        if depth > max_depth:
            raise InputLimitError(f"nested deeper than {max_depth} levels")
        for child in items:
            if isinstance(child, dict | list | tuple):
                push((child, depth))


def _too_deep(max_depth: int) -> InputLimitError:
    return InputLimitError(f"nested deeper than {max_depth} levels")


def json_loads(data: str | bytes | bytearray, *, max_depth: int = MAX_DEPTH,
               max_bytes: int = 0) -> Any:
    """``json.loads`` within bounds: ``max_bytes`` (0: no bound) and ``max_depth``."""
    if max_bytes and len(data) > max_bytes:
        raise InputLimitError(f"larger than {_size(max_bytes)}")
    try:
        obj = json.loads(data)
    except RecursionError:
        raise _too_deep(max_depth) from None
    # fast path: a document with few brackets cannot be deep (counts inside strings too)
    if isinstance(data, str):
        brackets = data.count("[") + data.count("{")
    else:
        brackets = data.count(b"[") + data.count(b"{")
    if brackets > max_depth:
        check_depth(obj, max_depth)
    return obj


def toml_loads(text: str, *, max_depth: int = MAX_DEPTH, max_bytes: int = MIB) -> dict[str, Any]:
    """``tomllib.loads`` within bounds (``max_bytes`` characters at most, 1 MiB by default).

    Raises :class:`InputLimitError` for a document over a bound, ``tomllib.TOMLDecodeError``
    for one that is not TOML.
    """
    if max_bytes and len(text) > max_bytes:
        raise InputLimitError(f"larger than {_size(max_bytes)}")
    if has_long_dotted_key(text):
        raise InputLimitError(f"a dotted key of more than {max_depth} parts")
    try:
        doc = tomllib.loads(text)
    except RecursionError:
        raise _too_deep(max_depth) from None
    check_depth(doc, max_depth)
    return doc


def read_bounded(path: Path, max_bytes: int) -> bytes:
    """The bytes of ``path``, at most ``max_bytes`` (reads one more to tell); OSError as
    ``open`` raises it."""
    with open(path, "rb") as f:
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise InputLimitError(f"larger than {_size(max_bytes)}")
    return data


def load_json_object(path: Path, what: str, fix: str, *, max_bytes: int,
                     error: type[BadInputError] = BadInputError) -> dict[str, Any]:
    """The JSON object in ``path`` within bounds; otherwise ``error`` naming the file,
    what is wrong with it (missing, unreadable, not UTF-8 JSON, too large or too deep,
    not an object) and ``fix``."""
    try:
        obj = json_loads(read_bounded(path, max_bytes))
    except FileNotFoundError:
        raise error(f"{path}: no such {what}; {fix}") from None
    except (OSError, ValueError) as exc:
        raise error(f"{path}: the {what} is not usable JSON ({exc}); {fix}") from None
    if not isinstance(obj, dict):
        raise error(f"{path}: the {what} is not a JSON object; {fix}")
    return obj


def _size(n: int) -> str:
    return f"{n // MIB} MiB" if n >= MIB and n % MIB == 0 else f"{n:,} bytes"
