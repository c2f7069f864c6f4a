"""Environment fingerprints: the client machine, and what the server says about itself.

The client part (:func:`client_machine`): CPU model, logical cores and the cores this
process may use, memory, OS and kernel, Python and tokenmark versions, a hash of the host
name (two results from one machine can be matched without naming it), and the machine's
background load: the CPU the rest of the machine used, in cores, sampled for a moment
before the run and averaged over the run (``/proc/stat`` minus this process's own CPU
time; where ``/proc/stat`` is missing, the load average).

The server part (:func:`describe_server`): for each endpoint, ``GET <prefix>/models`` with
its response headers, and the version and build-info endpoints of the engines that have
them: vLLM ``/version``, TGI ``/info``, SGLang ``/get_server_info`` and
``/get_model_info``, plus whether ``/metrics`` serves Prometheus text and whose names it
uses. Every request runs under its own deadline and all of them under a total budget, so
a hanging endpoint costs seconds, never the run.

Secrets never appear: the API key and every custom header value are replaced by ``***``
wherever they occur (bodies and headers), headers that carry credentials
(``Authorization``, cookies, ``*-key``, ``*token*``, ``*secret*``) are dropped to their
names, and so are JSON fields whose names say they hold one (``api_key``, ``token``, ...).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import os
import platform
import re
import socket
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokenmark import __version__, cpus
from tokenmark.inputs import json_loads
from tokenmark.metrics.summary import Summary
from tokenmark.mlperf.rules import Finding
from tokenmark.mlperf.scenarios import Schedule
from tokenmark.mlperf.settings import EffectiveSettings
from tokenmark.records import RequestRecord
from tokenmark.redact import Redactor as Masker
from tokenmark.trust.http import Answer, get

__all__ = [
    "CpuSnapshot",
    "EnvironmentWatcher",
    "Redactor",
    "ServerProbe",
    "client_machine",
    "cpu_snapshot",
    "describe_server",
]

_SECRET_NAME = re.compile(r"(auth|cookie|token|secret|passw|key|credential|session)",
                          re.IGNORECASE)
_KEEP_HEADERS_MAX = 40
_BODY_MAX = 64 * 1024
_TEXT_MAX = 2048


# -- the client machine -----------------------------------------------------------------


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8",
                                                    errors="replace").splitlines():
            if line.lower().startswith(("model name", "hardware", "processor\t: ")) and \
                    ":" in line and not line.split(":", 1)[1].strip().isdigit():
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_bytes() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return None


def _available_cores() -> int:
    return cpus.available()  # the process's CPUs, as before the emulated server's pinning


def client_machine() -> dict[str, Any]:
    """The client machine, JSON-ready (no secrets: the host name is hashed)."""
    import numpy

    return {
        "cpu_model": _cpu_model(),
        "cores_logical": os.cpu_count(),
        "cores_available": _available_cores(),
        "memory_bytes": _memory_bytes(),
        "os": platform.platform(),
        "system": platform.system(),
        "kernel": platform.release(),
        "machine": platform.machine(),
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "tokenmark": __version__,
        "numpy": numpy.__version__,
        "host_sha256": hashlib.sha256(socket.gethostname().encode()).hexdigest()[:16],
        "executable_prefix": "venv" if sys.prefix != sys.base_prefix else "system",
    }


@dataclass(frozen=True, slots=True)
class CpuSnapshot:
    """Machine CPU counters (``/proc/stat``, in seconds), this process's CPU time, the
    monotonic time; ``machine_busy_s`` is -1 where ``/proc/stat`` is missing."""

    machine_busy_s: float
    own_s: float
    t_s: float


def _proc_stat_busy() -> float:
    try:
        with open("/proc/stat", encoding="ascii") as f:
            parts = f.readline().split()
    except OSError:
        return -1.0
    if not parts or parts[0] != "cpu":
        return -1.0
    vals = [int(x) for x in parts[1:]]
    idle = vals[3] + (vals[4] if len(vals) > 4 else 0)  # idle + iowait
    busy = sum(vals[:8]) - idle  # user..steal; guest time is already in user
    hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    return busy / hz


def cpu_snapshot() -> CpuSnapshot:
    t = os.times()
    return CpuSnapshot(_proc_stat_busy(), t.user + t.system, time.monotonic())


def background_cores(a: CpuSnapshot, b: CpuSnapshot) -> float | None:
    """Cores the rest of the machine kept busy between two snapshots (None: unknown)."""
    dt = b.t_s - a.t_s
    if dt <= 0 or a.machine_busy_s < 0 or b.machine_busy_s < 0:
        return None
    other = (b.machine_busy_s - a.machine_busy_s) - (b.own_s - a.own_s)
    return round(max(0.0, other / dt), 3)


async def other_work_cores(window_s: float = 0.2) -> float | None:
    """Cores the rest of the machine kept busy over ``window_s`` seconds (None: unknown);
    measured while the client and the emulated server it just started both wait, it is
    what decides whether :class:`tokenmark.cpus.CpuPinning` pins them."""
    a = cpu_snapshot()
    await asyncio.sleep(window_s)
    return background_cores(a, cpu_snapshot())


def _loadavg() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (OSError, AttributeError):
        return None


# -- redaction --------------------------------------------------------------------------


@dataclass(frozen=True)
class Redactor:
    """Replaces every secret value with ``***`` and drops credential-bearing fields."""

    secrets: tuple[str, ...] = ()

    def text(self, s: str) -> str:
        """``s`` with each secret masked in every form it may take."""
        return _masker(self.secrets).text(s)

    def headers(self, items: Sequence[tuple[str, str]]) -> dict[str, str]:
        out: dict[str, str] = {}
        for name, value in list(items)[:_KEEP_HEADERS_MAX]:
            n = name.lower()
            out[n] = "(redacted)" if _SECRET_NAME.search(n) else self.text(value)[:512]
        return out

    def data(self, v: Any, depth: int = 0) -> Any:
        if depth > 12:
            return "(nested too deep)"
        if isinstance(v, dict):
            return {self.text(str(k)): ("(redacted)" if _SECRET_NAME.search(str(k))
                                        and v[k] not in (None, False, "", 0)
                                        else self.data(v[k], depth + 1)) for k in v}
        if isinstance(v, list):
            return [self.data(x, depth + 1) for x in v[:200]]
        if isinstance(v, str):
            return self.text(v)[:_TEXT_MAX]
        return v


@functools.lru_cache(maxsize=8)
def _masker(secrets: tuple[str, ...]) -> Masker:
    return Masker(secrets)


# -- the server -------------------------------------------------------------------------


#: Version and build-info endpoints: path -> the engine that serves it.
INFO_PATHS: tuple[tuple[str, str], ...] = (
    ("/version", "vllm"),
    ("/info", "tgi"),
    ("/get_server_info", "sglang"),
    ("/get_model_info", "sglang"),
)
#: Metric-name prefixes of the engines whose Prometheus text tokenmark reads.
METRIC_PREFIXES: tuple[tuple[str, str], ...] = (
    ("vllm:", "vllm"), ("sglang:", "sglang"), ("tgi_", "tgi"), ("tokenmark:", "tokenmark"),
)


@dataclass(frozen=True)
class ServerProbe:
    """Where and how to ask: base URLs (with their API prefix), the auth and custom
    header lines to send, the secrets to redact, and the deadlines."""

    urls: tuple[str, ...]
    header_lines: bytes = b""
    secrets: tuple[str, ...] = ()
    timeout_s: float = 2.0
    budget_s: float = 8.0
    ssl_context: Any = None


def _body(ans: Answer, red: Redactor) -> Any:
    raw = ans.body[:_BODY_MAX]
    try:
        return red.data(json_loads(raw))
    except (ValueError, UnicodeDecodeError):
        return red.text(raw[:_TEXT_MAX].decode("utf-8", "replace"))


def _answer_json(ans: Answer, red: Redactor, *, body: bool = True,
                 headers: bool = False) -> dict[str, Any]:
    if ans.error:
        return {"error": red.text(ans.error), "seconds": round(ans.seconds, 3)}
    out: dict[str, Any] = {"status": ans.status, "seconds": round(ans.seconds, 3)}
    if headers:
        out["headers"] = red.headers(ans.headers)
    if body and ans.status == 200:
        out["body"] = _body(ans, red)
    if ans.truncated:
        out["truncated"] = True
    return out


async def _describe_one(url: str, probe: ServerProbe, red: Redactor) -> dict[str, Any]:
    from tokenmark.adapters.pool import parse_base_url

    base = parse_base_url(url)
    prefix = base.path
    kw: dict[str, Any] = {"extra_headers": probe.header_lines, "timeout_s": probe.timeout_s,
                          "ssl_context": probe.ssl_context}
    paths = [f"{prefix}/models", *(p for p, _ in INFO_PATHS), "/metrics"]
    answers = await asyncio.gather(*(get(url, p, **kw) for p in paths))
    models = answers[0]
    out: dict[str, Any] = {"endpoint": red.text(base.label),
                           "models": _answer_json(models, red, headers=True)}
    info: dict[str, Any] = {}
    for (path, _), ans in zip(INFO_PATHS, answers[1:-1], strict=True):
        if ans.ok:
            info[path] = _answer_json(ans, red)
    out["info"] = info
    metrics = answers[-1]
    found: list[str] = []
    if metrics.ok:
        text = "\n" + metrics.body.decode("utf-8", "replace")
        found = [engine for pre, engine in METRIC_PREFIXES if f"\n{pre}" in text]
    out["metrics"] = {"available": metrics.ok, "engines": found,
                      **({"error": red.text(metrics.error)} if metrics.error else
                         {"status": metrics.status})}
    engines = list(found)
    body = {p: v.get("body") for p, v in info.items()}
    if isinstance(body.get("/info"), dict) and "model_id" in body["/info"]:
        engines.append("tgi")
    if isinstance(body.get("/get_server_info"), dict):
        engines.append("sglang")
    if isinstance(body.get("/version"), dict) and "version" in body["/version"]:
        engines.append("vllm" if "sglang" not in engines else "sglang")
    out["engines"] = sorted(set(engines))
    return out


async def describe_server(probe: ServerProbe) -> list[dict[str, Any]]:
    """What each endpoint says about itself; bounded by ``probe.budget_s`` overall."""
    red = Redactor(probe.secrets)
    try:
        async with asyncio.timeout(probe.budget_s):
            return list(await asyncio.gather(*(_describe_one(u, probe, red)
                                               for u in probe.urls)))
    except TimeoutError:
        return [{"endpoint": red.text(u), "error": f"no description within "
                 f"{probe.budget_s:g} s"} for u in probe.urls]


# -- the watcher ------------------------------------------------------------------------


@dataclass
class EnvironmentWatcher:
    """Fills ``environment`` in results.json: client machine, background load before
    and during the run, and the server's self-description (HTTP targets)."""

    server: ServerProbe | None = None
    before_s: float = 0.25
    key: str = "environment"
    _client: dict[str, Any] = field(default_factory=dict)
    _before: float | None = None
    _start: CpuSnapshot | None = None
    _end: CpuSnapshot | None = None
    _server: list[dict[str, Any]] = field(default_factory=list)
    _load_start: list[float] | None = None

    def plan(self, eff: EffectiveSettings, schedule: Schedule) -> None:
        pass

    async def start(self, output_dir: Path) -> None:
        self._client = client_machine()
        self._load_start = _loadavg()
        a = cpu_snapshot()
        await asyncio.sleep(self.before_s)
        self._before = background_cores(a, cpu_snapshot())
        if self.server is not None:
            self._server = await describe_server(self.server)
        self._start = cpu_snapshot()

    def record(self, rec: RequestRecord) -> None:
        pass

    async def stop(self) -> None:
        self._end = cpu_snapshot()

    def finish(self, summary: Summary, output_dir: Path
               ) -> tuple[dict[str, Any], list[Finding]]:
        during = None
        if self._start is not None and self._end is not None:
            during = background_cores(self._start, self._end)
        section = {
            "client": self._client,
            "background_load": {
                "unit": "cores busy outside tokenmark (/proc/stat)",
                "before": self._before,
                "during": during,
                "loadavg_at_start": self._load_start,
                "loadavg_at_end": _loadavg(),
            },
            "server": self._server,
        }
        return section, []
