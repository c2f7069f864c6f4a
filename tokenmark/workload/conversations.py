"""Multi-turn conversations: each user turn is one request that replays the history.

How later turns depend on earlier answers: they replay the *dataset's own* assistant
turns, not the answers the system under test gave. Every turn is then a complete,
independent request (system prompt, earlier user and assistant messages, this user
message) that is identical on every run and every machine, which is what a benchmark
needs to be reproducible; feeding back live answers would make each run's prompts
depend on the model's sampling. Consecutive turns of one conversation share their whole
history, so they exercise prefix caching as a real chat does: turn *k*'s
``prefix_tokens`` is the length of the history it shares with turn *k-1*'s request plus
that turn's answer, and its ``prefix_group`` is the conversation.

:func:`turn_rows` does this for conversations read from files (ShareGPT);
:class:`ConversationDataset` makes synthetic ones of exact lengths.
"""

from __future__ import annotations

import functools
import hashlib
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from tokenmark.dataset import LengthDistribution, draw_ids
from tokenmark.errors import DatasetError
from tokenmark.mlperf.settings import derive_seed
from tokenmark.records import Message, Sample
from tokenmark.tokenizer import BuiltinTokenizer, VocabularyTokenizer, exact_text
from tokenmark.workload.table import Row, message_text

__all__ = ["ConversationDataset", "turn_rows"]

_CACHE_SAMPLES = 4096


def turn_rows(messages: Sequence[Message], conversation: int, *,
              first_only: bool = False) -> list[Row]:
    """One :class:`Row` per user message: the history before it plus it, with the next
    assistant message (if any) as the reference answer. ``first_only`` keeps only the
    first user turn (the vLLM/ShareGPT single-turn convention)."""
    rows: list[Row] = []
    for k, m in enumerate(messages):
        if m.role != "user":
            continue
        nxt = messages[k + 1] if k + 1 < len(messages) else None
        answer = nxt.content if nxt is not None and nxt.role == "assistant" else None
        history = tuple(messages[: k + 1])
        turn = len(rows)
        rows.append(Row(messages=history, reference_text=answer,
                        images=sum(len(x.images) for x in history),
                        conversation=-1 if first_only else conversation, turn=turn,
                        prefix_group=conversation if turn and not first_only else -1))
        if first_only:
            break
    return rows


class ConversationDataset:
    """``conversations`` synthetic chats; one sample per user turn, in conversation order.

    Turns per conversation come from ``turns`` and lengths from ``input_lengths`` (each
    user message) and ``output_lengths`` (each answer, which is both that turn's
    ``max_tokens`` and the replayed assistant message's length), all from the stream
    ``derive_seed(seed, "conversation/lengths")``; the words of each message from its own
    stream (``conversation/{c}/{role}/{k}``). An optional system prompt of
    ``system_tokens`` tokens, the same for every conversation, opens each one.
    """

    def __init__(self, conversations: int, turns: LengthDistribution,
                 input_lengths: LengthDistribution, output_lengths: LengthDistribution, *,
                 seed: int = 0, tokenizer: VocabularyTokenizer | None = None,
                 system_tokens: int = 0, max_output_tokens: int | None = None) -> None:
        if conversations <= 0 or system_tokens < 0:
            raise DatasetError(
                f"a conversation dataset needs at least one conversation and a system "
                f"prompt of 0 or more tokens (got {conversations} and {system_tokens})")
        self._tok: VocabularyTokenizer = tokenizer or BuiltinTokenizer()
        self._seed = seed
        self._spec = (conversations, turns, input_lengths, output_lengths, system_tokens)
        rng = np.random.default_rng(derive_seed(seed, "conversation/lengths"))
        per = turns.draw(rng, conversations)
        total = int(per.sum())
        self._user = input_lengths.draw(rng, total)
        out = output_lengths.draw(rng, total)
        self._answer = np.minimum(out, max_output_tokens) if max_output_tokens else out
        self._conv = np.repeat(np.arange(conversations, dtype=np.int64), per)
        starts = np.concatenate(([0], np.cumsum(per)[:-1])).astype(np.int64)
        self._turn = np.arange(total, dtype=np.int64) - starts[self._conv]
        self._system = system_tokens
        # input tokens of turn k = system + all earlier user and answer turns + this user
        self._in = self._history(starts) + system_tokens
        self._cache: OrderedDict[int, Sample] = OrderedDict()

    def _history(self, starts: np.ndarray) -> np.ndarray:
        both = self._user + self._answer
        cum = np.cumsum(both)
        base = (cum - both)[starts][self._conv]  # total before the conversation began
        return np.asarray((cum - both - base) + self._user, dtype=np.int64)

    @property
    def name(self) -> str:
        c, t, i, o, s = self._spec
        return (f"conversations(n={c}, turns={t}, input={i}, output={o}, system={s}, "
                f"seed={self._seed})")

    @property
    def fingerprint(self) -> str:
        h = hashlib.sha256(self.name.encode())
        h.update(self._tok.fingerprint.encode())
        for a in (self._user, self._answer, self._conv):
            h.update(a.tobytes())
        return h.hexdigest()[:16]

    def describe(self) -> dict[str, object]:
        return {"dataset": self.name, "fingerprint": self.fingerprint, "samples": len(self),
                "tokenizer": self._tok.name, "tokenizer_fingerprint": self._tok.fingerprint,
                "chat_template": False, "conversations": self._spec[0],
                "replayed_answers": "dataset"}

    def __len__(self) -> int:
        return int(self._user.shape[0])

    @property
    def input_token_counts(self) -> np.ndarray:
        return self._in

    @property
    def output_token_counts(self) -> np.ndarray:
        return self._answer

    def _text(self, name: str, n: int) -> str:
        rng = np.random.default_rng(derive_seed(self._seed, name))
        return exact_text(self._tok, draw_ids(self._tok, rng, n))[0]

    def _make(self, index: int) -> tuple[str, tuple[int, ...] | None, tuple[Message, ...]]:
        c = int(self._conv[index])
        first = index - int(self._turn[index])
        msgs: list[Message] = []
        if self._system:
            msgs.append(Message("system", self._text("conversation/system", self._system)))
        for j in range(first, index + 1):
            k = j - first
            msgs.append(Message("user", self._text(f"conversation/{c}/user/{k}",
                                                   int(self._user[j]))))
            if j < index:
                msgs.append(Message("assistant", self._text(
                    f"conversation/{c}/assistant/{k}", int(self._answer[j]))))
        return message_text(msgs), None, tuple(msgs)

    def sample(self, index: int) -> Sample:
        cached = self._cache.get(index)
        if cached is not None:
            self._cache.move_to_end(index)
            return cached
        turn = int(self._turn[index])
        n_in = int(self._in[index])
        make = functools.partial(self._make, index)
        if not isinstance(self._tok, BuiltinTokenizer):  # count the real text
            text, _, msgs = make()
            n_in = self._tok.count(text)
            make = functools.partial(_ready, text, msgs)
        s = Sample(index, None, n_in, int(self._answer[index]), make_chat=make,
                   conversation=int(self._conv[index]), turn=turn,
                   prefix_group=int(self._conv[index]) if turn else -1,
                   prefix_tokens=n_in - int(self._user[index]) if turn else 0)
        self._cache[index] = s
        if len(self._cache) > _CACHE_SAMPLES:
            self._cache.popitem(last=False)
        return s


def _ready(text: str, msgs: tuple[Message, ...]
           ) -> tuple[str, tuple[int, ...] | None, tuple[Message, ...]]:
    return text, None, msgs
