"""Datasets read from files: rows in, exact counts and lazily built samples out.

An edge reader (:mod:`tokenmark.sources`) turns each record of a file into a
:class:`Row` (plain prompt text, pre-tokenized ids, or chat messages with images; an
output length or a reference answer) and can read any row again by index.
:class:`TableDataset` scans every row once, at load, to count its tokens with the
dataset's tokenizer, check it against the model's context and fix its output length,
keeping only a few integers per row (88 bytes); prompts stay in the file (or the
reader's one columnar copy) and are rebuilt when a system under test reads them (the
last 4096 built samples are kept). So a multi-GB file is never held twice, and a bad
row is reported by file and line before anything runs. The file must not change while
a dataset made from it is in use: rows are read again by their byte offsets.

Output length of each row, first rule that applies: an ``output_lengths`` distribution
the user gave (drawn from ``derive_seed(seed, "table/output-lengths")``); the row's own
output length; the length of its reference answer (``use_reference``). Every length is
capped by ``max_output_tokens``. ``expected_output_tokens`` keeps the reference length.

Context: a prompt that leaves no room for one output token in ``max_context`` is an
error naming its line (or is skipped with ``skip_long``, and counted); an output length
that would overrun the context is shortened to fit, as a server would refuse it.
"""

from __future__ import annotations

import functools
import hashlib
from array import array
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from tokenmark.dataset import LengthDistribution
from tokenmark.errors import DatasetError
from tokenmark.mlperf.settings import derive_seed
from tokenmark.records import Message, Sample
from tokenmark.tokenizer import ChatTemplater, Tokenizer

__all__ = ["Row", "RowReader", "TableDataset", "TableOptions", "message_text"]

_CACHE_SAMPLES = 4096


@dataclass(frozen=True, slots=True)
class Row:
    """One request as a file gives it. Exactly one of prompt, token_ids, messages is the
    request (``prompt`` may accompany ``token_ids`` as their text)."""

    prompt: str | None = None
    token_ids: tuple[int, ...] | None = None
    messages: tuple[Message, ...] | None = None
    output_tokens: int | None = None  # the row's own max_tokens
    reference_tokens: int | None = None  # reference answer length, when given as ids
    reference_text: str | None = None  # reference answer text, counted by the tokenizer
    images: int = 0
    image_bytes: int = 0
    conversation: int = -1
    turn: int = 0
    prefix_group: int = -1
    prefix_tokens: int = 0


class RowReader(Protocol):
    """What an edge reader offers: the rows in order once, and any row again."""

    @property
    def source(self) -> str:
        """The file, as errors and results name it."""
        ...

    @property
    def fingerprint(self) -> str:
        """A hash of the file's content (and of how it was read)."""
        ...

    def scan(self) -> Iterator[tuple[Row, str]]:
        """Every row in order with where it is (``FILE line N``)."""
        ...

    def row(self, index: int) -> Row:
        """Row ``index`` (0-based, in scan order) read again."""
        ...


@dataclass(frozen=True, slots=True)
class TableOptions:
    output_lengths: LengthDistribution | None = None
    use_reference: bool = False
    max_output_tokens: int | None = None
    max_context: int | None = None
    skip_long: bool = False
    chat_template: bool = False
    seed: int = 0
    limit: int | None = None  # read at most this many rows (after skipping)

    def label(self) -> str:
        return (f"output={self.output_lengths},reference={self.use_reference},"
                f"max_out={self.max_output_tokens},context={self.max_context},"
                f"skip_long={self.skip_long},template={self.chat_template},"
                f"seed={self.seed},limit={self.limit}")


def message_text(messages: Sequence[Message]) -> str:
    """The text of chat messages without a template: their contents, blank-line joined."""
    return "\n\n".join(m.content for m in messages if m.content)


class TableDataset:
    """A :class:`~tokenmark.dataset.Dataset` over the rows of a :class:`RowReader`."""

    def __init__(self, reader: RowReader, tokenizer: Tokenizer, options: TableOptions,
                 *, name: str) -> None:
        o = options
        if o.chat_template and not (isinstance(tokenizer, ChatTemplater)
                                    and tokenizer.has_chat_template):
            raise DatasetError(
                f"a chat template was asked for, but the tokenizer {tokenizer.name!r} has "
                "none; give a model folder whose tokenizer_config.json has 'chat_template', "
                "pass a template file, or drop the chat-template option")
        self._reader = reader
        self._tok = tokenizer
        self._opt = o
        self._name = name
        self._cache: OrderedDict[int, Sample] = OrderedDict()
        self.skipped_long = 0
        self.shortened_outputs = 0
        cols: dict[str, array[int]] = {k: array("q") for k in (
            "row", "in", "out", "expected", "images", "image_bytes", "conversation", "turn",
            "group", "prefix", "chat")}
        draw_rng = np.random.default_rng(derive_seed(o.seed, "table/output-lengths"))
        for i, (row, where) in enumerate(reader.scan()):
            if o.limit is not None and len(cols["row"]) >= o.limit:
                break
            text, ids = self._text_and_ids(row, where)
            n_in = len(ids) if ids is not None else self._tok.count(text)
            drawn = int(o.output_lengths.draw(draw_rng, 1)[0]) if o.output_lengths else None
            expected = self._reference(row)
            n_out = self._output(row, drawn, expected, where)
            if o.max_context is not None:
                if n_in >= o.max_context:
                    if o.skip_long:
                        self.skipped_long += 1
                        continue
                    raise DatasetError(
                        f"{where}: the prompt is {n_in} tokens, leaving no room to answer "
                        f"in the model's context of {o.max_context} tokens; shorten or drop "
                        "that row, raise the context length, or skip such rows "
                        "(--skip-long-prompts)")
                if n_in + n_out > o.max_context:
                    n_out = o.max_context - n_in
                    self.shortened_outputs += 1
            for key, v in (("row", i), ("in", n_in), ("out", n_out), ("expected", expected),
                           ("images", row.images), ("image_bytes", row.image_bytes),
                           ("conversation", row.conversation), ("turn", row.turn),
                           ("group", row.prefix_group), ("prefix", row.prefix_tokens),
                           ("chat", int(self._messages(row) is not None))):
                cols[key].append(v)
        if not cols["row"]:
            why = (f" ({self.skipped_long} skipped as longer than the context)"
                   if self.skipped_long else "")
            raise DatasetError(f"{reader.source}: no usable rows{why}; give a file with at "
                               "least one request")
        self._cols = {k: np.frombuffer(v, dtype=np.int64).copy() for k, v in cols.items()}

    # -- per row -------------------------------------------------------------------
    def _text_and_ids(self, row: Row, where: str) -> tuple[str, tuple[int, ...] | None]:
        if row.token_ids is not None:
            if self._opt.chat_template:
                raise DatasetError(f"{where}: this row is pre-tokenized, so its template is "
                                   "already applied; drop the chat-template option")
            if not row.token_ids:
                raise DatasetError(f"{where}: the prompt's token ids are empty; give at "
                                   "least one token")
            text = row.prompt if row.prompt is not None else self._tok.decode(row.token_ids)
            return text, row.token_ids
        msgs = self._messages(row)
        if msgs is not None:
            text = self._render(msgs) if self._opt.chat_template else message_text(msgs)
        else:
            text = row.prompt or ""
        if not text.strip() and not row.images:
            raise DatasetError(f"{where}: the prompt is empty; fill it in or drop the row")
        return text, None

    def _messages(self, row: Row) -> tuple[Message, ...] | None:
        if row.messages is not None:
            return row.messages
        if self._opt.chat_template and row.prompt is not None:
            return (Message("user", row.prompt),)
        return None

    def _render(self, msgs: Sequence[Message]) -> str:
        tok = self._tok
        assert isinstance(tok, ChatTemplater)
        return tok.apply_chat_template(msgs)

    def _reference(self, row: Row) -> int:
        if row.reference_tokens is not None:
            return row.reference_tokens
        if row.reference_text is not None:
            return self._tok.count(row.reference_text)
        return -1

    def _output(self, row: Row, drawn: int | None, expected: int, where: str) -> int:
        o = self._opt
        n = drawn if drawn is not None else row.output_tokens
        if n is None and o.use_reference and expected >= 0:
            n = expected
        if n is None:
            raise DatasetError(
                f"{where}: no output length for this row; map a column of max_tokens or a "
                "reference answer, or give an output length distribution (--output-len)")
        if n < 1:
            raise DatasetError(f"{where}: the output length is {n}; it must be at least 1")
        return min(n, o.max_output_tokens) if o.max_output_tokens else n

    def _make(self, row_index: int) -> tuple[str, tuple[int, ...] | None, tuple[Message, ...]]:
        row = self._reader.row(row_index)
        where = f"{self._reader.source} row {row_index + 1}"
        text, ids = self._text_and_ids(row, where)
        msgs = self._messages(row)
        return text, ids, msgs if msgs is not None else ()

    def _make_plain(self, row_index: int) -> tuple[str, tuple[int, ...] | None]:
        row = self._reader.row(row_index)
        return self._text_and_ids(row, f"{self._reader.source} row {row_index + 1}")

    # -- the Dataset protocol ------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._name

    @property
    def tokenizer(self) -> Tokenizer:
        return self._tok

    @functools.cached_property
    def fingerprint(self) -> str:
        h = hashlib.sha256(self._reader.fingerprint.encode())
        h.update(self._tok.fingerprint.encode())
        h.update(self._opt.label().encode())
        for k in sorted(self._cols):
            h.update(self._cols[k].tobytes())
        return h.hexdigest()[:16]

    def __len__(self) -> int:
        return int(self._cols["row"].shape[0])

    @property
    def input_token_counts(self) -> np.ndarray:
        return self._cols["in"]

    @property
    def output_token_counts(self) -> np.ndarray:
        return self._cols["out"]

    def describe(self) -> dict[str, object]:
        c = self._cols
        n = len(self)
        return {
            "dataset": self._name, "fingerprint": self.fingerprint, "samples": n,
            "source": self._reader.source, "tokenizer": self._tok.name,
            "tokenizer_fingerprint": self._tok.fingerprint,
            "chat_template": self._opt.chat_template,
            "input_tokens_mean": float(c["in"].mean()), "output_tokens_mean":
            float(c["out"].mean()), "images": int(c["images"].sum()),
            "image_bytes": int(c["image_bytes"].sum()),
            "images_per_sample_max": int(c["images"].max()),
            "conversations": int(np.unique(c["conversation"][c["conversation"] >= 0]).size),
            "skipped_long_prompts": self.skipped_long,
            "shortened_outputs": self.shortened_outputs,
        }

    def sample(self, index: int) -> Sample:
        cached = self._cache.get(index)
        if cached is not None:
            self._cache.move_to_end(index)
            return cached
        c = self._cols
        row_index = int(c["row"][index])
        def col(name: str) -> int:
            return int(c[name][index])

        chat = bool(col("chat"))
        s = Sample(
            index, None, col("in"), col("out"),
            make=None if chat else functools.partial(self._make_plain, row_index),
            make_chat=functools.partial(self._make, row_index) if chat else None,
            chat_template=self._opt.chat_template and chat, images=col("images"),
            image_bytes=col("image_bytes"), conversation=col("conversation"),
            turn=col("turn"), prefix_group=col("group"), prefix_tokens=col("prefix"),
            expected_output_tokens=col("expected"))
        self._cache[index] = s
        if len(self._cache) > _CACHE_SAMPLES:
            self._cache.popitem(last=False)
        return s
