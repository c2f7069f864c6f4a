"""MLPerf's rules, as LoadGen and the MLCommons rounds define them: plain data and pure
functions (standard library and numpy only).

- :mod:`~tokenmark.mlperf.settings`: requested -> effective test settings (LoadGen's
  ``TestSettings`` -> ``TestSettingsInternal``);
- :mod:`~tokenmark.mlperf.presets`: each round's requirements, packaged as TOML
  (``presets/v5.1.toml``, ...);
- :mod:`~tokenmark.mlperf.lgrandom`: LoadGen's random streams, bit for bit;
- :mod:`~tokenmark.mlperf.scenarios`: the schedules (which sample, when), as LoadGen makes them;
- :mod:`~tokenmark.mlperf.earlystop`: LoadGen's early-stopping bound;
- :mod:`~tokenmark.mlperf.rules`: the MLPerf verdict and tokenmark's own rules, each a
  :class:`~tokenmark.findings.Finding`;
- :mod:`~tokenmark.mlperf.mllog`, :mod:`~tokenmark.mlperf.accuracylog`: LoadGen's log
  files and accuracy log, written and parsed.

The engine that sends the queries is :mod:`tokenmark.loadgen`, not this package.
"""
