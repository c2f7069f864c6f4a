"""The exact server keeps its delays, logs its truth, and serves keep-alive connections.

In-process (one event loop) with a raw socket client, so what is checked is the server
alone: the delays it promises, the truth rows it writes, that a zero-delay answer is one
pre-rendered write, and its model list and errors.
"""

from __future__ import annotations

import asyncio
import json

from tokenmark.servers.exact import ExactConfig, ExactServer

MS = 1_000_000


async def exchange(server: ExactServer, requests: list[bytes]) -> list[bytes]:
    """Send requests one after another on one connection; return each whole response."""
    reader, writer = await asyncio.open_connection(server.host, server.port)
    out = []
    for req in requests:
        writer.write(req)
        await writer.drain()
        head = await reader.readuntil(b"\r\n\r\n")
        if b"content-length" in head.lower():
            n = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
            out.append(head + await reader.readexactly(n))
        else:
            out.append(head + await reader.readuntil(b"0\r\n\r\n"))
    writer.close()
    await writer.wait_closed()
    return out


def post(path: str, body: dict[str, object], rid: str = "") -> bytes:
    data = json.dumps(body).encode()
    extra = f"X-Request-Id: {rid}\r\n".encode() if rid else b""
    return (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(data)}\r\n".encode()
            + extra + b"\r\n" + data)


def run(cfg: ExactConfig, requests: list[bytes]) -> tuple[list[bytes], ExactServer]:
    async def main() -> tuple[list[bytes], ExactServer]:
        server = ExactServer(cfg)
        await server.start()
        try:
            return await exchange(server, requests), server
        finally:
            await server.stop()

    return asyncio.run(main())


def test_delays_are_kept_and_logged_as_truth():
    body = {"model": "exact", "prompt": "a b c", "max_tokens": 5, "stream": True,
            "stream_options": {"include_usage": True}}
    cfg = ExactConfig(ttft_ns=20 * MS, itl_ns=4 * MS, truth_tokens=True)
    resp, server = run(cfg, [post("/v1/completions", body, "r1")])
    (t,) = server.truth
    assert (t.rid, t.tokens, t.prompt_tokens) == ("r1", 5, 3)
    assert t.first_ns - t.recv_ns >= 20 * MS
    # token k is due at read + TTFT + k * ITL (absolute, so lateness never accumulates)
    # and is never written early
    assert len(t.token_ns) == 5
    assert all(w >= t.recv_ns + 20 * MS + k * 4 * MS for k, w in enumerate(t.token_ns))
    assert t.done_ns >= t.last_ns == t.token_ns[-1]
    text = resp[0].decode()
    assert text.count('"text":') == 5 and '"completion_tokens":5' in text
    assert resp[0].endswith(b"data: [DONE]\n\n\r\n0\r\n\r\n")


def test_zero_delay_answers_are_one_prerendered_write_and_keep_alive_works():
    chat = {"model": "exact", "messages": [{"role": "user", "content": "x y"}],
            "max_tokens": 300, "stream": True}
    plain = {"model": "exact", "prompt": "a", "max_tokens": 3}
    resp, server = run(ExactConfig(), [post("/v1/chat/completions", chat, "a"),
                                       post("/v1/completions", plain, "b")])
    first, second = server.truth
    assert first.tokens == 300 and first.first_ns == first.last_ns  # a single write
    assert resp[0].decode().count('"content":"') == 301  # role event + 300 tokens
    assert json.loads(resp[1].split(b"\r\n\r\n", 1)[1])["usage"]["completion_tokens"] == 3
    assert second.rid == "b"


def test_models_unknown_paths_and_wrong_models():
    get = b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n"
    resp, server = run(ExactConfig(model="m1"), [
        get, post("/v1/nothing", {}), post("/v1/completions", {"model": "m2", "prompt": "a"})])
    assert json.loads(resp[0].split(b"\r\n\r\n", 1)[1])["data"][0]["id"] == "m1"
    assert resp[1].startswith(b"HTTP/1.1 404") and resp[2].startswith(b"HTTP/1.1 404")
    assert b"does not exist" in resp[2] and server.truth == []
