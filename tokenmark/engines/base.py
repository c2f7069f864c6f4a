"""The engine contract: submit a request, stream its new token ids.

An :class:`Engine` owns a model and its tokenizer. :meth:`Engine.generate` is an async
iterator of chunks (lists of new token ids, usually one each) for one request, ending
when the request is done: ``max_tokens`` reached, or the end-of-sequence token generated
(that token is the last id yielded, as vLLM and the MLPerf harnesses include it) unless
``ignore_eos``. Greedy decoding (``temperature`` 0) is deterministic; an engine that
cannot sample refuses other temperatures with :class:`~tokenmark.errors.ConfigError`.

Both hosts use only this: :class:`~tokenmark.adapters.engine_sut.EngineSUT` (in
process, reporting ids to the load generator) and
:class:`~tokenmark.servers.engine_http.EngineHTTPServer` (the same engine behind an
OpenAI-compatible HTTP front). The emulated server can host a timing-model engine the
same way.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Protocol

__all__ = ["Engine", "GenerationRequest"]


@dataclass(frozen=True, slots=True)
class GenerationRequest:
    prompt_ids: tuple[int, ...]
    max_tokens: int
    ignore_eos: bool = False
    temperature: float = 0.0


class Engine(Protocol):
    @property
    def name(self) -> str:
        """The model name served (``/v1/models``)."""
        ...

    @property
    def eos_token_id(self) -> int | None: ...

    def encode(self, text: str) -> list[int]:
        """Prompt text to ids (with the model's special tokens, e.g. BOS)."""
        ...

    def chat_prompt(self, messages: Sequence[dict[str, object]]) -> list[int]:
        """Chat messages to prompt ids (the model's chat template)."""
        ...

    def decode(self, ids: Sequence[int]) -> str:
        """Output ids to text, special tokens skipped."""
        ...

    def generate(self, request: GenerationRequest) -> AsyncIterator[list[int]]: ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...
