"""The emulated server's response bytes: streamed events and whole bodies.

Token ``i`` of an answer is word ``i mod 64`` of the emulated model's words
(:data:`~tokenmark.engines.emulated.OUTPUT_WORDS`, the first without a leading space), so
the built-in tokenizer reads exactly one token per event, and its id is that word's id
in the built-in tokenizer. The shapes follow
vLLM's OpenAI server:

- completions: ``{"object": "text_completion", "choices": [{"text": ...}]}`` per token;
  chat: a first event with ``delta.role`` and an empty ``content``, then one event per
  token with ``delta.content``, or, for a reasoning model's reasoning tokens,
  ``delta.reasoning_content`` (DeepSeek-R1 style) or ``delta.reasoning`` (gpt-oss
  style), as vLLM's reasoning parsers stream them;
- the last token's event carries ``finish_reason`` (``length`` at ``max_tokens``,
  ``stop`` for an earlier end);
- with ``return_token_ids`` (vLLM >= 0.10.2: ``ChatCompletionRequest`` /
  ``CompletionRequest.return_token_ids`` in ``vllm/entrypoints/openai/protocol.py``,
  vllm-project/vllm commit ec3b890c: "token_ids contains the delta tokens for each
  chunk"), each event's choice carries ``"token_ids": [id]`` and a whole body's choice
  the list of all of them. The prompt's ids (vLLM's ``prompt_token_ids``) are not
  returned;
- ``usage`` counts image tokens in ``prompt_tokens`` and reports them apart as
  ``prompt_tokens_details.image_tokens``, and reasoning tokens in ``completion_tokens``
  and apart as ``completion_tokens_details.reasoning_tokens`` (OpenAI's field).

Cost: the events of a (kind, reasoning field, token-id) choice are rendered once; a span
of ``m`` tokens is at most a few slices of a pre-joined 64-event cycle, so a write costs
the same whatever the number of tokens it carries.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache

from tokenmark.engines.emulated import (
    OUTPUT_CYCLE,
    OUTPUT_WORDS,
    OutputIds,
    cycle_slice,
    output_text,
)
from tokenmark.servers.http_base import maybe_chunk
from tokenmark.servers.render import CREATED, prologue

__all__ = ["EmulatedBody", "full_body", "usage_event", "usage_object"]

_CYCLE = OUTPUT_CYCLE
#: Token 0's text, then the text of every later token ``i`` at ``1 + i mod 64``.
_WORDS = (OUTPUT_WORDS[0], *(" " + w for w in OUTPUT_WORDS))
_IDS = OutputIds(_CYCLE)


@dataclass(frozen=True, slots=True)
class _Table:
    """The 65 framed events of one field (token 0, then words 1..64), with and
    without ``finish_reason``, and the 64 later ones joined into a cycle."""

    tokens: tuple[bytes, ...]
    finals: tuple[bytes, ...]
    cycle: bytes
    offs: tuple[int, ...]

    def event(self, i: int, last: bool) -> bytes:
        j = 0 if i == 0 else 1 + i % _CYCLE
        return self.finals[j] if last else self.tokens[j]

    def run(self, i: int, m: int) -> bytes:
        """Events of tokens ``i .. i + m - 1`` (``i >= 1``, none of them the last)."""
        return cycle_slice(self.cycle, self.offs, i % _CYCLE, m)


@lru_cache(maxsize=64)
def _table(chat: bool, model: str, include_usage: bool, field: str, ids: bool,
           finish: str, sep: bytes, chunked: bool) -> _Table:
    usage_tail: dict[str, object] = {"usage": None} if include_usage else {}
    if chat:
        base: dict[str, object] = {"id": "chatcmpl-emulated",
                                   "object": "chat.completion.chunk", "created": CREATED,
                                   "model": model}
    else:
        base = {"id": "cmpl-emulated", "object": "text_completion", "created": CREATED,
                "model": model}

    def event(k: int, last: bool) -> bytes:
        text = _WORDS[k]
        choice: dict[str, object] = {"index": 0}
        if chat:
            choice["delta"] = {field: text}
        else:
            choice["text"] = text
        choice["logprobs"] = None
        choice["finish_reason"] = finish if last else None
        if not chat:
            choice["stop_reason"] = None
        if ids:
            choice["token_ids"] = [_IDS[(k - 1) % _CYCLE] if k else _IDS[0]]
        obj = {**base, "choices": [choice], **usage_tail}
        return maybe_chunk(b"data: " + json.dumps(obj, separators=(",", ":")).encode() + sep,
                           chunked)

    tokens = tuple(event(k, False) for k in range(_CYCLE + 1))
    finals = tuple(event(k, True) for k in range(_CYCLE + 1))
    offs = [0]
    for t in tokens[1:]:
        offs.append(offs[-1] + len(t))
    return _Table(tokens, finals, b"".join(tokens[1:]), tuple(offs))


class EmulatedBody:
    """One streamed answer of ``n`` tokens, the first ``reasoning`` of them reasoning
    (a :class:`~tokenmark.servers.faults.StreamBody` for
    :class:`~tokenmark.servers.faults.OutStream`)."""

    __slots__ = ("_a", "_r", "chunked", "done", "prologue", "reasoning", "sep")

    def __init__(self, *, chat: bool, model: str, include_usage: bool, finish: str,
                 reasoning: int = 0, reasoning_field: str = "", ids: bool = False,
                 sep: bytes = b"\n\n", chunked: bool = True) -> None:
        answer_field = "content" if chat else "text"
        self._a = _table(chat, model, include_usage, answer_field, ids, finish, sep, chunked)
        self.reasoning = reasoning if chat and reasoning_field else 0
        self._r = (_table(chat, model, include_usage, reasoning_field, ids, finish, sep,
                          chunked) if self.reasoning else self._a)
        self.prologue = prologue(chat, model, include_usage, sep, chunked,
                                 cid="chatcmpl-emulated")
        self.done = maybe_chunk(b"data: [DONE]" + sep, chunked) + (b"0\r\n\r\n" if chunked
                                                                   else b"")
        self.sep = sep
        self.chunked = chunked

    def span(self, k: int, end: int, n: int) -> bytes:
        """The framed events of tokens ``k .. end - 1`` of the ``n``-token answer."""
        r = self.reasoning
        if end - k == 1:
            return (self._r if k < r else self._a).event(k, k == n - 1)
        parts: list[bytes] = []
        i = k
        while i < end:
            tab, stop = (self._r, min(end, r)) if i < r else (self._a, end)
            if i == 0:
                parts.append(tab.event(0, n == 1))
                i = 1
                if i >= stop:
                    continue
            last = stop == n
            body_end = stop - 1 if last else stop
            if body_end > i:
                parts.append(tab.run(i, body_end - i))
            if last:
                parts.append(tab.event(n - 1, True))
            i = stop
        return b"".join(parts)


def usage_object(prompt: int, completion: int, *, image_tokens: int = 0,
                 reasoning: int = -1) -> dict[str, object]:
    """The ``usage`` of an answer (details only where they apply; ``reasoning`` < 0:
    not a reasoning answer)."""
    u: dict[str, object] = {"prompt_tokens": prompt, "total_tokens": prompt + completion,
                            "completion_tokens": completion}
    if image_tokens:
        u["prompt_tokens_details"] = {"image_tokens": image_tokens}
    if reasoning >= 0:
        u["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    return u


def usage_event(chat: bool, model: str, usage: dict[str, object], sep: bytes = b"\n\n",
                chunked: bool = True) -> bytes:
    """The final streamed event that carries ``usage`` (empty ``choices``)."""
    obj: dict[str, object] = {
           "id": "chatcmpl-emulated" if chat else "cmpl-emulated",
           "object": "chat.completion.chunk" if chat else "text_completion",
           "created": CREATED, "model": model, "choices": [], "usage": usage}
    return maybe_chunk(b"data: " + json.dumps(obj, separators=(",", ":")).encode() + sep,
                       chunked)


def full_body(*, chat: bool, model: str, reasoning: int, answer: int, reasoning_field: str,
              finish: str, usage: dict[str, object], ids: bool) -> bytes:
    """A non-streamed answer: ``reasoning`` tokens (chat: in the message's reasoning
    field) then ``answer`` tokens."""
    n = reasoning + answer
    choice: dict[str, object] = {"index": 0}
    if chat:
        msg: dict[str, object] = {"role": "assistant", "content": output_text(reasoning, n)}
        if reasoning_field:
            msg[reasoning_field] = output_text(0, reasoning) if reasoning else None
        choice["message"] = msg
    else:
        choice["text"] = output_text(0, n)
    choice["logprobs"] = None
    choice["finish_reason"] = finish
    if ids:
        choice["token_ids"] = list(OutputIds(n))
    obj: dict[str, object] = {
           "id": "chatcmpl-emulated" if chat else "cmpl-emulated",
           "object": "chat.completion" if chat else "text_completion", "created": CREATED,
           "model": model, "choices": [choice], "usage": usage}
    return json.dumps(obj, separators=(",", ":")).encode()
