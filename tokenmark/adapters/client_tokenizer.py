"""The client-side tokenizer: a second count of each response's output tokens.

The server's ``usage`` is the first source; a tokenizer given by the user counts the
returned text again, and :mod:`tokenmark.mlperf.rules` flags every request where the two
disagree (a wrong tokenizer, a server that miscounts, or text that does not re-encode to
the tokens it was decoded from). ``"builtin"`` is tokenmark's own tokenizer, which counts
the synthetic datasets' text exactly; anything else is a model folder or a
``tokenizer.json``, read by :mod:`tokenmark.sources.hf_tokenizer` (the one module that
imports the Hugging Face ``tokenizers`` package), so the client counts with exactly the
tokenizer a dataset was built with.
"""

from __future__ import annotations

from typing import Protocol

from tokenmark.sources.hf_tokenizer import load_hf_tokenizer
from tokenmark.tokenizer import BuiltinTokenizer

__all__ = ["ClientTokenizer", "load_tokenizer"]


class ClientTokenizer(Protocol):
    @property
    def name(self) -> str: ...

    def count(self, text: str) -> int: ...


def load_tokenizer(spec: str) -> ClientTokenizer:
    """``"builtin"``, a model folder, or a ``tokenizer.json`` (errors name the fix)."""
    if spec == "builtin":
        return BuiltinTokenizer()
    return load_hf_tokenizer(spec)
