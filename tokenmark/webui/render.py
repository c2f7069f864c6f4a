"""Rendering a page of the web UI, and reading the configuration a request runs under."""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse

from tokenmark import __version__
from tokenmark.webui.config import UiConfig

__all__ = ["config_of", "page"]


def config_of(request: Request) -> UiConfig:
    """The :class:`UiConfig` the application serving ``request`` was built with."""
    cfg: UiConfig = request.app.state.config
    return cfg


def page(request: Request, template: str, status_code: int = 200, **ctx: Any) -> HTMLResponse:
    """Render ``ui/<template>`` (autoescaped) with what every page needs."""
    cfg = config_of(request)
    html = request.app.state.env.get_template(f"ui/{template}").render(
        path=request.url.path, uploads=cfg.upload_token is not None, version=__version__,
        **ctx)
    return HTMLResponse(html, status_code=status_code)
