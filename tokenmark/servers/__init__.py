"""Servers tokenmark ships for testing and calibrating clients (edge layer).

- :mod:`tokenmark.servers.exact`: an OpenAI-compatible HTTP server with exact,
  configurable delays, pre-rendered responses, fault injection and a ground-truth log of
  its own per-request times. Tests and ``bench/`` measure the HTTP client against it.
- :mod:`tokenmark.servers.render`: the pre-rendered response bytes it writes.

Standard library only; nothing here imports the client adapters, and the adapters do not
import this package (tests and benchmarks compose the two).
"""
