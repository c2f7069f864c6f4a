"""Reproducibility and trust: what makes a result checkable by someone else.

- :mod:`~tokenmark.trust.canonical`: canonical JSON and content hashes.
- :mod:`~tokenmark.trust.manifest`: the workload manifest (everything that determines the
  request stream) and the hash of the requests a run actually issued.
- :mod:`~tokenmark.trust.fingerprint`: the client machine and what the server says about
  itself (secrets redacted, every wait bounded).
- :mod:`~tokenmark.trust.monitor`: client CPU saturation and event-loop lag during a run.
- :mod:`~tokenmark.trust.selfcal`: what this client sustains against the built-in server.
- :mod:`~tokenmark.trust.prometheus`: server metrics scraped during a run and cross-checked
  against the client's counts.
- :mod:`~tokenmark.trust.bundle`: Ed25519 keys, signed result bundles, verification.
- :mod:`~tokenmark.trust.compare`: run-against-run differences with confidence intervals
  (regression gates, reproducing a result).

Each is a :class:`~tokenmark.api.run.RunWatcher` or plain functions; the entry points are in
:mod:`tokenmark.api.trust`.
"""
