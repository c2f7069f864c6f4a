"""Fixtures of the trust tests: an isolated key folder, cache and results database, the
CLI in-process, and small loopback HTTP servers of our own (no third-party server)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

import tokenmark.cli.trust  # noqa: F401  (registers keys, bundle, verify, ...)
from tokenmark.cli import app


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    monkeypatch.setenv("TOKENMARK_KEYS_DIR", str(home / "keys"))
    monkeypatch.setenv("TOKENMARK_CACHE_DIR", str(home / "cache"))
    monkeypatch.setenv("TOKENMARK_DB", str(home / "results.db"))
    return home


class Cli:
    def __init__(self) -> None:
        self.runner = CliRunner()

    def __call__(self, *args: str) -> tuple[int, str]:
        res = self.runner.invoke(app, [str(a) for a in args], catch_exceptions=False)
        return res.exit_code, res.output


@pytest.fixture
def cli() -> Cli:
    return Cli()


Handler = Callable[[str, dict[str, str]], Awaitable[tuple[int, dict[str, str], bytes] | None]]


class Loopback:
    """An asyncio HTTP/1.1 server on 127.0.0.1 in the test's own event loop.

    ``handler(path, headers)`` returns (status, headers, body), or None to never answer
    (a hanging endpoint).
    """

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.server: asyncio.Server | None = None
        self.hung: list[asyncio.StreamWriter] = []
        self.seen: list[tuple[str, dict[str, str]]] = []

    @property
    def url(self) -> str:
        assert self.server is not None
        port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/v1"

    async def __aenter__(self) -> Loopback:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        for w in self.hung:
            w.close()
        self.server.close()
        await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()
            return
        lines = head.decode("latin-1").split("\r\n")
        path = lines[0].split()[1]
        headers = {k.strip().lower(): v.strip() for k, _, v in
                   (ln.partition(":") for ln in lines[1:] if ln)}
        self.seen.append((path, headers))
        got = await self.handler(path, headers)
        if got is None:
            self.hung.append(writer)
            return
        status, extra, body = got
        hdrs = "".join(f"{k}: {v}\r\n" for k, v in extra.items())
        writer.write(f"HTTP/1.1 {status} X\r\nContent-Length: {len(body)}\r\n{hdrs}"
                     "Connection: close\r\n\r\n".encode("latin-1") + body)
        try:
            await writer.drain()
        finally:
            writer.close()


def json_body(obj: object) -> bytes:
    return json.dumps(obj).encode()


@pytest.fixture
def loopback() -> Iterator[type[Loopback]]:
    yield Loopback
