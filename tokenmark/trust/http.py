"""One-off ``GET`` requests with a hard deadline and a size cap (fingerprints, metrics).

Built on the client's own HTTP/1.1 stack (:mod:`tokenmark.adapters.pool`). The whole
exchange (connect, send, every byte of the answer) runs under one deadline, so an
endpoint that accepts and never answers, or trickles bytes, costs at most
``timeout_s``; a body over ``max_bytes`` is cut off and the answer marked truncated.
"""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass

from tokenmark.adapters.http1 import describe_os_error
from tokenmark.adapters.pool import Endpoint
from tokenmark.records import ErrorClass

__all__ = ["Answer", "get"]


@dataclass(frozen=True, slots=True)
class Answer:
    """What a GET returned, or why it did not (``error`` non-empty)."""

    status: int = 0
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""
    truncated: bool = False
    error: str = ""
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.error and self.status == 200


class _Capped:
    def __init__(self, fut: asyncio.Future[Answer], max_bytes: int) -> None:
        self.fut = fut
        self.max = max_bytes
        self.status = 0
        self.headers: dict[str, str] = {}
        self.parts: list[bytes] = []
        self.size = 0

    def on_head(self, status: int, headers: dict[str, str], t: int) -> None:
        self.status = status
        self.headers = headers

    def on_body(self, data: bytes, t: int) -> None:
        if self.size >= self.max:
            return
        self.parts.append(data[: self.max - self.size])
        self.size += len(data)
        if self.size >= self.max:
            self._done(truncated=True)

    def on_end(self, t: int) -> None:
        self._done(truncated=False)

    def on_error(self, error: ErrorClass, detail: str, t: int) -> None:
        if not self.fut.done():
            self.fut.set_result(Answer(error=f"{error.value}: {detail}"))

    def _done(self, *, truncated: bool) -> None:
        if not self.fut.done():
            self.fut.set_result(Answer(self.status, tuple(self.headers.items()),
                                       b"".join(self.parts), truncated))


async def get(base_url: str, path: str, *, extra_headers: bytes = b"",
              timeout_s: float = 2.0, max_bytes: int = 1 << 20,
              ssl_context: ssl.SSLContext | None = None) -> Answer:
    """``GET path`` on the server of ``base_url``; never raises for network trouble."""
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    try:
        ep = Endpoint(base_url, ssl_context=ssl_context, max_conns=0, keepalive_s=0,
                      now=lambda: 0)
    except Exception as e:  # a URL the client cannot use
        return Answer(error=str(e))
    head = (f"GET {path} HTTP/1.1\r\nAccept: */*\r\nUser-Agent: tokenmark\r\n"
            f"Host: {ep.host_header}\r\nConnection: close\r\n").encode("latin-1")
    conn = None
    try:
        async with asyncio.timeout(timeout_s):
            conn = await ep.open()
            fut: asyncio.Future[Answer] = loop.create_future()
            conn.send(head + extra_headers + b"\r\n", _Capped(fut, max_bytes))
            ans = await fut
    except TimeoutError:
        ans = Answer(error=f"no answer within {timeout_s:g} s")
    except OSError as e:
        ans = Answer(error=describe_os_error(e))
    except (ConnectionError, ssl.SSLError) as e:
        ans = Answer(error=str(e) or type(e).__name__)
    finally:
        if conn is not None:
            conn.abort()
        ep.close()
    return Answer(ans.status, ans.headers, ans.body, ans.truncated, ans.error,
                  loop.time() - t0)
