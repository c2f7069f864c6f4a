"""The MLPerf LoadGen log format: writer and parser in one package.

LoadGen 6.0.17 writes ``mlperf_log_summary.txt`` (fixed human-readable text) and
``mlperf_log_detail.txt`` (one ``:::MLLOG {json}`` line per logged key). This module
renders both from a tokenmark run, in LoadGen's wording, spacing, key spelling, value
types and number formatting, and parses both back, for tokenmark's own files and for
real LoadGen logs of any round since v4.1. The writer and the parser live together so
that one round-trip test guards the format (STYLE.md §10 item 10). Its modules:
:mod:`.common` (the note, the error type, the run's facts, C++ number formatting),
:mod:`.view` (LoadGen's view of a run), :mod:`.write_summary`, :mod:`.write_detail`,
:mod:`.read_detail`, :mod:`.read_summary`; every public name is importable from here.

Writing (pure: returns strings, touches no file; :mod:`tokenmark.output.mlperf` writes):

- :func:`render_summary` and :func:`render_detail` take the effective settings, the
  :class:`~tokenmark.metrics.summary.Summary`, the
  :class:`~tokenmark.mlperf.rules.Verdicts` (the MLPerf verdict's findings are LoadGen's
  criteria), the :class:`~tokenmark.mlperf.scenarios.Schedule` (what LoadGen logs as
  ``loaded_qsl_set`` and ``generated_*``) and :class:`RunFacts` (names, wall clock,
  errors). Every LoadGen figure is recomputed from the summary's raw run facts with
  LoadGen's own arithmetic (C++ ``double`` division, ``size_t`` wrap-around, integer
  means), so the numbers are LoadGen's, not merely close.
- Number formatting follows the C++ stream LoadGen writes through: ``DoubleToString``
  is ``std::fixed`` with 2 decimals (1 for the target-percentile labels); a ``double``
  streamed as is uses the default format, i.e. ``%g`` with 6 significant digits
  (``Samples per second: 664.711``, ``Tokens per second: 2.49431e+06`` and every
  ``double`` value in the detail log); integers print in full; booleans print ``0``/``1``
  in the summary and ``true``/``false`` in the detail log.
- Each file carries one extra line saying it was written by tokenmark, not LoadGen, and
  that the result is unverified: the detail log starts with a ``tokenmark_note`` key (an
  ordinary ``:::MLLOG`` line, so LoadGen-format readers, including the submission
  checker's, accept the file); the summary ends with the note after LoadGen's
  errors/warnings trailer. LoadGen's identity keys (``loadgen_version``,
  ``loadgen_git_*``, ``loadgen_build_*``, ``loadgen_file_sha1``) are *not* written:
  tokenmark is not LoadGen and claims no LoadGen version. LoadGen's own internals
  (``get_sut_name_duration_ns``, ``logger_*`` contention counters) are left out too.

How exact: ``tests/mlperf/test_mllog_real.py`` replays official LoadGen 6.0.17 runs
(its settings, its per-sample times) through tokenmark and gets LoadGen's summary byte
for byte and every detail value, in order, for Server, Interactive, Offline and
accuracy runs, with and without token latencies; SingleStream and MultiStream match
too except the figures LoadGen measures from its ``start``, which its trace omits.

Deliberate differences from LoadGen's bytes (each a case LoadGen gets wrong or cannot
meet): ``test_datetime`` is UTC (LoadGen formats local time with a ``Z``); a non-finite
``double`` in the detail log is written ``NaN``/``Infinity`` (valid for Python's
``json``) instead of the stream's ``nan``/``inf``; the ``file``/``line_no`` metadata name
the module that writes the detail log (``line_no`` 0) instead of a LoadGen source
position; ``time_ms`` is 0 for lines LoadGen logs before the run and the run's active
duration for those it logs at the end. A failed or unanswered request (which LoadGen
cannot record: it waits for every query) makes the run INVALID, is logged as an
``error_runtime`` line and is named in the summary's ``Recommendations:``.

Parsing: :func:`parse_detail` gives every key's values in file order (keys repeat, e.g.
``generic_message`` and error lines) as a :class:`DetailLog`; :func:`parse_summary` gives
a :class:`SummaryLog` with the scenario, mode, validity, sub-criteria, early-stopping
texts, headline metrics and every ``label : value`` line by section. Both take an
optional source name for messages and raise :class:`MLLogError` (a
:class:`~tokenmark.errors.BadInputError`) naming the file and line of the first problem
(garbage, a truncated file, a missing header); with ``strict=False`` they skip bad lines
instead and list them in ``skipped``.
"""

from tokenmark.mlperf.mllog.common import (
    LOADGEN_FORMAT_VERSION,
    MARKER,
    NOTE_KEY,
    NOTE_PREFIX,
    MLLogError,
    RunFacts,
    fmt_fixed,
    fmt_g,
    note_text,
)
from tokenmark.mlperf.mllog.read_detail import DetailEntry, DetailLog, parse_detail
from tokenmark.mlperf.mllog.read_summary import (
    SECTION_ADDITIONAL,
    SECTION_PARAMETERS,
    SECTION_PER_QUERY,
    SECTION_RESULTS,
    SummaryLine,
    SummaryLog,
    parse_summary,
)
from tokenmark.mlperf.mllog.write_detail import render_detail
from tokenmark.mlperf.mllog.write_summary import render_summary

__all__ = [
    "LOADGEN_FORMAT_VERSION",
    "MARKER",
    "NOTE_KEY",
    "NOTE_PREFIX",
    "SECTION_ADDITIONAL",
    "SECTION_PARAMETERS",
    "SECTION_PER_QUERY",
    "SECTION_RESULTS",
    "DetailEntry",
    "DetailLog",
    "MLLogError",
    "RunFacts",
    "SummaryLine",
    "SummaryLog",
    "fmt_fixed",
    "fmt_g",
    "note_text",
    "parse_detail",
    "parse_summary",
    "render_detail",
    "render_summary",
]
