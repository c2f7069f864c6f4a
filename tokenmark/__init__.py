"""tokenmark: an open, MLPerf-grade benchmark system for LLM inference.

The public Python API is re-exported here; see :mod:`tokenmark.api` for the entry
points and README.md for the command line.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
