"""Fixtures of the scale command tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fixtures.servers import exact_server
from tokenmark.servers.exact import ExactConfig, ExactServer


@pytest.fixture
def exact() -> Iterator[ExactServer]:
    with exact_server(ExactConfig(api_key="sweep-secret", record_headers=("x-sweep",))) as s:
        yield s
