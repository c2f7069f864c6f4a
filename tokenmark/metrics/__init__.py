"""Metrics: pure functions from records to a summary, with LoadGen's definitions."""

from tokenmark.metrics.stats import LOADGEN_PERCENTILES, Column, Distribution, loadgen_index
from tokenmark.metrics.summary import Accumulator, RunData, Summary, summarize

__all__ = [
    "LOADGEN_PERCENTILES",
    "Accumulator",
    "Column",
    "Distribution",
    "RunData",
    "Summary",
    "loadgen_index",
    "summarize",
]
