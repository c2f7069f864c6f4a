"""The event loop a real-time run drives its clients on.

uvloop (libuv) when it is installed (a dependency of tokenmark everywhere but Windows),
else the standard library's loop; ``TOKENMARK_EVENT_LOOP=asyncio`` asks for the standard
loop, ``TOKENMARK_EVENT_LOOP=uvloop`` insists on uvloop (an error naming the fix when it
is missing). On ``tokenmark run`` beside the peers harness uvloop cut the client's CPU per
streamed token by 3-23% (``bench/cli_peers.py --variants uvloop,asyncio``, alternating
reps on a loaded 2-core machine; at 16 in flight on 2026-12-04, medians of 3 and of 4 reps
at loads of 3.7-10: 18.9 against 20.8 and 22.9 against 29.7 CPU-s per 1M tokens).

It was opt-in for a while: against ``transformers serve`` (tests/integration/test_truth.py,
hf) two runs on uvloop failed at a load of 12-14 (the length probe came back empty, then
every stream was closed by the server early), with the client code of 2026-12-03. That was
not reproduced since: the same test passed on uvloop 4 times out of 4 at loads of 0.7 to
13 (the server and the client at nice 19 beside 10 busy processes), and the HTTP client's
transport paths (chunked bodies in small reads, close-delimited bodies, EOF, a connection
closed mid-body) are tested on both loops (tests/adapters/test_loops.py).

Virtual time keeps its own loop (:func:`tokenmark.clock.run_virtual`).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from tokenmark.errors import ConfigError

__all__ = ["loop_factory", "run"]

T = TypeVar("T")

ENV = "TOKENMARK_EVENT_LOOP"


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop factory unless ``TOKENMARK_EVENT_LOOP=asyncio`` or uvloop is not
    installed; ``None`` means the standard loop."""
    want = os.environ.get(ENV, "").strip().lower()
    if want == "asyncio":
        return None
    if want not in ("", "uvloop"):
        raise ConfigError(f"{ENV}={os.environ[ENV]!r} is not an event loop tokenmark "
                          "knows: set it to uvloop or asyncio, or unset it")
    try:
        import uvloop
    except ImportError:
        if want == "uvloop":
            raise ConfigError(f"{ENV}=uvloop but uvloop is not installed: pip install "
                              "uvloop, or unset it (the standard loop)") from None
        return None
    return uvloop.new_event_loop


def run(coro: Coroutine[Any, Any, T]) -> T:
    """:func:`asyncio.run` on the loop :func:`loop_factory` names."""
    try:
        factory = loop_factory()
    except ConfigError:
        coro.close()  # never awaited: no warning on top of the error
        raise
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(coro)
