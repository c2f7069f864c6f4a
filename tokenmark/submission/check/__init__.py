"""``tokenmark submission check``: a submission checker stricter than the official one.

It walks ``<root>/<division>/<submitter>/results/<system>/<benchmark>/<scenario>/`` as
the official ``submission_checker`` does and, for every LLM result tokenmark has a preset
for, re-parses every log and recomputes every verdict it can:

- structure: the performance and accuracy logs, ``measurements.json`` (and, v5.x, its
  ``user.conf``/``README.md``), the system description, the harness folder;
- the system description: required fields present, the meaningful ones non-empty,
  ``status``/``system_type`` allowed, ``submitter``/``division`` equal to the folders;
- the performance log: LoadGen errors, the round's seeds, ``effective_min_duration_ms``
  (600 s), the performance sample count, Offline's samples per query, early stopping,
  token latencies on, the TTFT/TPOT limits (strict ``<``, as the checker) of the folder's
  scenario, the inferred-result rules, and that the summary says what the detail log says;
- LoadGen's own verdict, recomputed from its criteria and figures: a log whose
  ``result_validity`` contradicts its own criteria has been edited;
- tokenmark's records beside the log (``records.jsonl``, written by ``submission
  package``): the figures and the MLPerf verdict recomputed from them must match the log;
- accuracy: ``accuracy.txt`` against the round's targets (lower and upper bounds), its
  ``hash=`` line (and the hash itself when the accuracy log is whole: a log truncated by
  ``truncate_accuracy_log.py`` is recognised with LF or CRLF line ends), the accuracy
  log truncated, the accuracy run's errors and dataset size;
- compliance: the round's tests per benchmark (TEST06 recomputed from its accuracy log when
  present, at the token width the log holds, int32 or int64; TEST07/TEST09 verdict files);
- an open submitter's ``model_mapping.json``: its own model folders are checked as the
  benchmark each maps to, as the official checker does;
- the scenarios: required ones present (one of Server/Interactive where the round says so),
  none unknown.

Two rules go beyond the official checker (digest §3.2 "Gaps"), marked ``official=False``:
a run LoadGen itself marked INVALID is rejected (the official checker reads
``result_validity`` but never fails on it), and an ``Interactive`` folder is judged against
the Interactive TTFT/TPOT limits (the official checker applies the Server ones, because it
keys on ``effective_scenario``).

Every problem is a :class:`Finding` (severity, file, check, message, advice); nothing in a
tree, however broken, raises. Results without errors get a summary CSV row in the official
checker's columns and formatting.

Its modules: :mod:`.report` (findings, results, the report; readers that never raise; the
system description), :mod:`.walk` (the tree, :func:`check_tree`), :mod:`.result` (one
result's logs and verdicts), :mod:`.evidence` (accuracy, measurements, compliance),
:mod:`.csvrow` (the summary row); every public name is importable from here.
"""

from tokenmark.submission.check.report import (
    RECORDS_NAME,
    CheckReport,
    Finding,
    ResultCheck,
    Severity,
)
from tokenmark.submission.check.walk import check_tree

__all__ = [
    "RECORDS_NAME",
    "CheckReport",
    "Finding",
    "ResultCheck",
    "Severity",
    "check_tree",
]
