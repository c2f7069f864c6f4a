"""Shared fixtures. Every test is offline and targets loopback only."""

from __future__ import annotations

import pytest

from tokenmark.config.layering import LayeredSettings, build_settings
from tokenmark.settings import Scenario


@pytest.fixture
def demo_server() -> LayeredSettings:
    """llama3.1-8b Server under the v6.0 preset and the demo profile."""
    return build_settings("v6.0", "llama3.1-8b", Scenario.SERVER, profile="demo")
