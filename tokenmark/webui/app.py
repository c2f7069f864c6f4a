"""The web UI application (FastAPI): configuration, security measures, and how pages render.

:func:`create_app` builds the application over one results database. Pages
(:mod:`tokenmark.webui.pages`) and the JSON API (:mod:`tokenmark.webui.jsonapi`) read
through :mod:`tokenmark.api.results` and call the same analyses as the CLI; uploads
(:mod:`tokenmark.webui.upload`) import through ``results_api.import_results``.

Security measures, each with a test in ``tests/faces/test_webui.py``:

- read-only unless an upload token is configured; an upload must present it
  (``Authorization: Bearer TOKEN``), compared in constant time; a browser form cannot
  set that header, so a third-party page cannot make a visitor upload (no CSRF);
- uploads are size-limited while they stream in, then validated by the importer
  (strict: a file that fails stores nothing), archives with its hostile-archive checks;
- every page is rendered by autoescaped templates (:func:`tokenmark.report.environment`),
  and a Content-Security-Policy allows scripts and styles only from this server's
  ``/static`` files: no inline script runs, so an escaping slip would still not execute;
- ``Host`` must name the address the server is bound to (``localhost`` and
  ``127.0.0.1`` by default), which defeats DNS-rebinding pages reading the UI;
- no CDN: the OpenAPI document is served (``/api/openapi.json``), the interactive docs
  pages (which load scripts from a CDN) are not.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse
from starlette.middleware.trustedhost import TrustedHostMiddleware

from tokenmark import __version__
from tokenmark.errors import BadInputError
from tokenmark.report import environment
from tokenmark.report.html import STATIC_DIR as REPORT_STATIC
from tokenmark.resultrows import scale_label
from tokenmark.webui.runfiles import RunFolders

__all__ = ["DEFAULT_MAX_UPLOAD", "LOOPBACK_HOSTS", "MIN_TOKEN_LENGTH", "UiConfig",
           "create_app", "page"]

DEFAULT_MAX_UPLOAD = 64 * 1024 * 1024
MIN_TOKEN_LENGTH = 16
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")
TEMPLATE_DIR = Path(__file__).parent / "templates"
STATIC_DIR = Path(__file__).parent / "static"
#: The only files ``/static/`` serves: name -> (folder, media type).
STATIC_FILES = {
    "report.css": (REPORT_STATIC, "text/css"),
    "uPlot.min.css": (REPORT_STATIC, "text/css"),
    "uPlot.iife.min.js": (REPORT_STATIC, "text/javascript"),
    "report.js": (REPORT_STATIC, "text/javascript"),
    "ui.js": (STATIC_DIR, "text/javascript"),
}
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")


@dataclass(frozen=True)
class UiConfig:
    """How ``tokenmark ui`` serves.

    ``upload_token``: ``None`` keeps the UI read-only. ``runs``: folders holding results
    folders, for the plots that need records. ``allowed_hosts``: ``Host`` values
    accepted (``None``: any, for a server bound to every interface behind a proxy).
    """

    db: str | None = None
    upload_token: str | None = None
    max_upload_bytes: int = DEFAULT_MAX_UPLOAD
    runs: tuple[Path, ...] = ()
    allowed_hosts: tuple[str, ...] | None = LOOPBACK_HOSTS

    def __post_init__(self) -> None:
        tok = self.upload_token
        if tok is not None and (len(tok) < MIN_TOKEN_LENGTH or tok.strip() != tok):
            raise BadInputError(
                f"the upload token must be at least {MIN_TOKEN_LENGTH} characters without "
                "surrounding spaces; make one with: python -c 'import secrets; "
                "print(secrets.token_urlsafe(24))'")
        if self.max_upload_bytes <= 0:
            raise BadInputError("the upload size limit must be positive")


def page(request: Request, template: str, status_code: int = 200, **ctx: Any) -> HTMLResponse:
    """Render ``ui/<template>`` (autoescaped) with what every page needs."""
    cfg: UiConfig = request.app.state.config
    html = request.app.state.env.get_template(f"ui/{template}").render(
        path=request.url.path, uploads=cfg.upload_token is not None, version=__version__,
        **ctx)
    return HTMLResponse(html, status_code=status_code)


def create_app(config: UiConfig | None = None) -> FastAPI:
    """The application; serve it with :func:`tokenmark.webui.server.serve` (uvicorn)."""
    from tokenmark.webui import jsonapi, pages, upload

    cfg = config or UiConfig()
    app = FastAPI(
        title="tokenmark results", version=__version__, docs_url=None, redoc_url=None,
        openapi_url="/api/openapi.json",
        description="Read-only access to a tokenmark results database: result rows, the "
        "user's runs, and the analyses (leaderboard tiers, reproducibility, "
        "generation-over-generation comparison, scaling efficiency, software gains). "
        "Uploads need the token the server was started with. Results are unverified "
        "unless labelled official: not reviewed by MLCommons.",
    )
    app.state.config = cfg
    app.state.env = environment({"ui": TEMPLATE_DIR})
    app.state.env.filters["scale_label"] = scale_label
    app.state.runs = RunFolders(cfg.runs)

    @app.middleware("http")
    async def security_headers(request: Request,
                               call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        response = await call_next(request)
        response.headers.setdefault("Content-Security-Policy", CSP)
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "no-referrer"
        response.headers["X-Frame-Options"] = "DENY"
        response.headers.setdefault("Cache-Control", "no-store")
        return response

    if cfg.allowed_hosts is not None:
        app.add_middleware(TrustedHostMiddleware, allowed_hosts=list(cfg.allowed_hosts))

    @app.exception_handler(BadInputError)
    async def bad_input(request: Request, exc: BadInputError) -> Response:
        if request.url.path.startswith("/api/"):
            return JSONResponse({"detail": str(exc)}, status_code=400)
        return page(request, "error.html.j2", status_code=400, message=str(exc))

    @app.get("/static/{name}", include_in_schema=False)
    def static(name: str) -> Response:
        found = STATIC_FILES.get(name)
        if found is None:
            return PlainTextResponse("not found", status_code=404)
        folder, media = found
        return Response((folder / name).read_bytes(), media_type=media,
                        headers={"Cache-Control": "max-age=3600"})

    @app.get("/favicon.ico", include_in_schema=False)
    def favicon() -> Response:
        return Response(status_code=204)

    app.include_router(pages.router)
    app.include_router(jsonapi.router)
    app.include_router(upload.router)
    return app
