"""Serving the web UI with uvicorn (the one module that imports it)."""

from __future__ import annotations

import uvicorn

from tokenmark.webui.app import create_app
from tokenmark.webui.config import LOOPBACK_HOSTS, UiConfig

__all__ = ["allowed_hosts_for", "serve"]


def allowed_hosts_for(host: str, extra: tuple[str, ...] = ()) -> tuple[str, ...] | None:
    """``Host`` headers to accept when bound to ``host``: the loopback names for a
    loopback address, the address itself otherwise; ``None`` (any) for a wildcard bind
    without ``extra`` names (then a proxy in front is expected to check)."""
    if host in ("0.0.0.0", "::", ""):
        return extra or None
    if host in LOOPBACK_HOSTS or host.startswith("127."):
        return (*LOOPBACK_HOSTS, host, *extra)
    return (host, *extra)


def serve(config: UiConfig, host: str = "127.0.0.1", port: int = 8321) -> None:
    """Serve until interrupted (Ctrl-C)."""
    uvicorn.run(create_app(config), host=host, port=port, log_level="warning",
                lifespan="off", ws="none", server_header=False, proxy_headers=False)
