"""The web UI (an edge): ``tokenmark ui``, FastAPI and Jinja2 over the results database.

Pages for the runs (with the report's plots), the result rows, the two-tier leaderboard
with its filters and per-accelerator view, and the analyses (compare, reproducibility,
scaling efficiency, software gains), plus a JSON API with its OpenAPI schema. It reads
through :mod:`tokenmark.api.results` (never SQL), renders through the report edge's
autoescaping templates, and is read-only unless started with an upload token; see
:mod:`tokenmark.webui.app` for the security measures.
"""

from tokenmark.webui.app import DEFAULT_MAX_UPLOAD, UiConfig, create_app

__all__ = ["DEFAULT_MAX_UPLOAD", "UiConfig", "create_app"]
