"""Fixtures of the scale command tests."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest

from tokenmark.servers.exact import ExactConfig, ExactServer


@pytest.fixture
def exact() -> Iterator[ExactServer]:
    loop = asyncio.new_event_loop()
    server = ExactServer(ExactConfig(api_key="sweep-secret", record_headers=("x-sweep",)))
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(server.start(), loop).result(10)
    yield server
    asyncio.run_coroutine_threadsafe(server.stop(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    loop.close()
