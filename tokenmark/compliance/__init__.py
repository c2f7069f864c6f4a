"""MLPerf's LLM compliance audits (TEST06, TEST07, TEST09) and tokenmark's own.

- :mod:`~tokenmark.compliance.audit`: each test's ``audit.config`` as settings
  (LoadGen reads them from a file in its working directory; tokenmark applies them as a
  run mode), and a reader for ``audit.config`` files;
- :mod:`~tokenmark.compliance.verify`: the verification scripts' checks and their
  verdict folders in MLPerf's layout (``TEST06/verify_accuracy.txt``, ...);
- :mod:`~tokenmark.compliance.own`: tokenmark's audits beyond MLPerf (labelled so): no
  response caching, and streamed output equal to non-streamed output.
"""
