"""Shared fixtures. Every test is offline and targets loopback only."""

from __future__ import annotations

import pytest

from tokenmark.config.layering import LayeredSettings, build_settings
from tokenmark.mlperf.settings import Scenario


@pytest.fixture
def demo_server() -> LayeredSettings:
    """llama3.1-8b Server under the v6.0 preset and the demo profile."""
    return build_settings("v6.0", "llama3.1-8b", Scenario.SERVER, profile="demo")


@pytest.fixture(autouse=True, scope="session")
def _private_results_db(tmp_path_factory: pytest.TempPathFactory):
    """Runs store themselves in the results database: keep tests out of the user's."""
    import os

    path = tmp_path_factory.mktemp("db") / "results.db"
    old = os.environ.get("TOKENMARK_DB")
    os.environ["TOKENMARK_DB"] = str(path)
    yield path
    if old is None:
        os.environ.pop("TOKENMARK_DB", None)
    else:
        os.environ["TOKENMARK_DB"] = old
