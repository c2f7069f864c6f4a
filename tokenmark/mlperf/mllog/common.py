"""The pieces every MLPerf log file shares: tokenmark's note, the error type, the run's facts
and C++'s number formatting as LoadGen's streams write it."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

from tokenmark import __version__
from tokenmark.errors import BadInputError
from tokenmark.resultrows import UNVERIFIED_NOTE

__all__ = [
    "LOADGEN_FORMAT_VERSION",
    "MARKER",
    "NOTE_KEY",
    "NOTE_PREFIX",
    "MLLogError",
    "RunFacts",
    "fmt_fixed",
    "fmt_g",
    "note_text",
]

#: The LoadGen release whose log format (wording, keys, layout) tokenmark writes.
LOADGEN_FORMAT_VERSION = "6.0.17"
#: Prefix of every detail-log line.
MARKER = ":::MLLOG"
#: How tokenmark's note starts, in both files.
NOTE_PREFIX = "Written by tokenmark"
#: The detail-log key of tokenmark's note.
NOTE_KEY = "tokenmark_note"

_BANNER = "=" * 48
_NAMESPACE = "mlperf::logging"
_SOURCE_FILE = "tokenmark/mlperf/mllog/write_detail.py"
#: LoadGen's ``TestSettings`` defaults, logged where tokenmark has no value of its own.
_DEFAULT_TOKEN_LATENCY_NS = 100_000_000
_U64 = 1 << 64


def note_text(version: str = __version__) -> str:
    """The line that says a file was written by tokenmark, in LoadGen's format."""
    return (
        f"{NOTE_PREFIX} {version} in the log format of MLPerf LoadGen "
        f"{LOADGEN_FORMAT_VERSION}, not by LoadGen. "
        f"{UNVERIFIED_NOTE}"
    )


class MLLogError(BadInputError):
    """A log file that cannot be read as an MLPerf LoadGen log.

    ``source`` names the file (or whatever the caller passed) and ``line`` the 1-based
    line of the first problem (``None`` for the file as a whole).
    """

    def __init__(self, source: str, line: int | None, problem: str) -> None:
        where = f"{source}:{line}" if line is not None else source
        super().__init__(f"{where}: {problem}")
        self.source = source
        self.line = line


# -- inputs ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RunFacts:
    """What the logs say about a run beyond its settings and metrics.

    ``start_wall_ns`` is the wall clock (ns since the epoch) at the run's origin ``t0``
    (LoadGen's ``start``, logged as ``power_begin``); ``active_duration_ns`` runs from
    there to the last completion (LoadGen's ``sut_active_duration``: ``power_end`` and the
    ``time_ms`` of the end-of-run lines). ``test_datetime`` defaults to the start.
    ``errors`` and ``warnings`` are logged as ``error_runtime`` and
    ``warning_generic_message`` lines and counted in the summary's trailer;
    ``ran_out_of_generated_queries`` logs LoadGen's own "Ending early" error.

    ``server_token_limits_ns`` is the benchmark's Server ``(ttft, tpot)`` limits: with
    token latencies LoadGen reads ``ttft_latency``/``tpot_latency`` from ``mlperf.conf``'s
    *Server* lines whatever the scenario, and logs them (``ttft_latency (ns)``,
    ``requested_server_ttft_latency``) in Offline and SingleStream runs too. tokenmark's
    settings carry only the run's own scenario's limits, so the caller passes the Server
    preset's; ``None`` uses the run's own limits, else LoadGen's 100 ms defaults (what
    LoadGen logs for a benchmark with no Server limits, such as llama3.1-8b-edge).
    """

    sut_name: str
    qsl_name: str
    start_wall_ns: int
    active_duration_ns: int
    test_datetime: datetime | None = None
    ran_out_of_generated_queries: bool = False
    errors: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    server_token_limits_ns: tuple[int, int] | None = None
    pid: int = 0
    tokenmark_version: str = __version__


# -- C++ number formatting --------------------------------------------------------------


def _nan_text(x: float) -> str:
    return "-nan" if math.copysign(1.0, x) < 0 else "nan"


def fmt_fixed(x: float, precision: int = 2) -> str:
    """LoadGen's ``DoubleToString``: ``std::fixed`` with ``precision`` decimals (glibc)."""
    if math.isnan(x):
        return _nan_text(x)
    return f"{x:.{precision}f}"


def fmt_g(x: float) -> str:
    """A ``double`` written to a default C++ stream: ``%g``, 6 significant digits."""
    if math.isnan(x):
        return _nan_text(x)
    return f"{x:g}"


def _cdiv(a: float, b: float) -> float:
    """IEEE division as C++ does it: x/0 is +-inf and 0/0 the x86-64 default NaN."""
    if b == 0.0:
        if a == 0.0 or math.isnan(a):
            return -math.nan  # the sign bit is set, as x86-64's default NaN
        return math.copysign(math.inf, a) * math.copysign(1.0, b)
    return a / b


def _size_t(v: int) -> float:
    """An unsigned 64-bit count converted to ``double`` (``sample_count - 1`` wraps at 0)."""
    return float(v % _U64)


def _seconds(ns: int) -> float:
    """LoadGen's ``DurationToSeconds``/``QuerySampleLatencyToSeconds``: ``ns / 1e9``."""
    return ns / 1e9


def _pct2(p: float) -> str:
    return fmt_fixed(p * 100)


def _pct1(p: float) -> str:
    return fmt_fixed(p * 100, 1)


