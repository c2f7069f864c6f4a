"""tokenmark: an open, MLPerf-grade benchmark system for LLM inference.

This package exports only ``__version__``. The public Python API is :mod:`tokenmark.api`
(a curated list of entry points, each loaded on first use, e.g.
``from tokenmark.api import run_benchmark``); the command line is ``tokenmark`` (see
README.md); the layers of the package are described in docs/design.md.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
