"""The emulated server's engine as an in-process system under test.

:class:`EmulatedSUT` serves queries with the same :class:`~tokenmark.engines.emulated.
Emulator` the HTTP server runs, on the run's clock: it is how ``tokenmark run
--virtual-time`` (which cannot cross real sockets) runs against the emulated server's
model. Each query asks for its sample's ``input_tokens`` and ``output_tokens``; the first
token is reported when its step ends and the later ones, each with its own step's end
time, when the request finishes (exact times, far fewer callbacks than streaming).
"""

from __future__ import annotations

from array import array

from tokenmark.clock import Clock
from tokenmark.engines.emulated import Emulator, EmulatorSpec
from tokenmark.records import ErrorClass, Query, TokenSource
from tokenmark.sut import ResponseHandle

__all__ = ["EmulatedSUT", "emulated_describe"]


def emulated_describe(spec: EmulatorSpec, label: str, efficiency: str) -> dict[str, str]:
    """The labels every result of the emulated server carries."""
    return {
        "profile": label,
        "emulated": "true",
        "accelerator": spec.accelerator,
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
    def __init__(self, clock: Clock, spec: EmulatorSpec) -> None:
        self.spec = spec
        self.deployment = spec.deployment()
        self.label = spec.label(self.deployment)
        self.emulator = Emulator(self.deployment, clock, stream=False,
                                 time_scale=spec.time_scale)

    @property
    def name(self) -> str:
        return "tokenmark-emulated"

    def describe(self) -> dict[str, str]:
        return {"kind": "in-process emulated server",
                **emulated_describe(self.spec, self.label,
                                    self.deployment.efficiency.source)}

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
