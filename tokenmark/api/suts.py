"""The one place that chooses and builds the system under test (issue 20).

A run names its system under test in one of these ways, and every entry point (``run``,
``find-peak``, ``sweep``, ``scaling-run``, audits, official-LoadGen runs, the Python API)
builds it here:

- a built-in one, :class:`SutSpec` -> :func:`make_sut`: the emulated server over HTTP
  (:class:`EmulatedTarget`; in-process on a virtual clock), the latency model, or null;
- an OpenAI-compatible HTTP target, :func:`http_sut_factory` (in this process or in
  client worker processes);
- a real model in-process, :func:`hf_sut_factory` (``--sut hf``);
- ``n`` replicas of any of them behind one router, :func:`replicated`.

:func:`from_spec` makes the choice from a :class:`~tokenmark.config.runspec.RunSpec`
(its ``sut`` and ``target`` groups); :func:`replicas_of` for the scale commands. The
heavy modules (the emulator's performance model, the HTTP client, the model engine) load
only when their system is built.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from tokenmark.adapters.inprocess import LatencyModel
from tokenmark.clock import Clock, FakeClock
from tokenmark.config.layering import LayeredSettings
from tokenmark.config.runspec import RunSpec, headers
from tokenmark.cpus import CpuPinning
from tokenmark.errors import ConfigError, TargetError
from tokenmark.records import Query
from tokenmark.sut import ResponseHandle, SystemUnderTest
from tokenmark.trust import fingerprint

if TYPE_CHECKING:
    from tokenmark.adapters.openai_http import OpenAIHttpSUT
    from tokenmark.adapters.openai_target import OpenAIConfig
    from tokenmark.engines.emulated import EmulatorSpec
    from tokenmark.servers.emulated import EmulatedConfig, EmulatedServer
    from tokenmark.servers.process import ServerProcess

__all__ = ["EmulatedTarget", "SutFactory", "SutSpec", "builtin_spec", "from_spec",
           "hf_sut_factory", "http_config", "http_sut_factory", "make_sut", "replicas_of",
           "replicated"]

#: A system under test built on a run's clock.
SutFactory = Callable[[Clock], SystemUnderTest]


def _emulator_spec() -> EmulatorSpec:
    from tokenmark.engines.emulated import EmulatorSpec

    return EmulatorSpec()


def _emulator_server() -> EmulatedConfig:
    from tokenmark.servers.emulated import EmulatedConfig

    return EmulatedConfig()


@dataclass(frozen=True)
class SutSpec:
    """Which built-in system under test to run against.

    ``emulated``: the emulated server (:mod:`tokenmark.servers.emulated`) of
    ``emulator``; in real time it is started on a free loopback port (in its own
    process unless ``emulator_in_process``) and benchmarked over HTTP with ``api`` and
    ``stream``, then stopped; on a virtual clock its engine serves in-process
    (:class:`~tokenmark.adapters.emulated_sut.EmulatedSUT`).
    """

    kind: str = "latency-model"  # latency-model | null | emulated
    model: LatencyModel = LatencyModel()
    stream_tokens: bool = False
    emulator: EmulatorSpec = field(default_factory=_emulator_spec)
    emulator_server: EmulatedConfig = field(default_factory=_emulator_server)
    emulator_in_process: bool = False
    api: str = "completions"
    stream: bool = True
    preconnect: int = 0
    #: The client's settings for the emulated target (its URL is filled in); None: the
    #: defaults with ``api``, ``stream`` and ``preconnect``.
    client: OpenAIConfig | None = None
    #: The emulated server's process on one CPU, the client on the others (two CPUs or
    #: more; :mod:`tokenmark.cpus`). Only for the server tokenmark starts itself.
    pin_cpus: bool = True
    #: Why ``pin_cpus`` is off, for ``run.sut.cpus``.
    unpinned_because: str = "--no-pin-cpus"


def make_sut(spec: SutSpec, clock: Clock) -> SystemUnderTest:
    """The built-in system under test ``spec`` names, on ``clock``."""
    from tokenmark.adapters.inprocess import LatencyModelSUT, NullSUT

    if spec.kind == "latency-model":
        return LatencyModelSUT(clock, spec.model, stream_tokens=spec.stream_tokens)
    if spec.kind == "null":
        return NullSUT()
    if spec.kind == "emulated":
        if isinstance(clock, FakeClock):
            from tokenmark.adapters.emulated_sut import EmulatedSUT

            srv = spec.emulator_server
            return EmulatedSUT(clock, spec.emulator, stop_lengths=srv.stop_lengths,
                               output_seed=srv.output_seed)
        return EmulatedTarget(clock, spec)
    raise ConfigError(f"unknown system under test {spec.kind!r}; choose emulated, "
                      "latency-model or null")


class EmulatedTarget:
    """The emulated server on a free loopback port and the HTTP client against it: the
    main job's default target. ``start`` starts the server (its own process, or this
    one's event loop) and the client; ``stop`` stops both.

    A sample with a reference output length (``expected_output_tokens``) is sent with
    :data:`~tokenmark.servers.emulated.REFERENCE_FIELD`, so the emulated model stops
    there (tokenmark's own field, sent to its own emulator only). When the client keeps
    the output text (accuracy runs, audits), each answer's text becomes its token ids
    (:class:`~tokenmark.adapters.emulated_sut.EmulatorIdsHandle`)."""

    def __init__(self, clock: Clock, spec: SutSpec) -> None:
        from tokenmark.adapters.emulated_sut import emulated_describe

        self._describe = emulated_describe
        self.spec = spec
        self._clock = clock
        d = spec.emulator.deployment()  # bad input fails before anything starts
        self.label = spec.emulator.label(d)
        self._efficiency = d.efficiency.source
        from tokenmark.servers.emulated import REFERENCE_FIELD

        self._reference = REFERENCE_FIELD.encode()
        self.url = ""
        self.client: OpenAIHttpSUT | None = None
        self.server: EmulatedServer | None = None
        self.process: ServerProcess | None = None
        self._pinning: CpuPinning | None = None

    @property
    def name(self) -> str:
        return "tokenmark-emulated-http"

    def describe(self) -> dict[str, str]:
        d = {"kind": "emulated server over HTTP",
             **self._describe(self.spec.emulator, self.label, self._efficiency),
             "server": "same process" if self.spec.emulator_in_process else
             "own process", "url": self.url}
        if self._pinning is not None:
            d["cpus"] = self._pinning.description
        srv = self.spec.emulator_server
        if srv.faults or srv.fault_cycle:
            d["faults"] = ", ".join([f"{f}={p:g}" for f, p in srv.faults]
                                    + [f"cycle {','.join(srv.fault_cycle)}"] * bool(
                                        srv.fault_cycle))
        if self.client is not None:
            client = self.client.describe()
            client.pop("kind", None)
            d.update({k: v for k, v in client.items() if k not in d})
        return d

    async def start(self) -> None:
        from tokenmark.adapters.openai_http import OpenAIHttpSUT
        from tokenmark.adapters.openai_target import OpenAIConfig
        from tokenmark.servers.emulated import EmulatedServer, spec_arguments
        from tokenmark.servers.process import ServerProcess

        spec = self.spec
        if spec.emulator_in_process:
            self.server = EmulatedServer(spec.emulator, spec.emulator_server)
            await self.server.start()
            self.url = self.server.url
        else:
            proc = ServerProcess(spec_arguments(spec.emulator, spec.emulator_server),
                                 module="tokenmark.servers.emulated")
            try:
                proc.start()
            except RuntimeError as e:
                raise TargetError(f"the emulated server did not start: {e}") from None
            self.process = proc
            self.url = proc.url
            other = await fingerprint.other_work_cores() if spec.pin_cpus else None
            self._pinning = CpuPinning(spec.pin_cpus, other=other,
                                        off_reason=spec.unpinned_because)
            self._pinning.pin(proc.pid)
        if spec.client is not None:
            cfg = replace(spec.client, urls=(self.url,))
        else:
            cfg = OpenAIConfig(urls=(self.url,), api=spec.api, stream=spec.stream,
                               preconnect=spec.preconnect)
        try:
            self.client = OpenAIHttpSUT(self._clock, cfg)
            await self.client.start()
        except BaseException:  # the server stops and the client's CPUs come back
            with contextlib.suppress(Exception):
                await self.stop()
            raise

    def issue(self, query: Query, handle: ResponseHandle) -> None:
        client = self.client
        assert client is not None
        if client.config.keep_text:
            from tokenmark.adapters.emulated_sut import EmulatorIdsHandle

            handle = EmulatorIdsHandle(handle)
        ref = query.sample.expected_output_tokens
        if ref < 0:
            client.issue(query, handle)
            return
        body = client.body_for(query)
        client.send(0, query.seq, b'%s,"%s":%d}' % (body[:-1], self._reference, ref), handle)

    def prepare(self, query: Query) -> None:
        """The client renders the body ahead (:class:`tokenmark.sut.Preparable`)."""
        if self.client is not None:
            self.client.prepare(query)

    async def flush(self) -> None:
        if self.client is not None:
            await self.client.flush()

    async def stop(self) -> None:
        if self.client is not None:
            await self.client.stop()
        if self.server is not None:
            await self.server.stop()
        if self.process is not None:
            self.process.stop()
        if self._pinning is not None:
            self._pinning.restore()


def http_sut_factory(config: OpenAIConfig, *, workers: int = 0, check: bool = True
                     ) -> Callable[[Clock], SystemUnderTest]:
    """Check the target now (one clear line on failure; ``check=False``: the caller did)
    and return the SUT factory."""
    from tokenmark.adapters.openai_target import check_target

    checked = check_target(config) if check else config
    if workers < 0:
        raise ConfigError(f"--workers must be >= 0 (got {workers})")

    def make(clock: Clock) -> SystemUnderTest:
        if workers:
            from tokenmark.adapters.workers import WorkerPoolSUT

            return WorkerPoolSUT(clock, checked, workers=workers)
        from tokenmark.adapters.openai_http import OpenAIHttpSUT

        return OpenAIHttpSUT(clock, checked)

    return make


def hf_sut_factory(model_dir: Path) -> Callable[[Clock], SystemUnderTest]:
    """A local Hugging Face model in-process (``tokenmark run --sut hf``), real time only."""
    if not (model_dir / "config.json").is_file():
        raise ConfigError(f"{model_dir}: no config.json; give a Hugging Face model folder "
                          "(--model-dir)")

    def make(clock: Clock) -> SystemUnderTest:
        if isinstance(clock, FakeClock):
            raise ConfigError("a real model runs in real time; drop --virtual-time")
        from tokenmark.adapters.engine_sut import EngineSUT
        from tokenmark.engines.hf import HFEngine

        return EngineSUT(HFEngine(model_dir))

    return make


def replicated(factory: Callable[[Clock], SystemUnderTest], replicas: int,
               routing: str = "round-robin") -> Callable[[Clock], SystemUnderTest]:
    """A factory of ``replicas`` copies of ``factory``'s system behind one router."""
    from tokenmark.scale.replicas import ReplicatedSUT

    if replicas < 1:
        raise ValueError("at least one replica")

    def make(clock: Clock) -> SystemUnderTest:
        if replicas == 1:
            return factory(clock)
        return ReplicatedSUT([factory(clock) for _ in range(replicas)], routing)

    return make


def http_config(spec: RunSpec, *, preconnect: int = 0, keep_text: bool = False,
                api: str = "", urls: tuple[str, ...] | None = None) -> OpenAIConfig:
    """The HTTP client's configuration of ``spec``'s target (not yet checked):
    ``preconnect`` when the spec gives none, ``api`` when it gives none, the first
    ``urls`` (replicas) instead of all."""
    from tokenmark.adapters.openai_target import OpenAIConfig

    t = spec.target
    tok = spec.dataset.tokenizer
    return OpenAIConfig(
        urls=t.urls if urls is None else urls, api=t.api or api or "completions",
        stream=t.stream, model=t.model, api_key_env=t.api_key_env,
        headers=headers(t.headers), verify_tls=t.verify_tls, ca_file=t.ca_file,
        connect_timeout_s=t.connect_timeout, first_token_timeout_s=t.first_token_timeout,
        request_timeout_s=t.request_timeout, pool_size=t.pool_size,
        preconnect=preconnect if t.preconnect is None else t.preconnect,
        spare_connections=t.spare_connections, routing=t.routing, max_tokens=t.max_tokens,
        ignore_eos=t.ignore_eos, temperature=t.temperature, include_usage=t.include_usage,
        extra_body=t.extra_body, tokenizer="" if tok in ("builtin", "server") else tok,
        check_models=t.model_check, keep_text=keep_text, max_event_bytes=t.max_event_bytes,
        length_probe=t.length_probe)


def builtin_spec(spec: RunSpec, layered: LayeredSettings, *, api: str = "completions",
                 keep_text: bool = False) -> SutSpec:
    """The built-in system under test of ``spec``'s ``sut`` options (no HTTP target):
    an unknown accelerator or a model that does not fit fails here."""
    from tokenmark.adapters.openai_target import OpenAIConfig
    from tokenmark.engines.emulated import EmulatorSpec

    su, t = spec.sut, spec.target
    lm = LatencyModel(
        ttft_ns=int((50.0 if su.ttft_ms is None else su.ttft_ms) * 1e6),
        tpot_ns=int((10.0 if su.tpot_ms is None else su.tpot_ms) * 1e6),
        max_batch=su.max_batch or 0, batch_slope=su.batch_slope or 0.0)
    emu = EmulatorSpec(accelerator=su.accelerator or "H200", model=layered.preset.name,
                       precision=su.precision, tp=su.tp, replicas=su.replicas,
                       accelerators=su.accelerators)
    kind = su.chosen
    if kind == "emulated":
        emu.deployment()
    conns = layered.settings.concurrency or layered.settings.max_concurrency or 0
    return SutSpec(
        kind=kind, model=lm, emulator=emu, api=api, stream=t.stream, preconnect=conns,
        pin_cpus=su.pin_cpus,
        # outputs are logged: the client keeps the emulator's text (its token ids);
        # --pool-size caps the connections to the emulated server too (an Offline query
        # of 26,736 samples opened one each: past the machine's open-file limit)
        client=OpenAIConfig(urls=("http://emulated",), api=api, stream=t.stream,
                            preconnect=conns, keep_text=keep_text, pool_size=t.pool_size)
        if keep_text or t.pool_size else None)


def from_spec(spec: RunSpec, layered: LayeredSettings, *, api: str = "completions",
              keep_text: bool = False,
              ) -> tuple[SutSpec | SutFactory, OpenAIConfig | None]:
    """The system under test ``spec`` names, and its HTTP client's configuration (checked
    against the target: one clear line on failure) when it is an HTTP target."""
    if spec.sut.chosen == "hf" and not spec.target.urls:
        return hf_sut_factory(Path(spec.sut.model_dir or "")), None
    if not spec.target.urls:
        return builtin_spec(spec, layered, api=api, keep_text=keep_text), None
    from tokenmark.adapters.openai_target import check_target

    conc = layered.settings.concurrency or layered.settings.max_concurrency or 0
    cfg = check_target(http_config(spec, preconnect=conc, keep_text=keep_text, api=api))
    return http_sut_factory(cfg, workers=spec.target.workers, check=False), cfg


def replicas_of(spec: RunSpec, layered: LayeredSettings, *, api: str = "completions",
                ) -> Callable[[int], SutSpec | SutFactory]:
    """``n`` -> ``n`` replicas of ``spec``'s system under test: the first ``n`` of its
    HTTP endpoints (``find-peak``, ``sweep``, ``scaling-run``), or ``n`` copies of the
    built-in one behind a router."""
    urls = spec.target.urls
    if urls:
        def http(n: int) -> SutSpec | SutFactory:
            if n > len(urls):
                raise ConfigError(f"{n} replicas need {n} --url endpoints (got {len(urls)})")
            return http_sut_factory(http_config(spec, api=api, urls=urls[:n]),
                                    workers=spec.target.workers)
        return http
    base = builtin_spec(spec, layered, api=api)
    # several emulated servers share the machine's CPUs as they come
    unpinned = replace(base, pin_cpus=False,
                       unpinned_because="several emulated replicas share the CPUs")

    def local(n: int) -> SutSpec | SutFactory:
        if n == 1:
            return base
        return replicated(lambda c: make_sut(unpinned, c), n, spec.target.routing)

    return local
