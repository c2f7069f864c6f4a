"""Ray tests: loopback only, no token auth (ENVIRONMENT.md section 5)."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # every listener on 127.0.0.1
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.pop("RAY_ADDRESS", None)

from tests.fixtures.servers import required

if "ray" in required() or "all" in required():
    import ray  # a missing install step fails here instead of skipping
else:
    ray = pytest.importorskip("ray", reason="the ray extra is not installed "
                              "(pip install 'tokenmark[ray]')")


@pytest.fixture(scope="module")
def local_ray():
    """One local Ray instance for a module's tests (about 3 s to start)."""
    if ray.is_initialized():
        ray.shutdown()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()
