"""The emulated server's engine as an in-process system under test.

:class:`EmulatedSUT` serves queries with the same :class:`~tokenmark.engines.emulated.
Emulator` the HTTP server runs, on the run's clock: it is how ``tokenmark run
--virtual-time`` (which cannot cross real sockets) runs against the emulated server's
model. Each query asks for its sample's ``input_tokens`` (plus its images' tokens, by
the model's rule: :mod:`tokenmark.perfmodel.vision`) and ``output_tokens``, planned as
the HTTP server plans them (:mod:`tokenmark.perfmodel.outputs`: exact, or stopping at
the sample's reference length or at a draw from ``stop_lengths``; a reasoning model's
reasoning first, reported through the handle's ``reasoning``). The first token is
reported when its step ends and the later ones, each with its own step's end time, when
the request finishes (exact times, far fewer callbacks than streaming), or, with
``stream``, as their steps end. The output's token ids (the emulated model's words,
:data:`~tokenmark.engines.emulated.OUTPUT_WORDS`) go with the completion, and the first
one with the first token, for accuracy logs.

Given a :class:`~tokenmark.perfmodel.Deployment` whole (any efficiency and serving
policy) rather than named by an :class:`~tokenmark.engines.emulated.EmulatorSpec`, on a
:class:`~tokenmark.clock.FakeClock` it is what the simulator's own driver
(:mod:`tokenmark.sim.driver`) must agree with, request by request (``tests/sim``), so
the simulator and the emulated server share one performance model and one stepping.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence

from tokenmark.clock import Clock
from tokenmark.engines.emulated import Emulator, EmulatorSpec, OutputIds
from tokenmark.errors import BadInputError
from tokenmark.perfmodel import Deployment
from tokenmark.perfmodel.outputs import OutputPlan, OutputPlanner, output_model, prompt_key
from tokenmark.perfmodel.vision import VisionEncoder, chat_images, vision_encoder
from tokenmark.records import ErrorClass, Query, Sample, TokenSource
from tokenmark.sut import ResponseHandle
from tokenmark.tokenizer import BuiltinTokenizer

__all__ = ["EmulatedSUT", "EmulatorIdsHandle", "emulated_describe"]


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


class EmulatorIdsHandle:
    """A response handle that gives the emulated server's answers their token ids from
    what the client read: the text of the whole answer (the emulated model's tokenizer is
    the built-in one, one id per streamed word: the ids ``return_token_ids`` would carry)
    and, when the first chunk arrives, the ids of its tokens (token ``i`` of an answer is
    always word ``i mod 64``), so accuracy logs and LoadGen get ids from a client that
    reads text. Everything else passes through."""

    __slots__ = ("_encode", "_first", "inner")

    def __init__(self, inner: ResponseHandle) -> None:
        self.inner = inner
        self._encode = BuiltinTokenizer().encode
        self._first = hasattr(inner, "first_token_ids")  # still to report

    def _first_chunk(self, n: int) -> None:
        self._first = False
        self.inner.first_token_ids(list(OutputIds(n)))  # type: ignore[attr-defined]

    def sent(self, t_ns: int | None = None) -> None:
        self.inner.sent(t_ns)

    def token(self, n: int = 1, t_ns: int | None = None) -> None:
        if self._first:
            self._first_chunk(n)
        self.inner.token(n, t_ns)

    def reasoning(self, n: int = 1, t_ns: int | None = None) -> None:
        if self._first:
            self._first_chunk(n)
        if hasattr(self.inner, "reasoning"):
            self.inner.reasoning(n, t_ns)
        else:
            self.inner.token(n, t_ns)

    def reasoning_usage(self, tokens: int) -> None:
        if hasattr(self.inner, "reasoning_usage"):
            self.inner.reasoning_usage(tokens)

    def complete(self, output_tokens: int | None = None, source: TokenSource = TokenSource.SUT,
                 *, t_ns: int | None = None, input_tokens: int | None = None,
                 alt_output_tokens: int = -1, cached_input_tokens: int = -1,
                 token_ids: Sequence[int] | None = None, text: str | None = None,
                 endpoint: str = "") -> None:
        if token_ids is None and text is not None:
            token_ids = self._encode(text)
        self.inner.complete(output_tokens, source, t_ns=t_ns, input_tokens=input_tokens,
                            alt_output_tokens=alt_output_tokens,
                            cached_input_tokens=cached_input_tokens, token_ids=token_ids,
                            text=text, endpoint=endpoint)

    def fail(self, error: ErrorClass, detail: str = "", *, t_ns: int | None = None,
             endpoint: str = "") -> None:
        self.inner.fail(error, detail, t_ns=t_ns, endpoint=endpoint)


class _Reply:
    __slots__ = ("handle", "made", "plan", "prompt", "split")

    def __init__(self, handle: ResponseHandle, plan: OutputPlan, prompt: int) -> None:
        self.handle = handle
        self.plan = plan
        self.prompt = prompt
        self.made = 0
        # a ReasoningHandle (tokenmark.sut) takes the reasoning tokens apart
        self.split = plan.reasoning > 0 and hasattr(handle, "reasoning")

    def _tokens(self, n: int, t_ns: int) -> None:
        h = self.handle
        if self.made == 0 and hasattr(h, "first_token_ids"):
            h.first_token_ids(OutputIds(1))
        left = self.plan.reasoning - self.made
        self.made += n
        if self.split and left > 0:
            r = min(left, n)
            h.reasoning(r, t_ns)  # type: ignore[attr-defined]
            n -= r
            if n <= 0:
                return
        h.token(n, t_ns)

    def on_first(self, t_ns: int) -> None:
        self._tokens(1, t_ns)

    def on_tokens(self, n: int, t_ns: int) -> None:
        self._tokens(n, t_ns)

    def on_done(self, t_ns: int, later: array[int] | None) -> None:
        if later is not None:
            for t in later:
                self._tokens(1, t)
        n = self.plan.total
        self.handle.complete(n, TokenSource.SUT, t_ns=t_ns, input_tokens=self.prompt,
                             token_ids=OutputIds(n))

    def on_rejected(self, t_ns: int, reason: str) -> None:
        self.handle.fail(ErrorClass.SUT_ERROR, reason, t_ns=t_ns)


class EmulatedSUT:
    """The emulator of ``spec`` (an :class:`EmulatorSpec`, or a
    :class:`~tokenmark.perfmodel.Deployment` given whole, at time scale 1) on ``clock``.
    ``stream``: report every token as its step ends; by default the later tokens are
    reported at completion, each with its own step's end time."""

    def __init__(self, clock: Clock, spec: EmulatorSpec | Deployment, *,
                 stream: bool = False, stop_lengths: str = "", output_seed: int = 0) -> None:
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
        self.vision: VisionEncoder | None = vision_encoder(d.model)
        bench = d.model.benchmarks[0] if d.model.benchmarks else d.model.name
        om = output_model(bench)
        self.outputs = OutputPlanner(om, stop=om.stop_lengths(stop_lengths), seed=output_seed)
        self._keyed = om.reasons or self.outputs.stop is not None

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
        try:
            images, flops, parts = self._images(s)
        except BadInputError as e:
            handle.fail(ErrorClass.SUT_ERROR, str(e))
            return
        p = max(1, s.input_tokens) + images
        plan = self.outputs.plan(prompt_key(*parts) if self._keyed else "",
                                 max(1, s.output_tokens),
                                 reference=s.expected_output_tokens)
        if not self.emulator.fits(p, plan.total):
            handle.fail(ErrorClass.SUT_ERROR,
                        f"{p} + {plan.total} tokens exceed the KV cache "
                        f"({self.emulator.kv_capacity_tokens:,} tokens)")
            return
        self.emulator.submit(p, plan.total, _Reply(handle, plan, p), encoder_flops=flops)

    def _images(self, s: Sample) -> tuple[int, float, list[bytes]]:
        """The sample's image tokens and encoder FLOPs, and the key parts of its prompt
        as the HTTP server reads them (texts, then each image's size)."""
        if not s.images and not self._keyed:
            return 0, 0.0, []
        msgs = s.messages if s.is_chat else None
        if msgs is None:
            return 0, 0.0, [s.prompt.encode()]
        return chat_images(self.vision, msgs, self.deployment.model.name)
