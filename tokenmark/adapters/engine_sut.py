"""A system under test over an in-process :class:`~tokenmark.engines.base.Engine`.

Each query's prompt is the sample's token ids when the dataset has them (else its text,
encoded by the engine's tokenizer); ``max_tokens`` is the sample's ``output_tokens``.
As chunks of new ids stream from the engine the SUT reports them to the load generator:
the first chunk's ids through :class:`~tokenmark.sut.TokenIdsHandle` (what LoadGen's
``FirstTokenComplete`` receives), every chunk's size through ``token``, and at the end
the whole output (ids and decoded text) with its exact count. A request the engine
fails is a ``sut_error`` record, never a crash of the run.
"""

from __future__ import annotations

import asyncio

from tokenmark.engines.base import Engine, GenerationRequest
from tokenmark.records import ErrorClass, Query, TokenSource
from tokenmark.sut import ResponseHandle, TokenIdsHandle

__all__ = ["EngineSUT"]


class EngineSUT:
    def __init__(self, engine: Engine, *, ignore_eos: bool = False) -> None:
        self.engine = engine
        self.ignore_eos = ignore_eos
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def name(self) -> str:
        return f"tokenmark-engine:{self.engine.name}"

    def describe(self) -> dict[str, str]:
        return {"engine": self.engine.name, "ignore_eos": str(self.ignore_eos).lower()}

    async def start(self) -> None:
        await self.engine.start()

    async def flush(self) -> None:
        return None

    async def stop(self) -> None:
        for t in list(self._tasks):
            t.cancel()
        await self.engine.stop()

    def issue(self, query: Query, handle: ResponseHandle) -> None:
        task = asyncio.ensure_future(self._serve(query, handle))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _serve(self, query: Query, handle: ResponseHandle) -> None:
        sample = query.sample
        try:
            prompt = sample.token_ids
            if prompt is None:
                prompt = tuple(self.engine.encode(sample.prompt))
            req = GenerationRequest(tuple(prompt), max(1, sample.output_tokens),
                                    ignore_eos=self.ignore_eos)
            out: list[int] = []
            async for chunk in self.engine.generate(req):
                if not out and isinstance(handle, TokenIdsHandle):
                    handle.first_token_ids(chunk)
                out.extend(chunk)
                handle.token(len(chunk))
            handle.complete(len(out), TokenSource.SUT, input_tokens=len(prompt),
                            token_ids=out, text=self.engine.decode(out))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a failed request is data
            handle.fail(ErrorClass.SUT_ERROR, f"{type(exc).__name__}: {exc}")
