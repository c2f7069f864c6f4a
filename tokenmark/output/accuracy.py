"""The run's ``mlperf_log_accuracy.json``, written as responses complete.

:class:`AccuracyRecorder` is the runner's output consumer
(:data:`tokenmark.loadgen.runner.OutputConsumer`): for each finished request that
LoadGen would log (every one in accuracy mode; in performance mode those LoadGen's
sampling rule picks, :class:`~tokenmark.mlperf.accuracylog.AccuracyLogSampler`), it appends one
entry in LoadGen's exact text (:mod:`tokenmark.mlperf.accuracylog`) to the file, in completion
order, as LoadGen does. Memory stays bounded: entries go to disk as they come.

What each field holds, and where it comes from:

* ``data``: the output token ids the system under test returned (in-process engines),
  or, when it returned only text (an HTTP server), the text encoded by ``encode`` (the
  model's tokenizer; the reference API harnesses do the same);
* ``token_data``: the ids of the first streamed chunk as the SUT reported them when it
  arrived (:class:`~tokenmark.sut.TokenIdsHandle`). A SUT that cannot report them (an
  HTTP server streams text) gets the first ``chunk_tokens[0]`` ids of ``data``; the
  recorder counts those entries (``derived_first_tokens``), because TEST06's first-token
  check is then not independent of the output;
* ``token_count``: the output token count the run used for throughput (the record's
  ``output_tokens``: the SUT's or server's own count), which TEST06 compares with
  ``data``.

Failed requests are not logged (LoadGen never sees them complete) and are counted in
``failed``. The file is written under its final name from the start (as LoadGen does):
a run that is killed leaves it without its footer, which every reader reports.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from tokenmark.mlperf.accuracylog import (
    ACCURACY_LOG_FILE,
    FOOTER,
    HEADER,
    AccuracyEntry,
    AccuracyLogFormat,
    AccuracyLogSampler,
    encode_ids,
    render_entry,
)
from tokenmark.mlperf.settings import EffectiveSettings
from tokenmark.records import RequestRecord

__all__ = ["AccuracyRecorder", "AccuracyStats", "accuracy_recorder"]

#: Encodes output text into token ids (a model tokenizer's ``encode`` without specials).
Encoder = Callable[[str], Sequence[int]]
_FLUSH_EVERY = 64


@dataclass
class AccuracyStats:
    """What the recorder saw; written to ``results.json`` beside the log."""

    logged: int = 0
    failed: int = 0
    #: Logged entries whose output came as text and was encoded by the tokenizer.
    encoded_from_text: int = 0
    #: Logged entries whose first-token data was taken from the output itself.
    derived_first_tokens: int = 0
    #: Logged entries with no output at all (the SUT gave neither ids nor text).
    missing_output: int = 0

    def to_json(self) -> dict[str, int]:
        return {"logged": self.logged, "failed": self.failed,
                "encoded_from_text": self.encoded_from_text,
                "derived_first_tokens": self.derived_first_tokens,
                "missing_output": self.missing_output}


class AccuracyRecorder:
    """Writes ``path`` as LoadGen would for a run under ``eff``. Call :meth:`close`."""

    def __init__(self, path: Path, eff: EffectiveSettings, *,
                 encode: Encoder | None = None) -> None:
        self.path = path
        self.format = AccuracyLogFormat.for_settings(eff)
        self.sampler = AccuracyLogSampler(eff)
        self.stats = AccuracyStats()
        self._encode = encode
        self._f: IO[str] | None = open(path, "w", encoding="ascii", newline="\n")
        self._f.write(HEADER)
        self._since_flush = 0

    def __call__(self, rec: RequestRecord, token_ids: Sequence[int] | None,
                 text: str | None, first_ids: Sequence[int] | None) -> None:
        if not rec.ok:
            self.stats.failed += 1
            return
        if not self.sampler.should_log(rec.seq):
            return
        self.add(self.entry(rec, token_ids, text, first_ids))

    def entry(self, rec: RequestRecord, token_ids: Sequence[int] | None,
              text: str | None, first_ids: Sequence[int] | None) -> AccuracyEntry:
        """The entry for one finished record (see the module docstring)."""
        st = self.stats
        ids: Sequence[int]
        if token_ids is not None:
            ids = token_ids
        elif text is not None and self._encode is not None:
            ids = self._encode(text)
            st.encoded_from_text += 1
        else:
            ids = ()
            st.missing_output += 1
        if first_ids is None:
            k = rec.chunk_tokens[0] if rec.chunk_tokens else 1
            first_ids = ids[:max(1, k)]
            st.derived_first_tokens += 1
        return AccuracyEntry(seq_id=rec.seq, qsl_idx=rec.sample_index, data=encode_ids(ids),
                             token_data=encode_ids(first_ids), token_count=rec.output_tokens)

    def add(self, entry: AccuracyEntry) -> None:
        f = self._f
        if f is None:
            raise ValueError("the accuracy log is closed")
        f.write(render_entry(entry, self.format, first=self.stats.logged == 0))
        self.stats.logged += 1
        self._since_flush += 1
        if self._since_flush >= _FLUSH_EVERY:
            f.flush()
            self._since_flush = 0

    def close(self) -> None:
        """Write the footer and make the file durable. Idempotent."""
        f = self._f
        if f is None:
            return
        self._f = None
        f.write(FOOTER)
        f.flush()
        os.fsync(f.fileno())
        f.close()

    def __enter__(self) -> AccuracyRecorder:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def accuracy_recorder(output_dir: Path, eff: EffectiveSettings, *,
                      encode: Encoder | None = None) -> AccuracyRecorder | None:
    """The recorder a run needs, or ``None`` when LoadGen would log nothing.

    ``None`` for tokenmark's own patterns (no LoadGen logs) and for performance runs
    that sample nothing (the MLPerf writer then leaves LoadGen's empty ``[\\n]\\n``).
    """
    if not eff.is_mlperf:
        return None
    if not AccuracyLogSampler(eff).enabled:
        return None
    return AccuracyRecorder(output_dir / ACCURACY_LOG_FILE, eff, encode=encode)
