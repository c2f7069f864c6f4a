"""The event loop a real-time run drives its clients on.

The standard library's loop, or uvloop (libuv) with ``TOKENMARK_EVENT_LOOP=uvloop`` when it
is installed (``pip install 'tokenmark[uvloop]'``). On ``tokenmark run`` beside the peers
harness uvloop cut the client's CPU per streamed token by 4-7% at 16 in flight and 3-6% at
64 (``bench/cli_peers.py --variants uvloop,asyncio``, 3 alternating reps at a load average
of 12-13 on 2 cores; the rest is the client's own Python). It is not the default: against
``transformers serve`` (tests/integration/test_truth.py, hf) both runs on uvloop failed on a
loaded machine (the length probe came back empty; then every stream ended early), the run
on the standard loop passed; not yet explained.
Virtual time keeps its own loop (:func:`tokenmark.clock.run_virtual`).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["loop_factory", "run"]

T = TypeVar("T")


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop factory when asked for and installed, else ``None`` (the standard)."""
    if os.environ.get("TOKENMARK_EVENT_LOOP", "").strip().lower() != "uvloop":
        return None
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def run(coro: Coroutine[Any, Any, T]) -> T:
    """:func:`asyncio.run` on the loop :func:`loop_factory` names."""
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(coro)
