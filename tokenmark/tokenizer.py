"""Tokenizers: the interface, and a built-in deterministic tokenizer that needs no files.

The built-in tokenizer has a fixed vocabulary of pronounceable pseudo-words (made from
syllables in a documented order, so it never changes between versions) plus byte
tokens for everything else. Text made from its vocabulary with single spaces round-trips
exactly, which is what synthetic prompts rely on: a prompt of *n* vocabulary tokens is
counted as *n* tokens by the client, the built-in server and the in-process models.
It is not a model's tokenizer; results name which tokenizer counted their tokens.

A model's tokenizer (Hugging Face ``tokenizer.json``) lives at the edge
(:mod:`tokenmark.sources.hf_tokenizer`) and meets the same :class:`Tokenizer` protocol,
plus :class:`VocabularyTokenizer` (which ids synthetic prompts may draw from) and
:class:`ChatTemplater` (a chat template). :func:`exact_text` turns drawn ids into text
whose token count is exact under any of them.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from functools import cached_property
from typing import Protocol, runtime_checkable

from tokenmark.records import Message

__all__ = [
    "BuiltinTokenizer",
    "ChatTemplater",
    "Tokenizer",
    "VocabularyTokenizer",
    "exact_text",
]


class Tokenizer(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def fingerprint(self) -> str:
        """A content hash that changes whenever tokenization would."""
        ...

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: Sequence[int]) -> str: ...

    def count(self, text: str) -> int: ...


@runtime_checkable
class VocabularyTokenizer(Tokenizer, Protocol):
    """A tokenizer that says which ids synthetic prompts may be made of."""

    def word_ids(self) -> Sequence[int]:
        """Ids of whole-word tokens: text decoded from any sequence of them is expected
        to encode back to the same ids (checked by :func:`exact_text` unless the
        tokenizer guarantees it, as the built-in one does)."""
        ...


@runtime_checkable
class ChatTemplater(Protocol):
    """A tokenizer that can render chat messages with its model's chat template."""

    @property
    def has_chat_template(self) -> bool: ...

    def apply_chat_template(self, messages: Sequence[Message]) -> str:
        """The prompt text the model sees for ``messages``, ready for the assistant."""
        ...


def exact_text(
    tok: Tokenizer, ids: Sequence[int], *, rounds: int = 4
) -> tuple[str, tuple[int, ...]]:
    """Text made of ``ids`` and the ids that text really encodes to.

    The built-in tokenizer round-trips its vocabulary exactly, so its ids are returned
    as they are. Other tokenizers can merge or split tokens across the boundaries of
    decoded text; the text is then re-encoded and trimmed or extended (with its own
    leading tokens) for up to ``rounds`` rounds until it encodes to exactly
    ``len(ids)`` tokens. The returned ids always encode the returned text, so a count
    taken from them is exact even in the rare case the target length was missed.
    """
    want = len(ids)
    if isinstance(tok, BuiltinTokenizer):
        return tok.decode(ids), tuple(ids)
    cur = list(ids)
    text = tok.decode(cur)
    real = tok.encode(text)
    for _ in range(rounds):
        if len(real) == want:
            break
        if len(real) > want:
            cur = real[:want]
        else:
            cur = real + list(ids[: want - len(real)])
        text = tok.decode(cur)
        real = tok.encode(text)
    return text, tuple(real)


_ONSETS = ("", "b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "ch", "sh")
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ou")
_CODAS = ("", "n", "r", "s", "l")
_WORD = re.compile(r"\S+")


class BuiltinTokenizer:
    """Deterministic word-level tokenizer with a byte fallback.

    ids ``0..255`` are raw bytes (used for anything outside the vocabulary), ``256`` is
    end-of-sequence, and ``257..`` are vocabulary words. A word in the vocabulary is one
    token; whitespace between words is implied by decoding with single spaces.
    """

    BYTE_TOKENS = 256
    EOS_ID = 256
    FIRST_WORD_ID = 257

    def __init__(self, vocab_words: int = 8000) -> None:
        self._size = vocab_words

    @property
    def name(self) -> str:
        return f"tokenmark-builtin-{self._size}"

    @cached_property
    def words(self) -> tuple[str, ...]:
        out: dict[str, None] = {}  # insertion-ordered set: first occurrence wins
        syll = [o + v + c for o in _ONSETS for v in _VOWELS for c in _CODAS]
        for a in syll:
            out.setdefault(a)
            if len(out) == self._size:
                return tuple(out)
        for a in syll:
            for b in syll:
                out.setdefault(a + b)
                if len(out) == self._size:
                    return tuple(out)
        raise ValueError("vocabulary too large for the built-in syllable set")

    @cached_property
    def _index(self) -> dict[str, int]:
        return {w: i + self.FIRST_WORD_ID for i, w in enumerate(self.words)}

    @cached_property
    def fingerprint(self) -> str:
        h = hashlib.sha256(self.name.encode())
        h.update("\n".join(self.words).encode())
        return h.hexdigest()[:16]

    @property
    def vocab_size(self) -> int:
        return self.FIRST_WORD_ID + self._size

    def encode(self, text: str) -> list[int]:
        index = self._index
        ids: list[int] = []
        for m in _WORD.finditer(text):
            w = m.group(0)
            tid = index.get(w)
            if tid is not None:
                ids.append(tid)
            else:
                ids.extend(w.encode("utf-8"))
        return ids

    def count(self, text: str) -> int:
        index = self._index
        n = 0
        for w in text.split():
            n += 1 if w in index else len(w.encode("utf-8"))
        return n

    def decode(self, ids: Sequence[int]) -> str:
        words = self.words
        parts: list[str] = []
        pending = bytearray()
        for tid in ids:
            if tid < self.BYTE_TOKENS:
                pending.append(tid)
                continue
            if pending:
                parts.append(pending.decode("utf-8", errors="replace"))
                pending.clear()
            if tid == self.EOS_ID:
                continue
            parts.append(words[tid - self.FIRST_WORD_ID])
        if pending:
            parts.append(pending.decode("utf-8", errors="replace"))
        return " ".join(parts)

    def word_ids(self) -> range:
        return range(self.FIRST_WORD_ID, self.FIRST_WORD_ID + self._size)
