"""The emulated server's engine as an in-process system under test.

:class:`EmulatedSUT` serves queries with the same :class:`~tokenmark.engines.emulated.
Emulator` the HTTP server runs, on the run's clock: it is how ``tokenmark run
--virtual-time`` (which cannot cross real sockets) runs against the emulated server's
model. Each query asks for its sample's ``input_tokens`` and ``output_tokens``; the first
token is reported when its step ends and the later ones, each with its own step's end
time, when the request finishes (exact times, far fewer callbacks than streaming), or,
with ``stream``, every token as its step ends.

Given a :class:`~tokenmark.perfmodel.Deployment` whole (any efficiency and serving
policy) rather than named by an :class:`~tokenmark.engines.emulated.EmulatorSpec`, on a
:class:`~tokenmark.clock.FakeClock` it is what the simulator's own driver
(:mod:`tokenmark.sim.driver`) must agree with, request by request (``tests/sim``), so
the simulator and the emulated server share one performance model and one stepping.
"""

from __future__ import annotations

from array import array

from tokenmark.clock import Clock
from tokenmark.engines.emulated import Emulator, EmulatorSpec
from tokenmark.perfmodel import Deployment
from tokenmark.records import ErrorClass, Query, TokenSource
from tokenmark.sut import ResponseHandle

__all__ = ["EmulatedSUT", "emulated_describe"]


def emulated_describe(spec: EmulatorSpec, label: str, efficiency: str) -> dict[str, str]:
    """The labels every result of the emulated server carries."""
    return _labels(spec.accelerator, label, efficiency)


def _labels(accelerator: str, label: str, efficiency: str) -> dict[str, str]:
    return {
        "profile": label,
        "emulated": "true",
        "accelerator": accelerator,
        "efficiency": efficiency,
        "note": "timing of an emulated accelerator from tokenmark's performance model, "
                "not a measurement of hardware",
    }


class _Reply:
    __slots__ = ("handle", "n", "prompt")

    def __init__(self, handle: ResponseHandle, n: int, prompt: int) -> None:
        self.handle = handle
        self.n = n
        self.prompt = prompt

    def on_first(self, t_ns: int) -> None:
        self.handle.token(1, t_ns)

    def on_token(self, t_ns: int) -> None:
        self.handle.token(1, t_ns)

    def on_done(self, t_ns: int, later: array[int] | None) -> None:
        h = self.handle
        if later is not None:
            for t in later:
                h.token(1, t)
        h.complete(self.n, TokenSource.SUT, t_ns=t_ns, input_tokens=self.prompt)

    def on_rejected(self, t_ns: int, reason: str) -> None:
        self.handle.fail(ErrorClass.SUT_ERROR, reason, t_ns=t_ns)


class EmulatedSUT:
    """The emulator of ``spec`` (an :class:`EmulatorSpec`, or a
    :class:`~tokenmark.perfmodel.Deployment` given whole, at time scale 1) on ``clock``.
    ``stream``: report every token as its step ends; by default the later tokens are
    reported at completion, each with its own step's end time."""

    def __init__(self, clock: Clock, spec: EmulatorSpec | Deployment, *,
                 stream: bool = False) -> None:
        if isinstance(spec, Deployment):
            d, label, scale, accelerator = spec, spec.label, 1.0, spec.accelerator.short
        else:
            d = spec.deployment()
            label, scale, accelerator = spec.label(d), spec.time_scale, spec.accelerator
        self.spec = spec
        self.deployment = d
        self.label = label
        self._labels = _labels(accelerator, label, d.efficiency.source)
        self.emulator = Emulator(d, clock, stream=stream, time_scale=scale)

    @property
    def name(self) -> str:
        return "tokenmark-emulated"

    def describe(self) -> dict[str, str]:
        return {"kind": "in-process emulated server", **self._labels}

    async def start(self) -> None:
        return None

    async def flush(self) -> None:
        return None

    async def stop(self) -> None:
        self.emulator.stop()

    def issue(self, query: Query, handle: ResponseHandle) -> None:
        s = query.sample
        n = max(1, s.output_tokens)
        p = max(1, s.input_tokens)
        if not self.emulator.fits(p, n):
            handle.fail(ErrorClass.SUT_ERROR,
                        f"{p} + {n} tokens exceed the KV cache "
                        f"({self.emulator.kv_capacity_tokens:,} tokens)")
            return
        self.emulator.submit(p, n, _Reply(handle, n, p))
