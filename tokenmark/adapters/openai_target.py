"""What to benchmark over HTTP: :class:`OpenAIConfig`, its checks, and the model check.

:meth:`OpenAIConfig.validated` checks everything that can be checked without a network
(URLs, API kind, routing, timeouts, headers, the extra body, the tokenizer path) and
raises :class:`~tokenmark.errors.ConfigError` with one line that names the fix.
:func:`check_target` then asks every endpoint for ``GET <prefix>/models`` before the
run and raises :class:`~tokenmark.errors.TargetError` when an endpoint cannot be reached,
refuses the key, or does not serve the model; with no model given it picks the one
model all endpoints serve.

The API key never lives in the configuration: only the *name* of the environment
variable that holds it (``api_key_env``, default ``OPENAI_API_KEY``) does, so a config
can be logged, written to ``results.json`` and sent to worker processes without it.
"""

from __future__ import annotations

import asyncio
import errno
import os
import re
import ssl
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from tokenmark.adapters.http1 import describe_os_error
from tokenmark.adapters.pool import Endpoint, fetch, parse_base_url
from tokenmark.adapters.sse import DEFAULT_MAX_EVENT_BYTES
from tokenmark.errors import ConfigError, TargetError
from tokenmark.inputs import json_loads
from tokenmark.redact import Redactor

__all__ = [
    "API_KINDS",
    "DEFAULT_KEY_ENV",
    "DEFAULT_MAX_EVENT_BYTES",
    "ROUTINGS",
    "OpenAIConfig",
    "api_key",
    "check_target",
    "http_name",
    "probe",
    "secrets",
    "ssl_context",
]

API_KINDS = ("completions", "chat")
ROUTINGS = ("round-robin", "least-in-flight")
DEFAULT_KEY_ENV = "OPENAI_API_KEY"
#: Body keys the client owns; an extra body may not set them.
_OWNED = ("model", "stream", "prompt", "messages")
_RESERVED_HEADERS = ("host", "content-length", "transfer-encoding", "connection",
                     "x-request-id")
_TOKEN_RE = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
_ENV_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class OpenAIConfig:
    """An OpenAI-compatible target and how to talk to it. Times in seconds; 0 = none."""

    urls: tuple[str, ...]
    api: str = "completions"  # completions | chat
    stream: bool = True
    model: str = ""  # "" = the one model the endpoints serve
    api_key_env: str = DEFAULT_KEY_ENV
    headers: tuple[tuple[str, str], ...] = ()
    verify_tls: bool = True
    ca_file: str = ""
    connect_timeout_s: float = 30.0
    first_token_timeout_s: float = 0.0
    request_timeout_s: float = 0.0
    #: Connections per endpoint; 0 opens one per request in flight (the pool grows to
    #: the concurrency and keeps them alive).
    pool_size: int = 0
    #: Connections per endpoint opened before the run (a closed loop or a concurrency cap
    #: knows how many it needs): no first wave of requests waits for TCP/TLS handshakes.
    preconnect: int = 0
    #: Idle connections per endpoint kept open ahead of demand, opened in the background
    #: whenever fewer are idle: an open loop whose concurrency grows does not make a send
    #: wait for a TCP/TLS handshake (that wait is send lag, charged to the client).
    spare_connections: int = 4
    #: An idle connection older than this is not reused (below common server timeouts).
    keepalive_s: float = 4.0
    routing: str = "round-robin"  # round-robin | least-in-flight
    max_tokens: int = 0  # 0: each sample's output length
    ignore_eos: bool = False
    temperature: float | None = None
    include_usage: bool = True  # stream_options.include_usage
    extra_body: str = ""  # a JSON object merged into every request body
    tokenizer: str = ""  # "builtin", a tokenizer.json, or a folder holding one
    keep_text: bool = False  # extract the output text even without a tokenizer
    request_ids: bool = True  # send X-Request-Id (the server's logs can be matched)
    check_models: bool = True
    #: The largest server-sent event accepted; a larger one is a malformed stream.
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES
    #: Before the run, two requests of one token each measure what the server adds to a
    #: prompt and check the first sample's length (the ``input_length_agreement``
    #: finding); off: no request but the run's reaches the server.
    length_probe: bool = True
    #: What the server says it runs (its ``Server`` header, or the ``owned_by`` of the
    #: model it lists); filled by :func:`check_target`, "" when it does not say.
    served_by: str = ""

    def validated(self) -> OpenAIConfig:
        """Return ``self`` after checking it; raise ConfigError naming the fix."""
        if not self.urls:
            raise ConfigError("no target URL; pass --url http://HOST:PORT (repeat it for "
                              "several replicas)")
        labels = [parse_base_url(u).label for u in self.urls]
        if len(set(labels)) != len(labels):
            raise ConfigError("the same target URL is given twice; list each replica once")
        if self.api not in API_KINDS:
            raise ConfigError(f"unknown API {self.api!r}; choose completions or chat")
        if self.routing not in ROUTINGS:
            raise ConfigError(f"unknown routing {self.routing!r}; choose round-robin or "
                              "least-in-flight")
        for name in ("connect_timeout_s", "first_token_timeout_s", "request_timeout_s",
                     "keepalive_s"):
            v = getattr(self, name)
            if not v >= 0:
                raise ConfigError(f"{name} must be >= 0 seconds (0 = no limit), got {v}")
        if (self.pool_size < 0 or self.max_tokens < 0 or self.preconnect < 0
                or self.spare_connections < 0):
            raise ConfigError("pool size, preconnect, spare connections and max tokens "
                              "must be >= 0")
        if self.max_event_bytes < 1024:
            raise ConfigError(f"--max-event-bytes must be at least 1024 (got "
                              f"{self.max_event_bytes}); the default is "
                              f"{DEFAULT_MAX_EVENT_BYTES}")
        if self.pool_size and self.preconnect > self.pool_size:
            raise ConfigError(f"--preconnect {self.preconnect} exceeds --pool-size "
                              f"{self.pool_size}; lower it or raise the pool size")
        for name, value in self.headers:
            if not _TOKEN_RE.match(name) or not _header_safe(value):
                raise ConfigError(f"bad header {name!r}; write it as NAME: VALUE on one line "
                                  "(Latin-1 characters, no control characters)")
            if name.lower() in _RESERVED_HEADERS:
                raise ConfigError(f"the client sets the {name} header itself; drop it")
        self.extra_body_dict()
        if not _ENV_RE.match(self.api_key_env):
            raise ConfigError(f"--api-key-env takes the NAME of an environment variable "
                              f"(e.g. OPENAI_API_KEY), not {self.api_key_env[:4]!r}...")
        if self.ca_file and not Path(self.ca_file).is_file():
            raise ConfigError(f"CA file {self.ca_file!r} not found; fix --ca-file")
        if self.tokenizer and self.tokenizer != "builtin" and not Path(
                self.tokenizer).exists():
            raise ConfigError(f"tokenizer {self.tokenizer!r} not found; pass a "
                              "tokenizer.json, a folder holding one, or 'builtin'")
        return self

    def extra_body_dict(self) -> dict[str, Any]:
        if not self.extra_body:
            return {}
        try:
            obj = json_loads(self.extra_body)
        except ValueError as e:  # not JSON, or nested too deep
            raise ConfigError(f"--extra-body is not valid JSON ({e}); pass a JSON object "
                              "such as '{\"top_p\": 0.9}'") from None
        if not isinstance(obj, dict):
            raise ConfigError("--extra-body must be a JSON object such as '{\"top_p\": 0.9}'")
        owned = [k for k in _OWNED if k in obj]
        if owned:
            raise ConfigError(f"--extra-body may not set {', '.join(owned)}; use --model, "
                              "--api and --stream/--no-stream")
        return obj

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> OpenAIConfig:
        d = dict(d)
        d["urls"] = tuple(d["urls"])
        d["headers"] = tuple(tuple(h) for h in d.get("headers", ()))
        return cls(**d)


def api_key(config: OpenAIConfig) -> str:
    """The key from the environment variable the config names ('' when unset).

    Unset is fine for the default variable (local servers need no key); a variable the
    user named on purpose must be set.
    """
    key = os.environ.get(config.api_key_env, "")
    if not key and config.api_key_env != DEFAULT_KEY_ENV:
        raise ConfigError(f"${config.api_key_env} is not set; export the API key in it or "
                          "drop --api-key-env")
    if not _header_safe(key):  # it travels in an HTTP header
        raise ConfigError(f"the API key in ${config.api_key_env} holds a character an HTTP "
                          "header cannot carry (a control character, or one outside "
                          "Latin-1); check the variable")
    return key


def _header_safe(value: str) -> bool:
    """Whether ``value`` can be an HTTP header value as is: Latin-1, no control
    characters (CR or LF would start another header)."""
    return all(" " <= c <= "\xff" and c != "\x7f" or c == "\t" for c in value)


def secrets(config: OpenAIConfig, key: str) -> tuple[str, ...]:
    """What never appears in tokenmark's output: the API key and the custom header
    values (:mod:`tokenmark.redact` masks each in every form it may take)."""
    return tuple(v for v in (key, *(value for _, value in config.headers)) if v)


def ssl_context(config: OpenAIConfig) -> ssl.SSLContext | None:
    if not any(u.strip().lower().startswith("https") for u in config.urls):
        return None
    ctx = ssl.create_default_context(cafile=config.ca_file or None)
    if not config.verify_tls:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


def auth_headers(config: OpenAIConfig, key: str) -> bytes:
    """Authorization and custom header lines, CRLF-terminated."""
    lines = [f"Authorization: Bearer {key}\r\n"] if key else []
    lines += [f"{name}: {value}\r\n" for name, value in config.headers]
    return "".join(lines).encode("latin-1")


@dataclass(frozen=True)
class TargetInfo:
    model: str
    served: dict[str, tuple[str, ...]]  # endpoint label -> model ids
    software: str = ""  # what the first endpoint says it runs (see server_software)


#: ``owned_by`` values of ``/v1/models`` that name the serving software.
_OWNERS = {"vllm": "vLLM", "sglang": "SGLang", "llamacpp": "llama.cpp", "tgi": "TGI",
           "tensorrt_llm": "TensorRT-LLM", "trtllm": "TensorRT-LLM"}
#: ``Server`` headers of HTTP frameworks, which say nothing about the model server.
_GENERIC = ("uvicorn", "hypercorn", "gunicorn", "nginx", "envoy", "cloudflare", "werkzeug",
            "python", "aiohttp", "istio-envoy", "awselb", "openresty")


def server_software(header: str, owned_by: str) -> str:
    """The serving software a ``/v1/models`` answer names: tokenmark's own servers by
    their ``Server`` header, known engines by ``owned_by``, else a non-generic
    ``Server`` header; "" when it does not say."""
    header = header.strip()
    if header.startswith("tokenmark/"):
        return header
    known = _OWNERS.get(owned_by.strip().lower())
    if known:
        return known
    if header and not header.lower().startswith(_GENERIC):
        return header[:60]
    return ""


async def probe(config: OpenAIConfig, key: str) -> TargetInfo:
    """``GET <prefix>/models`` on every endpoint; raise TargetError naming the fix."""
    ctx = ssl_context(config)
    served: dict[str, tuple[str, ...]] = {}
    software: list[str] = []
    mask = Redactor(secrets(config, key))
    limit = config.connect_timeout_s or 30.0
    for url in config.urls:
        ep = Endpoint(url, ssl_context=ctx, max_conns=0, keepalive_s=0, now=lambda: 0)
        path = f"{ep.base.path}/models"
        head = (f"GET {path} HTTP/1.1\r\nAccept: application/json\r\n"
                "User-Agent: tokenmark\r\n").encode() + auth_headers(config, key)
        try:
            async with asyncio.timeout(limit):
                resp = await fetch(ep, head)
        except TimeoutError:
            raise TargetError(f"{ep.label} did not answer GET {path} within {limit:g} s; "
                              "check --url or raise --connect-timeout") from None
        except ssl.SSLCertVerificationError as e:
            raise TargetError(f"the TLS certificate of {ep.label} is not trusted "
                              f"({e.verify_message}); pass --ca-file or --no-verify-tls"
                              ) from None
        except OSError as e:
            if e.errno == errno.ECONNREFUSED:
                raise TargetError(f"cannot connect to {ep.label}: connection refused; start "
                                  "the server or fix --url") from None
            raise TargetError(f"cannot reach {ep.label}: {describe_os_error(e)}; check --url"
                              ) from None
        except ConnectionError as e:
            raise TargetError(f"{ep.label} broke the connection on GET {path} ({e}); "
                              "check that --url points at an HTTP server") from None
        served[ep.label] = _models(ep.label, path, resp.status, resp.body, config, key)
        # masked before server_software cuts it: a server may quote anything there
        header = mask.text(resp.headers.get("server", ""))
        software.append(server_software(header, _owner(resp.body)))
    model = config.model
    if not model:
        sets = {ids for ids in served.values()}
        if len(sets) == 1 and len(next(iter(sets))) == 1:
            model = next(iter(sets))[0]
        else:
            listing = "; ".join(f"{k} serves {', '.join(v) or 'nothing'}"
                                for k, v in served.items())
            raise TargetError(f"choose the model with --model ({listing})")
    for label, ids in served.items():
        if model not in ids:
            raise TargetError(f"model {model!r} is not served at {label} (it serves: "
                              f"{', '.join(ids) or 'nothing'}); pass --model with one of them")
    return TargetInfo(model, served, software[0] if software else "")


def _owner(body: bytes) -> str:
    try:
        data = json_loads(body)["data"]
        return str(data[0].get("owned_by") or "")
    except (ValueError, KeyError, TypeError, IndexError, AttributeError):
        return ""


def _models(label: str, path: str, status: int, body: bytes, config: OpenAIConfig,
            key: str) -> tuple[str, ...]:
    if status in (401, 403):
        how = (f"${config.api_key_env} is not set" if not key
               else f"the key in ${config.api_key_env} was refused")
        raise TargetError(f"{label} answered HTTP {status} to GET {path}: {how}; export "
                          "the key or name its variable with --api-key-env")
    if status == 404:
        raise TargetError(f"{label} has no GET {path} (HTTP 404); check the URL's prefix "
                          "(e.g. http://HOST:PORT/v1) or skip the check with "
                          "--no-model-check")
    if status != 200:
        snippet = Redactor(secrets(config, key)).text(
            body[:2048].decode("utf-8", "replace"))[:160]
        raise TargetError(f"{label} answered HTTP {status} to GET {path} ({snippet!r}); "
                          "check the server")
    try:
        data = json_loads(body)["data"]
        return tuple(str(m["id"]) for m in data)
    except (ValueError, KeyError, TypeError):
        raise TargetError(f"{label} did not return an OpenAI model list for GET {path}; "
                          "check --url or skip the check with --no-model-check") from None


def http_name(config: OpenAIConfig) -> str:
    """What an HTTP run measured: the served model, and the server software where the
    server says it (``Llama-3.1-8B on vLLM``); ``openai-http`` before the model is known."""
    model = config.model or "openai-http"
    return f"{model} on {config.served_by}" if config.served_by else model


def check_target(config: OpenAIConfig) -> OpenAIConfig:
    """Validate ``config`` and check the endpoints; return it with the model resolved.

    Call it before a run (the CLI does) so a wrong URL, key or model fails in a second
    with one clear line, not as a run full of errors.
    """
    config.validated()
    key = api_key(config)
    if not config.check_models:
        if not config.model:
            raise ConfigError("--no-model-check needs --model")
        return config
    info = asyncio.run(probe(config, key))
    return replace(config, model=info.model, served_by=info.software)
