"""A real transformer on the CPU: Hugging Face ``transformers`` with ``torch``.

:class:`HFEngine` loads a causal language model and its tokenizer from a local folder
(never from a hub: ``local_files_only``), then decodes one step at a time with the KV
cache in one worker thread, handing each new token to the event loop as it is made, so
streams are real: the first token arrives after the prefill, the others one decode step
apart. Requests run one after another (a lock), as ``transformers serve`` runs them
without continuous batching; that is enough for correctness tests and small demos.

Greedy decoding only (argmax of the last logits; ties go to the lowest id, as
``torch.argmax`` does); ``max_tokens`` is honoured exactly; generation stops after the
EOS token (included in the ids) unless the request says ``ignore_eos``.
``tests/fixtures/tinymodel.py`` builds a tiny Llama for it locally; the ``hf-engine``
extra installs ``torch`` and ``transformers``.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from tokenmark.engines.base import GenerationRequest
from tokenmark.errors import ConfigError

__all__ = ["HFEngine"]

_DONE = object()


class HFEngine:
    def __init__(self, model_dir: Path | str, *, name: str = "", threads: int = 2) -> None:
        try:
            import torch
            import transformers
        except ImportError:
            raise ConfigError('the hf engine needs torch and transformers: pip install '
                              '"tokenmark[hf-engine]" (torch==2.13.0 from the local wheel)'
                              ) from None
        path = Path(model_dir)
        if not (path / "config.json").exists():
            raise ConfigError(f"{path} is not a Hugging Face model folder (no config.json)")
        torch.set_num_threads(threads)
        self._torch = torch
        self.tokenizer: Any = transformers.AutoTokenizer.from_pretrained(
            str(path), local_files_only=True)
        self.model: Any = transformers.AutoModelForCausalLM.from_pretrained(
            str(path), local_files_only=True)
        self.model.requires_grad_(False)
        self._name = name or path.name
        self._lock = threading.Lock()
        # transformers 5.x renamed the KV-cache argument and output field to ``cache``
        params = inspect.signature(self.model.forward).parameters
        self._cache_arg = "cache" if "cache" in params else "past_key_values"

    @property
    def name(self) -> str:
        return self._name

    @property
    def eos_token_id(self) -> int | None:
        eos = self.tokenizer.eos_token_id
        return int(eos) if eos is not None else None

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text))

    def chat_prompt(self, messages: Sequence[dict[str, object]]) -> list[int]:
        out = self.tokenizer.apply_chat_template(list(messages), add_generation_prompt=True,
                                                 tokenize=True)
        if isinstance(out, dict) or hasattr(out, "keys"):
            out = out["input_ids"]
        return [int(x) for x in out]

    def decode(self, ids: Sequence[int]) -> str:
        return str(self.tokenizer.decode(list(ids), skip_special_tokens=True))

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    async def generate(self, request: GenerationRequest) -> AsyncIterator[list[int]]:
        if request.temperature not in (0, 0.0):
            raise ConfigError("the hf engine decodes greedily; use temperature 0")
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[object] = asyncio.Queue()
        stop = threading.Event()

        def put(item: object) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, item)

        thread = threading.Thread(target=self._run, args=(request, put, stop), daemon=True)
        thread.start()
        try:
            while True:
                item = await queue.get()
                if item is _DONE:
                    break
                if isinstance(item, BaseException):
                    raise item
                yield [item]  # type: ignore[list-item]
        finally:
            stop.set()

    def _run(self, req: GenerationRequest, put: Any, stop: threading.Event) -> None:
        torch = self._torch
        eos = self.eos_token_id
        try:
            with self._lock, torch.inference_mode():
                ids = torch.tensor([list(req.prompt_ids)], dtype=torch.long)
                past = None
                for _ in range(req.max_tokens):
                    if stop.is_set():
                        break
                    out = self.model(input_ids=ids, use_cache=True, **{self._cache_arg: past})
                    past = getattr(out, self._cache_arg)
                    nxt = int(torch.argmax(out.logits[0, -1]).item())
                    put(nxt)
                    if nxt == eos and not req.ignore_eos:
                        break
                    ids = torch.tensor([[nxt]], dtype=torch.long)
        except Exception as exc:  # reported to the awaiting coroutine
            put(exc)
        put(_DONE)
