"""Rendering a page of the web UI: the configuration a request runs under, times and
verdict reasons as people read them."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse

from tokenmark import __version__
from tokenmark.resultrows import RunRecord
from tokenmark.webui.config import UiConfig

__all__ = ["config_of", "page", "readable_time", "reasons"]


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


def readable_time(text: object) -> str:
    """An ISO-8601 time as people read it: ``2026-12-03 20:55 UTC`` (to the minute, in
    UTC; no microseconds, no ``+00:00``). Text that is not a time comes back as it is;
    a time without a zone is taken as UTC (tokenmark writes UTC)."""
    s = str(text or "").strip()
    if not s:
        return "-"
    try:
        t = datetime.fromisoformat(s.replace("Z", "+00:00"))
    except ValueError:
        return s
    if t.tzinfo is not None:
        t = t.astimezone(UTC)
    return t.strftime("%Y-%m-%d %H:%M UTC")


def reasons(rec: RunRecord, kind: str = "tokenmark") -> list[str]:
    """Why a run's ``kind`` verdict (``tokenmark`` or ``mlperf``) is INVALID: each
    finding that makes it so, as ``rule: observed (required ...)``. tokenmark's verdict
    also fails when MLPerf's does; with no failing finding of its own, MLPerf's are its
    reasons."""
    def of(k: str) -> list[str]:
        return [f"{f.rule}: {f.observed}" + (f" (required {f.required})" if f.required else "")
                for f in rec.findings if f.verdict.value == k and f.blocks]

    own = of(kind)
    invalid = (rec.tokenmark_validity if kind == "tokenmark" else rec.mlperf_validity)
    if not own and kind == "tokenmark" and invalid == "INVALID":
        return of("mlperf")
    return own
