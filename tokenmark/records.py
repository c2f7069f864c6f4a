"""What a run produces: one :class:`RequestRecord` per request (per MLPerf *sample*).

All times are integer nanoseconds relative to the run's origin ``t0`` (the moment the
schedule starts; LoadGen's ``start``). A time that never happened is ``-1``.

Latencies are measured from the *scheduled* time, as LoadGen does, so a client that
sends late is charged for it; the send lag (``issued_ns - scheduled_ns``) is kept so the
tokenmark verdict can tell a late client from a slow server.

Streaming: ``chunk_ns[i]`` is when the i-th streamed chunk carrying output arrived and
``chunk_tokens[i]`` how many output tokens it carried (usually 1). The first chunk is
the first token; ITL is computed exactly from these two columns.

Reasoning models stream ``reasoning_content`` before the answer: those chunks are output
too (TTFT is the first token of either kind, as MLPerf measures DeepSeek-R1), and
``first_answer_ns`` marks the first chunk of the answer itself; ``reasoning_tokens``
counts the reasoning part of ``output_tokens`` (-1: the request reported none).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

__all__ = [
    "ErrorClass",
    "Message",
    "Phase",
    "Query",
    "RecordSink",
    "RequestRecord",
    "ResponseDetails",
    "Sample",
    "TokenSource",
]


class ErrorClass(StrEnum):
    """Why a request failed. Each class is counted separately in every summary."""

    HTTP_STATUS = "http_status"  # a non-2xx answer other than 429
    RATE_LIMITED = "http_429"
    CONNECT = "connect_error"  # connection refused or could not be made
    RESET = "connection_reset"  # reset before a response arrived
    RESET_MID_STREAM = "reset_mid_stream"
    MALFORMED = "malformed_stream"
    TRUNCATED = "truncated_stream"  # the stream ended without its terminator
    TIMEOUT_CONNECT = "timeout_connect"
    TIMEOUT_FIRST_TOKEN = "timeout_first_token"
    TIMEOUT_REQUEST = "timeout_request"
    EMPTY_RESPONSE = "empty_response"  # the answer ended without one output token
    SUT_ERROR = "sut_error"  # an in-process system under test raised or reported failure
    UNANSWERED = "unanswered"  # never completed: the run ended (Ctrl-C, crash, lost worker)
    NOT_SENT = "not_sent"  # scheduled but never sent because the run stopped first


class TokenSource(StrEnum):
    """Where an output token count came from."""

    USAGE = "usage"  # the server's ``usage`` block
    TOKENIZER = "tokenizer"  # a client-side tokenizer over the returned text
    SUT = "sut"  # reported by an in-process system under test
    CHUNKS = "chunks"  # counted streamed chunks (one token each): a fallback
    NONE = "none"  # no count: the request failed before any output


class Phase(StrEnum):
    WARMUP = "warmup"
    MEASURE = "measure"
    COOLDOWN = "cooldown"


PromptMaker = Callable[[], tuple[str, tuple[int, ...] | None]]


@dataclass(frozen=True, slots=True)
class Message:
    """One chat message as ``/v1/chat/completions`` takes it.

    ``images`` are data URLs (``data:image/png;base64,...``); they follow the text as
    OpenAI content parts, the order the MLPerf Qwen3-VL harness uses.
    """

    role: str
    content: str
    images: tuple[str, ...] = ()

    def to_openai(self) -> dict[str, object]:
        """The message as JSON-ready data: a plain string, or text and image parts."""
        if not self.images:
            return {"role": self.role, "content": self.content}
        parts: list[dict[str, object]] = []
        if self.content:
            parts.append({"type": "text", "text": self.content})
        parts.extend({"type": "image_url", "image_url": {"url": u}} for u in self.images)
        return {"role": self.role, "content": parts}


#: Builds a chat sample's prompt text, its token ids (or None) and its messages at once.
ChatMaker = Callable[[], tuple[str, tuple[int, ...] | None, tuple[Message, ...]]]


class Sample:
    """One dataset entry as the load generator sees it (immutable).

    ``prompt`` is the text sent to text-based systems; ``token_ids`` the same prompt as
    tokens when the dataset knows them exactly (made from a tokenizer, or pre-tokenized
    like MLPerf's ``tok_input``). ``output_tokens`` is the output length the sample asks
    for (``max_tokens``); in-process models use it as the exact length to generate. A
    dataset may give a ``make`` function instead of the text, so a prompt is only built
    when a system under test reads it (in-process models never do).

    Chat samples carry ``messages`` (or ``make_chat``, which builds prompt, ids and
    messages at once). Their ``prompt`` is the chat-template rendering when
    ``chat_template`` is true (``token_ids`` then encode exactly that text), otherwise the
    messages' texts joined by blank lines; ``input_tokens`` counts that text, never the
    images. The keyword-only facts describe the request without building it:

    - ``prefix_group``: samples with the same group (>= 0) begin with the same
      ``prefix_tokens`` tokens (to exercise prefix caching); -1: none;
    - ``conversation`` / ``turn``: a multi-turn conversation's id and 0-based turn. Each
      turn replays the dataset's own earlier turns (user and assistant), so every turn
      is an independent, reproducible request whose history is a shared prefix;
    - ``images`` / ``image_bytes``: how many images the messages hold and their size
      (decoded bytes, not base64);
    - ``expected_output_tokens``: the reference answer's length where the dataset has
      one (MLPerf's reference outputs), while ``output_tokens`` stays the request's
      ``max_tokens``; -1: unknown.
    """

    __slots__ = (
        "_ids", "_make", "_make_chat", "_messages", "_prompt", "chat_template",
        "conversation", "expected_output_tokens", "image_bytes", "images", "index",
        "input_tokens", "output_tokens", "prefix_group", "prefix_tokens", "turn",
    )

    def __init__(
        self,
        index: int,
        prompt: str | None,
        input_tokens: int,
        output_tokens: int,
        token_ids: tuple[int, ...] | None = None,
        *,
        make: PromptMaker | None = None,
        messages: tuple[Message, ...] | None = None,
        make_chat: ChatMaker | None = None,
        chat_template: bool = False,
        prefix_group: int = -1,
        prefix_tokens: int = 0,
        conversation: int = -1,
        turn: int = 0,
        images: int = 0,
        image_bytes: int = 0,
        expected_output_tokens: int = -1,
    ) -> None:
        if prompt is None and make is None and make_chat is None:
            raise ValueError("a Sample needs a prompt or a function that makes it")
        self.index = index
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens
        self._prompt = prompt
        self._ids = token_ids
        self._make = make
        self._messages = messages
        self._make_chat = make_chat
        self.chat_template = chat_template
        self.prefix_group = prefix_group
        self.prefix_tokens = prefix_tokens
        self.conversation = conversation
        self.turn = turn
        self.images = images
        self.image_bytes = image_bytes
        self.expected_output_tokens = expected_output_tokens

    def _build(self) -> None:
        if self._make_chat is not None:
            self._prompt, self._ids, self._messages = self._make_chat()
            self._make_chat = None
        elif self._prompt is None and self._make is not None:
            self._prompt, self._ids = self._make()
            self._make = None

    @property
    def prompt(self) -> str:
        self._build()
        assert self._prompt is not None
        return self._prompt

    @property
    def token_ids(self) -> tuple[int, ...] | None:
        self._build()
        return self._ids

    @property
    def is_chat(self) -> bool:
        """Whether the sample carries chat messages (known without building them)."""
        return self._messages is not None or self._make_chat is not None

    @property
    def messages(self) -> tuple[Message, ...] | None:
        """The chat messages, or ``None`` for a plain prompt."""
        self._build()
        return self._messages

    def openai_messages(self) -> list[dict[str, object]]:
        """``messages`` for ``/v1/chat/completions``; a plain prompt is one user turn."""
        msgs = self.messages
        if msgs is None:
            return [{"role": "user", "content": self.prompt}]
        return [m.to_openai() for m in msgs]

    def __repr__(self) -> str:
        return (f"Sample(index={self.index}, input_tokens={self.input_tokens}, "
                f"output_tokens={self.output_tokens})")


@dataclass(frozen=True, slots=True)
class Query:
    """What a system under test is asked to do: one sample, at one scheduled time.

    ``seq`` is the sample sequence number (LoadGen's ``sample_seq``), unique within a
    run; ``query_id`` groups the samples LoadGen would issue as one query (MultiStream
    issues 8, Offline issues one query of all samples).
    """

    seq: int
    query_id: int
    sample: Sample
    scheduled_ns: int


@dataclass(slots=True)
class RequestRecord:
    seq: int
    query_id: int
    sample_index: int
    scheduled_ns: int
    issued_ns: int = -1
    first_token_ns: int = -1
    done_ns: int = -1
    input_tokens: int = 0
    output_tokens: int = 0
    token_source: TokenSource = TokenSource.NONE
    chunk_ns: list[int] = field(default_factory=list)
    chunk_tokens: list[int] = field(default_factory=list)
    error: ErrorClass | None = None
    error_detail: str = ""
    phase: Phase = Phase.MEASURE
    endpoint: str = ""
    #: Output token count a second source gave, when two were available (e.g. the
    #: server's usage and the client tokenizer); -1 when only one source exists.
    alt_output_tokens: int = -1
    #: Prompt tokens the server says it served from its prefix cache (usage
    #: ``prompt_tokens_details.cached_tokens``); -1 when not reported.
    cached_input_tokens: int = -1
    #: Reasoning tokens among ``output_tokens`` (-1: none reported, not a reasoning request).
    reasoning_tokens: int = -1
    #: When the first answer (not reasoning) token arrived; -1: never, or not tracked.
    first_answer_ns: int = -1
    #: The prompt tokens the server counted (usage ``prompt_tokens``), beside the planned
    #: ``input_tokens``; -1 when not reported.
    server_input_tokens: int = -1
    #: Why the answer ended, as the server said (``length``, ``stop``, ...); "" unknown.
    finish_reason: str = ""
    #: Output tokens counted from the streamed events (see ``token_basis``); -1: not
    #: streamed.
    stream_tokens: int = -1
    #: How ``chunk_tokens`` and ``stream_tokens`` were counted: ``ids`` / ``logprobs``
    #: (the server's token ids or logprobs per event), ``events`` (one token per event,
    #: from a server known to stream that way), ``usage`` (events not known to carry
    #: one token each: ``chunk_tokens`` spread so they add up to the usage), ``chunks``
    #: (one per event assumed, nothing to check it by); "" not streamed or not told.
    token_basis: str = ""
    #: The output length the request demanded exactly (``ignore_eos``, or ``min_tokens``
    #: equal to ``max_tokens``); -1 when the server could stop earlier.
    demanded_output_tokens: int = -1

    @property
    def served_input_tokens(self) -> int:
        """The prompt's length as served: the server's count, else the planned one."""
        return self.server_input_tokens if self.server_input_tokens >= 0 else self.input_tokens

    @property
    def ok(self) -> bool:
        return self.error is None and self.done_ns >= 0

    @property
    def send_lag_ns(self) -> int:
        return self.issued_ns - self.scheduled_ns if self.issued_ns >= 0 else -1

    @property
    def answer_tokens(self) -> int:
        """Output tokens that are not reasoning (all of them when none was reported)."""
        return self.output_tokens - max(self.reasoning_tokens, 0)


@dataclass(frozen=True, slots=True)
class ResponseDetails:
    """What a system under test learned about an answer beyond its tokens and times
    (:class:`~tokenmark.sut.DetailsHandle`). A field left at its default was not given:
    a SUT may report details in several calls (at issue, at the end)."""

    finish_reason: str = ""
    stream_tokens: int = -1
    token_basis: str = ""
    demanded_output_tokens: int = -1

    def apply_to(self, rec: RequestRecord) -> None:
        """Set the fields given here on ``rec`` (those left at their defaults are not
        changed)."""
        if self.finish_reason:
            rec.finish_reason = self.finish_reason
        if self.stream_tokens >= 0:
            rec.stream_tokens = self.stream_tokens
        if self.token_basis:
            rec.token_basis = self.token_basis
        if self.demanded_output_tokens >= 0:
            rec.demanded_output_tokens = self.demanded_output_tokens


class RecordSink(Protocol):
    """Receives every finished record, in completion order."""

    def write(self, record: RequestRecord) -> None: ...

    def flush(self) -> None:
        """Make everything written so far durable against a crash of this process."""
        ...

    def close(self) -> None: ...
