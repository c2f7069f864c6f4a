"""``POST /api/upload``: storing a run or a submission sent to the web UI.

The contract, in the order it is checked:

1. uploads are off unless the server was started with a token (403 otherwise);
2. the request carries ``Authorization: Bearer TOKEN`` (401 without it or with another
   token; compared with :func:`hmac.compare_digest`);
3. the body is at most the configured size: a ``Content-Length`` above it is refused
   before reading (413), and the body is counted as it streams to a temporary file, so
   a request that lies about its length or uses chunked encoding is cut off too;
4. the body is a ``results.json`` of schema ``tokenmark.results/1``, or an archive
   (tar, tar.gz/bz2/xz, zip) of a results folder or a submission tree, recognised by
   its first bytes, never by a client-given name (415 otherwise);
5. :func:`tokenmark.api.results.import_results` reads it with the importer's hostile
   archive checks (no links, no ``..``, member and total size limits) in strict mode:
   any file that fails stores nothing and the answer lists why (400). Uploads are
   labelled unverified, whatever they contain.
"""

from __future__ import annotations

import hmac
import tempfile
from dataclasses import replace
from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from tokenmark.api import results as results_api
from tokenmark.importer import Limits
from tokenmark.webui.app import UiConfig
from tokenmark.webui.models import UploadOut

__all__ = ["kind_of", "router"]

router = APIRouter(prefix="/api", tags=["upload"])

#: First bytes of each accepted kind -> the file name the importer recognises it by.
_MAGIC: tuple[tuple[bytes, int, str], ...] = (
    (b"\x1f\x8b", 0, "upload.tar.gz"),
    (b"BZh", 0, "upload.tar.bz2"),
    (b"\xfd7zXZ\x00", 0, "upload.tar.xz"),
    (b"PK\x03\x04", 0, "upload.zip"),
    (b"ustar", 257, "upload.tar"),
)


def kind_of(head: bytes) -> str | None:
    """The file name an upload starting with ``head`` is stored under, or ``None``."""
    for magic, offset, name in _MAGIC:
        if head[offset:offset + len(magic)] == magic:
            return name
    if head.lstrip()[:1] == b"{":
        return "results.json"
    return None


def _error(status: int, detail: str) -> JSONResponse:
    return JSONResponse({"detail": detail}, status_code=status)


def _authorised(request: Request, token: str) -> bool:
    header = request.headers.get("authorization", "")
    scheme, _, given = header.partition(" ")
    if scheme.lower() != "bearer" or not given:
        return False
    return hmac.compare_digest(given.strip().encode(), token.encode())


@router.post("/upload", responses={
    401: {"description": "missing or wrong token"}, 403: {"description": "uploads are off"},
    413: {"description": "too large"}, 415: {"description": "not a results file or archive"},
    400: {"description": "the importer refused it; nothing was stored"}})
async def upload(request: Request) -> JSONResponse:
    """Store a ``results.json`` or an archive of results (the raw request body)."""
    cfg: UiConfig = request.app.state.config
    if cfg.upload_token is None:
        return _error(403, "uploads are off: start tokenmark ui with --upload-token "
                      "(or TOKENMARK_UPLOAD_TOKEN) to accept them")
    if not _authorised(request, cfg.upload_token):
        return _error(401, "an upload needs the header 'Authorization: Bearer TOKEN' with "
                      "the token the server was started with")
    limit = cfg.max_upload_bytes
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > limit):
        return _error(413, f"the upload is larger than the limit of {limit} bytes")
    with tempfile.TemporaryDirectory(prefix="tokenmark-upload-") as tmp:
        body = Path(tmp) / "body"
        size = 0
        with open(body, "wb") as f:
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    return _error(413, f"the upload is larger than the limit of {limit} bytes")
                f.write(chunk)
        with open(body, "rb") as f:
            head = f.read(512)
        name = kind_of(head)
        if name is None:
            return _error(415, "send a tokenmark results.json or an archive (tar, tar.gz, "
                          "tar.bz2, tar.xz, zip) of results folders or a submission tree")
        target = Path(tmp) / "in" / name
        target.parent.mkdir()
        body.rename(target)
        limits = replace(Limits(), archive_total=min(Limits().archive_total, 64 * limit))
        report = await run_in_threadpool(
            results_api.import_results, target, db=cfg.db, official=False, strict=True,
            limits=limits)
    out = UploadOut.of(report)
    if report.errors or not report.written:
        detail = "; ".join(out.errors) or "nothing importable in the upload"
        return JSONResponse({"detail": detail, **out.model_dump()}, status_code=400)
    return JSONResponse(out.model_dump(), status_code=200)
