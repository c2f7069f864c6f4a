"""LoadGen's ``mlperf_log_accuracy.json``: its exact text, and which samples it holds.

The reference evaluators and the compliance scripts read this file, so tokenmark writes
it byte for byte as LoadGen 6.0.17 does (``logging.cc`` ``LogAccuracy``,
``WriteAccuracyHeaderLocked`` / ``FooterLocked``; proven against the official wheel in
``tests/integration/test_accuracy_loadgen.py``):

* the file is ``[``, then per logged sample ``\\n{ `` (``,\\n{ `` after the first), the
  fields as ``"name" : value`` joined by ``, ``, and `` }``, then ``\\n]\\n``; with no
  sample logged it is exactly ``[\\n]\\n``;
* fields, in order: ``seq_id`` (LoadGen's sample sequence number), ``qsl_idx`` (the
  dataset index), ``data`` (the response bytes as upper-case hex in quotes), then, for
  token-latency benchmarks (``use_token_latencies``), ``token_data`` (the bytes passed
  to ``FirstTokenComplete``; every scenario but Offline) and ``token_count`` (the
  ``n_tokens`` the SUT reported);
* entries appear in completion order, not in ``seq_id`` order.

Token ids are little-endian int32, as the reference harnesses send them and as
``compliance/TEST06/run_verification.py`` (``--dtype int32``, its default) reads them.
Some published logs hold int64 ids (the script's ``--dtype int64``; v5.1 Intel):
:func:`token_width` tells the two apart from the data alone (see there), and
:func:`decode_ids` reads either width.

A submitted log is truncated by the checker's ``truncate_accuracy_log.py`` (its first and
last 4096 characters around ``\n\n...\n\n``); :func:`is_truncated` recognises that,
with LF or CRLF line ends (a log checked out with ``core.autocrlf`` has CRLF).

Which samples are logged (:class:`AccuracyLogSampler`, ``loadgen.cc``
``ResponseDelegateDetailed`` and ``IssueQueries``): in accuracy mode every one. In
performance mode, sample ``k`` (its sequence id) is logged when ``v_k + offset`` (less 1
when that reaches 1) is at most ``p``, where

* ``v_k`` is the ``k``-th ``uniform_real_distribution<double>(0, 1)`` draw of a
  ``std::mt19937`` that LoadGen never seeds (``SequenceGen::InitAccLogRng`` is never
  called in 6.0.17), so it runs from the engine's default seed 5489, one draw per sample
  in sequence order;
* ``offset`` is the first such draw of ``mt19937(accuracy_log_rng_seed)``;
* ``p`` is ``accuracy_log_probability``, or, when ``accuracy_log_sampling_target`` is
  set, ``target / expected`` with ``expected = uint64(target_qps * min_duration_ms /
  1000)``, times ``samples_per_query`` outside Offline, and at least
  ``min_query_count * samples_per_query`` (Offline: ``min_sample_count``).

This is a domain module: standard library, numpy and :mod:`tokenmark.mlperf.lgrandom` only.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from tokenmark.errors import DatasetError
from tokenmark.inputs import json_loads
from tokenmark.mlperf.lgrandom import MT19937, generate_canonical
from tokenmark.mlperf.settings import EffectiveSettings, Mode, Scenario

__all__ = [
    "ACCURACY_LOG_FILE",
    "EMPTY_ACCURACY_LOG",
    "FOOTER",
    "HEADER",
    "LOADGEN_DEFAULT_ENGINE_SEED",
    "AccuracyEntry",
    "AccuracyLogFormat",
    "AccuracyLogSampler",
    "decode_ids",
    "encode_ids",
    "is_truncated",
    "parse_accuracy_log",
    "render_accuracy_log",
    "render_entry",
    "token_width",
]

ACCURACY_LOG_FILE: Final = "mlperf_log_accuracy.json"
HEADER: Final = "["
FOOTER: Final = "\n]\n"
EMPTY_ACCURACY_LOG: Final = HEADER + FOOTER
#: ``std::mt19937``'s ``default_seed``: what LoadGen's per-sample draws start from.
LOADGEN_DEFAULT_ENGINE_SEED: Final = 5489
_INT32: Final = np.dtype("<i4")
_INT64: Final = np.dtype("<i8")
_TWO32: Final = 4294967296.0
_TWO64: Final = 18446744073709551616.0
_BELOW_ONE: Final = math.nextafter(1.0, 0.0)


def encode_ids(ids: Sequence[int]) -> bytes:
    """Token ids as LoadGen's response bytes: little-endian int32, 4 bytes each.

    Raises :class:`~tokenmark.errors.DatasetError` for an id outside int32 (no
    tokenizer has one; a wrapped id would corrupt the evaluation silently).
    """
    arr = np.asarray(list(ids), dtype=np.int64)
    if arr.size and (int(arr.min()) < -(2**31) or int(arr.max()) >= 2**31):
        raise DatasetError("a token id does not fit LoadGen's int32 accuracy log")
    return arr.astype(_INT32).tobytes()


def decode_ids(hex_text: str, width: int = 4) -> list[int]:
    """The token ids of a ``data`` or ``token_data`` hex string, ``width`` bytes each
    (4: int32, LoadGen's and the reference harnesses'; 8: int64), little-endian."""
    if width not in (4, 8):
        raise DatasetError(f"token ids are 4 or 8 bytes wide, not {width}")
    raw = bytes.fromhex(hex_text)
    if len(raw) % width:
        raise DatasetError(f"{len(raw)} bytes of token data is not a whole number of "
                           f"int{8 * width}s")
    dtype = _INT32 if width == 4 else _INT64
    return np.frombuffer(raw, dtype=dtype).astype(np.int64).tolist()  # type: ignore[no-any-return]


def token_width(entries: Iterable[Mapping[str, Any]]) -> int:
    """The byte width of the token ids in a parsed accuracy log: 8 or 4.

    8 (int64) when every ``data`` and ``token_data`` is a whole number of 8-byte values,
    there is at least one, and each value's upper 4 bytes are the sign extension of its
    lower 4 (token ids fit in 32 bits, so int64 ids have all-zero upper halves); else 4
    (int32). An int32 log passes that test only if every second id in every entry is 0
    (or -1 after a negative id): no tokenizer's output looks like that. The widths are
    told apart without ``token_count``, so TEST06's sample-length check, which compares
    the two, stays a check.
    """
    seen = False
    for e in entries:
        for key in ("data", "token_data"):
            text = e.get(key)
            if not isinstance(text, str) or not text:
                continue
            raw = bytes.fromhex(text)
            if len(raw) % 8:
                return 4
            words = np.frombuffer(raw, dtype=_INT32)
            low, high = words[0::2], words[1::2]
            if not np.array_equal(high, np.where(low < 0, -1, 0)):
                return 4
            seen = True
    return 8 if seen else 4


_TRUNCATION_MARKS: Final = (b"\n\n...\n\n", b"\r\n\r\n...\r\n\r\n")


def is_truncated(raw: bytes) -> bool:
    """Whether an accuracy log is the checker's truncated copy (LF or CRLF line ends)."""
    return any(m in raw for m in _TRUNCATION_MARKS)


@dataclass(frozen=True, slots=True)
class AccuracyLogFormat:
    """Which optional fields LoadGen writes: set once per run from the settings."""

    use_tokens: bool = True  # token_count (LoadGen's SetUseTokens)
    first_token: bool = True  # token_data (SetNeedsFirstToken: every scenario but Offline)

    @classmethod
    def for_settings(cls, eff: EffectiveSettings) -> AccuracyLogFormat:
        return cls(use_tokens=eff.use_token_latencies,
                   first_token=eff.scenario.loadgen is not Scenario.OFFLINE)


@dataclass(frozen=True, slots=True)
class AccuracyEntry:
    """One logged sample. ``token_data`` ``None`` is written as ``""`` (no first token)."""

    seq_id: int
    qsl_idx: int
    data: bytes
    token_data: bytes | None = None
    token_count: int = 0


def render_entry(entry: AccuracyEntry, fmt: AccuracyLogFormat, *, first: bool) -> str:
    """One entry's text, with its leading separator (``first``: no comma before it)."""
    parts = [f'"seq_id" : {entry.seq_id}', f'"qsl_idx" : {entry.qsl_idx}',
             f'"data" : "{entry.data.hex().upper()}"']
    if fmt.use_tokens:
        if fmt.first_token:
            td = entry.token_data.hex().upper() if entry.token_data is not None else ""
            parts.append(f'"token_data" : "{td}"')
        parts.append(f'"token_count" : {entry.token_count}')
    return ("\n{ " if first else ",\n{ ") + ", ".join(parts) + " }"


def render_accuracy_log(entries: Iterable[AccuracyEntry], fmt: AccuracyLogFormat) -> str:
    """The whole file for ``entries`` in the order given (completion order)."""
    out = [HEADER]
    for i, e in enumerate(entries):
        out.append(render_entry(e, fmt, first=i == 0))
    out.append(FOOTER)
    return "".join(out)


def parse_accuracy_log(text: str) -> list[dict[str, Any]]:
    """The entries of an accuracy log (LoadGen's or tokenmark's), checked for shape.

    Raises :class:`~tokenmark.errors.DatasetError` naming the first bad entry: not JSON,
    not a list of objects, a missing ``seq_id``/``qsl_idx``/``data``, or hex that is
    not whole int32 values.
    """
    try:
        doc = json_loads(text)
    except ValueError as exc:
        raise DatasetError(f"the accuracy log is not JSON (was the run cut short?): "
                           f"{exc}") from None
    if not isinstance(doc, list):
        raise DatasetError("the accuracy log is not a JSON array")
    for i, e in enumerate(doc):
        if not isinstance(e, dict) or not {"seq_id", "qsl_idx", "data"} <= set(e):
            raise DatasetError(f"accuracy log entry {i} lacks seq_id, qsl_idx or data")
        for key in ("data", "token_data"):
            v = e.get(key)
            if v is not None and (not isinstance(v, str) or len(v) % 8):
                raise DatasetError(f"accuracy log entry {i}: {key} is not int32 hex")
    return doc


class AccuracyLogSampler:
    """Whether LoadGen would log sample ``seq`` of a run under ``eff`` (see the module)."""

    def __init__(self, eff: EffectiveSettings) -> None:
        r = eff.requested
        self.all = eff.mode is Mode.ACCURACY
        self.offset = generate_canonical(MT19937(eff.seeds.accuracy_log))
        self.probability = self._probability(eff) if not self.all else 1.0
        self.enabled = self.all or r.accuracy_log_probability > 0 or \
            r.accuracy_log_sampling_target > 0
        self._rng = MT19937(LOADGEN_DEFAULT_ENGINE_SEED)
        self._vals: np.ndarray = np.empty(0, dtype=np.float64)

    @staticmethod
    def _probability(eff: EffectiveSettings) -> float:
        r = eff.requested
        if r.accuracy_log_sampling_target <= 0:
            return r.accuracy_log_probability
        offline = eff.scenario.loadgen is Scenario.OFFLINE
        min_ms = eff.min_duration_ns // 1_000_000
        expected = _u64(eff.target_qps * float(min_ms) / 1000.0)
        minimum = eff.min_query_count * eff.samples_per_query
        if offline:
            minimum = eff.min_sample_count
        else:
            expected *= eff.samples_per_query
        expected = max(expected, minimum)
        if expected == 0:
            return math.inf  # LoadGen divides by zero: +inf logs every sample
        return r.accuracy_log_sampling_target / expected

    def value(self, seq: int) -> float:
        """Sample ``seq``'s draw after the offset (``<= probability`` means logged)."""
        self._grow(seq + 1)
        v = float(self._vals[seq]) + self.offset
        return v if v < 1.0 else v - 1.0

    def should_log(self, seq: int) -> bool:
        if self.all:
            return True
        if not self.enabled:
            return False
        return self.value(seq) <= self.probability

    def _grow(self, n: int) -> None:
        have = self._vals.shape[0]
        if n <= have:
            return
        k = max(n - have, 4096)
        raws = self._rng.take(2 * k).astype(np.float64)
        vals = (raws[0::2] + raws[1::2] * _TWO32) / _TWO64
        self._vals = np.concatenate((self._vals, np.minimum(vals, _BELOW_ONE)))


def _u64(x: float) -> int:
    """C++'s double -> uint64_t conversion for the values LoadGen computes (>= 0)."""
    return int(x) if x > 0 and math.isfinite(x) else 0
