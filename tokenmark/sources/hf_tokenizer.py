"""A model's tokenizer from local files: the one module of :mod:`tokenmark.sources`
that imports the Hugging Face ``tokenizers`` package (optional: the ``hf`` extra).

:func:`load_hf_tokenizer` takes a model folder (``tokenizer.json``, and if present
``tokenizer_config.json`` and ``chat_template.jinja``) or a ``tokenizer.json`` file, and
optionally a chat template file that overrides the folder's. The result meets
:class:`~tokenmark.tokenizer.Tokenizer`, :class:`~tokenmark.tokenizer.VocabularyTokenizer`
and :class:`~tokenmark.tokenizer.ChatTemplater`:

- ``encode`` adds no special tokens (a chat template writes its own, as text that
  encodes to them); a server may add a BOS token to a plain completion prompt, which
  its ``usage`` then counts and this count does not;
- ``word_ids`` are the ids that decode, alone, to a space and a lowercase word of 2 to
  12 letters: text made of them re-encodes to the same ids in BPE and SentencePiece
  vocabularies alike, which synthetic prompts need (and
  :func:`~tokenmark.tokenizer.exact_text` checks anyway);
- the name says which files counted the tokens; the fingerprint hashes the tokenizer
  file and the template, so results show exactly what was used.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

from tokenmark.errors import DatasetError
from tokenmark.inputs import MIB, json_loads, read_bounded
from tokenmark.records import Message
from tokenmark.sources.chat_template import ChatTemplate

__all__ = ["HFTokenizer", "load_hf_tokenizer"]

_WORD = re.compile(r"^ [a-z]{2,12}$")


class HFTokenizer:
    def __init__(self, tok: Any, path: Path, digest: str,
                 template: ChatTemplate | None) -> None:
        self._tok = tok
        self._path = path
        self._digest = digest
        self._template = template

    @property
    def name(self) -> str:
        t = f" + template {self._template.origin}" if self._template else ""
        return f"hf:{self._path}{t}"

    @property
    def fingerprint(self) -> str:
        h = hashlib.sha256(self._digest.encode())
        if self._template is not None:
            h.update(self._template.source.encode())
        return h.hexdigest()[:16]

    def encode(self, text: str) -> list[int]:
        return list(self._tok.encode(text, add_special_tokens=False).ids)

    def decode(self, ids: Sequence[int]) -> str:
        return str(self._tok.decode(list(ids), skip_special_tokens=False))

    def count(self, text: str) -> int:
        """``len(encode(text))``, without the character offsets ``encode`` also builds:
        the client re-counts every answer with this (issue 21), and the offsets were a
        fifth of its cost (the byte-level pre-tokenizer's regex is the rest)."""
        return len(self._tok.encode_batch_fast([text], add_special_tokens=False)[0])

    @cached_property
    def _words(self) -> list[int]:
        size = int(self._tok.get_vocab_size(with_added_tokens=False))
        texts = self._tok.decode_batch([[i] for i in range(size)], skip_special_tokens=True)
        words = [i for i, t in enumerate(texts) if _WORD.match(t)]
        if not words:  # vocabularies without a leading-space convention (word level)
            words = [i for i, t in enumerate(texts) if re.fullmatch(r"[a-z]{2,12}", t)]
        if not words:
            raise DatasetError(f"{self._path}: the tokenizer has no plain word tokens to "
                               "make synthetic prompts from; use the built-in tokenizer")
        return words

    def word_ids(self) -> Sequence[int]:
        return self._words

    @property
    def has_chat_template(self) -> bool:
        return self._template is not None

    def apply_chat_template(self, messages: Sequence[Message]) -> str:
        if self._template is None:
            raise DatasetError(f"{self._path}: the tokenizer has no chat template; give one "
                               "with --chat-template FILE")
        return self._template.render(messages)


def _special(value: Any) -> str:
    if isinstance(value, dict):
        return str(value.get("content", ""))
    return value if isinstance(value, str) else ""


def _config_template(config: dict[str, Any]) -> str | None:
    t = config.get("chat_template")
    if isinstance(t, list):  # named templates: take "default"
        named = {d.get("name"): d.get("template") for d in t if isinstance(d, dict)}
        t = named.get("default")
    return t if isinstance(t, str) else None


def load_hf_tokenizer(path: Path | str, *, chat_template: Path | str | None = None
                      ) -> HFTokenizer:
    """The tokenizer of a model folder or ``tokenizer.json`` (see the module docstring)."""
    p = Path(path)
    folder = p if p.is_dir() else p.parent
    file = p / "tokenizer.json" if p.is_dir() else p
    if not file.is_file():
        raise DatasetError(f"{p}: no tokenizer.json there; give a model folder holding one, "
                           "a tokenizer.json file, or 'builtin'")
    try:
        import tokenizers
    except ImportError:
        raise DatasetError("a model's tokenizer needs the 'tokenizers' package: pip install "
                           "'tokenmark[hf]'") from None
    data = file.read_bytes()
    try:
        tok = tokenizers.Tokenizer.from_str(data.decode("utf-8"))
    except Exception as e:  # the library raises plain Exception on bad files
        raise DatasetError(f"{file}: not a tokenizer.json the tokenizers library can read "
                           f"({e})") from None
    config: dict[str, Any] = {}
    cfg_file = folder / "tokenizer_config.json"
    if p.is_dir() and cfg_file.is_file():
        try:
            config = json_loads(read_bounded(cfg_file, 64 * MIB).decode("utf-8"))
        except ValueError as e:  # not UTF-8 JSON, too large or too deep
            raise DatasetError(f"{cfg_file}: not valid JSON ({e})") from None
    source: str | None
    if chat_template is not None:
        origin = Path(chat_template)
        if not origin.is_file():
            raise DatasetError(f"{origin}: no such chat template file")
        source = origin.read_text(encoding="utf-8")
    else:
        origin = folder / "chat_template.jinja"
        source = origin.read_text(encoding="utf-8") if p.is_dir() and origin.is_file() \
            else None
        if source is None:
            origin, source = cfg_file, _config_template(config)
    template = None
    if source is not None:
        template = ChatTemplate(source, str(origin), bos_token=_special(config.get("bos_token")),
                                eos_token=_special(config.get("eos_token")))
    return HFTokenizer(tok, file, hashlib.sha256(data).hexdigest(), template)
