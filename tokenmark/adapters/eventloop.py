"""The event loop a real-time run drives its clients on.

uvloop (libuv) when it is installed, else the standard library's loop. On ``tokenmark run``
beside the peers harness it cut the client's CPU per streamed token by 4-7% at 16 in
flight and 3-6% at 64 (``bench/cli_peers.py --variants uvloop,asyncio``, 3 alternating
reps at a load average of 12-13 on 2 cores; the rest is the client's own Python). Set
``TOKENMARK_EVENT_LOOP=asyncio`` to run on the standard loop (to compare, or to rule the
loop out when something looks wrong). Virtual time keeps its own loop
(:func:`tokenmark.clock.run_virtual`).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["loop_factory", "loop_name", "run"]

T = TypeVar("T")


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop factory, or ``None`` for the standard loop."""
    if os.environ.get("TOKENMARK_EVENT_LOOP", "").strip().lower() == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def loop_name() -> str:
    """``uvloop`` or ``asyncio``: what :func:`run` will use (recorded with a run)."""
    return "asyncio" if loop_factory() is None else "uvloop"


def run(coro: Coroutine[Any, Any, T]) -> T:
    """:func:`asyncio.run` on the fastest loop available."""
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(coro)
