"""Secrets out of every text tokenmark keeps: the API key in each form it can take.

A server may quote what it was sent (an error body that echoes the ``Authorization``
header, a metric label, a version page), and that text ends up in records, results,
reports and logs. The key then rarely appears as it was given: JSON escapes its quotes,
backslashes, slashes and non-ASCII characters (once, or twice when the echo is itself
embedded in JSON), a language's string literal escapes them its own way, a URL
percent-encodes it, HTML escapes ``&<>"'``, Basic auth base64-encodes ``user:key``. A
:class:`Redactor` knows every form of each secret and replaces it with ``***``:

- exact forms: raw; JSON-escaped (``ensure_ascii`` on and off, ``/`` escaped or not, and
  JSON-escaped twice); Python ``repr``-escaped in either quote style, of the text and of
  its UTF-8 bytes, and so of each JSON form (the ``repr`` of a JSON body quoted in an
  error detail); percent-encoded (upper- and lower-case hex, ``+`` for space or not);
  HTML-escaped;
- base64 (standard and URL-safe): a secret inside base64 text changes all the
  characters it spans, by its offset modulo 3, except its edges; the middle of each of
  the three encodings is searched for, and the whole base64 token holding it is replaced;
- cut forms: tokenmark keeps the start of long texts (``[:300]``), which may end inside
  a secret; a form's first 8 characters or more (all of a shorter one) are replaced
  wherever they appear, with as much of the rest as follows them.

Secrets shorter than 4 characters are not searched for (they would mask ordinary text).
"""

from __future__ import annotations

import base64
import html
import json
import re
from collections.abc import Iterable
from urllib.parse import quote, quote_plus

__all__ = ["MASK", "MIN_SECRET", "Redactor", "forms"]

MASK = "***"
MIN_SECRET = 4
_PREFIX = 8  # a cut form is replaced from this many leading characters on


def _py_escape(s: str, quote_char: str, as_bytes: bool = False) -> str:
    """``s`` (with ``as_bytes``, its UTF-8 bytes) as a Python literal's body in
    ``quote_char`` quotes (repr's rules)."""
    other = "'" if quote_char == '"' else '"'

    def literal(x: str) -> str:  # repr without a bytes literal's "b"
        return repr(x.encode("utf-8"))[1:] if as_bytes else repr(x)

    forced = literal(s + other)
    if forced[0] == quote_char:
        return forced[1:-2]
    # repr chose the other quote: escape ours by hand, as repr would in that style
    out = literal(s)[1:-1]
    return out.replace("\\" + other, other).replace(quote_char, "\\" + quote_char)


def forms(secret: str) -> set[str]:
    """Every exact form of ``secret`` a text may hold (see the module docstring)."""
    out = {secret}
    for ascii_only in (True, False):
        j = json.dumps(secret, ensure_ascii=ascii_only)[1:-1]
        out |= {j, j.replace("/", "\\/")}
        jj = json.dumps(j, ensure_ascii=ascii_only)[1:-1]
        out |= {jj, jj.replace("/", "\\/")}
    # the text and its JSON forms as a Python literal: a repr of a body, str or bytes
    # (a detail quoting a JSON answer the client could not use)
    for f in list(out):
        for q in ("'", '"'):
            out.add(_py_escape(f, q))
            out.add(_py_escape(f, q, as_bytes=True))
    for enc in (quote(secret, safe=""), quote(secret), quote_plus(secret, safe=""),
                quote_plus(secret)):
        out |= {enc, re.sub(r"%[0-9A-F]{2}", lambda m: m.group().lower(), enc)}
    out |= {html.escape(secret), html.escape(secret, quote=False),
            secret.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&#34;").replace("'", "&#39;")}
    return {f for f in out if f}


def _base64_cores(secret: str) -> set[str]:
    """The base64 characters fixed by ``secret`` alone at each offset mod 3 (both
    alphabets): what any base64 text holding the secret contains."""
    raw = secret.encode("utf-8")
    cores = set()
    for lead in range(3):
        enc = base64.b64encode(b"\0" * lead + raw).decode()
        start = -(-8 * lead // 6)  # the first character made of the secret's bits only
        end = 8 * (lead + len(raw)) // 6  # one past the last such character
        core = enc[start:end]
        if len(core) >= MIN_SECRET:
            cores |= {core, core.replace("+", "-").replace("/", "_")}
    return cores


def _prefix_pattern(form: str) -> str:
    """``form``'s first ``_PREFIX`` characters (all of a shorter one), then as much of
    the rest as follows (nested optional groups, in order)."""
    head = min(len(form), _PREFIX)
    rest = form[head:]
    tail = "".join("(?:" + re.escape(c) for c in rest) + ")?" * len(rest)
    return re.escape(form[:head]) + tail


class Redactor:
    """Replaces every form of each secret (an API key, header values) with ``***``."""

    __slots__ = ("_patterns", "secrets")

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self.secrets = tuple(s for s in dict.fromkeys(secrets) if len(s) >= MIN_SECRET)
        exact = {f for s in self.secrets for f in forms(s)}
        cores = {c for s in self.secrets for c in _base64_cores(s)}
        #: (what every match starts with, the pattern, whether it is base64)
        self._patterns = [(f[:_PREFIX], re.compile(_prefix_pattern(f)), False)
                          for f in sorted(exact)]
        self._patterns += [(c[:_PREFIX], re.compile(_prefix_pattern(c)), True)
                           for c in sorted(cores)]

    def __bool__(self) -> bool:
        return bool(self.secrets)

    def text(self, s: str) -> str:
        """``s`` with every form of every secret replaced by ``***``: the union of what
        every form matches (each as far as it goes), a base64 match widened to its
        whole token."""
        spans: list[tuple[int, int]] = []
        for head, pattern, b64 in self._patterns:
            if head not in s:
                continue
            for m in pattern.finditer(s):
                a, b = m.span()
                if b64:
                    while a > 0 and s[a - 1] in _B64_CHARS:
                        a -= 1
                    while b < len(s) and s[b] in _B64_CHARS:
                        b += 1
                spans.append((a, b))
        if not spans:
            return s
        spans.sort()
        out = []
        pos = 0
        end = -1
        for a, b in spans:
            if a > end:  # a new masked stretch
                if end >= 0:
                    out.append(MASK)
                out.append(s[pos:a])
                end = b
            else:
                end = max(end, b)
            pos = end
        out.append(MASK)
        out.append(s[pos:])
        return "".join(out)


_B64_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=_-")
