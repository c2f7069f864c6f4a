"""An OpenAI-compatible HTTP front for any :class:`~tokenmark.engines.base.Engine`.

:class:`EngineHTTPServer` serves ``GET /v1/models``, ``POST /v1/completions`` and
``POST /v1/chat/completions`` on loopback (HTTP/1.1 keep-alive, one request at a time
per connection), streamed (server-sent events, chunked) or not. It is how ``tokenmark
serve --engine hf`` exposes the real tiny model, and it can host any other engine (the
emulator's timing model) unchanged.

Response shapes follow vLLM's, as :mod:`tokenmark.servers.render` does: one event per
chunk of new text, the last carrying ``finish_reason`` (``"stop"`` after EOS,
``"length"`` at ``max_tokens``), ``usage`` in a final event when
``stream_options.include_usage`` is set (and always in a non-streamed body), then
``data: [DONE]``. Request fields read: ``model`` (must name the served model),
``prompt`` (text, or a list of token ids) or ``messages``, ``max_tokens`` /
``max_completion_tokens`` (default 16), ``stream``, ``stream_options``,
``temperature`` (0 only, for a greedy engine) and vLLM's ``ignore_eos``.

Text is decoded incrementally: each event carries the decoded text of all ids so far
minus what was already sent; text that ends in an incomplete UTF-8 sequence (U+FFFD) is
held back until a later token completes it, so concatenated events equal the decoded
output. An event may therefore stand for more than one token, as with real servers.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from typing import Any

from tokenmark.engines.base import Engine, GenerationRequest
from tokenmark.servers.render import chunk

__all__ = ["EngineHTTPServer"]

_MAX_BODY = 16 * 1024 * 1024


def _response(status: int, body: dict[str, Any]) -> bytes:
    data = json.dumps(body).encode()
    reason = {200: "OK", 400: "Bad Request", 404: "Not Found"}.get(status, "Error")
    return (f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(data)}\r\n\r\n").encode() + data


def _error(status: int, message: str) -> bytes:
    return _response(status, {"error": {"message": message, "type": "invalid_request_error",
                                        "code": status}})


class EngineHTTPServer:
    """``await start()``, then use :attr:`url`; ``await stop()`` at the end."""

    def __init__(self, engine: Engine, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.engine = engine
        self.host = host
        self.port = port
        self.requests = 0
        self._server: asyncio.Server | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def start(self) -> None:
        await self.engine.start()
        self._server = await asyncio.start_server(self._conn, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        await self.engine.stop()

    async def serve_forever(self) -> None:
        assert self._server is not None
        await self._server.serve_forever()

    async def _conn(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = (lines[0].split(" ", 2) + ["", ""])[:3]
                headers = {k.strip().lower(): v.strip() for k, _, v in
                           (ln.partition(":") for ln in lines[1:] if ln)}
                length = int(headers.get("content-length") or 0)
                if length > _MAX_BODY:
                    writer.write(_error(400, "request body too large"))
                    break
                body = await reader.readexactly(length) if length else b""
                await self._handle(method, path.split("?", 1)[0], body, writer)
                await writer.drain()
                if headers.get("connection", "").lower() == "close":
                    break
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()

    async def _handle(self, method: str, path: str, body: bytes,
                      writer: asyncio.StreamWriter) -> None:
        eng = self.engine
        if method == "GET" and path.rstrip("/") == "/v1/models":
            writer.write(_response(200, {"object": "list", "data": [
                {"id": eng.name, "object": "model", "created": 0, "owned_by": "tokenmark"}]}))
            return
        chat = path == "/v1/chat/completions"
        if method != "POST" or not (chat or path == "/v1/completions"):
            writer.write(_error(404, f"no route {method} {path}"))
            return
        try:
            req = json.loads(body)
            if not isinstance(req, dict):
                raise ValueError("not an object")
            prompt = self._prompt(req, chat)
        except (RecursionError, ValueError, TypeError, KeyError) as exc:
            writer.write(_error(400, f"bad request: {exc}"))
            return
        if req.get("model", eng.name) != eng.name:
            writer.write(_error(404, f"The model `{req.get('model')}` does not exist."))
            return
        temperature = float(req.get("temperature") or 0.0)
        if temperature != 0.0:
            writer.write(_error(400, "this engine decodes greedily: temperature must be 0"))
            return
        max_tokens = int(req.get("max_tokens") or req.get("max_completion_tokens") or 16)
        greq = GenerationRequest(tuple(prompt), max(1, max_tokens),
                                 ignore_eos=bool(req.get("ignore_eos")))
        self.requests += 1
        rid = f"cmpl-tokenmark-{self.requests}"
        if req.get("stream"):
            usage = bool((req.get("stream_options") or {}).get("include_usage"))
            await self._stream(greq, chat, rid, usage, writer)
        else:
            await self._full(greq, chat, rid, writer)

    def _prompt(self, req: dict[str, Any], chat: bool) -> list[int]:
        if chat:
            msgs = req["messages"]
            if not isinstance(msgs, list):
                raise ValueError("messages must be a list")
            return self.engine.chat_prompt(msgs)
        p = req["prompt"]
        if isinstance(p, list) and all(isinstance(x, int) for x in p):
            return [int(x) for x in p]
        if not isinstance(p, str):
            raise ValueError("prompt must be a string or a list of token ids")
        return self.engine.encode(p)

    def _choice(self, chat: bool, text: str, finish: str | None, delta: bool) -> dict[str, Any]:
        if not chat:
            return {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}
        key = "delta" if delta else "message"
        content: dict[str, Any] = {"content": text} if delta else \
            {"role": "assistant", "content": text}
        return {"index": 0, key: content, "logprobs": None, "finish_reason": finish}

    def _envelope(self, chat: bool, rid: str, choices: list[dict[str, Any]],
                  stream: bool) -> dict[str, Any]:
        obj = ("chat.completion.chunk" if stream else "chat.completion") if chat else \
            "text_completion"
        return {"id": rid, "object": obj, "created": int(time.time()),
                "model": self.engine.name, "choices": choices}

    async def _stream(self, greq: GenerationRequest, chat: bool, rid: str, usage: bool,
                      writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
                     b"cache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n")

        def event(obj: dict[str, Any]) -> None:
            writer.write(chunk(b"data: " + json.dumps(obj).encode() + b"\n\n"))

        if chat:
            event(self._envelope(chat, rid, [{"index": 0, "delta": {"role": "assistant",
                                                                    "content": ""},
                                              "logprobs": None, "finish_reason": None}], True))
        ids: list[int] = []
        sent = ""
        pending = ""
        async for new in self.engine.generate(greq):
            ids.extend(new)
            text = self.engine.decode(ids)
            if text.endswith("\ufffd"):
                continue  # an incomplete character: wait for the token that ends it
            pending, sent = text[len(sent):], text
            if pending:
                event(self._envelope(chat, rid, [self._choice(chat, pending, None, True)],
                                     True))
                await writer.drain()
        tail = self.engine.decode(ids)[len(sent):]
        event(self._envelope(chat, rid, [self._choice(chat, tail, self._finish(greq, ids),
                                                      True)], True))
        if usage:
            ev = self._envelope(chat, rid, [], True)
            ev["usage"] = self._usage(greq, ids)
            event(ev)
        writer.write(chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")

    async def _full(self, greq: GenerationRequest, chat: bool, rid: str,
                    writer: asyncio.StreamWriter) -> None:
        ids: list[int] = []
        async for new in self.engine.generate(greq):
            ids.extend(new)
        body = self._envelope(chat, rid, [self._choice(chat, self.engine.decode(ids),
                                                       self._finish(greq, ids), False)], False)
        body["usage"] = self._usage(greq, ids)
        writer.write(_response(200, body))

    def _finish(self, greq: GenerationRequest, ids: Sequence[int]) -> str:
        eos = self.engine.eos_token_id
        return "stop" if ids and ids[-1] == eos and not greq.ignore_eos else "length"

    @staticmethod
    def _usage(greq: GenerationRequest, ids: Sequence[int]) -> dict[str, int]:
        n, p = len(ids), len(greq.prompt_ids)
        return {"prompt_tokens": p, "completion_tokens": n, "total_tokens": p + n}
