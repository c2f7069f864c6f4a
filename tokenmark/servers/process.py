"""The exact server in its own process: a command line, and a handle to start one.

``python -m tokenmark.servers.process --ttft-ms 50 --itl-ms 10 --truth truth.jsonl``
serves on ``127.0.0.1`` (port 0 picks a free one) and prints one line, ``READY <url>``,
once it listens. Ground-truth rows (:class:`~tokenmark.servers.exact.Truth`) are
appended to ``--truth`` as JSON lines every 100 ms and at exit (SIGTERM or SIGINT).
``--cpu N`` pins the process to core ``N``. The API key the server demands is read from
the environment variable named by ``--api-key-env``, never from the command line.

:class:`ServerProcess` starts that command for tests and benchmarks, waits for
``READY`` (bounded), and always kills what it started.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import select
import signal
import ssl
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import IO

from tokenmark.servers.exact import ExactConfig, ExactServer

__all__ = ["ServerProcess", "main"]


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m tokenmark.servers.process",
                                description="OpenAI-compatible server with exact delays.")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--ttft-ms", type=float, default=0.0)
    p.add_argument("--itl-ms", type=float, default=0.0)
    p.add_argument("--tokens", type=int, default=0, help="tokens per answer (0: max_tokens)")
    p.add_argument("--model", default="exact")
    p.add_argument("--framing", choices=("chunked", "close"), default="chunked")
    p.add_argument("--crlf", action="store_true", help="separate SSE events with CRLF CRLF")
    p.add_argument("--cached-tokens", type=int, default=-1)
    p.add_argument("--faults", default="", help="comma-separated fault plan, cycled")
    p.add_argument("--exit-after", type=int, default=0)
    p.add_argument("--spin-us", type=float, default=0.0)
    p.add_argument("--truth", type=Path)
    p.add_argument("--truth-tokens", action="store_true")
    p.add_argument("--api-key-env", default="")
    p.add_argument("--record-headers", default="", help="comma-separated header names")
    p.add_argument("--reasoning", type=int, default=0,
                   help="chat answers start with this many reasoning_content tokens")
    p.add_argument("--step-tokens", type=int, default=1,
                   help="tokens written together at each step (each its own event)")
    p.add_argument("--adversarial", action="store_true",
                   help="token texts drawn from render.adversarial_texts (kept in truth)")
    p.add_argument("--tls-cert", type=Path)
    p.add_argument("--tls-key", type=Path)
    p.add_argument("--cpu", type=int, default=-1)
    return p.parse_args(argv)


async def _serve(args: argparse.Namespace) -> None:
    cfg = ExactConfig(
        ttft_ns=int(args.ttft_ms * 1e6), itl_ns=int(args.itl_ms * 1e6),
        output_tokens=args.tokens, model=args.model, framing=args.framing,
        sep=b"\r\n\r\n" if args.crlf else b"\n\n", cached_tokens=args.cached_tokens,
        faults=tuple(f for f in args.faults.split(",") if f), exit_after=args.exit_after,
        spin_ns=int(args.spin_us * 1e3), truth_tokens=args.truth_tokens,
        api_key=os.environ.get(args.api_key_env, "") if args.api_key_env else "",
        record_headers=tuple(h.strip().lower() for h in args.record_headers.split(",")
                             if h.strip()),
        reasoning_tokens=args.reasoning, step_tokens=args.step_tokens,
        adversarial=args.adversarial,
    )
    ctx = None
    if args.tls_cert:
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(args.tls_cert, args.tls_key)
    server = ExactServer(cfg, host=args.host, port=args.port, ssl_context=ctx)
    await server.start()
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    out: IO[str] | None = open(args.truth, "w") if args.truth else None  # noqa: SIM115
    written = 0

    def dump() -> None:
        nonlocal written
        if out is None:
            return
        rows = server.truth
        while written < len(rows) and rows[written].done_ns >= 0:
            out.write(json.dumps(rows[written].to_json()) + "\n")
            written += 1
        out.flush()

    print(f"READY {server.url}", flush=True)
    try:
        while not stop.is_set() and not server.died:
            try:
                await asyncio.wait_for(stop.wait(), 0.1)
            except TimeoutError:
                pass
            dump()
    finally:
        dump()
        if out is not None:  # unfinished rows too: a stalled or cut request is truth
            for row in server.truth[written:]:
                out.write(json.dumps(row.to_json()) + "\n")
            out.close()
    if server.died:
        os._exit(70)  # a crash: no orderly shutdown
    await server.stop()


def main(argv: Sequence[str] | None = None) -> None:
    args = _parse(argv)
    if args.cpu >= 0:
        os.sched_setaffinity(0, {args.cpu})
    asyncio.run(_serve(args))


class ServerProcess:
    """Start ``python -m MODULE ARGS`` (the exact server by default; any module that
    prints ``READY <url>`` once it listens) and wait until it listens."""

    def __init__(self, args: Sequence[str] = (), *, truth: Path | None = None,
                 env: dict[str, str] | None = None, ready_timeout_s: float = 20.0,
                 module: str = "tokenmark.servers.process") -> None:
        self.module = module
        self.args = list(args)
        self.truth_path = truth
        self.env = env
        self.ready_timeout_s = ready_timeout_s
        self.url = ""
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> ServerProcess:
        if self.proc is not None:
            return self  # already started (``with`` after ``start()``)
        cmd = [sys.executable, "-m", self.module, *self.args]
        if self.truth_path is not None:
            cmd += ["--truth", str(self.truth_path)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=self.env)
        assert self.proc.stdout is not None
        deadline = time.monotonic() + self.ready_timeout_s
        said = ""
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], 0.1)
            if ready:
                line = self.proc.stdout.readline()
                if line.startswith("READY "):
                    self.url = line.split()[1]
                    return self
                if not line:
                    break
                said = line.strip() or said
            if self.proc.poll() is not None:
                break
        self.kill()
        raise RuntimeError(f"the server did not start ({said or 'no output'}): "
                           f"{' '.join(cmd)}")

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def stop(self, timeout_s: float = 10.0) -> int | None:
        """SIGTERM (the truth file is completed), then SIGKILL if it lingers."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        return self.proc.returncode

    def kill(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            if self.proc.stdout is not None:
                self.proc.stdout.close()

    def truth(self) -> list[dict[str, object]]:
        if self.truth_path is None or not self.truth_path.exists():
            return []
        rows = []
        for line in self.truth_path.read_text().splitlines():
            if line.strip():
                rows.append(json.loads(line))
        return rows

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


if __name__ == "__main__":
    main()
