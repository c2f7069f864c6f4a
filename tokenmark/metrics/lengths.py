"""Lengths and counts against the server's own: the facts behind three findings.

:class:`LengthTally` sees every finished record (a record consumer of the run) and keeps
what :mod:`tokenmark.mlperf.rules` needs:

- ``input_length_agreement``: each request's planned prompt length beside the server's
  ``prompt_tokens`` (only where the server reported it);
- ``output_length``: answers shorter than the length their request demanded exactly
  (``ignore_eos``), by finish reason, with how many tokens each missed (a count that is
  not the server's or exact per event, but re-encoded from the text by a client
  tokenizer, is short only when it misses more than 1 token and 2%);
- ``stream_usage_agreement``: ``usage.completion_tokens`` against the tokens counted
  from the stream, exact where the per-event counts are (token ids, logprobs, a server
  known to stream one token per event), else only "never fewer than streamed".

Memory: two int32 values per request that reported prompt tokens, and one per short
answer; nothing per token.
"""

from __future__ import annotations

from array import array
from collections import defaultdict
from typing import Any

from tokenmark.mlperf.rules import (
    Finding,
    input_length_agreement,
    output_length,
    stream_usage_agreement,
)
from tokenmark.records import RequestRecord, TokenSource

__all__ = ["EXACT_BASES", "LengthTally"]

#: ``token_basis`` values whose stream counts are exact (see ``RequestRecord``).
EXACT_BASES = ("ids", "logprobs", "events")


class LengthTally:
    """A record consumer; :meth:`findings` after the run."""

    def __init__(self) -> None:
        self.planned = array("i")
        self.served = array("i")
        self.short: dict[str, list[int]] = defaultdict(list)
        self.demanded = 0
        self.exact = self.exact_off = self.other = self.other_over = 0
        self.examples: list[str] = []
        self.probes = 0

    def add(self, r: RequestRecord) -> None:
        if r.server_input_tokens >= 0:
            self.planned.append(r.input_tokens)
            self.served.append(r.server_input_tokens)
        if r.error is not None or r.done_ns < 0:
            return
        want = r.demanded_output_tokens
        if want > 0:
            self.demanded += 1
            exact = r.token_source is TokenSource.USAGE or r.token_basis in EXACT_BASES
            # a count re-encoded from the text (a client tokenizer) may merge or split a
            # token or two at the edges: short only beyond that
            floor = want if exact else want - 1 - int(0.02 * want)
            if r.output_tokens < floor:
                self.short[r.finish_reason].append(want - r.output_tokens)
        if r.token_source is TokenSource.USAGE and r.stream_tokens >= 0:
            if r.token_basis in EXACT_BASES:
                self.exact += 1
                if r.stream_tokens != r.output_tokens:
                    self.exact_off += 1
                    self._example(r)
            else:
                self.other += 1
                if r.stream_tokens > r.output_tokens:
                    self.other_over += 1
                    self._example(r)

    def add_probe(self, planned: int, served: int) -> None:
        """One probe request's prompt (the run's first sample, sent before the run)."""
        self.planned.append(planned)
        self.served.append(served)
        self.probes += 1

    def _example(self, r: RequestRecord) -> None:
        if len(self.examples) < 3:
            self.examples.append(f"request {r.seq}: usage {r.output_tokens}, streamed "
                                 f"{r.stream_tokens} ({r.token_basis})")

    def findings(self, overhead: int | None, probe: str = "") -> list[Finding]:
        if self.probes:
            probe = f"; {self.probes} of them a probe request sent before the run" + probe
        found = [input_length_agreement(self.planned, self.served, overhead, probe=probe),
                 output_length(dict(self.short), self.demanded),
                 stream_usage_agreement(self.exact, self.exact_off, self.other,
                                        self.other_over, self.examples)]
        return [f for f in found if f is not None]

    def to_json(self) -> dict[str, Any]:
        return {
            "prompt_tokens_reported": len(self.served) - self.probes,
            "exact_output_demanded": self.demanded,
            "short_answers": {k or "none": len(v) for k, v in sorted(self.short.items())},
            "usage_checked": {"exact": self.exact, "exact_disagree": self.exact_off,
                              "other": self.other, "other_over": self.other_over},
        }
