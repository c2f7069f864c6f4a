"""How ``tokenmark ui`` serves (:class:`UiConfig`) and its limits.

Its own module so that every part of the web UI (pages, JSON API, uploads, the
application that assembles them) reads the configuration without importing the
application: the web UI's modules form no import cycle (an import-linter contract in
``pyproject.toml`` keeps it so).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tokenmark.errors import BadInputError

__all__ = ["DEFAULT_MAX_UPLOAD", "LOOPBACK_HOSTS", "MIN_TOKEN_LENGTH", "UiConfig"]

DEFAULT_MAX_UPLOAD = 64 * 1024 * 1024
MIN_TOKEN_LENGTH = 16
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")


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
