"""Pre-rendered OpenAI-compatible response bytes for :mod:`tokenmark.servers.exact`.

Everything a response contains except the ``usage`` numbers is rendered once per
(API kind, output length) and cached, so serving a request costs one dictionary lookup
and one ``write`` however many tokens it streams; with zero delays the server is never
the bottleneck of a client benchmark.

The shapes follow vLLM's (the most used OpenAI-compatible server):

- completions: ``{"object": "text_completion", "choices": [{"text": ...}]}`` per token;
- chat: a first event with ``delta.role`` and an empty ``content`` (it carries no token,
  so a client that takes it for the first token is caught), then ``delta.content`` per
  token;
- the last token's event carries ``finish_reason: "length"``; with
  ``stream_options.include_usage`` every event has ``"usage": null`` and a final event
  with empty ``choices`` carries the counts (``prompt_tokens_details.cached_tokens``
  when the server is told to report cached tokens); then ``data: [DONE]``.

Token texts are words of tokenmark's built-in tokenizer, so the built-in tokenizer
counts exactly one token per streamed event.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from tokenmark import __version__
from tokenmark.tokenizer import BuiltinTokenizer

__all__ = [
    "ADVERSARIAL",
    "CHUNK_END",
    "HEAD_CLOSE",
    "HEAD_SSE",
    "CyclicStreamBody",
    "StreamBody",
    "adversarial_texts",
    "chunk",
    "json_response",
    "prologue",
    "render_cyclic",
    "render_full",
    "render_stream",
    "token_words",
]

_WORDS = BuiltinTokenizer().words[100:164]  # 64 distinct one-token words
CREATED = 1_700_000_000

#: tokenmark's servers name themselves so (the client then knows that each event carries
#: exactly one token: ``tokenmark.adapters.openai_http.ONE_PER_EVENT``).
SERVER_HEADER = b"server: tokenmark/%s (exact)\r\n" % __version__.encode()
HEAD_SSE = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
            b"cache-control: no-cache\r\n" + SERVER_HEADER
            + b"transfer-encoding: chunked\r\n\r\n")
#: A close-delimited stream (no ``transfer-encoding``): the body ends when the server
#: closes the connection, as HTTP/1.0-style servers do.
HEAD_CLOSE = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n" + SERVER_HEADER
              + b"connection: close\r\n\r\n")
CHUNK_END = b"0\r\n\r\n"


def token_words(n: int) -> list[str]:
    """The texts of ``n`` streamed tokens (the first without a leading space)."""
    return [(_WORDS[k % 64] if k == 0 else " " + _WORDS[k % 64]) for k in range(n)]


def chunk(data: bytes) -> bytes:
    """``data`` as one HTTP/1.1 chunk."""
    return b"%x\r\n%s\r\n" % (len(data), data)


def _dumps(obj: object) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


@dataclass(frozen=True, slots=True)
class StreamBody:
    """One streamed response, pre-rendered and framed.

    ``prologue`` goes out with the headers (chat's role event), ``tokens[k]`` when token
    ``k`` is due, and the epilogue (usage, ``[DONE]``, chunk terminator) right after the
    last token; ``usage_event`` renders the one part that depends on the request.
    """

    prologue: bytes
    tokens: tuple[bytes, ...]
    done: bytes  # "data: [DONE]" plus the terminating chunk, when chunked
    chat: bool
    model: str
    sep: bytes
    chunked: bool

    def usage_event(self, prompt: int, completion: int, cached: int,
                    reasoning: int = 0) -> bytes:
        """The final usage event (a bytes template: no JSON encoding per request)."""
        details = b',"prompt_tokens_details":{"cached_tokens":%d}' % cached if cached >= 0 else b""
        if reasoning:
            details += b',"completion_tokens_details":{"reasoning_tokens":%d}' % reasoning
        obj = (b'{"id":"%s","object":"%s","created":%d,"model":%s,"choices":[],'
               b'"usage":{"prompt_tokens":%d,"total_tokens":%d,"completion_tokens":%d%s}}'
               % (b"chatcmpl-exact" if self.chat else b"cmpl-exact",
                  b"chat.completion.chunk" if self.chat else b"text_completion", CREATED,
                  self.model_json, prompt, prompt + completion, completion, details))
        return _frame(b"data: " + obj + self.sep, self.chunked)

    @property
    def model_json(self) -> bytes:
        return json.dumps(self.model).encode()

    def span(self, k: int, end: int, n: int) -> bytes:
        """The framed events of tokens ``k .. end - 1``."""
        return self.tokens[k] if end - k == 1 else b"".join(self.tokens[k:end])


def _frame(event: bytes, chunked: bool) -> bytes:
    return chunk(event) if chunked else event


def _event_maker(chat: bool, model: str, include_usage: bool, sep: bytes, chunked: bool
                 ) -> Callable[[str, bool, bool], bytes]:
    """A function (text, last, reasoning) -> one framed token event."""
    usage_tail: dict[str, object] = {"usage": None} if include_usage else {}
    if chat:
        base = {"id": "chatcmpl-exact", "object": "chat.completion.chunk",
                "created": CREATED, "model": model}

        def event(text: str, last: bool, reasoning: bool) -> bytes:
            delta = {"reasoning_content" if reasoning else "content": text}
            obj = {**base, "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                        "finish_reason": "length" if last else None}],
                   **usage_tail}
            return _frame(b"data: " + _dumps(obj) + sep, chunked)

        return event
    cbase = {"id": "cmpl-exact", "object": "text_completion", "created": CREATED,
             "model": model}

    def cevent(text: str, last: bool, reasoning: bool) -> bytes:
        obj = {**cbase, "choices": [{"index": 0, "text": text, "logprobs": None,
                                     "finish_reason": "length" if last else None,
                                     "stop_reason": None}], **usage_tail}
        return _frame(b"data: " + _dumps(obj) + sep, chunked)

    return cevent


def prologue(chat: bool, model: str, include_usage: bool, sep: bytes, chunked: bool,
             cid: str = "chatcmpl-exact") -> bytes:
    """Chat's first event (the assistant role, no token), framed; nothing for
    completions. ``cid``: the response id."""
    if not chat:
        return b""
    obj = {"id": cid, "object": "chat.completion.chunk", "created": CREATED,
           "model": model, "choices": [{"index": 0, "delta": {"role": "assistant",
                                                              "content": ""},
                                        "logprobs": None, "finish_reason": None}],
           **({"usage": None} if include_usage else {})}
    return _frame(b"data: " + _dumps(obj) + sep, chunked)


def _done(sep: bytes, chunked: bool) -> bytes:
    return _frame(b"data: [DONE]" + sep, chunked) + (CHUNK_END if chunked else b"")


@lru_cache(maxsize=256)
def render_stream(
    chat: bool, n: int, model: str, include_usage: bool, sep: bytes = b"\n\n",
    chunked: bool = True, reasoning: int = 0, texts: tuple[str, ...] | None = None,
) -> StreamBody:
    """The events of a streamed response of ``n`` tokens (cached).

    ``reasoning``: chat's first tokens come as ``delta.reasoning_content``, as reasoning
    models stream them (vLLM's reasoning parsers), the rest as ``delta.content``.
    ``texts``: the tokens' texts (default: :func:`token_words`).
    """
    event = _event_maker(chat, model, include_usage, sep, chunked)
    first = prologue(chat, model, include_usage, sep, chunked)
    words = token_words(n) if texts is None else texts
    tokens = tuple(event(w, k == n - 1, chat and k < reasoning) for k, w in enumerate(words))
    return StreamBody(first, tokens, _done(sep, chunked), chat, model, sep, chunked)


#: Texts that fooled a byte scanner, and what no text may break: first letters that
#: look like keys' ("else", "return"), key names, SSE framing, quotes, escapes.
ADVERSARIAL = ("else", " each", "end", "return", " reasoning", "error", '"error": {',
               "content", '"text": "', "data: [DONE]\n\n", "data:", "\n\n", "\r\n\r\n",
               "\r", ": ping", "[DONE]", '"', "\\", "\\u0041", "\u00e9", "\u8bed",
               "\U0001f642", "\u2028", "{", "}")


def adversarial_texts(n: int, seed: int) -> tuple[str, ...]:
    """``n`` token texts, each one piece of :data:`ADVERSARIAL` or random Unicode (no
    surrogates), drawn from ``seed``: every first letter, every escape JSON has."""
    import random

    rng = random.Random(seed)
    out = []
    for _ in range(n):
        if rng.random() < 0.5:
            out.append(rng.choice(ADVERSARIAL))
        else:
            k = rng.randint(1, 4)
            chars: list[str] = []
            while len(chars) < k:
                c = rng.randint(32, 0x2FFFF) if rng.random() < 0.3 else rng.randint(32, 126)
                if not 0xD800 <= c <= 0xDFFF:
                    chars.append(chr(c))
            out.append("".join(chars))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class CyclicStreamBody(StreamBody):
    """A streamed response of any length from 2 x 65 pre-rendered events: token ``k`` is
    word ``k mod 64`` (:func:`token_words`), the last one carries ``finish_reason``.
    ``tokens`` holds the first token then the 64 words; ``finals`` the same, last."""

    finals: tuple[bytes, ...] = ()

    def span(self, k: int, end: int, n: int) -> bytes:
        tokens, finals = self.tokens, self.finals
        out = []
        for i in range(k, end):
            j = 0 if i == 0 else 1 + i % 64
            out.append(finals[j] if i == n - 1 else tokens[j])
        return b"".join(out)


@lru_cache(maxsize=64)
def render_cyclic(chat: bool, model: str, include_usage: bool, sep: bytes = b"\n\n",
                  chunked: bool = True) -> CyclicStreamBody:
    """Events for streamed answers of every length, in constant memory (the emulated
    server's answers are as long as a request asks)."""
    event = _event_maker(chat, model, include_usage, sep, chunked)
    texts = [_WORDS[0], *(" " + w for w in _WORDS)]
    return CyclicStreamBody(prologue(chat, model, include_usage, sep, chunked),
                            tuple(event(t, False, False) for t in texts),
                            _done(sep, chunked), chat, model, sep, chunked,
                            tuple(event(t, True, False) for t in texts))


@lru_cache(maxsize=256)
def render_full(chat: bool, n: int, model: str) -> tuple[bytes, bytes]:
    """A non-streamed body of ``n`` tokens, split around its ``usage`` value."""
    text = "".join(token_words(n))
    if chat:
        obj: dict[str, object] = {
            "id": "chatcmpl-exact", "object": "chat.completion", "created": CREATED,
            "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                         "logprobs": None, "finish_reason": "length"}],
        }
    else:
        obj = {
            "id": "cmpl-exact", "object": "text_completion", "created": CREATED,
            "model": model,
            "choices": [{"index": 0, "text": text, "logprobs": None,
                         "finish_reason": "length"}],
        }
    body = _dumps(obj)
    return body[:-1] + b',"usage":', b"}"


def json_response(status: int, obj: object, reason: str = "") -> bytes:
    """A complete JSON response with ``Content-Length`` (keeps the connection open)."""
    body = _dumps(obj)
    reason = reason or {200: "OK", 400: "Bad Request", 401: "Unauthorized",
                        404: "Not Found", 429: "Too Many Requests",
                        500: "Internal Server Error", 503: "Service Unavailable"}.get(
                            status, "Error")
    return (b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\n%scontent-length: %d\r\n"
            b"\r\n" % (status, reason.encode(), SERVER_HEADER, len(body))) + body
